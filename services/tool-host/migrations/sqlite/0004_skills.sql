-- Skills: a user's saved scripts, each offered to their prompts as the tool `skill.<name>`.
-- Saving a name again adds a version; the newest is the tool. Older versions beyond the
-- newest few are deleted as new ones are saved (see src/skills.rs for every bound).
CREATE TABLE skills (
    user_id          TEXT   NOT NULL,
    name             TEXT   NOT NULL,
    version          BIGINT NOT NULL,
    description      TEXT   NOT NULL,
    input_schema     TEXT   NOT NULL, -- JSON Schema of the input, serialized
    code             TEXT   NOT NULL,
    source_prompt_id TEXT   NOT NULL DEFAULT '',
    created_at       BIGINT NOT NULL, -- milliseconds since the Unix epoch
    PRIMARY KEY (user_id, name, version)
);

-- One row per user who ever saved a skill. A save updates it first, which holds the row
-- (PostgreSQL) or the write lock (SQLite) to the end of its transaction: one user's saves
-- run one at a time, so counting their skills and numbering versions never race.
CREATE TABLE skill_users (
    user_id TEXT   PRIMARY KEY NOT NULL,
    saves   BIGINT NOT NULL
);
