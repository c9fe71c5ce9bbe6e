//! The prompt host against a stand-in tool-host: the events a user sees around approvals, and
//! what the code sees.

use std::sync::Mutex;

use agentic_executor::timeline::Decision;
use agentic_executor::tool_host::{RunScope, ToolHost, ToolSpec};
use agentic_executor::{EventSink, SchemaCache};
use agentic_llm::{ChatResponse, LlmError};
use agentic_proto::v1::tool_host_server::{ToolHost as ToolHostService, ToolHostServer};
use agentic_proto::v1::{
    InvokeToolResponse, PrepareRequest, PrepareResponse, invoke_tool_response,
};
use agentic_sandbox::{Limits, Program, Sandboxes};
use serde_json::{Map, json};
use tokio::sync::mpsc;

use super::*;

/// A tool-host whose tools answer `{"done": <tool id>}` and remember that they ran;
/// `files.summarize` also reports tokens it spent on an LLM of its own.
#[derive(Clone, Default)]
struct FakeToolHost {
    invoked: Arc<Mutex<Vec<String>>>,
}

#[tonic::async_trait]
impl ToolHostService for FakeToolHost {
    type InvokeToolStream = tonic::codegen::BoxStream<agentic_proto::v1::InvokeToolUpdate>;

    async fn invoke_tool(
        &self,
        request: tonic::Request<tonic::Streaming<agentic_proto::v1::InvokeToolInput>>,
    ) -> Result<tonic::Response<Self::InvokeToolStream>, tonic::Status> {
        agentic_executor::tool_host::answer_once(request, |call| async move {
            Ok(self.answer(call.tool_id))
        })
        .await
    }

    async fn list_tools(
        &self,
        _request: tonic::Request<agentic_proto::v1::ListToolsRequest>,
    ) -> Result<tonic::Response<agentic_proto::v1::ListToolsResponse>, tonic::Status> {
        Err(tonic::Status::unimplemented("not needed here"))
    }

    async fn prepare(
        &self,
        _request: tonic::Request<PrepareRequest>,
    ) -> Result<tonic::Response<PrepareResponse>, tonic::Status> {
        Err(tonic::Status::unimplemented("not needed here"))
    }
}

impl FakeToolHost {
    fn answer(&self, tool_id: String) -> InvokeToolResponse {
        self.invoked.lock().unwrap().push(tool_id.clone());
        let output = agentic_proto::json::to_proto(&json!({ "done": tool_id }));
        let usage = (tool_id == "files.summarize").then_some(agentic_proto::v1::Usage {
            input_tokens: 50,
            output_tokens: 50,
            total_tokens: 100,
            llm_calls: 2,
            ..agentic_proto::v1::Usage::default()
        });
        InvokeToolResponse {
            result: Some(invoke_tool_response::Result::Output(output)),
            files: Vec::new(),
            usage,
            nested: Vec::new(),
        }
    }
}

struct NoModel;

#[async_trait::async_trait]
impl ChatModel for NoModel {
    async fn chat(
        &self,
        _request: ChatRequest,
        _deltas: Option<mpsc::UnboundedSender<String>>,
    ) -> Result<ChatResponse, LlmError> {
        Ok(ChatResponse::default())
    }
}

/// A prompt host with `files.delete` (requires approval) and `files.list` (does not).
struct Prompt {
    host: Arc<PromptHost>,
    events: mpsc::Receiver<Event>,
    /// Decisions as the gateway forwards them on the `Execute` stream.
    decisions: mpsc::Sender<Decision>,
    tool_host: FakeToolHost,
}

async fn prompt(approval_timeout: Duration) -> Prompt {
    prompt_after(approval_timeout, 0).await
}

