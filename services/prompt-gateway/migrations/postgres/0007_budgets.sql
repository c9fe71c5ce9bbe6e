-- What a prompt spent besides tokens (Usage.llm_calls, Usage.tool_calls), summed like its
-- tokens, and its budget (an encoded agentic.v1.Budget; empty: none).
ALTER TABLE prompts ADD COLUMN llm_calls BIGINT NOT NULL DEFAULT 0;
ALTER TABLE prompts ADD COLUMN tool_calls BIGINT NOT NULL DEFAULT 0;
ALTER TABLE prompts ADD COLUMN budget BYTEA NOT NULL DEFAULT ''::bytea;
