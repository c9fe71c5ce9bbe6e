use std::sync::Mutex;

use agentic_proto::v1 as pb;
use pb::tool_host_server::{ToolHost as ToolHostService, ToolHostServer};
use serde_json::json;

use super::*;

/// `slow.answer` answers after 300 ms (the tool-host gives it two seconds) with usage;
/// `slow.hang` never answers. Each call's `grpc-timeout` header is kept.
/// `slow.progress` reports progress twice, then answers; `drained` says whether its
/// stream was read to its end (after the answer).
#[derive(Clone, Default)]
struct SlowToolHost {
    deadlines: Arc<Mutex<Vec<String>>>,
    drained: Arc<std::sync::atomic::AtomicBool>,
    /// Whether `Prepare` still lists `slow.answer`.
    without_answer: Arc<std::sync::atomic::AtomicBool>,
}

#[tonic::async_trait]
impl ToolHostService for SlowToolHost {
    type InvokeToolStream = tonic::codegen::BoxStream<pb::InvokeToolUpdate>;

    async fn invoke_tool(
        &self,
        request: tonic::Request<tonic::Streaming<pb::InvokeToolInput>>,
    ) -> Result<tonic::Response<Self::InvokeToolStream>, Status> {
        let deadline = request
            .metadata()
            .get("grpc-timeout")
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        self.deadlines.lock().unwrap().push(deadline);
        let mut inputs = request.into_inner();
        let Some(pb::InvokeToolInput {
            kind: Some(pb::invoke_tool_input::Kind::Start(start)),
        }) = inputs.message().await?
        else {
            return Err(Status::invalid_argument("no call"));
        };
        match start.tool_id.as_str() {
            "slow.progress" => Ok(tonic::Response::new(self.progress_then_answer())),
            "slow.hang" => std::future::pending().await,
            _ => {
                tokio::time::sleep(Duration::from_millis(300)).await;
                let done = pb::InvokeToolResponse {
                    result: Some(invoke_tool_response::Result::Output(json::to_proto(
                        &json!("done"),
                    ))),
                    files: Vec::new(),
                    usage: Some(pb::Usage {
                        input_tokens: 3,
                        output_tokens: 2,
                        total_tokens: 5,
                        llm_calls: 1,
                        ..pb::Usage::default()
                    }),
                    nested: Vec::new(),
                };
                let update = pb::InvokeToolUpdate {
                    kind: Some(pb::invoke_tool_update::Kind::Done(done)),
                };
                Ok(tonic::Response::new(Box::pin(futures::stream::iter([Ok(
                    update,
                )]))))
            }
        }
    }

    async fn list_tools(
        &self,
        _request: tonic::Request<pb::ListToolsRequest>,
    ) -> Result<tonic::Response<pb::ListToolsResponse>, Status> {
        Err(Status::unimplemented("no list here"))
    }

    async fn prepare(
        &self,
        _request: tonic::Request<pb::PrepareRequest>,
    ) -> Result<tonic::Response<pb::PrepareResponse>, Status> {
        let tool = |id: &str, timeout_ms| pb::ToolDefinition {
            id: id.to_owned(),
            timeout_ms,
            ..pb::ToolDefinition::default()
        };
        let mut tools = vec![tool("slow.hang", 0)];
        if !self
            .without_answer
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            tools.push(tool("slow.answer", 2000));
        }
        tools.push(pb::ToolDefinition {
            reports_progress: true,
            ..tool("slow.progress", 0)
        });
        Ok(tonic::Response::new(pb::PrepareResponse {
            tools,
            ..pb::PrepareResponse::default()
        }))
    }
}

impl SlowToolHost {
    /// Two progress updates, the answer, and the stream's end a little after it.
    fn progress_then_answer(&self) -> tonic::codegen::BoxStream<pb::InvokeToolUpdate> {
        use futures::StreamExt;
        use pb::invoke_tool_update::Kind;
        let progress = |n: f64| pb::InvokeToolUpdate {
            kind: Some(Kind::Progress(pb::ToolProgress {
                progress: n,
                total: 2.0,
                message: format!("step {n}"),
            })),
        };
        let done = pb::InvokeToolUpdate {
            kind: Some(Kind::Done(pb::InvokeToolResponse {
                result: Some(invoke_tool_response::Result::Output(json::to_proto(
                    &json!("done"),
                ))),
                ..pb::InvokeToolResponse::default()
            })),
        };
        let drained = Arc::clone(&self.drained);
        // The stream ends a little after the answer: a caller that stops at the answer
        // returns before this runs.
        let end = futures::stream::once(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            drained.store(true, std::sync::atomic::Ordering::SeqCst);
        })
        .filter_map(|()| std::future::ready(None));
        let updates = futures::stream::iter([progress(1.0), progress(2.0), done].map(Ok));
        Box::pin(updates.chain(end))
    }
}

