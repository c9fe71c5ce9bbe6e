-- The files a prompt's user attached to its input (an encoded agentic.v1.Attachments; empty:
-- none). Each is also a row of prompt_files, at a negative position (before the timeline's).
ALTER TABLE prompts ADD COLUMN attachments BYTEA NOT NULL DEFAULT ''::bytea;
