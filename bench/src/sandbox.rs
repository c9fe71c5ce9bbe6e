//! Items 1–3: the code sandbox on its own, through `agentic_sandbox::Sandboxes::run` with a bench
//! host: a fresh sandbox with 30 tools, one tool call in process and through the real
//! tool-host over gRPC, and `parallel` of ten 50 ms calls.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentic_executor::tool_host::{RunScope, ToolHost};
use agentic_sandbox::{
    Clock, Host, Limits, Program, PromptLimits, SandboxTool, Sandboxes, ToolFailure,
};
use serde_json::{Map, Value as Json, json};

use crate::Effort;
use crate::report::{Figure, Samples, Target};
use crate::services;

/// Where the bench host sends `demo.echo`.
enum Backend {
    /// Answers in process, at once.
    InProcess,
    /// Through the tool-host's `InvokeTool`, as the code-executor does: to `tool_id` with
    /// the call's input, or with `input` when it is given.
    Grpc {
        tool_host: Box<ToolHost>,
        scope: Box<RunScope>,
        tool_id: &'static str,
        input: Option<Json>,
    },
}

struct BenchHost {
    backend: Backend,
    /// When each tool call reached the host: the gaps are the cost of one call as the
    /// sandbox sees it (crossing into Rust, the host call, and back into JavaScript).
    arrivals: Mutex<Vec<Instant>>,
}

impl BenchHost {
    fn new(backend: Backend) -> Arc<BenchHost> {
        Arc::new(BenchHost {
            backend,
            arrivals: Mutex::new(Vec::new()),
        })
    }

    fn take_arrivals(&self) -> Vec<Instant> {
        match self.arrivals.lock() {
            Ok(mut arrivals) => std::mem::take(&mut *arrivals),
            Err(_) => Vec::new(),
        }
    }
}

#[async_trait::async_trait]
impl Host for BenchHost {
    async fn call_tool(
        &self,
        tool_id: &str,
        input: Json,
        _clock: &Clock,
    ) -> Result<Json, ToolFailure> {
        if let Ok(mut arrivals) = self.arrivals.lock() {
            arrivals.push(Instant::now());
        }
        if tool_id == "bench.sleep" {
            let ms = input.get("ms").and_then(Json::as_u64).unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            return Ok(json!({ "slept_ms": ms }));
        }
        match &self.backend {
            Backend::InProcess => Ok(json!({ "echo": input })),
            Backend::Grpc {
                tool_host,
                scope,
                tool_id,
                input: fixed,
            } => {
                let input = fixed.as_ref().unwrap_or(&input);
                let invoked = tool_host
                    .invoke(scope, tool_id, input, "bench-call")
                    .await
                    .map_err(|error| ToolFailure::Failed(error.to_string()))?;
                invoked.result.map_err(ToolFailure::Failed)
            }
        }
    }

    async fn output(&self, _text: String) {}

    async fn llm(&self, _prompt: String, _json: bool) -> Result<String, String> {
        Err("the bench host has no model".to_owned())
    }
}

fn tool(id: &str) -> SandboxTool {
    SandboxTool {
        id: id.to_owned(),
        description: format!("Bench tool {id}. Returns its input."),
        input_schema: json!({
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": "Which record."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100},
            },
            "additionalProperties": true,
        }),
    }
}