async fn client(default_timeout: Duration) -> (ToolHost, SlowToolHost) {
    let fake = SlowToolHost::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (router, _health) = agentic_rpc::router(&[]).unwrap();
    let router = router.add_service(ToolHostServer::new(fake.clone()));
    tokio::spawn(agentic_rpc::serve(router, listener, std::future::pending()));
    let channel = agentic_rpc::channel(
        &format!("http://{address}"),
        &agentic_rpc::SendInternalToken::default(),
    )
    .unwrap();
    let tool_host = ToolHost::new(channel).with_default_timeout(default_timeout);
    (tool_host, fake)
}

fn scope() -> RunScope {
    RunScope {
        user_id: UserId::known("user"),
        prompt_id: Some(PromptId::known("prompt")),
        conversation_id: None,
        state: Map::new(),
        tier: agentic_llm::Tier::Normal,
        spend: None,
        tools: None,
    }
}

#[tokio::test]
async fn a_call_past_its_deadline_fails_alone_with_an_error_naming_the_limit() {
    let (tool_host, fake) = client(Duration::from_millis(200)).await;
    let started = tokio::time::Instant::now();
    let error = tool_host
        .invoke(&scope(), "slow.hang", &json!({}), "call-1")
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        error.to_string(),
        "the tool did not answer within 0.2 s and was stopped"
    );
    // The tool-host was told the deadline, so it drops the call at the same moment.
    assert_eq!(*fake.deadlines.lock().unwrap(), ["200000u"]);
}

#[tokio::test]
async fn a_tool_the_tool_host_gives_a_longer_limit_outlives_the_default() {
    let (tool_host, _fake) = client(Duration::from_millis(100)).await;
    let scope = scope();
    let early = tool_host
        .invoke(&scope, "slow.answer", &json!({}), "call-1")
        .await;
    assert!(
        matches!(early, Err(ToolHostError::TimedOut { .. })),
        "{early:?}"
    );

    tool_host.prepare(&scope).await.unwrap();
    assert_eq!(tool_host.timeout_of("slow.answer"), Duration::from_secs(2));
    assert_eq!(
        tool_host.timeout_of("slow.hang"),
        Duration::from_millis(100)
    );
    let invoked = tool_host
        .invoke(&scope, "slow.answer", &json!({}), "call-2")
        .await
        .unwrap();
    assert_eq!(invoked.result, Ok(json!("done")));
    assert_eq!(
        invoked.usage,
        Usage {
            input_tokens: 3,
            output_tokens: 2,
            total_tokens: 5,
            calls: 1,
            ..Usage::default()
        }
    );
}

#[tokio::test]
async fn progress_reaches_the_caller_and_the_stream_is_read_to_its_end() {
    let (tool_host, fake) = client(Duration::from_secs(5)).await;
    let scope = scope();
    tool_host.prepare(&scope).await.unwrap();
    let seen = Mutex::new(Vec::new());
    let report = |progress: Progress| seen.lock().unwrap().push(progress.progress);
    let invoked = tool_host
        .invoke_reporting(&scope, "slow.progress", &json!({}), "call-1", &report)
        .await
        .unwrap();
    assert_eq!(invoked.result, Ok(json!("done")));
    assert_eq!(*seen.lock().unwrap(), [1.0, 2.0]);
    // A stream dropped after the answer is reset, and HTTP/2 servers close connections
    // whose client resets too many: the call ends with the server's trailers instead.
    assert!(fake.drained.load(std::sync::atomic::Ordering::SeqCst));
}

#[tokio::test]
async fn a_prepare_that_does_not_name_a_tool_keeps_its_limit() {
    let (tool_host, fake) = client(Duration::from_millis(100)).await;
    let scope = scope();
    tool_host.prepare(&scope).await.unwrap();
    fake.without_answer
        .store(true, std::sync::atomic::Ordering::SeqCst);
    tool_host.prepare(&scope).await.unwrap();
    assert_eq!(tool_host.timeout_of("slow.answer"), Duration::from_secs(2));
}
