-- Typed answers: the JSON Schema a prompt's final answer must match (JSON text; empty: none)
-- and that answer once the prompt completed with one (JSON text; empty: none).
ALTER TABLE prompts ADD COLUMN output_schema TEXT NOT NULL DEFAULT '';
ALTER TABLE prompts ADD COLUMN structured_output TEXT NOT NULL DEFAULT '';