/// Thirty tools: `bench.tool-00` … `bench.tool-27`, `demo.echo` and `bench.sleep`.
fn tools() -> Vec<SandboxTool> {
    let mut tools: Vec<SandboxTool> = (0..28)
        .map(|index| tool(&format!("bench.tool-{index:02}")))
        .collect();
    tools.push(tool("demo.echo"));
    tools.push(tool("bench.sleep"));
    tools
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

/// A service's limits, except that a run may make as many tool calls as item 2 times (the
/// per-run and per-prompt bounds are checked by the tests, not measured here).
fn limits() -> Limits {
    let defaults = Limits::default();
    Limits {
        timeout: Duration::from_secs(120),
        max_tool_calls: 1_000_000,
        prompt: PromptLimits {
            max_events: 1_000_000,
            ..defaults.prompt
        },
        ..defaults
    }
}

async fn run_checked(
    sandboxes: &Sandboxes,
    program: Program,
    host: Arc<BenchHost>,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let outcome = sandboxes.run("bench", program, host, limits()).await;
    let elapsed = started.elapsed();
    if let Err(error) = outcome.result {
        anyhow::bail!("sandbox run failed: {}", error.message);
    }
    Ok(elapsed)
}

async fn fresh_runs(
    sandboxes: &Sandboxes,
    host: &Arc<BenchHost>,
    code: &str,
    tools: Vec<SandboxTool>,
    iterations: usize,
) -> anyhow::Result<Samples> {
    let mut samples = Samples::new();
    for iteration in 0..iterations + iterations / 10 {
        let program = Program {
            tools: tools.clone(),
            ..program(code)
        };
        let elapsed = run_checked(sandboxes, program, Arc::clone(host)).await?;
        if iteration >= iterations / 10 {
            samples.push(elapsed);
        }
        host.take_arrivals();
    }
    Ok(samples)
}

/// Item 1: `run()` of a program with 30 tool functions whose code makes one call, from the
/// call to `run` until its outcome is back (thread hand-off, runtime and globals included).
/// Two lighter runs split the cost: an empty program without tools, and with the 30 tools.
pub async fn fresh_sandbox(effort: Effort) -> anyhow::Result<Vec<Figure>> {
    let host = BenchHost::new(Backend::InProcess);
    let iterations = effort.pick(200, 2_000);
    // An executor's sandboxes, as code mode has them.
    let sandboxes = Sandboxes::default();
    let full = fresh_runs(
        &sandboxes,
        &host,
        "benchTool07({id: 'a'})",
        tools(),
        iterations,
    )
    .await?;
    let empty = fresh_runs(&sandboxes, &host, "1", Vec::new(), iterations).await?;
    let with_tools = fresh_runs(&sandboxes, &host, "1", tools(), iterations).await?;
    Ok(vec![
        Figure::latency(
            "1",
            "fresh sandbox with 30 tool functions + first call",
            full.latency(),
            Some(Target::MaxMicros { micros: 150.0 }),
        )
        .note("Sandboxes::run wall time, in-process host answering at once"),
        Figure::latency(
            "1·",
            "… of which: fresh sandbox, no tools, code `1`",
            empty.latency(),
            None,
        ),
        Figure::latency(
            "1·",
            "… of which: fresh sandbox, 30 tools, code `1`",
            with_tools.latency(),
            None,
        ),
    ])
}

/// Gaps between consecutive tool calls of a tight loop in one run.
async fn call_gaps(
    sandboxes: &Sandboxes,
    host: Arc<BenchHost>,
    calls: usize,
    runs: usize,
) -> anyhow::Result<Samples> {
    let code = format!("for (let i = 0; i < {calls}; i++) demoEcho({{id: 'r' + i}});");
    let mut samples = Samples::new();
    for run in 0..runs + 1 {
        run_checked(sandboxes, program(&code), Arc::clone(&host)).await?;
        let arrivals = host.take_arrivals();
        // The first run warms up (and, over gRPC, connects).
        if run == 0 {
            continue;
        }
        for pair in arrivals.windows(2) {
            samples.push(pair[1] - pair[0]);
        }
    }
    Ok(samples)
}

/// Item 2: one tool call from sandbox code, in process and through the tool-host over gRPC.
pub async fn tool_calls(effort: Effort) -> anyhow::Result<Vec<Figure>> {
    let sandboxes = Sandboxes::default();
    let in_process = call_gaps(
        &sandboxes,
        BenchHost::new(Backend::InProcess),
        effort.pick(1_000, 5_000),
        effort.pick(3, 10),
    )
    .await?;

    let dir = tempfile::tempdir()?;
    let (tool_host_server, address) = services::tool_host(dir.path())?;
    let channel = agentic_rpc::channel(
        &format!("http://{address}"),
        &agentic_rpc::SendInternalToken::new(None)?,
    )?;
    let grpc = call_gaps(
        &sandboxes,
        BenchHost::new(Backend::Grpc {
            tool_host: Box::new(ToolHost::new(channel)),
            scope: Box::new(scope()),
            tool_id: "demo.echo",
            input: None,
        }),
        effort.pick(300, 2_000),
        effort.pick(3, 10),
    )
    .await?;
    drop(tool_host_server);

    Ok(vec![
        Figure::latency(
            "2a",
            "tool call from sandbox code, in process",
            in_process.latency(),
            Some(Target::MaxMicros { micros: 5.0 }),
        )
        .note("gap between consecutive calls of a loop in one run"),
        Figure::latency(
            "2b",
            "tool call from sandbox code, tool-host over gRPC (demo.echo)",
            grpc.latency(),
            Some(Target::MaxRoundTrips { round_trips: 2.0 }),
        )
        .note("gap between consecutive calls; the executor's ToolHost client, schema check and plugin included"),
    ])
}

fn scope() -> RunScope {
    RunScope {
        user_id: agentic_ids::UserId::known("bench"),
        prompt_id: Some(agentic_ids::PromptId::known("bench-prompt")),
        conversation_id: Some(agentic_ids::ConversationId::known("bench-conversation")),
        state: Map::new(),
        tier: Default::default(),
        spend: None,
        tools: None,
    }
}

/// Item 11: one MCP tool call from sandbox code through the tool-host to server-everything
/// over stdio (`everything.echo`, with progress reporting as executors call MCP tools),
/// beside the same loop calling the built-in `demo.echo` through the same tool-host.
pub async fn mcp_tool_calls(
    effort: Effort,
    everything: &std::path::Path,
) -> anyhow::Result<Vec<Figure>> {
    let sandboxes = Sandboxes::default();
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("mcp.json");
    let servers =
        json!({"mcpServers": {"everything": {"command": "node", "args": [everything, "stdio"]}}});
    std::fs::write(&config, servers.to_string())?;
    let (tool_host_server, address) = services::tool_host_with_mcp(dir.path(), &config)?;
    let channel = agentic_rpc::channel(
        &format!("http://{address}"),
        &agentic_rpc::SendInternalToken::new(None)?,
    )?;
    let tool_host = ToolHost::new(channel);
    // As an executor does before a run: learns which tools report progress.
    let prepared = tool_host.prepare(&scope()).await?;
    if !prepared
        .tools
        .iter()
        .any(|tool| tool.id == "everything.echo")
    {
        anyhow::bail!("the tool-host does not offer everything.echo");
    }
    let (calls, runs) = (effort.pick(300, 2_000), effort.pick(3, 10));
    let mut figures = Vec::new();
    for (item, tool_id, input, what) in [
        (
            "11",
            "everything.echo",
            Some(json!({"message": "bench"})),
            "MCP tool over stdio (everything.echo)",
        ),
        (
            "11·",
            "demo.echo",
            None,
            "… the same loop, built-in demo.echo",
        ),
    ] {
        let host = BenchHost::new(Backend::Grpc {
            tool_host: Box::new(tool_host.clone()),
            scope: Box::new(scope()),
            tool_id,
            input,
        });
        let gaps = call_gaps(&sandboxes, host, calls, runs).await?;
        figures.push(
            Figure::latency(
                item,
                &format!("tool call from sandbox code, {what}"),
                gaps.latency(),
                None,
            )
            .note("gap between consecutive calls of a loop; tool-host over gRPC"),
        );
    }
    drop(tool_host_server);
    Ok(figures)
}

/// Item 3: `parallel` of ten 50 ms tool calls, the whole run.
pub async fn parallel_sleeps(effort: Effort) -> anyhow::Result<Figure> {
    let sandboxes = Sandboxes::default();
    let host = BenchHost::new(Backend::InProcess);
    let code = "parallel(Array.from({length: 10}, () => ({tool: 'bench.sleep', input: {ms: 50}})))";
    let iterations = effort.pick(10, 40);
    let mut samples = Samples::new();
    for iteration in 0..iterations + 1 {
        let elapsed = run_checked(&sandboxes, program(code), Arc::clone(&host)).await?;
        if host.take_arrivals().len() != 10 {
            anyhow::bail!("parallel did not make ten calls");
        }
        if iteration > 0 {
            samples.push(elapsed);
        }
    }
    Ok(Figure::latency(
        "3",
        "parallel of 10 × 50 ms tool calls",
        samples.latency(),
        Some(Target::MaxMicros { micros: 60_000.0 }),
    )
    .note("Sandboxes::run wall time, fresh sandbox included"))
}
