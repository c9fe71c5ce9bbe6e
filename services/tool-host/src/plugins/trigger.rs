//! `trigger.create`, `trigger.list`, `trigger.delete`: a prompt schedules prompts of its
//! own user (`triggerCreate` in code). Triggers live in the gateway; this plugin calls its
//! trigger RPCs with the internal token, for the user of the calling prompt (never one the
//! input names), naming that prompt, which the gateway checks is running. Creating one needs
//! the user's approval: a trigger outlives the prompt, and what a prompt-injected model
//! schedules would otherwise run again and again. Deleting one does too: a model must not
//! quietly remove what the user scheduled.

use std::str::FromStr as _;

use agentic_proto::v1::prompt_gateway_client::PromptGatewayClient;
use agentic_proto::v1::{
    CatchUp, CreateTriggerRequest, DeleteTriggerRequest, ListTriggersRequest, Schedule, Trigger,
    TriggeredPrompt, schedule,
};
use agentic_rpc::InternalChannel;
use async_trait::async_trait;
use serde_json::{Value, json};

use crate::plugin::{CallContext, Plugin, ToolFailure, ToolOutcome, ToolSpec};

pub const CREATE: &str = "trigger.create";
pub const LIST: &str = "trigger.list";
pub const DELETE: &str = "trigger.delete";

/// The headers that name the user an internal caller acts for (the gateway's `x-user-id`)
/// and their prompt that calls.
const USER_HEADER: &str = "x-user-id";
const PROMPT_HEADER: &str = "x-agentic-prompt-id";
/// Characters of a trigger's input `trigger.list` shows.
const LISTED_INPUT_CHARS: usize = 200;

pub struct TriggerPlugin {
    gateway: PromptGatewayClient<InternalChannel>,
}

impl TriggerPlugin {
    pub fn new(gateway: InternalChannel) -> TriggerPlugin {
        TriggerPlugin {
            gateway: PromptGatewayClient::new(gateway)
                .max_decoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES),
        }
    }

    /// `message` as a request acting for the caller's user.
    fn request<T>(message: T, ctx: &CallContext) -> Result<tonic::Request<T>, ToolFailure> {
        let mut request = tonic::Request::new(message);
        let prompt = ctx.prompt_id.as_ref().ok_or_else(|| {
            ToolFailure::new("trigger tools are called from a prompt; this call names none")
        })?;
        let header = |text: &str| {
            text.parse().map_err(|_| {
                ToolFailure::new("the calling prompt's ids cannot be sent to the gateway")
            })
        };
        request
            .metadata_mut()
            .insert(USER_HEADER, header(ctx.user_id.as_str())?);
        request
            .metadata_mut()
            .insert(PROMPT_HEADER, header(prompt.as_str())?);
        request.set_timeout(std::time::Duration::from_secs(15));
        Ok(request)
    }
}

/// A trigger as the model sees it: what identifies it and when it fires (its input cut).
fn described(trigger: &Trigger) -> Value {
    let schedule = trigger.schedule.as_ref().map(|schedule| {
        let mut described = match &schedule.kind {
            Some(schedule::Kind::Cron(cron)) => json!({"cron": cron}),
            Some(schedule::Kind::EveryMs(every)) => json!({"every_minutes": every / 60_000}),
            Some(schedule::Kind::At(at)) => json!({"at": at.to_string()}),
            None => json!({}),
        };
        if !schedule.time_zone.is_empty() {
            described["time_zone"] = json!(schedule.time_zone);
        }
        described
    });
    let time = |stamp: Option<&prost_types::Timestamp>| stamp.map(ToString::to_string);
    let input = trigger.prompt.as_ref().map_or_else(String::new, |prompt| {
        agentic_telemetry::text::truncate_chars(&prompt.input, LISTED_INPUT_CHARS, "…")
    });
    json!({
        "id": trigger.id,
        "name": trigger.name,
        "prompt": input,
        "schedule": schedule,
        "paused": trigger.paused,
        "next_fire_at": time(trigger.next_fire_at.as_ref()),
        "last_fired_at": time(trigger.last_fired_at.as_ref()),
        "last_error": trigger.last_error,
    })
}

/// What the gateway refused, for the model: its own words when they are about the input.
fn refused(status: &tonic::Status) -> ToolFailure {
    use tonic::Code;
    match status.code() {
        Code::InvalidArgument
        | Code::NotFound
        | Code::ResourceExhausted
        | Code::FailedPrecondition
        | Code::PermissionDenied => ToolFailure::new(status.message().to_owned()),
        Code::Unauthenticated => ToolFailure::withheld(
            "the gateway refused the tool-host: triggers need the same AGENTIC_INTERNAL_TOKEN \
             on the gateway and the tool-host",
            &agentic_rpc::relayed(status),
        ),
        _ => ToolFailure::withheld(
            "the gateway could not be reached to manage triggers; try again later",
            &agentic_rpc::relayed(status),
        ),
    }
}

fn text<'a>(input: &'a Value, field: &str) -> &'a str {
    input.get(field).and_then(Value::as_str).unwrap_or_default()
}

