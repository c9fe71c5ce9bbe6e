//! The gRPC contracts of agentic (`proto/agentic/v1`): the code and descriptor set `make proto`
//! generated from them (`src/generated/`, checked in; `make lint` fails when the protos have
//! changed since), and JSON <-> protobuf helpers.

pub mod budget;
pub mod canonical;
pub mod codec;
mod events;
pub mod json;
pub mod memory;
pub mod scope;

#[allow(clippy::all)]
pub mod v1 {
    include!("generated/agentic.v1.rs");
}

/// Google's HTTP route annotation (`google.api.http`), which the gateway's HTTP API is read
/// from.
#[allow(clippy::all)]
pub mod google_api {
    include!("generated/google.api.rs");
}

/// Largest message any service accepts or sends (tonic's default receive limit is 4 MiB and
/// its send limit is unbounded; every server and client sets both to this). Part of the
/// contract: what a peer may send in one message.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// The tool of the agent's questions to the user (the tool-host's `human` plugin): a pending
/// call of it is a question, which `AnswerQuestion` answers. Part of the contract.
pub const QUESTION_TOOL: &str = "human.ask";

/// What the id of a sub-agent's tool starts with: `agent.<name>` runs the agent `<name>` as a
/// child prompt (the prompt's `AgentRun.sub_agents`). The executors offer these tools and
/// pause on their calls; the gateway answers them with the child's answer.
pub const SUB_AGENT_TOOL_PREFIX: &str = "agent.";

/// The names of the sandbox modules a skill folder's JavaScript files become
/// (`skills/<skill>/<path>`): the tool-host's `Prepare` offers them, and code mode leaves them
/// out of its system prompt, as `skill.read` names them when a skill is read. Part of the
/// contract.
pub const SKILL_MODULE_PREFIX: &str = "skills/";

/// `text/plain` of `Text/Plain; charset=utf-8`: a file's media type (`FileOutput.mime_type`)
/// without its parameters, lowercase, as every reader of files compares it.
pub fn mime_essence(mime_type: &str) -> String {
    mime_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// Encoded `FileDescriptorSet` of every agentic proto, for server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!("generated/agentic_descriptor.bin");