/// [`prompt`] for a prompt that has `outputs` outputs already.
async fn prompt_after(approval_timeout: Duration, outputs: usize) -> Prompt {
    let tool_host = FakeToolHost::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (router, _health) = agentic_rpc::router(&[]).unwrap();
    let router = router.add_service(ToolHostServer::new(tool_host.clone()));
    tokio::spawn(agentic_rpc::serve(router, listener, std::future::pending()));

    let spec = |id: &str, requires_approval| ToolSpec {
        id: id.to_owned(),
        description: format!("the {id} tool"),
        input_schema: json!({ "type": "object" }),
        requires_approval,
    };
    let scope = Arc::new(RunScope {
        user_id: agentic_ids::UserId::known("user"),
        prompt_id: Some(agentic_ids::PromptId::known("prompt")),
        conversation_id: Some(agentic_ids::ConversationId::known("conversation")),
        state: Map::new(),
        tier: agentic_llm::Tier::Normal,
        spend: None,
        tools: None,
    });
    let channel = agentic_rpc::channel(
        &format!("http://{address}"),
        &agentic_rpc::SendInternalToken::default(),
    )
    .unwrap();
    let tools = crate::tools::for_sandbox(
        vec![
            spec("files.delete", true),
            spec("files.list", false),
            spec("files.summarize", false),
        ],
        &SchemaCache::default(),
    );
    let (sender, events) = mpsc::channel(64);
    let approvals = Arc::new(Approvals::default());
    let (decisions, receiver) = mpsc::channel(16);
    tokio::spawn({
        let approvals = Arc::clone(&approvals);
        async move { approvals.route(receiver).await }
    });
    let host = Arc::new(PromptHost {
        tools,
        tool_host: ToolHost::new(channel),
        scope,
        timeline: Arc::new(Timeline::new(EventSink::new(sender), outputs)),
        model: Arc::new(NoModel),
        tier: Tier::Normal,
        approvals,
        approval_timeout,
        paused: super::PausedRuns::new(agentic_fair::Shares::new(8, 8))
            .for_run(&agentic_ids::UserId::known("user")),
        round: Default::default(),
        recorded: 0.into(),
    });
    Prompt {
        host,
        events,
        decisions,
        tool_host,
    }
}

impl Prompt {
    /// The next event, in words.
    async fn next(&mut self) -> String {
        let event = tokio::time::timeout(Duration::from_secs(5), self.events.recv())
            .await
            .expect("no event within 5 s")
            .expect("the event stream ended");
        describe(&event)
    }

    /// Events up to and including `paused`, and the ids of the calls asking for approval.
    async fn until_paused(&mut self) -> (Vec<String>, Vec<String>) {
        let (mut seen, mut ids) = (Vec::new(), Vec::new());
        loop {
            let event = tokio::time::timeout(Duration::from_secs(5), self.events.recv())
                .await
                .expect("no event within 5 s")
                .expect("the event stream ended");
            if let Event::ApprovalRequested { tool_call_id, .. } = &event {
                ids.push(tool_call_id.clone());
            }
            seen.push(describe(&event));
            if matches!(event, Event::Paused { .. }) {
                return (seen, ids);
            }
        }
    }

    async fn decide(&self, tool_call_id: &str, approved: bool, reason: &str) {
        let decision = Decision {
            tool_call_id: tool_call_id.to_owned(),
            approved,
            reason: reason.to_owned(),
            ..Decision::default()
        };
        self.decisions.send(decision).await.unwrap();
    }

    fn call(&self, tool_id: &str) -> tokio::task::JoinHandle<Result<Json, ToolFailure>> {
        let host = Arc::clone(&self.host);
        let tool_id = tool_id.to_owned();
        tokio::spawn(async move {
            let clock = Clock::new(Duration::from_secs(30));
            host.call_tool(&tool_id, json!({ "path": "a" }), &clock)
                .await
        })
    }

    fn invoked(&self) -> Vec<String> {
        self.tool_host.invoked.lock().unwrap().clone()
    }
}

fn describe(event: &Event) -> String {
    match event {
        Event::OutputAdded { index, output } => {
            format!("added {index}: {}", output_text(output))
        }
        Event::OutputUpdated { index, output } => {
            format!("updated {index}: {}", output_text(output))
        }
        Event::ApprovalRequested {
            tool_id,
            input,
            index,
            ..
        } => format!("approval requested {index}: {tool_id} {input}"),
        Event::Paused { .. } => "paused".into(),
        Event::Log(line) => format!("log {line}"),
        Event::StateSet(fields) => format!("state {fields:?}"),
        other => format!("{other:?}"),
    }
}

fn output_text(output: &Output) -> String {
    let Output::Tool(call) = output else {
        return format!("{output:?}");
    };
    let result = match &call.result {
        ToolResult::Pending { reason, .. } => format!("pending ({reason})"),
        ToolResult::Success { output } => format!("success {output}"),
        ToolResult::Error { error } => format!("error ({error})"),
    };
    let approval = match (call.approval.state, call.approval.reason.as_str()) {
        (state, "") => format!("{state:?}"),
        (state, reason) => format!("{state:?} ({reason})"),
    };
    format!("{} {result} {approval}", call.function)
}

