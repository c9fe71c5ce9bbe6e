//! What every execution mode shares: the executor service around it (settings, `main`,
//! serving behind the internal token, registration), the `Execute` edge (start,
//! cancellation, time limit, live decisions, the run's end, protobuf conversion), the
//! timeline types runs speak in, the tool-host client, and a run's tools with their input
//! checks (compiled once per executor, in a [`SchemaCache`]). A mode implements [`Mode`];
//! its binary's `main` calls `agentic_rpc::service_main`, its `run` calls [`serve`].

pub mod answers;
pub mod approvals;
pub mod attachments;
pub mod bounds;
pub mod budget;
pub mod calls;
mod convert;
mod deltas;
mod edge;
mod error;
pub mod functions;
pub mod metrics;
mod register;
mod run_start;
mod run_tools;
mod schema;
mod service;
mod sink;
mod slots;
pub mod sub_agents;
pub mod tape;
pub mod timeline;
pub mod tool_host;

pub use convert::approval_to_proto;
pub use edge::Mode;
pub use error::{ExecuteError, RunError, ToolHostError};
pub use register::{Announce, Registration, RegistrationError};
pub use run_start::RunStart;
pub use run_tools::{CallRefused, RunTools};
pub use schema::{InputCheck, MAX_CACHED_SCHEMAS, SchemaCache};
pub use service::{
    CheckError, CodeRunnerArgs, ExecutorArgs, ServeError, SetupError, ToolHostArgs, serve,
};
pub use sink::{EventSink, StreamClosed};
pub use slots::{Capacity, DEFAULT_MAX_RUNS};
