-- Bytes of artifacts each user keeps, for the storage quota. Every insert bumps its owner's
-- row in the same transaction, by a statement that also checks the quota.
CREATE TABLE artifact_usage (
    user_id TEXT    PRIMARY KEY NOT NULL,
    bytes   INTEGER NOT NULL
);

INSERT INTO artifact_usage (user_id, bytes)
SELECT user_id, SUM(size) FROM artifacts GROUP BY user_id;
