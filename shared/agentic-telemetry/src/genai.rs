//! Attribute and metric names of the OpenTelemetry GenAI semantic conventions that our spans
//! and metrics carry.
//! Defined here because `opentelemetry-semantic-conventions` marks every `GEN_AI_*` constant
//! deprecated. `tracing` macros take field names as tokens, so spans spell these out
//! (`gen_ai.operation.name = "chat"`); these constants are for readers and tests.

pub const OPERATION_NAME: &str = "gen_ai.operation.name";
pub const PROVIDER_NAME: &str = "gen_ai.provider.name";
pub const REQUEST_MODEL: &str = "gen_ai.request.model";
pub const USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
pub const USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
pub const TOOL_NAME: &str = "gen_ai.tool.name";
pub const TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
pub const AGENT_NAME: &str = "gen_ai.agent.name";

/// Values of [`PROVIDER_NAME`]: OpenAI's API (and those compatible with it), Anthropic's.
pub const PROVIDER_OPENAI: &str = "openai";
pub const PROVIDER_ANTHROPIC: &str = "anthropic";

/// Values of [`OPERATION_NAME`].
pub const OPERATION_CHAT: &str = "chat";
pub const OPERATION_EXECUTE_TOOL: &str = "execute_tool";
pub const OPERATION_INVOKE_AGENT: &str = "invoke_agent";

/// The GenAI client metrics (histograms) and their attributes.
pub const METRIC_TOKEN_USAGE: &str = "gen_ai.client.token.usage";
pub const METRIC_OPERATION_DURATION: &str = "gen_ai.client.operation.duration";
pub const TOKEN_TYPE: &str = "gen_ai.token.type";
pub const TOKEN_TYPE_INPUT: &str = "input";
pub const TOKEN_TYPE_OUTPUT: &str = "output";
pub const ERROR_TYPE: &str = "error.type";
