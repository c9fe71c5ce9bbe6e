use agentic_executor::tool_host::ToolSpec;
use agentic_llm::{ChatRequest, ChatResponse, LlmError};
use serde_json::json;

use super::*;

#[test]
fn a_sandbox_takes_tool_inputs_as_large_as_one_message_to_the_tool_host() {
    assert_eq!(
        agentic_sandbox::MAX_TOOL_INPUT_BYTES,
        agentic_proto::MAX_MESSAGE_BYTES
    );
}

#[test]
fn the_sandboxs_ask_calls_the_contracts_question_tool() {
    assert_eq!(agentic_sandbox::ASK_TOOL, agentic_proto::QUESTION_TOOL);
}

struct NoModel;

#[async_trait::async_trait]
impl ChatModel for NoModel {
    async fn chat(
        &self,
        _request: ChatRequest,
        _deltas: Option<tokio::sync::mpsc::UnboundedSender<String>>,
    ) -> Result<ChatResponse, LlmError> {
        Err(LlmError::Setup {
            message: "no model in this test".into(),
        })
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn code_run_by_a_tool_is_refused_tools_that_require_approval() {
    // Nothing listens there: the refusal must not need the tool-host.
    let channel = agentic_rpc::channel(
        "http://127.0.0.1:1",
        &agentic_rpc::SendInternalToken::default(),
    )
    .unwrap();
    let scope = Arc::new(RunScope {
        user_id: agentic_ids::UserId::known("user"),
        prompt_id: Some(agentic_ids::PromptId::known("prompt")),
        conversation_id: Some(agentic_ids::ConversationId::known("conversation")),
        state: serde_json::Map::new(),
        tier: agentic_llm::Tier::Normal,
        spend: None,
        tools: None,
    });
    let spec = ToolSpec {
        id: "files.delete".into(),
        description: "deletes a file".into(),
        input_schema: json!({ "type": "object" }),
        requires_approval: true,
    };
    let tools = tools::for_sandbox(vec![spec], &SchemaCache::default());
    let program = Program {
        code: "try { filesDelete({}) } catch (error) { error.message }".into(),
        tools: tools::sandbox_tools(&tools),
        modules: Vec::new(),
        input: None,
        memory: serde_json::Map::new(),
        spent: Spent::default(),
        entropy: Default::default(),
    };
    let paused = PausedRuns::new(agentic_fair::Shares::new(1, 1)).for_run(&scope.user_id);
    let host = Arc::new(RecordingHost {
        tools,
        tool_host: ToolHost::new(channel),
        scope,
        model: Arc::new(NoModel),
        calls: Mutex::default(),
        outputs: Mutex::default(),
        usage: Mutex::default(),
        files: Mutex::default(),
        asks: None,
        approval_timeout: Duration::from_secs(1),
        paused,
        asking: Default::default(),
        budget_left: None,
        started_calls: Default::default(),
        code: String::new(),
        skill: String::new(),
    });
    let outcome = Sandboxes::default()
        .run("user", program, host.clone(), Limits::default())
        .await;
    assert_eq!(
        outcome.result,
        Ok(json!(
            "Tool \"files.delete\" failed: this tool requires approval, which code run through interpreter.run-code cannot ask for here (call the tool directly instead)"
        ))
    );
    assert_eq!(host.calls.lock().unwrap().len(), 1);
}
