-- Bytes of artifacts each user keeps, for the storage quota. Every insert bumps its owner's
-- row in the same transaction, by a statement that also checks the quota.
-- The PostgreSQL twin of ../sqlite/0002_artifact_usage.sql: same columns, same meaning.
CREATE TABLE artifact_usage (
    user_id TEXT   PRIMARY KEY NOT NULL,
    bytes   BIGINT NOT NULL
);

INSERT INTO artifact_usage (user_id, bytes)
SELECT user_id, SUM(size)::BIGINT FROM artifacts GROUP BY user_id;
