//! The gateway's messages as canonical proto3 JSON, for the CLI's `--json` and the gateway's
//! HTTP API: the mapping every protobuf JSON library reads and writes, and what grpcurl
//! prints. Field
//! names are lowerCamelCase (`promptId`), enums their proto names (`"PROMPT_STATE_COMPLETED"`),
//! 64-bit integers strings (`"sequence": "3"`), timestamps RFC 3339 strings in UTC with 0, 3, 6
//! or 9 fractional digits, `google.protobuf.Value` and `Struct` plain JSON, a oneof the one
//! field that is set (`{"stream": {"text": "hi"}}`), and fields at their default value (0,
//! `""`, `false`, the enum's zero, empty lists, unset messages) are left out. Fields come in
//! the order of their numbers in the `.proto` files.
//!
//! prost messages are not serde types: each is read again as a `prost_reflect::DynamicMessage`
//! through the descriptor set this crate embeds (the one reflection serves), whose
//! `Serialize` and `Deserialize` are the canonical mapping.

use std::io;
use std::sync::LazyLock;

use crate::v1::{
    AddSkillFolderRequest, Agent, AnswerQuestionRequest, ApproveToolCallRequest,
    CancelPromptRequest, Conversation, ConversationFile, CreateAgentRequest,
    CreateConversationRequest, CreatePromptRequest, CreateSkillRequest, CreateTriggerRequest,
    DeleteAgentRequest, DeleteAgentResponse, DeleteAllDataRequest, DeleteAllDataResponse,
    DeleteConversationRequest, DeleteConversationResponse, DeleteFileRequest, DeleteFileResponse,
    DeleteMemoryRequest, DeleteMemoryResponse, DeletePromptRequest, DeletePromptResponse,
    DeleteRecordingRequest, DeleteRecordingResponse, DeleteSkillRequest, DeleteSkillResponse,
    DeleteTriggerRequest, DeleteTriggerResponse, ExportDataRequest, ExportItem, File, FileOutput,
    GetAgentRequest, GetConversationRequest, GetFileRequest, GetPromptRequest, GetRecordingRequest,
    GetSkillRequest, GetStorageUsageRequest, ImportRecordingRequest, ListAgentVersionsRequest,
    ListAgentVersionsResponse, ListAgentsRequest, ListAgentsResponse, ListConversationFilesRequest,
    ListConversationFilesResponse, ListConversationsRequest, ListConversationsResponse,
    ListMemoryRequest, ListMemoryResponse, ListModesRequest, ListModesResponse, ListPromptsRequest,
    ListPromptsResponse, ListSkillsRequest, ListSkillsResponse, ListToolsRequest,
    ListToolsResponse, ListTriggersRequest, ListTriggersResponse, MemoryItem, Mode, Prompt,
    PromptEvent, PromptOutput, PutMemoryRequest, Recording, RejectToolCallRequest,
    ReplayPromptRequest, RespondToToolCallRequest, Skill, StorageUsage, StreamPromptRequest,
    Trigger, UpdateConversationRequest, UpdateTriggerRequest, UploadFileRequest,
};
use prost_reflect::{
    DescriptorPool, DeserializeOptions, DynamicMessage, ReflectMessage, SerializeOptions,
};
use serde_json::Serializer;
use serde_json::ser::{CompactFormatter, Formatter, PrettyFormatter};

/// A message of the agentic protos that can be written as JSON: its full protobuf name, under
/// which the descriptor set describes it.
pub trait Described: prost::Message + Default {
    /// `agentic.v1.Prompt`, …
    const FULL_NAME: &'static str;
}

/// `message` as one line of JSON (the `--json` form of each streamed event).
pub fn compact<M: Described>(message: &M) -> Result<String, JsonError> {
    write(message, CompactFormatter)
}

/// `message` as an indented JSON document.
pub fn pretty<M: Described>(message: &M) -> Result<String, JsonError> {
    write(message, PrettyFormatter::new())
}

