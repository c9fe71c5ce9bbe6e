-- The PostgreSQL twin of ../sqlite/0001..0003: same tables, same columns, same meaning.
-- Timestamps are milliseconds since the Unix epoch; payloads are encoded protobuf messages.

-- Prompts, their timeline and their ordered event log. Written only by gateways.
CREATE TABLE prompts (
    id TEXT PRIMARY KEY NOT NULL,
    user_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL DEFAULT '',
    mode TEXT NOT NULL,
    model INTEGER NOT NULL,
    visible BOOLEAN NOT NULL DEFAULT TRUE,
    state INTEGER NOT NULL,
    input TEXT NOT NULL,
    input_tokens BIGINT NOT NULL DEFAULT 0,
    output_tokens BIGINT NOT NULL DEFAULT 0,
    total_tokens BIGINT NOT NULL DEFAULT 0,
    error TEXT NOT NULL DEFAULT '',
    max_rounds BIGINT NOT NULL DEFAULT 0,
    state_data TEXT NOT NULL DEFAULT '{}',
    last_sequence BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    -- 1 while a live run waits for decisions on its open Execute stream (code mode).
    paused_live INTEGER NOT NULL DEFAULT 0,
    -- The replica whose run is live, and until when its lease holds.
    owner TEXT NOT NULL DEFAULT '',
    lease_until BIGINT NOT NULL DEFAULT 0
);

CREATE INDEX prompts_by_user ON prompts (user_id, created_at);
CREATE INDEX prompts_by_conversation ON prompts (conversation_id, created_at);
CREATE INDEX prompts_by_state ON prompts (state);

-- One row per entry of Prompt.output; `payload` is an encoded agentic.v1.PromptOutput.
CREATE TABLE prompt_outputs (
    prompt_id TEXT NOT NULL REFERENCES prompts (id),
    position BIGINT NOT NULL,
    payload BYTEA NOT NULL,
    PRIMARY KEY (prompt_id, position)
);

-- `payload` is an encoded agentic.v1.PromptEvent: the log stores exactly what clients get.
CREATE TABLE prompt_events (
    prompt_id TEXT NOT NULL REFERENCES prompts (id),
    sequence BIGINT NOT NULL,
    at BIGINT NOT NULL,
    payload BYTEA NOT NULL,
    PRIMARY KEY (prompt_id, sequence)
);

-- Conversations: an ordered list of prompts plus shared state and a default mode.
CREATE TABLE conversations (
    id TEXT PRIMARY KEY NOT NULL,
    user_id TEXT NOT NULL,
    title TEXT NOT NULL DEFAULT '',
    default_mode TEXT NOT NULL DEFAULT '',
    state TEXT NOT NULL DEFAULT '{}',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE INDEX conversations_by_user ON conversations (user_id, created_at);

-- Every file output of every prompt, so files can be listed per conversation and fetched by id.
CREATE TABLE prompt_files (
    file_id TEXT PRIMARY KEY NOT NULL,
    prompt_id TEXT NOT NULL REFERENCES prompts (id),
    user_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL DEFAULT '',
    position BIGINT NOT NULL,
    payload BYTEA NOT NULL
);

CREATE INDEX prompt_files_by_conversation ON prompt_files (conversation_id, prompt_id, position);

-- Approval decisions for tool calls a paused prompt waits on; they survive restarts.
CREATE TABLE approval_decisions (
    prompt_id TEXT NOT NULL REFERENCES prompts (id),
    tool_call_id TEXT NOT NULL,
    approved BOOLEAN NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    decided_at BIGINT NOT NULL,
    PRIMARY KEY (prompt_id, tool_call_id)
);
