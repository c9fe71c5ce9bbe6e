-- Skill folders (the Agent Skills format) a user added: one row per skill, its files beside
-- it. Their bytes count in artifact_usage with the user's artifacts (src/folders.rs).
CREATE TABLE skill_folders (
    user_id      TEXT   NOT NULL,
    name         TEXT   NOT NULL,
    description  TEXT   NOT NULL,
    content_hash TEXT   NOT NULL, -- hex SHA-256 over each file's path and bytes
    size         BIGINT NOT NULL, -- bytes of every file together
    created_at   BIGINT NOT NULL, -- milliseconds since the Unix epoch
    PRIMARY KEY (user_id, name)
);

CREATE TABLE skill_folder_files (
    user_id TEXT   NOT NULL,
    name    TEXT   NOT NULL,
    path    TEXT   NOT NULL, -- inside the folder, '/'-separated; SKILL.md at the root
    size    BIGINT NOT NULL,
    content BYTEA  NOT NULL,
    PRIMARY KEY (user_id, name, path)
);

-- The provider's copy (hosted mode's Skills API) of a folder skill: owner_user_id is '' for
-- the operator's skills. content_hash says which content the copy holds.
CREATE TABLE provider_skills (
    owner_user_id TEXT NOT NULL,
    name          TEXT NOT NULL,
    skill_id      TEXT NOT NULL,
    version       TEXT NOT NULL,
    content_hash  TEXT NOT NULL,
    PRIMARY KEY (owner_user_id, name)
);

-- Provider copies whose skill is gone, until a hosted executor has deleted them there.
CREATE TABLE provider_skill_deletions (
    skill_id   TEXT   PRIMARY KEY NOT NULL,
    created_at BIGINT NOT NULL
);
