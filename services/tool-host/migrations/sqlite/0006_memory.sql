-- Long-term memory: a user's items, shared across their conversations, by namespace (its
-- parts joined with '/') and key. `content` is the text searched (the namespace, the key and
-- every string of the value); `memory_search` is SQLite's FTS5 index of it, kept by the
-- triggers below. `size` counts in artifact_usage with the user's artifacts.
CREATE TABLE memory_items (
    id         INTEGER PRIMARY KEY, -- the FTS index's row id: stable, unlike an implicit rowid
    user_id    TEXT   NOT NULL,
    namespace  TEXT   NOT NULL,
    key        TEXT   NOT NULL,
    value      TEXT   NOT NULL, -- JSON
    content    TEXT   NOT NULL,
    size       BIGINT NOT NULL,
    created_at BIGINT NOT NULL, -- milliseconds since the Unix epoch
    updated_at BIGINT NOT NULL,
    expires_at BIGINT,          -- NULL: never
    UNIQUE (user_id, namespace, key)
);
CREATE INDEX memory_items_expiry ON memory_items (expires_at) WHERE expires_at IS NOT NULL;

CREATE VIRTUAL TABLE memory_search USING fts5(content, content = 'memory_items', content_rowid = 'id');

CREATE TRIGGER memory_items_inserted AFTER INSERT ON memory_items BEGIN
    INSERT INTO memory_search (rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER memory_items_deleted AFTER DELETE ON memory_items BEGIN
    INSERT INTO memory_search (memory_search, rowid, content) VALUES ('delete', old.id, old.content);
END;
CREATE TRIGGER memory_items_updated AFTER UPDATE ON memory_items BEGIN
    INSERT INTO memory_search (memory_search, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO memory_search (rowid, content) VALUES (new.id, new.content);
END;
