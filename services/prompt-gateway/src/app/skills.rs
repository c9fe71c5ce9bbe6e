//! Skills through the public API: the gateway authenticates the caller and forwards to the
//! tool-host's `Skills` service, which keeps them. A skill saved from a prompt takes its code
//! from the prompt's timeline here, where prompts live.

use agentic_ids::{PromptId, UserId};
use agentic_proto::json;
use agentic_proto::v1::skills_client::SkillsClient;
use agentic_proto::v1::{
    AddSkillFolderRequest, CreateSkillRequest, DeleteSkillRequest, DeleteSkillResponse,
    GetSkillRequest, ListSkillsRequest, ListSkillsResponse, Prompt, Skill, prompt_output,
    tool_result,
};
use agentic_rpc::{ErrorKind, InternalChannel};
use std::time::Duration;

use crate::app::prompts::Prompts;
use crate::error::GatewayError;

/// Skill calls are one query each on the tool-host.
const CALL_TIMEOUT: Duration = Duration::from_secs(15);

/// The tools whose input `code` a skill can be saved from: a code-mode round, and code a
/// classic prompt ran.
const CODE_TOOLS: &[&str] = &["code.execute", "interpreter.run-code"];

#[derive(Clone)]
pub struct Skills {
    client: SkillsClient<InternalChannel>,
}

impl Skills {
    pub fn new(tool_host: InternalChannel) -> Skills {
        Skills {
            client: SkillsClient::new(tool_host)
                .max_decoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES)
                .max_encoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES),
        }
    }

    /// Saves the caller's skill: the code given, or the code of the prompt it names.
    pub async fn create(
        &self,
        user_id: &UserId,
        prompts: &Prompts,
        mut request: CreateSkillRequest,
    ) -> Result<Skill, GatewayError> {
        request.user_id = user_id.to_string();
        let from_prompt = request.from_prompt_id.trim().to_owned();
        if request.from_round > 0 && from_prompt.is_empty() {
            return Err(GatewayError::InvalidArgument(
                "from_round names a round of from_prompt_id, which is not given".into(),
            ));
        }
        match (request.code.is_empty(), from_prompt.is_empty()) {
            (false, false) => {
                return Err(GatewayError::InvalidArgument(
                    "give the skill's code or the prompt to take it from, not both".into(),
                ));
            }
            (true, true) => {
                return Err(GatewayError::InvalidArgument(
                    "give the skill's code, or the prompt to take it from (from_prompt_id)".into(),
                ));
            }
            (true, false) => {
                let prompt_id = PromptId::parse(from_prompt)
                    .map_err(|error| GatewayError::InvalidArgument(error.to_string()))?;
                let prompt = prompts.get(user_id, &prompt_id).await?;
                request.code = code_of(&prompt, request.from_round)?;
                request.from_prompt_id = prompt_id.to_string();
            }
            (false, true) => request.from_prompt_id = String::new(),
        }
        let answer = self.client.clone().save_skill(timed(request)).await;
        Ok(answer.map_err(relayed)?.into_inner())
    }

    pub async fn list(&self, user_id: &UserId) -> Result<ListSkillsResponse, GatewayError> {
        let request = ListSkillsRequest {
            user_id: user_id.to_string(),
        };
        let answer = self.client.clone().list_skills(timed(request)).await;
        Ok(answer.map_err(relayed)?.into_inner())
    }

    pub async fn get(
        &self,
        user_id: &UserId,
        mut request: GetSkillRequest,
    ) -> Result<Skill, GatewayError> {
        request.user_id = user_id.to_string();
        let answer = self.client.clone().get_skill(timed(request)).await;
        Ok(answer.map_err(relayed)?.into_inner())
    }

    pub async fn delete(
        &self,
        user_id: &UserId,
        mut request: DeleteSkillRequest,
    ) -> Result<DeleteSkillResponse, GatewayError> {
        request.user_id = user_id.to_string();
        let answer = self.client.clone().delete_skill(timed(request)).await;
        Ok(answer.map_err(relayed)?.into_inner())
    }

    /// Adds the caller's skill folder (the tool-host unpacks and checks it).
    pub async fn add_folder(
        &self,
        user_id: &UserId,
        mut request: AddSkillFolderRequest,
    ) -> Result<Skill, GatewayError> {
        request.user_id = user_id.to_string();
        if request.archive.is_empty() {
            return Err(GatewayError::InvalidArgument(
                "archive is required: a zip or tar of the skill folder".into(),
            ));
        }
        let answer = self.client.clone().add_skill_folder(timed(request)).await;
        Ok(answer.map_err(relayed)?.into_inner())
    }
}