#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    #[error("the embedded descriptor set does not load: {0}")]
    Descriptors(String),
    #[error("the descriptor set has no message {0}")]
    UnknownMessage(&'static str),
    #[error("cannot read {0} through its descriptor: {1}")]
    Decode(&'static str, prost::DecodeError),
    /// A message with no JSON form, e.g. a `google.protobuf.Value` holding NaN.
    #[error("cannot write {0} as JSON: {1}")]
    Serialize(&'static str, serde_json::Error),
    /// JSON that is not a `{0}` (an unknown field, a wrong type, a syntax error).
    #[error("not a valid {0}: {1}")]
    Parse(&'static str, serde_json::Error),
}

/// `json` read as an `M`, by the canonical mapping (unknown fields are refused).
pub fn from_json<M: Described>(json: &[u8]) -> Result<M, JsonError> {
    deserialize(descriptor_of::<M>()?, json)
        .map_err(|error| JsonError::Parse(M::FULL_NAME, error))?
        .transcode_to::<M>()
        .map_err(|error| JsonError::Decode(M::FULL_NAME, error))
}

/// The descriptor set this crate embeds (every agentic message, service and HTTP route, and
/// the well-known types they use), decoded once.
pub fn descriptors() -> Result<&'static DescriptorPool, JsonError> {
    DESCRIPTORS
        .as_ref()
        .map_err(|error| JsonError::Descriptors(error.clone()))
}

/// `json` read as a message of `descriptor`, by the canonical mapping (unknown fields are
/// refused); what is wrong, in words, when it is not one.
pub fn parse_dynamic(
    descriptor: prost_reflect::MessageDescriptor,
    json: &[u8],
) -> Result<DynamicMessage, String> {
    let name = descriptor.full_name().to_owned();
    deserialize(descriptor, json).map_err(|error| format!("not a valid {name}: {error}"))
}

/// `message` as one line of canonical JSON.
pub fn compact_dynamic(message: &DynamicMessage) -> Result<String, String> {
    serialize(message, CompactFormatter).map_err(|error| {
        format!(
            "cannot write {} as JSON: {error}",
            message.descriptor().full_name()
        )
    })
}

/// Every agentic message and the well-known types they use, decoded once.
static DESCRIPTORS: LazyLock<Result<DescriptorPool, String>> = LazyLock::new(|| {
    DescriptorPool::decode(crate::FILE_DESCRIPTOR_SET).map_err(|error| error.to_string())
});

fn descriptor_of<M: Described>() -> Result<prost_reflect::MessageDescriptor, JsonError> {
    descriptors()?
        .get_message_by_name(M::FULL_NAME)
        .ok_or(JsonError::UnknownMessage(M::FULL_NAME))
}

/// The whole of `json` as a message of `descriptor` (nothing may follow it).
fn deserialize(
    descriptor: prost_reflect::MessageDescriptor,
    json: &[u8],
) -> Result<DynamicMessage, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_slice(json);
    let dynamic = DynamicMessage::deserialize_with_options(
        descriptor,
        &mut deserializer,
        &DeserializeOptions::new(),
    )?;
    deserializer.end()?;
    Ok(dynamic)
}

/// `message` as JSON in `formatter`'s layout, by the canonical mapping (the default options).
fn serialize<F: Formatter>(
    message: &DynamicMessage,
    formatter: F,
) -> Result<String, serde_json::Error> {
    let mut written = Vec::new();
    let mut serializer = Serializer::with_formatter(&mut written, WholeNumbers(formatter));
    message.serialize_with_options(&mut serializer, &SerializeOptions::new())?;
    // serde_json writes only UTF-8 (strings stay strings, everything else is ASCII).
    String::from_utf8(written).map_err(|error| serde_json::Error::io(io::Error::other(error)))
}

fn write<M: Described, F: Formatter>(message: &M, formatter: F) -> Result<String, JsonError> {
    serialize(&dynamic(message)?, formatter)
        .map_err(|error| JsonError::Serialize(M::FULL_NAME, error))
}

fn dynamic<M: Described>(message: &M) -> Result<DynamicMessage, JsonError> {
    DynamicMessage::decode(descriptor_of::<M>()?, message.encode_to_vec().as_slice())
        .map_err(|error| JsonError::Decode(M::FULL_NAME, error))
}

/// serde_json's formatting, except that a whole double within ±2^53 (where every integer is
/// exact) is written as an integer: `3`, not `3.0`, as protobuf's own JSON printers (grpcurl's
/// among them) write it. Numbers in `google.protobuf.Value` are doubles, so without this every
/// integer in a tool's input or output would come out as `3.0`.
struct WholeNumbers<F>(F);

const MAX_EXACT_INTEGER: f64 = 9_007_199_254_740_992.0; // 2^53

impl<F: Formatter> Formatter for WholeNumbers<F> {
    fn write_f64<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        if value.fract() == 0.0 && value.abs() <= MAX_EXACT_INTEGER {
            #[allow(clippy::cast_possible_truncation)] // whole and within ±2^53: exact
            return self.0.write_i64(writer, value as i64);
        }
        self.0.write_f64(writer, value)
    }

    // Layout: whatever the wrapped formatter does (indentation for `PrettyFormatter`).
    fn begin_array<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.begin_array(writer)
    }

    fn end_array<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.end_array(writer)
    }

    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.0.begin_array_value(writer, first)
    }

    fn end_array_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.end_array_value(writer)
    }

    fn begin_object<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.begin_object(writer)
    }

    fn end_object<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.end_object(writer)
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.0.begin_object_key(writer, first)
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.begin_object_value(writer)
    }

    fn end_object_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.end_object_value(writer)
    }
}

