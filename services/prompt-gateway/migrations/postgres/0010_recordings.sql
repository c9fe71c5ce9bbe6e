-- Prompts' recordings: what their runs exchanged with the world outside their executors
-- (the tool-host's answers, every model request and answer), in order. A recording stops,
-- marked incomplete, once it passes its bounds (see src/store/recordings.rs).
CREATE TABLE prompt_recordings (
    prompt_id TEXT PRIMARY KEY NOT NULL,
    exchanges BIGINT NOT NULL,
    bytes BIGINT NOT NULL,
    complete INTEGER NOT NULL DEFAULT 1
);

-- `payload` is an encoded agentic.v1.Exchange; `sequence` counts from 1 per prompt.
CREATE TABLE prompt_exchanges (
    prompt_id TEXT NOT NULL,
    sequence BIGINT NOT NULL,
    payload BYTEA NOT NULL,
    PRIMARY KEY (prompt_id, sequence)
);

-- Recordings imported from a file (`ImportRecording`), each an encoded agentic.v1.Recording
-- of its user, replayable by its id.
CREATE TABLE imported_recordings (
    id TEXT PRIMARY KEY NOT NULL,
    user_id TEXT NOT NULL,
    payload BYTEA NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX imported_recordings_by_user ON imported_recordings (user_id, created_at);
