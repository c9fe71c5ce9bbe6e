-- User-owned stored data. An artifact holds either JSON `data` (serialized text) or raw
-- `content` bytes, never both; `size` is the byte length of whichever one it holds.
-- The PostgreSQL twin of ../sqlite/0001_artifacts.sql: same columns, same meaning.
CREATE TABLE artifacts (
    id              TEXT    PRIMARY KEY NOT NULL,
    user_id         TEXT    NOT NULL,
    conversation_id TEXT    NOT NULL DEFAULT '',
    description     TEXT    NOT NULL DEFAULT '',
    filename        TEXT    NOT NULL DEFAULT '',
    mime_type       TEXT    NOT NULL,
    size            BIGINT  NOT NULL,
    created_at      BIGINT  NOT NULL, -- milliseconds since the Unix epoch
    data            TEXT,
    content         BYTEA,
    CHECK ((data IS NULL) <> (content IS NULL))
);

-- Every read is scoped to one user; listing is newest first, optionally per conversation.
CREATE INDEX artifacts_by_user ON artifacts (user_id, created_at DESC, id DESC);
CREATE INDEX artifacts_by_conversation ON artifacts (user_id, conversation_id, created_at DESC, id DESC);
