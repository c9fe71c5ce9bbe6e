-- Work that one replica at a time does (retention): a named lease, taken by the replica
-- named in `owner` until `until` (ms since the epoch), renewed while it works.
CREATE TABLE maintenance_leases (
    name TEXT PRIMARY KEY NOT NULL,
    owner TEXT NOT NULL,
    until BIGINT NOT NULL
);
INSERT INTO maintenance_leases (name, owner, until) VALUES ('retention', '', 0);
CREATE INDEX conversations_by_update ON conversations (updated_at);
