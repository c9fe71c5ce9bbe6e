//! The prompt-gateway's migrations, embedded in the binary: one folder per backend under
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
        name: "0001_prompts.sql",
        sql: include_str!("../../migrations/sqlite/0001_prompts.sql"),
    },
    MigrationFile {
        name: "0002_conversations.sql",
        sql: include_str!("../../migrations/sqlite/0002_conversations.sql"),
    },
    MigrationFile {
        name: "0003_leases.sql",
        sql: include_str!("../../migrations/sqlite/0003_leases.sql"),
    },
    MigrationFile {
        name: "0004_modes.sql",
        sql: include_str!("../../migrations/sqlite/0004_modes.sql"),
    },
    MigrationFile {
        name: "0005_rounds.sql",
        sql: include_str!("../../migrations/sqlite/0005_rounds.sql"),
    },
    MigrationFile {
        name: "0006_queues.sql",
        sql: include_str!("../../migrations/sqlite/0006_queues.sql"),
    },
    MigrationFile {
        name: "0007_budgets.sql",
        sql: include_str!("../../migrations/sqlite/0007_budgets.sql"),
    },
    MigrationFile {
        name: "0008_triggers.sql",
        sql: include_str!("../../migrations/sqlite/0008_triggers.sql"),
    },
    MigrationFile {
        name: "0009_daily_tokens.sql",
        sql: include_str!("../../migrations/sqlite/0009_daily_tokens.sql"),
    },
    MigrationFile {
        name: "0010_recordings.sql",
        sql: include_str!("../../migrations/sqlite/0010_recordings.sql"),
    },
    MigrationFile {
        name: "0011_approval_expiry.sql",
        sql: include_str!("../../migrations/sqlite/0011_approval_expiry.sql"),
    },
    MigrationFile {
        name: "0012_retention.sql",
        sql: include_str!("../../migrations/sqlite/0012_retention.sql"),
    },
    MigrationFile {
        name: "0013_stored_bytes.sql",
        sql: include_str!("../../migrations/sqlite/0013_stored_bytes.sql"),
    },
    MigrationFile {
        name: "0014_trace_parent.sql",
        sql: include_str!("../../migrations/sqlite/0014_trace_parent.sql"),
    },
    MigrationFile {
        name: "0015_attachments.sql",
        sql: include_str!("../../migrations/sqlite/0015_attachments.sql"),
    },
    MigrationFile {
        name: "0016_structured_output.sql",
        sql: include_str!("../../migrations/sqlite/0016_structured_output.sql"),
    },
    MigrationFile {
        name: "0017_decision_edits.sql",
        sql: include_str!("../../migrations/sqlite/0017_decision_edits.sql"),
    },
    MigrationFile {
        name: "0018_agents.sql",
        sql: include_str!("../../migrations/sqlite/0018_agents.sql"),
    },
    MigrationFile {
        name: "0019_sub_prompts.sql",
        sql: include_str!("../../migrations/sqlite/0019_sub_prompts.sql"),
    },
];

const POSTGRES: &[MigrationFile] = &[
    MigrationFile {
        name: "0001_gateway.sql",
        sql: include_str!("../../migrations/postgres/0001_gateway.sql"),
    },
    MigrationFile {
        name: "0002_conversations.sql",
        sql: include_str!("../../migrations/postgres/0002_conversations.sql"),
    },
    MigrationFile {
        name: "0003_leases.sql",
        sql: include_str!("../../migrations/postgres/0003_leases.sql"),
    },
    MigrationFile {
        name: "0004_modes.sql",
        sql: include_str!("../../migrations/postgres/0004_modes.sql"),
    },
    MigrationFile {
        name: "0005_rounds.sql",
        sql: include_str!("../../migrations/postgres/0005_rounds.sql"),
    },
    MigrationFile {
        name: "0006_queues.sql",
        sql: include_str!("../../migrations/postgres/0006_queues.sql"),
    },
    MigrationFile {
        name: "0007_budgets.sql",
        sql: include_str!("../../migrations/postgres/0007_budgets.sql"),
    },
    MigrationFile {
        name: "0008_triggers.sql",
        sql: include_str!("../../migrations/postgres/0008_triggers.sql"),
    },
    MigrationFile {
        name: "0009_daily_tokens.sql",
        sql: include_str!("../../migrations/postgres/0009_daily_tokens.sql"),
    },
    MigrationFile {
        name: "0010_recordings.sql",
        sql: include_str!("../../migrations/postgres/0010_recordings.sql"),
    },
    MigrationFile {
        name: "0011_approval_expiry.sql",
        sql: include_str!("../../migrations/postgres/0011_approval_expiry.sql"),
    },
    MigrationFile {
        name: "0012_retention.sql",
        sql: include_str!("../../migrations/postgres/0012_retention.sql"),
    },
    MigrationFile {
        name: "0013_stored_bytes.sql",
        sql: include_str!("../../migrations/postgres/0013_stored_bytes.sql"),
    },
    MigrationFile {
        name: "0014_trace_parent.sql",
        sql: include_str!("../../migrations/postgres/0014_trace_parent.sql"),
    },
    MigrationFile {
        name: "0015_attachments.sql",
        sql: include_str!("../../migrations/postgres/0015_attachments.sql"),
    },
    MigrationFile {
        name: "0016_structured_output.sql",
        sql: include_str!("../../migrations/postgres/0016_structured_output.sql"),
    },
    MigrationFile {
        name: "0017_decision_edits.sql",
        sql: include_str!("../../migrations/postgres/0017_decision_edits.sql"),
    },
    MigrationFile {
        name: "0018_agents.sql",
        sql: include_str!("../../migrations/postgres/0018_agents.sql"),
    },
    MigrationFile {
        name: "0019_sub_prompts.sql",
        sql: include_str!("../../migrations/postgres/0019_sub_prompts.sql"),
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