macro_rules! described {
    ($($message:ident),* $(,)?) => {
        $(impl Described for $message {
            const FULL_NAME: &'static str = concat!("agentic.v1.", stringify!($message));
        })*
    };
}

described!(
    CreatePromptRequest,
    StreamPromptRequest,
    GetPromptRequest,
    ListPromptsRequest,
    CancelPromptRequest,
    ApproveToolCallRequest,
    RejectToolCallRequest,
    RespondToToolCallRequest,
    AnswerQuestionRequest,
    ListModesRequest,
    ListToolsRequest,
    CreateConversationRequest,
    GetConversationRequest,
    UpdateConversationRequest,
    ListConversationsRequest,
    ListConversationFilesRequest,
    GetFileRequest,
    File,
    FileOutput,
    UploadFileRequest,
    PromptEvent,
    ListToolsResponse,
    Prompt,
    PromptOutput,
    Mode,
    Conversation,
    ConversationFile,
    ListPromptsResponse,
    ListModesResponse,
    ListConversationsResponse,
    ListConversationFilesResponse,
    CreateTriggerRequest,
    ListTriggersRequest,
    UpdateTriggerRequest,
    DeleteTriggerRequest,
    Trigger,
    ListTriggersResponse,
    DeleteTriggerResponse,
    CreateSkillRequest,
    ListSkillsRequest,
    GetSkillRequest,
    DeleteSkillRequest,
    Skill,
    ListSkillsResponse,
    DeleteSkillResponse,
    AddSkillFolderRequest,
    Recording,
    ReplayPromptRequest,
    GetRecordingRequest,
    ImportRecordingRequest,
    DeleteConversationRequest,
    DeleteConversationResponse,
    DeleteFileRequest,
    DeleteFileResponse,
    DeleteRecordingRequest,
    DeleteRecordingResponse,
    GetStorageUsageRequest,
    StorageUsage,
    DeletePromptRequest,
    DeletePromptResponse,
    ExportDataRequest,
    ExportItem,
    DeleteAllDataRequest,
    DeleteAllDataResponse,
    CreateAgentRequest,
    ListAgentsRequest,
    GetAgentRequest,
    ListAgentVersionsRequest,
    DeleteAgentRequest,
    Agent,
    ListAgentsResponse,
    ListAgentVersionsResponse,
    DeleteAgentResponse,
    ListMemoryRequest,
    PutMemoryRequest,
    DeleteMemoryRequest,
    MemoryItem,
    ListMemoryResponse,
    DeleteMemoryResponse,
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{timestamp_from_millis, to_proto};
    use crate::v1::{
        PromptState, TextDelta, TextOutput, ToolOutput, ToolResult, ToolSuccess, Usage,
        prompt_event, prompt_output, tool_result,
    };
    use serde_json::{Value, json};

    fn parsed<M: Described>(message: &M) -> Value {
        serde_json::from_str(&compact(message).expect("writes as JSON")).expect("valid JSON")
    }

    #[test]
    fn an_event_has_camel_case_names_string_int64s_and_its_oneof_as_a_field() {
        let delta = PromptEvent {
            sequence: 3,
            prompt_id: "p1".into(),
            at: Some(timestamp_from_millis(1_700_000_000_123)),
            kind: Some(prompt_event::Kind::Stream(TextDelta { text: "hi".into() })),
        };
        assert_eq!(
            compact(&delta).unwrap(),
            r#"{"sequence":"3","promptId":"p1","at":"2023-11-14T22:13:20.123Z","stream":{"text":"hi"}}"#
        );
    }

    #[test]
    fn a_prompt_has_enum_names_plain_json_values_and_no_default_fields() {
        let prompt = Prompt {
            id: "p1".into(),
            state: PromptState::Completed as i32,
            usage: Some(Usage {
                input_tokens: 20,
                output_tokens: 10,
                total_tokens: 30,
                ..Usage::default()
            }),
            output: vec![
                PromptOutput {
                    kind: Some(prompt_output::Kind::Tool(ToolOutput {
                        id: "call-1".into(),
                        function: "demo.echo".into(),
                        input: Some(to_proto(&json!({"say": "hello"}))),
                        result: Some(ToolResult {
                            result: Some(tool_result::Result::Success(ToolSuccess {
                                output: Some(to_proto(&json!({"n": 1, "half": 0.5}))),
                            })),
                        }),
                        ..ToolOutput::default()
                    })),
                },
                PromptOutput {
                    kind: Some(prompt_output::Kind::Text(TextOutput {
                        content: "Echoed.".into(),
                    })),
                },
            ],
            created_at: Some(timestamp_from_millis(0)),
            ..Prompt::default()
        };
        assert_eq!(
            parsed(&prompt),
            json!({
                "id": "p1",
                "state": "PROMPT_STATE_COMPLETED",
                "output": [
                    {"tool": {"id": "call-1", "function": "demo.echo", "input": {"say": "hello"},
                              "result": {"success": {"output": {"n": 1, "half": 0.5}}}}},
                    {"text": {"content": "Echoed."}},
                ],
                "usage": {"inputTokens": "20", "outputTokens": "10", "totalTokens": "30"},
                "createdAt": "1970-01-01T00:00:00Z",
            })
        );
    }

    #[test]
    fn whole_numbers_in_values_are_written_as_integers() {
        let output = PromptOutput {
            kind: Some(prompt_output::Kind::Tool(ToolOutput {
                input: Some(to_proto(&json!({"ms": 60_000, "big": 1e300, "neg": -2}))),
                ..ToolOutput::default()
            })),
        };
        let line = compact(&output).unwrap();
        assert!(line.contains(r#""ms":60000"#), "{line}");
        assert!(line.contains(r#""neg":-2"#), "{line}");
        assert!(line.contains(r#""big":1e+300"#), "{line}");
        let document = pretty(&output).unwrap();
        assert!(document.contains("\"ms\": 60000"), "{document}");
        assert!(
            document.contains("\n  \"tool\": {\n"),
            "indented: {document}"
        );
    }

    #[test]
    fn every_described_message_is_in_the_descriptor_set() {
        dynamic(&PromptEvent::default()).unwrap();
        dynamic(&Prompt::default()).unwrap();
        dynamic(&PromptOutput::default()).unwrap();
        dynamic(&Mode::default()).unwrap();
        dynamic(&Conversation::default()).unwrap();
        dynamic(&ConversationFile::default()).unwrap();
        dynamic(&ListPromptsResponse::default()).unwrap();
        dynamic(&ListModesResponse::default()).unwrap();
        dynamic(&ListConversationsResponse::default()).unwrap();
        dynamic(&ListConversationFilesResponse::default()).unwrap();
    }

    #[test]
    fn an_empty_list_is_an_empty_object_as_grpcurl_prints_it() {
        assert_eq!(pretty(&ListModesResponse::default()).unwrap(), "{}");
    }
}
