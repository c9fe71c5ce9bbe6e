-- Long-term memory: a user's items, shared across their conversations, by namespace (its
-- parts joined with '/') and key. `content` is the text searched (the namespace, the key and
-- every string of the value), indexed as a tsvector with GIN. `size` counts in
-- artifact_usage with the user's artifacts.
CREATE TABLE memory_items (
    user_id    TEXT   NOT NULL,
    namespace  TEXT   NOT NULL,
    key        TEXT   NOT NULL,
    value      TEXT   NOT NULL, -- JSON
    content    TEXT   NOT NULL,
    size       BIGINT NOT NULL,
    created_at BIGINT NOT NULL, -- milliseconds since the Unix epoch
    updated_at BIGINT NOT NULL,
    expires_at BIGINT,          -- NULL: never
    search     TSVECTOR GENERATED ALWAYS AS (to_tsvector('simple', content)) STORED,
    PRIMARY KEY (user_id, namespace, key)
);
CREATE INDEX memory_items_expiry ON memory_items (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX memory_items_search ON memory_items USING GIN (search);
