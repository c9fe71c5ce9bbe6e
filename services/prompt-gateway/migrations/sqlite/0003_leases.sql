-- The gateway replica whose run of the prompt is live, and until when (milliseconds since
-- the Unix epoch) its lease holds. A RUNNING (or live-paused) prompt whose lease expired lost
-- its run: another replica fails it.
ALTER TABLE prompts ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE prompts ADD COLUMN lease_until INTEGER NOT NULL DEFAULT 0;
