//! The tools `agentic mcp` offers, as an MCP client lists them: names, descriptions, and the
//! JSON Schemas of their arguments and structured results.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations, object};
use serde_json::json;

use super::files::MAX_FILE_BYTES;

pub const RUN_PROMPT: &str = "run_prompt";
pub const LIST_CONVERSATIONS: &str = "list_conversations";
pub const GET_FILE: &str = "get_file";
pub const APPROVE: &str = "approve_tool_call";
pub const REJECT: &str = "reject_tool_call";
pub const RESPOND: &str = "respond_to_tool_call";
pub const ANSWER: &str = "answer_question";
pub const LIST_SKILLS: &str = "list_skills";
pub const ADD_SKILL_FOLDER: &str = "add_skill_folder";

/// The most conversations `list_conversations` asks for (the gateway's own maximum).
pub const MAX_CONVERSATIONS: u32 = 500;

/// How many conversations `list_conversations` lists without a `limit`.
pub const DEFAULT_CONVERSATIONS: u32 = 20;

/// The tools; `approve_tool_call` and `respond_to_tool_call` only when approvals are
/// allowed.
pub fn all(allow_approvals: bool) -> Vec<Tool> {
    let mut tools = vec![run_prompt(), list_conversations(), get_file()];
    if allow_approvals {
        tools.push(decide(true));
        tools.push(respond());
    }
    tools.push(decide(false));
    tools.push(answer());
    tools.push(list_skills());
    tools.push(add_skill_folder());
    tools
}

/// A skill as `list_skills` and `add_skill_folder` give it.
fn skill_result() -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "source": {"type": "string", "description": "saved (code kept as the tool skill.<name>), folder (a folder the user added) or operator (shared by every user)."},
            "version": {"type": "integer", "minimum": 0},
            "description": {"type": "string"},
            "files": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}, "size": {"type": "integer", "minimum": 0}},
                    "required": ["path", "size"],
                },
                "description": "A folder skill's files, SKILL.md first.",
            },
        },
        "required": ["name", "source", "version", "description", "files"],
    })
}

fn list_skills() -> Tool {
    let input = json!({"type": "object", "properties": {}, "additionalProperties": false});
    let output = json!({
        "type": "object",
        "properties": {"skills": {"type": "array", "items": skill_result()}},
        "required": ["skills"],
    });
    Tool::new(
        LIST_SKILLS,
        "Lists the skills the agent has for the user: code it saved, skill folders the user \
         added and the operator's, each with its description.",
        schema(input),
    )
    .with_title("List skills")
    .with_raw_output_schema(schema(output))
    .with_annotations(ToolAnnotations::new().read_only(true).open_world(false))
}

fn add_skill_folder() -> Tool {
    let input = json!({
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "minLength": 1,
                "description": "Absolute path, on the machine this server runs on, of a skill folder (SKILL.md at its top) or of a .zip, .tar or .tar.gz of one.",
            },
        },
        "required": ["path"],
        "additionalProperties": false,
    });
    Tool::new(
        ADD_SKILL_FOLDER,
        "Adds a skill folder in the Agent Skills format (a SKILL.md with name and description, \
         then instructions, beside any scripts and reference files) to the user's skills: \
         every later prompt lists it, and the agent reads it with skill.read. A folder of the \
         same name is replaced.",
        schema(input),
    )
    .with_title("Add a skill folder")
    .with_raw_output_schema(schema(skill_result()))
    .with_annotations(
        ToolAnnotations::new()
            .read_only(false)
            .destructive(false)
            .open_world(false),
    )
}

