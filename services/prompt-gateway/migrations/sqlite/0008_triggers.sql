-- Triggers: prompts a user scheduled (a cron expression in a time zone, an interval, or one
-- time). `schedule` is an encoded agentic.v1.Schedule, `prompt` an encoded
-- agentic.v1.TriggeredPrompt. `next_fire_at` (ms since the epoch) is the next due time,
-- NULL when the trigger will not fire again (a single time that fired).
CREATE TABLE triggers (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    name TEXT NOT NULL,
    schedule BLOB NOT NULL,
    prompt BLOB NOT NULL,
    paused INTEGER NOT NULL DEFAULT 0,
    catch_up INTEGER NOT NULL DEFAULT 0,
    next_fire_at INTEGER,
    last_fired_at INTEGER,
    last_prompt_id TEXT NOT NULL DEFAULT '',
    last_error TEXT NOT NULL DEFAULT '',
    -- Firings in a row that created no prompt; at MAX_FAILED_FIRINGS the trigger pauses.
    failed_firings INTEGER NOT NULL DEFAULT 0,
    fired_count INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX triggers_due ON triggers (next_fire_at) WHERE paused = 0;
CREATE INDEX triggers_by_user ON triggers (user_id, created_at);
-- A due time a replica claimed, with the id its prompt gets: the row is written with the
-- trigger's next due time in one transaction (so a due time is claimed once), and removed
-- once its prompt was created (or could not be). A row whose claim expired is one whose
-- replica died in between: another replica creates the prompt, under the same id.
CREATE TABLE trigger_firings (
    prompt_id TEXT PRIMARY KEY,
    trigger_id TEXT NOT NULL,
    due_at INTEGER NOT NULL,
    claimed_until INTEGER NOT NULL,
    UNIQUE (trigger_id, due_at)
);
