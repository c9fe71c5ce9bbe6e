-- What a prompt spent besides tokens (Usage.llm_calls, Usage.tool_calls), summed like its
-- tokens, and its budget (an encoded agentic.v1.Budget; empty: none).
ALTER TABLE prompts ADD COLUMN llm_calls INTEGER NOT NULL DEFAULT 0;
ALTER TABLE prompts ADD COLUMN tool_calls INTEGER NOT NULL DEFAULT 0;
ALTER TABLE prompts ADD COLUMN budget BLOB NOT NULL DEFAULT x'';
