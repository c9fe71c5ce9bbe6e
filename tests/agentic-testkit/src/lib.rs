//! Test and demo support: the scripted stand-in model (an OpenAI-compatible HTTP server) and
//! the stack sandbox that runs the real services in one process (or, in `processes`, as child
//! processes of the built binaries), on fresh SQLite or PostgreSQL databases.

pub use agentic_db::test_database as database;
pub mod model;
pub mod processes;
pub mod stack;
pub mod stored;

pub use model::{
    HostedBlock, HostedFile, HostedImage, HostedMatch, HostedReply, HostedRule, ImagePart, Match,
    RecordedRequest, Reply, Rule, ScriptedCall, StandInModel, UploadedFile,
};
pub use processes::{ProcessStack, ProcessStackOptions, Service};
pub use stack::{GatewayReplica, Stack, StackDatabase, StackOptions, TestClock};
