//! Behaviour of the sandbox through its public `run`, against a host that records every call
//! and answers deterministically.

mod api;
mod budget;
mod hostile;
mod limits;
mod properties;
mod shapes;
mod warm;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value as Json, json};

use crate::{Clock, Host, Limits, Program, RunOutcome, SandboxTool, Sandboxes, ToolFailure};

/// Tools of the test host, by id.
const TOOL_IDS: &[&str] = &[
    "math.add",
    "echo",
    "fail",
    "sleep",
    "outputs.count",
    "tick",
    "panic",
    "weather.get-weather",
    // Both are `aB` in camelCase: the first keeps the name.
    "a.b",
    "a-b",
    // Would shadow the host API's `output`.
    "output",
    // Wait `ms` for a person, then answer as the person decided (`approve: false` rejects).
    "approval",
    // Waits for a person who never decides.
    "approval.expire",
];

#[derive(Default)]
struct TestHost {
    calls: Mutex<Vec<(String, Json)>>,
    /// The thread each call came from (the run's sandbox thread), and its name.
    threads: Mutex<Vec<(std::thread::ThreadId, String)>>,
    outputs: Mutex<Vec<String>>,
    ticks: AtomicU32,
    /// `sleep` calls whose future was dropped before it finished.
    abandoned_sleeps: AtomicU32,
    /// `approval` calls whose future was dropped while waiting for the person.
    abandoned_approvals: AtomicU32,
}

impl TestHost {
    fn calls(&self) -> Vec<(String, Json)> {
        self.calls.lock().unwrap().clone()
    }

    fn outputs(&self) -> Vec<String> {
        self.outputs.lock().unwrap().clone()
    }

    fn threads(&self) -> Vec<(std::thread::ThreadId, String)> {
        self.threads.lock().unwrap().clone()
    }
}

/// Counts itself into `abandoned_sleeps` unless disarmed.
struct Abandoned<'a>(&'a AtomicU32, bool);

impl Drop for Abandoned<'_> {
    fn drop(&mut self) {
        if self.1 {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[async_trait::async_trait]
impl Host for TestHost {
    async fn call_tool(
        &self,
        tool_id: &str,
        input: Json,
        clock: &Clock,
    ) -> Result<Json, ToolFailure> {
        self.calls
            .lock()
            .unwrap()
            .push((tool_id.to_owned(), input.clone()));
        // Before any `.await`: still on the sandbox thread, which blocks on this call.
        let thread = std::thread::current();
        let name = thread.name().unwrap_or_default().to_owned();
        self.threads.lock().unwrap().push((thread.id(), name));
        let number = |name: &str| input.get(name).and_then(Json::as_f64).unwrap_or(0.0);
        match tool_id {
            "math.add" => Ok(json!({ "sum": number("a") + number("b") })),
            "echo" | "a.b" | "a-b" | "output" => Ok(json!({ "tool": tool_id, "input": input })),
            "fail" => Err(ToolFailure::Failed("boom".into())),
            "approval" => {
                let wait = Duration::from_millis(number("ms") as u64);
                let mut abandoned = Abandoned(&self.abandoned_approvals, true);
                clock.paused_during(tokio::time::sleep(wait)).await;
                abandoned.1 = false;
                match input.get("approve").and_then(Json::as_bool).unwrap_or(true) {
                    true => Ok(json!({ "approved": true })),
                    false => Err(ToolFailure::Rejected {
                        reason: "not today".into(),
                    }),
                }
            }
            "approval.expire" => {
                let after = Duration::from_millis(number("ms") as u64);
                clock.paused_during(tokio::time::sleep(after)).await;
                Err(ToolFailure::ApprovalTimedOut { after })
            }
            "sleep" => {
                let mut abandoned = Abandoned(&self.abandoned_sleeps, true);
                tokio::time::sleep(Duration::from_millis(number("ms") as u64)).await;
                abandoned.1 = false;
                Ok(json!({ "slept": number("ms") }))
            }
            "outputs.count" => Ok(json!(self.outputs.lock().unwrap().len())),
            "tick" => Ok(json!(self.ticks.fetch_add(1, Ordering::SeqCst) + 1)),
            "panic" => panic!("the tool exploded"),
            "weather.get-weather" => Ok(json!({ "city": input["city"], "temperature": 21 })),
            "artifact.store" => Ok(json!({ "id": "art-1" })),
            "artifact.get" => Ok(json!({ "id": input["id"], "data": { "stored": input["id"] } })),
            "artifact.list" => Ok(json!({ "artifacts": [{ "id": "art-1" }] })),
            other => Err(format!("the test host has no tool {other}").into()),
        }
    }

    async fn output(&self, text: String) {
        self.outputs.lock().unwrap().push(text);
    }

    async fn llm(&self, prompt: String, json: bool) -> Result<String, String> {
        match (prompt.as_str(), json) {
            ("fail", _) => Err("model down".into()),
            ("bad json", true) => Ok("not json {".into()),
            (_, true) => Ok(r#"{"answer": 42}"#.into()),
            (prompt, false) => Ok(format!("echo: {prompt}")),
        }
    }
}

fn tools() -> Vec<SandboxTool> {
    TOOL_IDS
        .iter()
        .map(|id| SandboxTool {
            id: (*id).to_owned(),
            description: format!("the {id} tool"),
            input_schema: json!({ "type": "object", "title": id }),
        })
        .collect()
}

fn program(code: &str) -> Program {
    Program {
        code: code.to_owned(),
        tools: tools(),
        modules: Vec::new(),
        input: None,
        memory: Map::new(),
        spent: Default::default(),
        entropy: Default::default(),
    }
}

/// `limits` with no limit on tool calls, per run or (as events) per prompt.
fn without_tool_call_limits(limits: Limits) -> Limits {
    Limits {
        max_tool_calls: u32::MAX,
        prompt: crate::PromptLimits {
            max_events: u32::MAX,
            ..limits.prompt.clone()
        },
        ..limits
    }
}

fn limits_with_timeout(milliseconds: u64) -> Limits {
    Limits {
        timeout: Duration::from_millis(milliseconds),
        ..Limits::default()
    }
}

/// The sandboxes these tests share, as an executor's runs do: most runs land on warm threads.
fn sandboxes() -> &'static Sandboxes {
    static SANDBOXES: std::sync::OnceLock<Sandboxes> = std::sync::OnceLock::new();
    SANDBOXES.get_or_init(Sandboxes::default)
}

/// A run on the shared sandboxes.
fn run(
    program: Program,
    host: Arc<dyn Host>,
    limits: Limits,
) -> impl Future<Output = RunOutcome> + Send + 'static {
    sandboxes().run("user", program, host, limits)
}

async fn run_program(program: Program, limits: Limits) -> (RunOutcome, Arc<TestHost>) {
    let host = Arc::new(TestHost::default());
    let outcome = run(program, host.clone(), limits).await;
    (outcome, host)
}

async fn run_code(code: &str) -> (RunOutcome, Arc<TestHost>) {
    run_program(program(code), Limits::default()).await
}

/// The result of code that must succeed.
async fn value_of(code: &str) -> Json {
    let (outcome, _) = run_code(code).await;
    match outcome.result {
        Ok(value) => value,
        Err(error) => panic!("{code:?} failed: {error:?}"),
    }
}

/// The error of code that must fail.
async fn error_of(program: Program, limits: Limits) -> crate::CodeError {
    let code = program.code.clone();
    let (outcome, _) = run_program(program, limits).await;
    match outcome.result {
        Ok(value) => panic!("{code:?} succeeded with {value}"),
        Err(error) => error,
    }
}