fn timed<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(CALL_TIMEOUT);
    request
}

/// The tool-host's answer for the caller: what it says about the request (invalid, not
/// found, over a limit) as it said it; anything else as the skills being unavailable.
fn relayed(status: tonic::Status) -> GatewayError {
    relayed_or(status, GatewayError::SkillsUnavailable)
}

/// As [`relayed`], with `unavailable` for what is not about the request.
pub(crate) fn relayed_or(
    status: tonic::Status,
    unavailable: impl FnOnce(String) -> GatewayError,
) -> GatewayError {
    let kind = match status.code() {
        tonic::Code::InvalidArgument => ErrorKind::InvalidArgument,
        tonic::Code::NotFound => ErrorKind::NotFound,
        tonic::Code::ResourceExhausted => ErrorKind::ResourceExhausted,
        tonic::Code::FailedPrecondition => ErrorKind::FailedPrecondition,
        tonic::Code::AlreadyExists => ErrorKind::AlreadyExists,
        tonic::Code::PermissionDenied => ErrorKind::PermissionDenied,
        _ => return unavailable(agentic_rpc::relayed(&status)),
    };
    GatewayError::Relayed {
        kind,
        message: status.message().to_owned(),
    }
}

/// The code of `prompt`'s piece of code `round` (counting from 1: code-mode rounds and
/// `interpreter.run-code` calls, in timeline order); 0: the last that ran without an error.
fn code_of(prompt: &Prompt, round: u32) -> Result<String, GatewayError> {
    if prompt.is_unfinished() {
        return Err(GatewayError::FailedPrecondition(format!(
            "prompt {} has not ended: save a skill from it once it has",
            prompt.id
        )));
    }
    let mut pieces: Vec<(String, bool)> = prompt
        .output
        .iter()
        .filter_map(|output| match &output.kind {
            Some(prompt_output::Kind::Tool(tool))
                if tool.parent_id.is_empty() && CODE_TOOLS.contains(&tool.function.as_str()) =>
            {
                let input = json::from_proto_opt(tool.input.as_ref());
                // Code in another language (hosted mode's shell commands) is no skill.
                if input
                    .get("language")
                    .and_then(serde_json::Value::as_str)
                    .is_some_and(|language| language != "javascript")
                {
                    return None;
                }
                let code = input.get("code")?.as_str()?.to_owned();
                let worked = matches!(
                    tool.result
                        .as_ref()
                        .and_then(|result| result.result.as_ref()),
                    Some(tool_result::Result::Success(_))
                );
                Some((code, worked))
            }
            _ => None,
        })
        .collect();
    if pieces.is_empty() {
        return Err(GatewayError::FailedPrecondition(format!(
            "prompt {} ran no code to save (a skill's code comes from a code-mode round or an interpreter.run-code call)",
            prompt.id
        )));
    }
    let count = pieces.len();
    let index = match round {
        0 => pieces.iter().rposition(|(_, worked)| *worked).ok_or_else(|| {
            GatewayError::FailedPrecondition(format!(
                "none of the {count} pieces of code prompt {} ran succeeded: name one with from_round",
                prompt.id
            ))
        })?,
        n if n as usize <= count => n as usize - 1,
        n => {
            return Err(GatewayError::InvalidArgument(format!(
                "prompt {} ran {count} pieces of code; there is no round {n}",
                prompt.id
            )));
        }
    };
    Ok(pieces.swap_remove(index).0)
}