#[tokio::test]
async fn a_call_that_needs_approval_pauses_and_runs_once_approved() {
    let mut prompt = prompt(Duration::from_secs(30)).await;
    let call = prompt.call("files.delete");
    let (events, ids) = prompt.until_paused().await;
    assert_eq!(
        events,
        [
            "added 0: files.delete pending (waiting for approval) Pending",
            "approval requested 0: files.delete {\"path\":\"a\"}",
            "paused",
        ]
    );
    assert!(prompt.invoked().is_empty(), "the tool ran before approval");
    prompt.decide(&ids[0], true, "fine").await;
    assert_eq!(call.await.unwrap(), Ok(json!({ "done": "files.delete" })));
    assert_eq!(
        prompt.next().await,
        "updated 0: files.delete success {\"done\":\"files.delete\"} Approved (fine)"
    );
    assert_eq!(prompt.invoked(), ["files.delete"]);
}

#[tokio::test]
async fn tokens_a_tool_spent_count_into_the_prompts_usage() {
    let mut prompt = prompt(Duration::from_secs(30)).await;
    let call = prompt.call("files.summarize");
    assert_eq!(
        call.await.unwrap(),
        Ok(json!({ "done": "files.summarize" }))
    );
    assert_eq!(
        prompt.next().await,
        "added 0: files.summarize pending (running) NotRequired"
    );
    assert_eq!(
        prompt.next().await,
        format!(
            "{:?}",
            Event::Usage(Usage {
                input_tokens: 50,
                output_tokens: 50,
                total_tokens: 100,
                calls: 2,
                ..Usage::default()
            })
        )
    );
    assert_eq!(
        prompt.next().await,
        "updated 0: files.summarize success {\"done\":\"files.summarize\"} NotRequired"
    );
}

#[tokio::test]
async fn a_rejected_call_never_runs_and_the_code_hears_why() {
    let mut prompt = prompt(Duration::from_secs(30)).await;
    let call = prompt.call("files.delete");
    let (_, ids) = prompt.until_paused().await;
    prompt.decide(&ids[0], false, " too risky ").await;
    let failure = call.await.unwrap().unwrap_err();
    assert_eq!(
        failure.message("files.delete"),
        "Tool \"files.delete\" rejected: too risky"
    );
    assert_eq!(
        prompt.next().await,
        "updated 0: files.delete error (rejected by the user: too risky) Rejected (too risky)"
    );
    assert!(prompt.invoked().is_empty());
}

#[tokio::test]
async fn a_call_nobody_decides_on_times_out_and_late_decisions_are_ignored() {
    let mut prompt = prompt(Duration::from_millis(100)).await;
    let call = prompt.call("files.delete");
    let (_, ids) = prompt.until_paused().await;
    prompt.decide("call_unknown", true, "").await;
    let failure = call.await.unwrap().unwrap_err();
    assert_eq!(
        failure.message("files.delete"),
        "Tool \"files.delete\" approval timed out after 0.1s"
    );
    assert_eq!(
        prompt.next().await,
        "updated 0: files.delete error (approval timed out after 0.1 s) Expired (approval timed out after 0.1 s)"
    );
    prompt.decide(&ids[0], true, "too late").await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(prompt.invoked().is_empty());
    assert!(
        prompt.events.try_recv().is_err(),
        "a late decision did something"
    );
}

