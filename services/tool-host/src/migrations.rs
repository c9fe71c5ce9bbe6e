//! The tool-host's migrations, embedded in the binary: one folder per backend under
//! `migrations/`, numbered in step. A new file there goes into this list too (a test says
//! when one is missing).

use agentic_db::{MigrationFile, Migrations};

/// Both backends' migrations, in version order.
pub const MIGRATIONS: Migrations = Migrations {
    sqlite: SQLITE,
    postgres: POSTGRES,
};

const SQLITE: &[MigrationFile] = &[
    MigrationFile {
        name: "0001_artifacts.sql",
        sql: include_str!("../migrations/sqlite/0001_artifacts.sql"),
    },
    MigrationFile {
        name: "0002_artifact_usage.sql",
        sql: include_str!("../migrations/sqlite/0002_artifact_usage.sql"),
    },
    MigrationFile {
        name: "0003_artifact_kind.sql",
        sql: include_str!("../migrations/sqlite/0003_artifact_kind.sql"),
    },
    MigrationFile {
        name: "0004_skills.sql",
        sql: include_str!("../migrations/sqlite/0004_skills.sql"),
    },
    MigrationFile {
        name: "0005_skill_folders.sql",
        sql: include_str!("../migrations/sqlite/0005_skill_folders.sql"),
    },
    MigrationFile {
        name: "0006_memory.sql",
        sql: include_str!("../migrations/sqlite/0006_memory.sql"),
    },
];

const POSTGRES: &[MigrationFile] = &[
    MigrationFile {
        name: "0001_artifacts.sql",
        sql: include_str!("../migrations/postgres/0001_artifacts.sql"),
    },
    MigrationFile {
        name: "0002_artifact_usage.sql",
        sql: include_str!("../migrations/postgres/0002_artifact_usage.sql"),
    },
    MigrationFile {
        name: "0003_artifact_kind.sql",
        sql: include_str!("../migrations/postgres/0003_artifact_kind.sql"),
    },
    MigrationFile {
        name: "0004_skills.sql",
        sql: include_str!("../migrations/postgres/0004_skills.sql"),
    },
    MigrationFile {
        name: "0005_skill_folders.sql",
        sql: include_str!("../migrations/postgres/0005_skill_folders.sql"),
    },
    MigrationFile {
        name: "0006_memory.sql",
        sql: include_str!("../migrations/postgres/0006_memory.sql"),
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_migration_file_of_each_backend_is_embedded_in_order() {
        let folders = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
        MIGRATIONS.matches_folders(&folders).unwrap();
    }
}