/// The schedule the input asks for: exactly one of `cron`, `every_minutes`, `at`.
fn schedule_of(input: &Value) -> Result<Schedule, ToolFailure> {
    let cron = input.get("cron").and_then(Value::as_str);
    let every = input.get("every_minutes").and_then(Value::as_u64);
    let at = input.get("at").and_then(Value::as_str);
    let kind = match (cron, every, at) {
        (Some(cron), None, None) => schedule::Kind::Cron(cron.to_owned()),
        (None, Some(minutes), None) => schedule::Kind::EveryMs(minutes.saturating_mul(60_000)),
        (None, None, Some(at)) => {
            let at = prost_types::Timestamp::from_str(at).map_err(|_| {
                ToolFailure::new(format!(
                    "at {at:?} is not an RFC 3339 time (like 2026-12-01T09:00:00Z)"
                ))
            })?;
            schedule::Kind::At(at)
        }
        _ => {
            return Err(ToolFailure::new(
                "give exactly one of cron, every_minutes or at",
            ));
        }
    };
    Ok(Schedule {
        kind: Some(kind),
        time_zone: text(input, "time_zone").to_owned(),
    })
}

#[async_trait]
impl Plugin for TriggerPlugin {
    fn name(&self) -> &'static str {
        "trigger"
    }

    fn tools(&self) -> Vec<ToolSpec> {
        let spec = |id: &str, description: &str, input_schema: Value| ToolSpec {
            id: id.into(),
            description: description.into(),
            input_schema,
            requires_approval: id == CREATE || id == DELETE,
            timeout: None,
            reports_progress: false,
            asks_approval: false,
            wants_code: false,
        };
        vec![
            spec(
                CREATE,
                "Schedules a prompt for this user: at the times given (exactly one of cron, \
                 every_minutes, at), `prompt` runs as a new prompt, by default in this \
                 conversation. Returns the trigger with its id and next fire time.",
                json!({
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "minLength": 1, "maxLength": 200, "description": "What the trigger is for."},
                        "prompt": {"type": "string", "minLength": 1, "maxLength": 262144, "description": "The prompt to run each time."},
                        "cron": {"type": "string", "maxLength": 200, "description": "Five-field cron expression, e.g. \"0 9 * * MON\" for Mondays at 09:00."},
                        "time_zone": {"type": "string", "maxLength": 200, "description": "IANA time zone of cron, e.g. \"Europe/Paris\" (default UTC)."},
                        "every_minutes": {"type": "integer", "minimum": 1, "maximum": 527_040},
                        "at": {"type": "string", "maxLength": 64, "description": "One time, RFC 3339 (2026-12-01T09:00:00Z)."},
                        "conversation": {"enum": ["this", "new", "none"], "description": "Where each prompt runs: this conversation (default when there is one), a new conversation each time, or alone."},
                        "mode": {"type": "string", "maxLength": 64, "description": "Execution mode (default: the conversation's, else classic)."},
                        "skip_missed": {"type": "boolean", "description": "Skip times missed while the system was down (default: fire once for them)."},
                    },
                    "required": ["name", "prompt"],
                    "additionalProperties": false,
                }),
            ),
            spec(
                LIST,
                "Lists this user's triggers with their schedules and next fire times.",
                json!({"type": "object", "properties": {}, "additionalProperties": false}),
            ),
            spec(
                DELETE,
                "Deletes one of this user's triggers by id.",
                json!({
                    "type": "object",
                    "properties": {"id": {"type": "string", "minLength": 1, "maxLength": 256}},
                    "required": ["id"],
                    "additionalProperties": false,
                }),
            ),
        ]
    }

    async fn invoke(
        &self,
        tool_id: &agentic_ids::ToolId,
        input: Value,
        ctx: &CallContext,
    ) -> Result<ToolOutcome, ToolFailure> {
        let mut gateway = self.gateway.clone();
        match tool_id.as_str() {
            CREATE => {
                let conversation = match (text(&input, "conversation"), &ctx.conversation_id) {
                    ("new", _) => (String::new(), true),
                    ("none", _) | ("", None) => (String::new(), false),
                    (_, Some(conversation)) => (conversation.to_string(), false),
                    ("this", None) => {
                        return Err(ToolFailure::new(
                            "this prompt is in no conversation: use \"new\" or \"none\"",
                        ));
                    }
                    (other, None) => {
                        return Err(ToolFailure::new(format!("unknown conversation {other:?}")));
                    }
                };
                let request = CreateTriggerRequest {
                    name: text(&input, "name").to_owned(),
                    schedule: Some(schedule_of(&input)?),
                    prompt: Some(TriggeredPrompt {
                        input: text(&input, "prompt").to_owned(),
                        mode: text(&input, "mode").to_owned(),
                        conversation_id: conversation.0,
                        new_conversation: conversation.1,
                        ..TriggeredPrompt::default()
                    }),
                    paused: false,
                    catch_up: if input.get("skip_missed").and_then(Value::as_bool) == Some(true) {
                        CatchUp::Skip as i32
                    } else {
                        CatchUp::FireOnce as i32
                    },
                };
                let trigger = gateway
                    .create_trigger(Self::request(request, ctx)?)
                    .await
                    .map_err(|status| refused(&status))?
                    .into_inner();
                Ok(ToolOutcome::output(described(&trigger)))
            }
            LIST => {
                let triggers = gateway
                    .list_triggers(Self::request(ListTriggersRequest { limit: 100 }, ctx)?)
                    .await
                    .map_err(|status| refused(&status))?
                    .into_inner()
                    .triggers;
                Ok(ToolOutcome::output(Value::Array(
                    triggers.iter().map(described).collect(),
                )))
            }
            DELETE => {
                let trigger_id = text(&input, "id").to_owned();
                gateway
                    .delete_trigger(Self::request(
                        DeleteTriggerRequest {
                            trigger_id: trigger_id.clone(),
                        },
                        ctx,
                    )?)
                    .await
                    .map_err(|status| refused(&status))?;
                Ok(ToolOutcome::output(json!({"deleted": trigger_id})))
            }
            other => Err(ToolFailure::new(format!("unknown tool {other}"))),
        }
    }
}
