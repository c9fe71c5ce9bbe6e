-- Agents: each version of a user's agent definitions (an encoded agentic.v1.Agent), kept
-- until the agent is deleted; `bytes` is what the version counts in its owner's stored bytes.
CREATE TABLE agents (
    user_id TEXT NOT NULL,
    name TEXT NOT NULL,
    version INTEGER NOT NULL,
    definition BLOB NOT NULL,
    bytes BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (user_id, name, version)
);
-- What a prompt took of the agent it runs as (an encoded agentic.v1.AgentRun; empty: none).
ALTER TABLE prompts ADD COLUMN agent BLOB NOT NULL DEFAULT x'';
-- The agent's name again, for counting a user's prompts through one agent (its rate limit).
ALTER TABLE prompts ADD COLUMN agent_name TEXT NOT NULL DEFAULT '';
-- What the prompt's model calls cost by the operator's price table (millionths of its
-- currency), and the input tokens the provider read from its cache.
ALTER TABLE prompts ADD COLUMN cost_micros BIGINT NOT NULL DEFAULT 0;
ALTER TABLE prompts ADD COLUMN cached_input_tokens BIGINT NOT NULL DEFAULT 0;
-- What a user's prompts deleted on a UTC day had spent that day (tokens, cost): the day's
-- limits still count it. Rows of days before yesterday go with the next deletion.
CREATE TABLE user_daily_spend (
    user_id TEXT NOT NULL,
    day_start BIGINT NOT NULL,
    tokens BIGINT NOT NULL,
    cost_micros BIGINT NOT NULL,
    PRIMARY KEY (user_id, day_start)
);
