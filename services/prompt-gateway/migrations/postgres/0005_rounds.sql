-- The rounds a prompt's mode ran (Usage.rounds), summed like its tokens.
ALTER TABLE prompts ADD COLUMN rounds BIGINT NOT NULL DEFAULT 0;
