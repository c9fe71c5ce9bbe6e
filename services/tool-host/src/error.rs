//! The tool-host's error type and how each variant reaches a caller (ids it echoes are cut to
//! a UUID's length).

use agentic_rpc::{ErrorKind, ServiceError, shown_id};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0} is required")]
    Required(&'static str),
    #[error("invalid {field}: {reason}")]
    InvalidField { field: &'static str, reason: String },
    /// Text in an id field that no id can be.
    #[error(transparent)]
    InvalidId(#[from] agentic_ids::IdError),
    #[error("unknown tool: \"{}\"", shown_id(.0))]
    UnknownTool(String),
    #[error("artifact not found: {}", shown_id(.0))]
    ArtifactNotFound(String),
    #[error("the artifact is {size} bytes, more than the {limit} bytes one artifact may hold")]
    ArtifactTooLarge { size: u64, limit: u64 },
    #[error(
        "storage quota exceeded: {size} more bytes would take this user's artifacts past their quota of {quota} bytes ({used} bytes in use)"
    )]
    QuotaExceeded { size: u64, used: u64, quota: u64 },
    #[error("unknown plugin: \"{name}\" (known plugins: {known})")]
    UnknownPlugin { name: String, known: String },
    #[error("tool {tool} is not valid: {reason}")]
    InvalidTool { tool: String, reason: String },
    #[error("artifact {id} holds unreadable data")]
    CorruptArtifact {
        id: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("{}", skill_not_found(name, *version))]
    SkillNotFound { name: String, version: Option<u32> },
    #[error(
        "this user has {limit} skills, as many as one user may keep: delete one before saving another"
    )]
    TooManySkills { limit: i64 },
    #[error("not a valid skill folder: {0}")]
    InvalidSkillFolder(String),
    #[error("the skill name {name:?} is taken by {by}")]
    SkillNameTaken { name: String, by: &'static str },
    #[error(
        "this user has {limit} skill folders, as many as one user may keep: delete one before adding another"
    )]
    TooManyFolderSkills { limit: i64 },
    #[error(
        "this user keeps {limit} memory items, as many as one user may: delete some (or let them expire) first"
    )]
    TooManyMemoryItems { limit: i64 },
    #[error("skills are off: this tool-host does not run the `skill` plugin (TOOL_HOST_PLUGINS)")]
    SkillsOff,
    #[error("skill {name} holds an unreadable schema")]
    CorruptSkill {
        name: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("database error")]
    Database(#[from] sqlx::Error),
}

impl ServiceError for Error {
    fn kind(&self) -> ErrorKind {
        match self {
            Error::Required(_)
            | Error::InvalidField { .. }
            | Error::InvalidId(_)
            | Error::UnknownPlugin { .. }
            | Error::InvalidSkillFolder(_) => ErrorKind::InvalidArgument,
            Error::SkillNameTaken { .. } => ErrorKind::AlreadyExists,
            Error::UnknownTool(_) | Error::ArtifactNotFound(_) | Error::SkillNotFound { .. } => {
                ErrorKind::NotFound
            }
            Error::SkillsOff => ErrorKind::FailedPrecondition,
            Error::ArtifactTooLarge { .. }
            | Error::QuotaExceeded { .. }
            | Error::TooManySkills { .. }
            | Error::TooManyFolderSkills { .. }
            | Error::TooManyMemoryItems { .. } => ErrorKind::ResourceExhausted,
            Error::InvalidTool { .. }
            | Error::CorruptArtifact { .. }
            | Error::CorruptSkill { .. }
            | Error::Database(_) => ErrorKind::Internal,
        }
    }
}

fn skill_not_found(name: &str, version: Option<u32>) -> String {
    let name = shown_id(name);
    match version {
        Some(version) => format!("skill not found: \"{name}\" version {version}"),
        None => format!("skill not found: \"{name}\""),
    }
}
