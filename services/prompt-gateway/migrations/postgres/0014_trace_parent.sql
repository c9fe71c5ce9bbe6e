-- The W3C traceparent of the run a prompt paused durably in (empty otherwise): the run that
-- takes the pause up continues that trace, so one prompt stays one trace across its pauses.
ALTER TABLE prompts ADD COLUMN trace_parent TEXT NOT NULL DEFAULT '';