#[tokio::test]
async fn parallel_calls_settle_the_others_then_ask_for_every_approval_and_pause_once() {
    let mut prompt = prompt(Duration::from_secs(30)).await;
    let host = Arc::clone(&prompt.host);
    let calls = tokio::spawn(async move {
        let clock = Clock::new(Duration::from_secs(30));
        let calls = ["files.delete", "files.list", "files.delete"]
            .map(|id| (id.to_owned(), json!({ "path": "a" })))
            .to_vec();
        host.call_tools(calls, &clock).await
    });
    let (events, ids) = prompt.until_paused().await;
    assert_eq!(
        events,
        [
            "added 0: files.delete pending (waiting for approval) Pending",
            "added 1: files.list pending (running) NotRequired",
            "added 2: files.delete pending (waiting for approval) Pending",
            // The slot that needs no approval has settled before the pause is announced:
            // nothing follows `paused` until a person decides.
            "updated 1: files.list success {\"done\":\"files.list\"} NotRequired",
            "approval requested 0: files.delete {\"path\":\"a\"}",
            "approval requested 2: files.delete {\"path\":\"a\"}",
            "paused",
        ]
    );
    assert!(prompt.events.try_recv().is_err(), "an event after paused");
    prompt.decide(&ids[1], false, "").await;
    assert_eq!(
        prompt.next().await,
        "updated 2: files.delete error (rejected by the user) Rejected"
    );
    prompt.decide(&ids[0], true, "").await;
    assert_eq!(
        prompt.next().await,
        "updated 0: files.delete success {\"done\":\"files.delete\"} Approved"
    );
    let answers = calls.await.unwrap();
    assert_eq!(
        answers,
        [
            Ok(json!({ "done": "files.delete" })),
            Ok(json!({ "done": "files.list" })),
            Err(ToolFailure::Rejected {
                reason: String::new()
            }),
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn code_waits_for_a_decision_longer_than_its_time_budget_and_goes_on_after_a_rejection() {
    let mut prompt = prompt(Duration::from_secs(30)).await;
    let program = Program {
        code: "let seen;\ntry { filesDelete({ path: 'a' }) } catch (error) { seen = error.message }\n[seen, filesList({}).done]".into(),
        tools: crate::tools::sandbox_tools(&prompt.host.tools),
        modules: Vec::new(),
        input: None,
        memory: Map::new(),
        spent: Default::default(),
        entropy: Default::default(),
    };
    let limits = Limits {
        timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let sandboxes = Sandboxes::default();
    let host = prompt.host.clone();
    let run = tokio::spawn(async move { sandboxes.run("user", program, host, limits).await });
    let (_, ids) = prompt.until_paused().await;
    // The person takes longer than the whole budget of the run.
    tokio::time::sleep(Duration::from_millis(600)).await;
    prompt.decide(&ids[0], false, "not now").await;
    let outcome = run.await.unwrap();
    assert_eq!(
        outcome.result,
        Ok(json!([
            "Tool \"files.delete\" rejected: not now",
            "files.list"
        ]))
    );
}

/// `code` as a first round of `prompt`, reading `entropy`.
fn round_program(prompt: &Prompt, code: &str, entropy: agentic_sandbox::Entropy) -> Program {
    Program {
        code: code.into(),
        tools: crate::tools::sandbox_tools(&prompt.host.tools),
        modules: Vec::new(),
        input: None,
        memory: Map::new(),
        spent: Default::default(),
        entropy,
    }
}

/// Code that reads a random number, shows text, runs `files.list`, then waits for approval of
/// `files.delete` (both called with the number) and shows more.
const PAUSING_CODE: &str = "output('before'); const r = Math.random();\n\
                            const listed = filesList({ n: r });\n\
                            const deleted = filesDelete({ path: 'x' + r });\n\
                            output('after'); [listed.done, deleted.done, r]";

/// Runs `code` as a round (its `code.execute` output first) until it pauses, then drops the
/// run, as a code-executor that dies would: the prompt's outputs as the gateway keeps them,
/// the waiting call's id, and whether the pause was said to be resumable.
async fn paused_round(code: &str) -> (Vec<Output>, String, bool) {
    let mut prompt = prompt(Duration::from_secs(30)).await;
    let round = round_output(code);
    let index = prompt
        .host
        .timeline
        .add(Output::Tool(round.clone()))
        .await
        .unwrap();
    let entropy = agentic_sandbox::Entropy::default();
    prompt.host.begin_round(index, round, entropy.clone(), None);
    let program = round_program(&prompt, code, entropy);
    let host = prompt.host.clone();
    let run = tokio::spawn(async move {
        Sandboxes::default()
            .run("user", program, host, Limits::default())
            .await
    });
    let mut outputs: Vec<Output> = Vec::new();
    let mut waiting = String::new();
    let resumable = loop {
        let event = tokio::time::timeout(Duration::from_secs(5), prompt.events.recv())
            .await
            .expect("no event within 5 s")
            .expect("the event stream ended");
        match event {
            Event::OutputAdded { index, output } => {
                assert_eq!(index as usize, outputs.len());
                outputs.push(output);
            }
            Event::OutputUpdated { index, output } => outputs[index as usize] = output,
            Event::ApprovalRequested { tool_call_id, .. } => waiting = tool_call_id,
            Event::Paused { resumable } => break resumable,
            _ => {}
        }
    };
    run.abort();
    assert_eq!(prompt.invoked(), ["files.list"]);
    (outputs, waiting, resumable)
}

/// Runs `code` again from the record `outputs` hold, with `decision` on the call that waited:
/// the outcome, what it showed (events in words), what ran, and why the replay diverged.
async fn replayed_round(
    code: &str,
    outputs: &[Output],
    decision: Decision,
) -> (
    agentic_sandbox::RunOutcome,
    Vec<String>,
    Vec<String>,
    Option<String>,
) {
    let mut prompt = prompt_after(Duration::from_secs(30), outputs.len()).await;
    let mut resume = crate::replay::Resume::from_outputs(outputs, &[decision]).unwrap();
    let round = resume.rounds.pop_back().unwrap();
    assert!(round.paused());
    let entropy = agentic_sandbox::Entropy::replaying(&round.entropy());
    let replay = crate::replay::Replay::of(&round, resume.decisions);
    prompt.host.begin_round(
        round.index,
        round.output.clone(),
        entropy.clone(),
        Some(replay),
    );
    let program = round_program(&prompt, code, entropy);
    let outcome = Sandboxes::default()
        .run("user", program, prompt.host.clone(), Limits::default())
        .await;
    let (_, diverged) = prompt.host.end_round(&outcome);
    let mut shown = Vec::new();
    while let Ok(event) = prompt.events.try_recv() {
        shown.push(describe(&event));
    }
    (outcome, shown, prompt.invoked(), diverged)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_paused_round_run_again_from_its_record_repeats_nothing_and_goes_on_from_the_pause() {
    let (outputs, waiting, resumable) = paused_round(PAUSING_CODE).await;
    assert!(resumable);
    let Output::Tool(round) = &outputs[0] else {
        panic!("{outputs:?}")
    };
    let record = round
        .record
        .as_ref()
        .expect("the record is kept before the pause");
    let approve = Decision {
        tool_call_id: waiting,
        approved: true,
        reason: "go".into(),
        ..Decision::default()
    };
    let (outcome, shown, invoked, diverged) = replayed_round(PAUSING_CODE, &outputs, approve).await;
    assert_eq!(diverged, None);
    assert_eq!(
        invoked,
        ["files.delete"],
        "files.list is answered from the record"
    );
    let value = outcome.result.unwrap();
    assert_eq!(value[0], json!("files.list"));
    assert_eq!(value[1], json!("files.delete"));
    assert_eq!(record.answers, []);
    // The same random number: the approved call is the call the person saw.
    let Output::Tool(delete) = &outputs[3] else {
        panic!("{outputs:?}")
    };
    assert_eq!(
        delete.input,
        json!({ "path": format!("x{}", value[2].as_f64().unwrap()) })
    );
    assert_eq!(
        shown,
        [
            "updated 3: files.delete success {\"done\":\"files.delete\"} Approved (go)",
            "TextDelta(\"after\")",
            "added 4: Text(\"after\")",
        ],
        "nothing shown before the pause is shown again"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replay_that_takes_another_path_runs_nothing_and_says_where_it_diverged() {
    let (outputs, waiting, _) = paused_round(PAUSING_CODE).await;
    let approve = Decision {
        tool_call_id: waiting,
        approved: true,
        reason: String::new(),
        ..Decision::default()
    };
    let other = PAUSING_CODE.replace("filesList({ n: r })", "filesList({ n: 2 })");
    let (outcome, shown, invoked, diverged) = replayed_round(&other, &outputs, approve).await;
    assert!(invoked.is_empty(), "{invoked:?}");
    let diverged = diverged.expect("the replay diverged");
    assert!(
        diverged.contains("files.list with {\"n\":2} where it called files.list with"),
        "{diverged}"
    );
    assert!(shown.is_empty(), "{shown:?}");
    // The code saw its calls refused, saying why.
    let error = outcome.result.unwrap_err().message;
    assert!(
        error.contains("not run: the code called files.list"),
        "{error}"
    );
}