/// `run_prompt`'s structured result (approving or rejecting answers the same).
fn prompt_result() -> serde_json::Value {
    let file = json!({
        "type": "object",
        "properties": {
            "id": {"type": "string", "description": "The file's id, for get_file."},
            "filename": {"type": "string"},
            "mime_type": {"type": "string"},
            "size": {"type": "integer", "minimum": 0, "description": "Size in bytes."},
        },
        "required": ["id", "filename", "mime_type", "size"],
    });
    let pending = json!({
        "type": "object",
        "properties": {
            "call_id": {"type": "string"},
            "tool": {"type": "string"},
            "input": {"description": "The arguments the tool was called with."},
            "approve": {"type": "string", "description": "The command that lets the call run."},
            "reject": {"type": "string", "description": "The command that refuses it."},
        },
        "required": ["call_id", "tool", "approve", "reject"],
    });
    json!({
        "type": "object",
        "properties": {
            "prompt_id": {"type": "string"},
            "conversation_id": {"type": "string"},
            "state": {
                "type": "string",
                "description": "completed, failed, cancelled or waiting_for_approval.",
            },
            "mode": {"type": "string"},
            "text": {"type": "string", "description": "The agent's answer."},
            "files": {"type": "array", "items": file, "description": "Files the prompt created."},
            "error": {"type": "string", "description": "Why the prompt failed or was cancelled."},
            "pending_approvals": {
                "type": "array",
                "items": pending,
                "description": "Tool calls that wait for a person to approve them.",
            },
        },
        "required": ["prompt_id", "conversation_id", "state", "mode", "text", "files"],
    })
}

fn run_prompt() -> Tool {
    let input = json!({
        "type": "object",
        "properties": {
            "input": {
                "type": "string",
                "minLength": 1,
                "description": "What to ask the agent, as you would type it to `agentic prompt`.",
            },
            "mode": {
                "type": "string",
                "description": "Execution mode, e.g. `classic` or `code` (default: the conversation's, else classic).",
            },
            "conversation_id": {
                "type": "string",
                "description": "Continue this conversation (an id from run_prompt or list_conversations); without it a new conversation is created.",
            },
        },
        "required": ["input"],
        "additionalProperties": false,
    });
    Tool::new(
        RUN_PROMPT,
        "Runs a prompt on the agentic gateway as the configured user and waits for its end: \
         the agent's answer, the files it created (read them with get_file) and the prompt and \
         conversation ids. Pass conversation_id to continue a conversation. A tool call that \
         needs a person's approval ends the call early with the command that approves it.",
        schema(input),
    )
    .with_title("Run a prompt")
    .with_raw_output_schema(schema(prompt_result()))
    .with_annotations(ToolAnnotations::new().read_only(false).open_world(true))
}

fn list_conversations() -> Tool {
    let input = json!({
        "type": "object",
        "properties": {
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_CONVERSATIONS,
                "description": format!("How many to list (default {DEFAULT_CONVERSATIONS})."),
            },
        },
        "additionalProperties": false,
    });
    let conversation = json!({
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "title": {"type": "string"},
            "default_mode": {"type": "string"},
            "created_at": {"type": "string", "description": "RFC 3339."},
            "updated_at": {"type": "string", "description": "RFC 3339."},
        },
        "required": ["id", "title", "default_mode"],
    });
    let output = json!({
        "type": "object",
        "properties": {"conversations": {"type": "array", "items": conversation}},
        "required": ["conversations"],
    });
    Tool::new(
        LIST_CONVERSATIONS,
        "Lists the user's conversations on the agentic gateway, newest first: ids to continue \
         with run_prompt.",
        schema(input),
    )
    .with_title("List conversations")
    .with_raw_output_schema(schema(output))
    .with_annotations(ToolAnnotations::new().read_only(true).open_world(false))
}

fn get_file() -> Tool {
    let input = json!({
        "type": "object",
        "properties": {
            "file_id": {
                "type": "string",
                "minLength": 1,
                "description": "A file's id, from run_prompt's files.",
            },
        },
        "required": ["file_id"],
        "additionalProperties": false,
    });
    let description = format!(
        "Reads a file a prompt created: text files as text, images as images, anything else \
         as an embedded resource (base64). Files over {} MiB are refused.",
        MAX_FILE_BYTES / (1024 * 1024)
    );
    Tool::new(GET_FILE, description, schema(input))
        .with_title("Get a file")
        .with_annotations(
            ToolAnnotations::new()
                .read_only(true)
                .idempotent(true)
                .open_world(false),
        )
}

