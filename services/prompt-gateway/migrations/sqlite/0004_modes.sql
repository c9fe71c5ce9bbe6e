-- Modes registered at run time by executors holding the internal token (RegisterMode), so
-- every replica sees the same modes and a restarted gateway keeps them. A registration not
-- renewed by `expires_at` (milliseconds since the Unix epoch) is gone. Modes from the
-- gateway's configuration are never stored here.
CREATE TABLE mode_registrations (
    id TEXT PRIMARY KEY NOT NULL,
    name TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);