/// One of the tools that decide a call a prompt waits on.
struct DecisionTool {
    name: &'static str,
    title: &'static str,
    description: &'static str,
    /// What `call_id` names.
    call: &'static str,
    /// The one argument the tool takes beside `prompt_id` and `call_id`: its name and schema.
    field: (&'static str, serde_json::Value),
    /// Whether that argument is required.
    required: bool,
    /// Whether the decision may let a call run.
    destructive: bool,
}

/// The tool `tool` describes: its arguments `prompt_id`, `call_id` and its own field, its
/// answer the prompt's as `run_prompt` gives it.
fn decision_tool(tool: DecisionTool) -> Tool {
    let (field, field_schema) = tool.field;
    let mut properties = json!({
        "prompt_id": {"type": "string", "minLength": 1, "description": "The waiting prompt, from run_prompt."},
        "call_id": {"type": "string", "minLength": 1, "description": tool.call},
    });
    properties[field] = field_schema;
    let mut required = vec!["prompt_id", "call_id"];
    if tool.required {
        required.push(field);
    }
    let input = json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    });
    Tool::new(tool.name, tool.description, schema(input))
        .with_title(tool.title)
        .with_raw_output_schema(schema(prompt_result()))
        .with_annotations(
            ToolAnnotations::new()
                .read_only(false)
                .destructive(tool.destructive)
                .open_world(true),
        )
}

/// What `call_id` names for a decision on a tool call.
const PENDING_CALL: &str = "The call, from run_prompt's pending_approvals.";

/// `approve_tool_call` (`approve`) or `reject_tool_call`.
fn decide(approve: bool) -> Tool {
    if approve {
        decision_tool(DecisionTool {
            name: APPROVE,
            title: "Approve a tool call",
            description: "Lets a tool call that waits for a person's approval run (ask the person \
                          first: this is their decision), then waits for the prompt: its answer \
                          as run_prompt gives it, or the next call that waits.",
            call: PENDING_CALL,
            field: (
                "edited_input",
                json!({
                    "type": "object",
                    "description": "Run the call with these arguments instead of the ones asked for \
                                    (checked against the tool's schema; only what the person chose).",
                }),
            ),
            required: false,
            destructive: true,
        })
    } else {
        decision_tool(DecisionTool {
            name: REJECT,
            title: "Reject a tool call",
            description: "Refuses a tool call that waits for a person's approval, with the reason \
                          the agent reads, then waits for the prompt: its answer as run_prompt \
                          gives it.",
            call: PENDING_CALL,
            field: (
                "reason",
                json!({"type": "string", "description": "Why not: the agent reads it."}),
            ),
            required: false,
            destructive: false,
        })
    }
}

/// `answer_question`: the answer to a question the agent asked (a waiting `human.ask` call).
fn answer() -> Tool {
    decision_tool(DecisionTool {
        name: ANSWER,
        title: "Answer the agent's question",
        description: "Answers a question the agent asked the person (ask them, and pass on their \
                      answer), then waits for the prompt: its answer as run_prompt gives it, or \
                      the next call that waits.",
        call: "The question's call, from run_prompt's pending_approvals (tool human.ask; its input holds the question).",
        field: (
            "answer",
            json!({"description": "The person's answer: one of the question's choices, or a value its schema accepts, or text."}),
        ),
        required: true,
        destructive: false,
    })
}

/// `respond_to_tool_call`: the person's result in a call's place.
fn respond() -> Tool {
    decision_tool(DecisionTool {
        name: RESPOND,
        title: "Answer a tool call in its place",
        description: "Answers a tool call that waits for a person's approval with the person's own \
                      result instead of running it (ask the person first: this is their decision), \
                      then waits for the prompt: its answer as run_prompt gives it, or the next \
                      call that waits.",
        call: PENDING_CALL,
        field: (
            "output",
            json!({"description": "The result the agent receives as the tool's output (any JSON)."}),
        ),
        required: true,
        destructive: false,
    })
}

fn schema(value: serde_json::Value) -> Arc<JsonObject> {
    Arc::new(object(value))
}
