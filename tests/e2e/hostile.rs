//! Hostile input, table-driven: every case names the exact status (or the error the model
//! sees), and after each table the services still answer and stored data reads back intact.

use std::time::Instant;

use agentic_proto::v1::{
    ApproveToolCallRequest, CancelPromptRequest, CreateConversationRequest, CreatePromptRequest,
    GetConversationRequest, GetFileRequest, GetPromptRequest, ListConversationFilesRequest,
    ListPromptsRequest, Prompt, PromptEvent, PromptState, RegisterModeRequest,
    RejectToolCallRequest, StreamPromptRequest,
};
use agentic_testkit::model::{Match, Reply, Rule};
use agentic_testkit::{Stack, StackOptions};
use futures::FutureExt;
use futures::future::BoxFuture;
use prost_types::value::Kind;
use tonic::{Code, Status};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use crate::support::*;

/// Strings that would break a query built by pasting text into SQL.
const SQL_DROP: &str = "'; DROP TABLE prompts; --";
const SQL_OR: &str = "\" OR 1=1 --";
const SQL_UNION: &str = "x' UNION SELECT payload FROM prompt_events --";
/// A well-formed id that names nothing.
const MISSING_UUID: &str = "0193e5a4-0000-7000-8000-000000000000";

/// What a case expects: a gRPC status with a message fragment, or success (whose checks the
/// case made itself).
enum Expect {
    Status(Code, &'static str),
    Succeeds,
}

/// A case's own checks on a successful answer: `Err` says what was wrong.
type Checked = Result<(), String>;

type Call = Box<dyn FnOnce(Gateway) -> BoxFuture<'static, Result<Checked, Status>> + Send>;

struct Case {
    name: &'static str,
    expect: Expect,
    call: Call,
}

fn case<F>(
    name: &'static str,
    expect: Expect,
    call: impl FnOnce(Gateway) -> F + Send + 'static,
) -> Case
where
    F: std::future::Future<Output = Result<Checked, Status>> + Send + 'static,
{
    Case {
        name,
        expect,
        call: Box::new(move |gateway| call(gateway).boxed()),
    }
}

fn fails(code: Code, fragment: &'static str) -> Expect {
    Expect::Status(code, fragment)
}

fn ensure(condition: bool, what: impl Into<String>) -> Checked {
    if condition { Ok(()) } else { Err(what.into()) }
}

fn create_request(input: &str) -> CreatePromptRequest {
    CreatePromptRequest {
        input: input.to_owned(),
        ..Default::default()
    }
}

async fn read_all(
    gateway: &mut Gateway,
    prompt_id: &str,
    after: u64,
) -> Result<Vec<PromptEvent>, Status> {
    let request = StreamPromptRequest {
        prompt_id: prompt_id.to_owned(),
        after_sequence: after,
    };
    let mut stream = gateway.stream_prompt(request).await?.into_inner();
    let mut events = Vec::new();
    let read = async {
        while let Some(event) = stream.message().await? {
            events.push(event);
        }
        Ok::<_, Status>(())
    };
    tokio::time::timeout(PATIENCE, read)
        .await
        .map_err(|_| Status::deadline_exceeded("the stream did not end in time"))??;
    Ok(events)
}

async fn get(gateway: &mut Gateway, prompt_id: &str) -> Result<Prompt, Status> {
    let request = GetPromptRequest {
        prompt_id: prompt_id.to_owned(),
    };
    Ok(gateway.get_prompt(request).await?.into_inner())
}

/// Creates a prompt and reads its stream to the end: the prompt as finally stored.
async fn run_to_end(gateway: &mut Gateway, request: CreatePromptRequest) -> Result<Prompt, Status> {
    let prompt = gateway.create_prompt(request).await?.into_inner();
    read_all(gateway, &prompt.id, 0).await?;
    get(gateway, &prompt.id).await
}

/// A `state` whose struct nests `depth` levels deep.
fn nested_state(depth: usize) -> prost_types::Struct {
    let mut fields = prost_types::Struct::default();
    for _ in 1..depth {
        let inner = prost_types::Value {
            kind: Some(Kind::StructValue(fields)),
        };
        fields = prost_types::Struct {
            fields: [("n".to_owned(), inner)].into(),
        };
    }
    fields
}

/// Runs `call` on a thread of its own with a stack deep enough to encode (and drop) values
/// nested thousands of levels deep, which the client's encoder walks recursively.
async fn on_a_big_stack<F, Fut>(call: F) -> Result<Checked, Status>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<Checked, Status>>,
{
    let (sender, receiver) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .stack_size(256 * 1024 * 1024)
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let _ = sender.send(runtime.block_on(call()));
        })
        .unwrap();
    receiver.await.unwrap()
}

fn state_with_text(bytes: usize) -> prost_types::Struct {
    let blob = prost_types::Value {
        kind: Some(Kind::StringValue("s".repeat(bytes))),
    };
    prost_types::Struct {
        fields: [("blob".to_owned(), blob)].into(),
    }
}

async fn serving(channel: tonic::transport::Channel) -> ServingStatus {
    let mut health = HealthClient::new(channel);
    let request = HealthCheckRequest {
        service: String::new(),
    };
    health.check(request).await.unwrap().into_inner().status()
}

async fn channel_to(url: String) -> tonic::transport::Channel {
    tonic::transport::Endpoint::from_shared(url)
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// Runs each case, collecting every mismatch so one failure does not hide the others.
async fn run_table(gateway: &Gateway, cases: Vec<Case>) -> Vec<String> {
    let mut failures = Vec::new();
    for case in cases {
        let started = Instant::now();
        let outcome = (case.call)(gateway.clone()).await;
        let elapsed = started.elapsed();
        let verdict = match (&case.expect, outcome) {
            (Expect::Succeeds, Ok(Ok(()))) => Ok(()),
            (Expect::Succeeds, Ok(Err(wrong))) => Err(wrong),
            (Expect::Succeeds, Err(status)) => Err(format!("failed with {status:?}")),
            (Expect::Status(code, _), Ok(_)) => Err(format!("succeeded, expected {code:?}")),
            (Expect::Status(code, fragment), Err(status)) => {
                if status.code() == *code && status.message().contains(fragment) {
                    Ok(())
                } else {
                    Err(format!(
                        "expected {code:?} containing {fragment:?}, got {:?}: {:?}",
                        status.code(),
                        truncated(status.message())
                    ))
                }
            }
        };
        eprintln!(
            "hostile case {:?}: {:?} in {elapsed:?}",
            case.name,
            verdict.is_ok()
        );
        if let Err(wrong) = verdict {
            eprintln!("  {wrong}");
            failures.push(format!("{}: {wrong}", case.name));
        }
    }
    failures
}

fn truncated(text: &str) -> String {
    text.chars().take(300).collect()
}

#[tokio::test]
async fn hostile_api_requests_get_exact_statuses_and_leave_stored_data_intact() {
    let started = Instant::now();
    // Two cases read one prompt's log on 2,000 streams at once: an operator who allows one
    // user that many (walls::http shows a user past their share refused).
    let stack = Stack::start_with(
        vec![
            Rule::new(
                Match::LastUserContains("slow".into()),
                Reply::Text("Slowly.".into()),
            )
            .delay_ms(1_500),
            text(Match::Any, "Noted."),
        ],
        StackOptions {
            stream_bounds: (4_096, 256, 600),
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();
    let mut alice = gateway_for(&stack, "alice").await;

    // The witness: a conversation and a finished prompt, stored before any hostile request.
    let conversation = alice
        .create_conversation(CreateConversationRequest {
            title: format!("witness {SQL_DROP}"),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let witness = run_to_end(
        &mut alice,
        CreatePromptRequest {
            input: format!("remember {SQL_OR}"),
            conversation_id: conversation.id.clone(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(witness.state, PromptState::Completed as i32);
    let witness_events = read_all(&mut alice, &witness.id, 0).await.unwrap();
    let witness_id = witness.id.clone();
    let conversation_id = conversation.id.clone();

    let ten_mib = "x".repeat(10 * 1024 * 1024);

    let mut cases = vec![
        // Inputs: empty, blank, too big for the gateway, too big for the wire.
        case(
            "empty input",
            fails(Code::InvalidArgument, "input must not be empty"),
            |mut g| async move { g.create_prompt(create_request("")).await.map(|_| Ok(())) },
        ),
        case(
            "blank input",
            fails(Code::InvalidArgument, "input must not be empty"),
            |mut g| async move {
                g.create_prompt(create_request(" \n\t "))
                    .await
                    .map(|_| Ok(()))
            },
        ),
        case(
            "1 MiB input, over the input limit",
            fails(Code::InvalidArgument, "input is longer than 262144 bytes"),
            {
                let input = "x".repeat(1024 * 1024);
                |mut g| async move {
                    g.create_prompt(create_request(&input))
                        .await
                        .map(|_| Ok(()))
                }
            },
        ),
        case(
            "10 MiB input, over the request limit",
            fails(Code::OutOfRange, "message length too large"),
            |mut g| async move {
                let input = ten_mib.clone();
                g.create_prompt(create_request(&input))
                    .await
                    .map(|_| Ok(()))
            },
        ),
        case(
            "input with NUL characters",
            fails(
                Code::InvalidArgument,
                "input must not contain NUL characters",
            ),
            |mut g| async move {
                g.create_prompt(create_request("\0\0\0"))
                    .await
                    .map(|_| Ok(()))
            },
        ),
        case(
            "a prompt id with a NUL character",
            fails(
                Code::InvalidArgument,
                "prompt_id must not contain NUL characters",
            ),
            |mut g| async move {
                g.get_prompt(GetPromptRequest {
                    prompt_id: "\0".into(),
                })
                .await
                .map(|_| Ok(()))
            },
        ),
        // Modes and tiers.
        case(
            "unknown mode",
            fails(Code::InvalidArgument, r#"Unknown execution mode: "x""#),
            |mut g| async move {
                let request = CreatePromptRequest {
                    mode: "x".into(),
                    ..create_request("hi")
                };
                g.create_prompt(request).await.map(|_| Ok(()))
            },
        ),
        case(
            "SQL as the mode",
            fails(
                Code::InvalidArgument,
                "Unknown execution mode: \"'; DROP TABLE prompts; --\"",
            ),
            |mut g| async move {
                let request = CreatePromptRequest {
                    mode: SQL_DROP.into(),
                    ..create_request("hi")
                };
                g.create_prompt(request).await.map(|_| Ok(()))
            },
        ),
        case(
            "unknown model tier",
            fails(Code::InvalidArgument, "unknown model tier 99"),
            |mut g| async move {
                let request = CreatePromptRequest {
                    model: 99,
                    ..create_request("hi")
                };
                g.create_prompt(request).await.map(|_| Ok(()))
            },
        ),
        case(
            "too many rounds",
            fails(Code::InvalidArgument, "max_rounds must be at most 100"),
            |mut g| async move {
                let request = CreatePromptRequest {
                    max_rounds: u32::MAX,
                    ..create_request("hi")
                };
                g.create_prompt(request).await.map(|_| Ok(()))
            },
        ),
        // Conversations that do not exist, by every kind of id.
        case(
            "unknown conversation",
            fails(Code::NotFound, "conversation not found: 0193e5a4"),
            |mut g| async move {
                let request = CreatePromptRequest {
                    conversation_id: MISSING_UUID.into(),
                    ..create_request("hi")
                };
                g.create_prompt(request).await.map(|_| Ok(()))
            },
        ),
        case(
            "malformed conversation id",
            fails(Code::NotFound, "conversation not found: not-a-uuid"),
            |mut g| async move {
                let request = CreatePromptRequest {
                    conversation_id: "not-a-uuid".into(),
                    ..create_request("hi")
                };
                g.create_prompt(request).await.map(|_| Ok(()))
            },
        ),
        case(
            "SQL as the conversation id",
            fails(Code::NotFound, "conversation not found: \" OR 1=1 --"),
            |mut g| async move {
                let request = CreatePromptRequest {
                    conversation_id: SQL_OR.into(),
                    ..create_request("hi")
                };
                g.create_prompt(request).await.map(|_| Ok(()))
            },
        ),
        case(
            "SQL input is stored and answered verbatim",
            Expect::Succeeds,
            |mut g| async move {
                let stored = run_to_end(&mut g, create_request(SQL_DROP)).await?;
                Ok(ensure(
                    stored.input == SQL_DROP && stored.state == PromptState::Completed as i32,
                    format!("stored {:?} in state {}", stored.input, stored.state),
                ))
            },
        ),
        // Prompts that do not exist, by every kind of id.
        case(
            "unknown prompt",
            fails(Code::NotFound, "prompt not found: 0193e5a4"),
            |mut g| async move { get(&mut g, MISSING_UUID).await.map(|_| Ok(())) },
        ),
        case(
            "malformed prompt id",
            fails(Code::NotFound, "prompt not found: not-a-uuid"),
            |mut g| async move { get(&mut g, "not-a-uuid").await.map(|_| Ok(())) },
        ),
        case(
            "empty prompt id",
            fails(Code::NotFound, "prompt not found"),
            |mut g| async move { get(&mut g, "").await.map(|_| Ok(())) },
        ),
        case(
            "SQL as the prompt id",
            fails(Code::NotFound, "prompt not found: x' UNION SELECT"),
            |mut g| async move { get(&mut g, SQL_UNION).await.map(|_| Ok(())) },
        ),
        case(
            "streaming an unknown prompt",
            fails(Code::NotFound, "prompt not found: \" OR 1=1 --"),
            |mut g| async move { read_all(&mut g, SQL_OR, 0).await.map(|_| Ok(())) },
        ),
        case(
            "cancelling an unknown prompt",
            fails(Code::NotFound, "prompt not found: '; DROP TABLE"),
            |mut g| async move {
                let request = CancelPromptRequest {
                    prompt_id: SQL_DROP.into(),
                    reason: SQL_OR.into(),
                };
                g.cancel_prompt(request).await.map(|_| Ok(()))
            },
        ),
        case(
            "approving in an unknown prompt",
            fails(Code::NotFound, "prompt not found: not-a-uuid"),
            |mut g| async move {
                let request = ApproveToolCallRequest {
                    prompt_id: "not-a-uuid".into(),
                    tool_call_id: SQL_DROP.into(),
                    edited_input: None,
                };
                g.approve_tool_call(request).await.map(|_| Ok(()))
            },
        ),
        // The witness, addressed with hostile companions.
        case(
            "replay after the end of a finished prompt is empty",
            Expect::Succeeds,
            {
                let id = witness_id.clone();
                let total = witness_events.len() as u64;
                move |mut g| async move {
                    let events = read_all(&mut g, &id, total).await?;
                    Ok(ensure(
                        events.is_empty(),
                        format!("{} events after the end", events.len()),
                    ))
                }
            },
        ),
        case("replay after u64::MAX is empty", Expect::Succeeds, {
            let id = witness_id.clone();
            move |mut g| async move {
                let events = read_all(&mut g, &id, u64::MAX).await?;
                Ok(ensure(
                    events.is_empty(),
                    format!("{} events after u64::MAX", events.len()),
                ))
            }
        }),
        case(
            "cancelling a finished prompt with an SQL reason",
            fails(Code::FailedPrecondition, "already ended"),
            {
                let id = witness_id.clone();
                move |mut g| async move {
                    let request = CancelPromptRequest {
                        prompt_id: id,
                        reason: SQL_DROP.into(),
                    };
                    g.cancel_prompt(request).await.map(|_| Ok(()))
                }
            },
        ),
        case(
            "approving an SQL tool call id",
            fails(
                Code::FailedPrecondition,
                "is not waiting for approval (it is PROMPT_STATE_COMPLETED)",
            ),
            {
                let id = witness_id.clone();
                move |mut g| async move {
                    let request = ApproveToolCallRequest {
                        prompt_id: id,
                        tool_call_id: SQL_DROP.into(),
                        edited_input: None,
                    };
                    g.approve_tool_call(request).await.map(|_| Ok(()))
                }
            },
        ),
        case(
            "rejecting with SQL in the call id and reason",
            fails(
                Code::FailedPrecondition,
                "is not waiting for approval (it is PROMPT_STATE_COMPLETED)",
            ),
            {
                let id = witness_id.clone();
                move |mut g| async move {
                    let request = RejectToolCallRequest {
                        prompt_id: id,
                        tool_call_id: SQL_OR.into(),
                        reason: SQL_DROP.into(),
                    };
                    g.reject_tool_call(request).await.map(|_| Ok(()))
                }
            },
        ),
        case(
            "another user cannot read the witness",
            fails(Code::NotFound, "prompt not found"),
            {
                let id = witness_id.clone();
                let url = stack.gateway_url();
                move |_| async move {
                    let mut mallory = gateway_at(&url, SQL_OR).await;
                    get(&mut mallory, &id).await.map(|_| Ok(()))
                }
            },
        ),
        case(
            "an SQL user header is a user like any other",
            Expect::Succeeds,
            {
                let url = stack.gateway_url();
                move |_| async move {
                    let mut mallory = gateway_at(&url, SQL_DROP).await;
                    let stored = run_to_end(&mut mallory, create_request("mine")).await?;
                    let listed = mallory
                        .list_prompts(ListPromptsRequest::default())
                        .await?
                        .into_inner()
                        .prompts;
                    Ok(ensure(
                        stored.user_id == SQL_DROP
                            && listed.len() == 1
                            && listed[0].id == stored.id,
                        format!("user {:?} lists {} prompts", stored.user_id, listed.len()),
                    ))
                }
            },
        ),
        // Conversations.
        case(
            "SQL conversation title is stored verbatim",
            Expect::Succeeds,
            |mut g| async move {
                let title = format!("{SQL_DROP} {SQL_OR} {SQL_UNION}");
                let request = CreateConversationRequest {
                    title: title.clone(),
                    ..Default::default()
                };
                let created = g.create_conversation(request).await?.into_inner();
                let request = GetConversationRequest {
                    conversation_id: created.id,
                };
                let read = g.get_conversation(request).await?.into_inner();
                Ok(ensure(
                    read.title == title,
                    format!("read back {:?}", read.title),
                ))
            },
        ),
        case(
            "too long conversation title",
            fails(Code::InvalidArgument, "title is longer than 500 characters"),
            |mut g| async move {
                let request = CreateConversationRequest {
                    title: "t".repeat(501),
                    ..Default::default()
                };
                g.create_conversation(request).await.map(|_| Ok(()))
            },
        ),
        case(
            "SQL as a conversation's default mode",
            fails(
                Code::InvalidArgument,
                "Unknown execution mode: \"x' UNION SELECT",
            ),
            |mut g| async move {
                let request = CreateConversationRequest {
                    default_mode: SQL_UNION.into(),
                    ..Default::default()
                };
                g.create_conversation(request).await.map(|_| Ok(()))
            },
        ),
        case(
            "malformed conversation id to read",
            fails(Code::NotFound, "conversation not found: {}"),
            |mut g| async move {
                let request = GetConversationRequest {
                    conversation_id: "{}".into(),
                };
                g.get_conversation(request).await.map(|_| Ok(()))
            },
        ),
        case(
            "listing prompts of an SQL conversation id",
            fails(Code::NotFound, "conversation not found"),
            |mut g| async move {
                let request = ListPromptsRequest {
                    conversation_id: SQL_OR.into(),
                    limit: 0,
                    page_token: String::new(),
                };
                g.list_prompts(request).await.map(|_| Ok(()))
            },
        ),
        case(
            "listing files of an SQL conversation id",
            fails(Code::NotFound, "conversation not found"),
            |mut g| async move {
                let request = ListConversationFilesRequest {
                    conversation_id: SQL_DROP.into(),
                };
                g.list_conversation_files(request).await.map(|_| Ok(()))
            },
        ),
        case(
            "reading an SQL file id",
            fails(Code::NotFound, "file not found: x' UNION SELECT"),
            |mut g| async move {
                let request = GetFileRequest {
                    file_id: SQL_UNION.into(),
                };
                g.get_file(request).await.map(|_| Ok(()))
            },
        ),
        case(
            "a user registering a mode with an SQL endpoint",
            fails(
                Code::PermissionDenied,
                "only agentic services with the internal token register modes",
            ),
            |mut g| async move {
                let request = RegisterModeRequest {
                    id: SQL_DROP.into(),
                    name: SQL_OR.into(),
                    endpoint: SQL_UNION.into(),
                };
                g.register_mode(request).await.map(|_| Ok(()))
            },
        ),
        // State: deep, deeper than any decoder allows, and big.
        case(
            "state nested 17 levels deep",
            fails(
                Code::InvalidArgument,
                "state is nested deeper than 16 levels",
            ),
            |mut g| async move {
                let request = CreatePromptRequest {
                    state: Some(nested_state(17)),
                    ..create_request("deep")
                };
                g.create_prompt(request).await.map(|_| Ok(()))
            },
        ),
        case(
            "state nested 33 levels deep, past what the executors decode",
            fails(
                Code::InvalidArgument,
                "state is nested deeper than 16 levels",
            ),
            |mut g| async move {
                let request = CreatePromptRequest {
                    state: Some(nested_state(33)),
                    ..create_request("deep")
                };
                g.create_prompt(request).await.map(|_| Ok(()))
            },
        ),
        // Past prost's recursion limit the request never reaches the gateway's code: the codec
        // refuses it, as the caller's fault.
        case(
            "state nested 2000 levels deep",
            fails(Code::InvalidArgument, "the message could not be decoded"),
            {
                let url = stack.gateway_url();
                |_| {
                    on_a_big_stack(move || async move {
                        // A connection of its own: the connection's task encodes the request.
                        let mut g = gateway_at(&url, "alice").await;
                        let request = CreatePromptRequest {
                            state: Some(nested_state(2_000)),
                            ..create_request("deeper")
                        };
                        g.create_prompt(request).await.map(|_| Ok(()))
                    })
                }
            },
        ),
        case(
            "state nested 16 levels deep is kept",
            Expect::Succeeds,
            |mut g| async move {
                let state = nested_state(16);
                let request = CreatePromptRequest {
                    state: Some(state.clone()),
                    ..create_request("shallow")
                };
                let stored = run_to_end(&mut g, request).await?;
                Ok(ensure(
                    stored.state_data == Some(state),
                    "the state changed on the way",
                ))
            },
        ),
        case(
            "1.5 MiB state",
            fails(Code::InvalidArgument, "state is larger than 1048576 bytes"),
            |mut g| async move {
                let request = CreatePromptRequest {
                    state: Some(state_with_text(1536 * 1024)),
                    ..create_request("big state")
                };
                g.create_prompt(request).await.map(|_| Ok(()))
            },
        ),
        case(
            "1.5 MiB conversation state",
            fails(Code::InvalidArgument, "state is larger than 1048576 bytes"),
            |mut g| async move {
                let request = CreateConversationRequest {
                    state: Some(state_with_text(1536 * 1024)),
                    ..Default::default()
                };
                g.create_conversation(request).await.map(|_| Ok(()))
            },
        ),
        case(
            "conversation state nested 17 levels deep",
            fails(
                Code::InvalidArgument,
                "state is nested deeper than 16 levels",
            ),
            |mut g| async move {
                let request = CreateConversationRequest {
                    state: Some(nested_state(17)),
                    ..Default::default()
                };
                g.create_conversation(request).await.map(|_| Ok(()))
            },
        ),
    ];
    // A plugin list is the one plugin input a tool-host takes from outside; a plugin whose
    // input schema does not compile is refused the same way at start (see the registry's
    // `a_schema_that_does_not_compile_stops_the_start`: plugins are built in, so no test can
    // hand the running host a foreign one).
    cases.push(case(
        "a tool-host with an unknown SQL-named plugin refuses to start, naming it",
        Expect::Succeeds,
        |_| async move {
            let data = tempfile::tempdir().unwrap();
            let database = format!("sqlite://{}?mode=rwc", data.path().join("t.db").display());
            let config = tool_host::Config {
                service: agentic_rpc::ServiceArgs::dev("127.0.0.1:0".parse().unwrap()),
                database_url: database,
                plugins: vec!["artifact".into(), "x' OR '1'='1".into()],
                gateway_url: "http://127.0.0.1:9".into(),
                storage: tool_host::StorageLimits::default(),
                mcp_config: None,
                guardrails: None,
                skills_dir: None,
                allow_root: false,
                memory_put_approval: false,
            };
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let started = tool_host::run(config, listener, std::future::pending());
            let outcome = tokio::time::timeout(PATIENCE, started).await;
            let message = match outcome {
                Ok(Err(error)) => format!("{error:#}"),
                Ok(Ok(())) => "it started and stopped".to_owned(),
                Err(_) => "it started".to_owned(),
            };
            Ok(ensure(
                message.contains("unknown plugin: \"x' OR '1'='1\""),
                message,
            ))
        },
    ));
    cases.push(case(
        "2000 concurrent streams of a finished prompt all get the whole log",
        Expect::Succeeds,
        {
            let id = witness_id.clone();
            let expected = witness_events.clone();
            move |g| async move { concurrent_streams(g, id, expected.len(), Some(expected)).await }
        },
    ));
    cases.push(case(
        "2000 concurrent streams of a running prompt all get the same whole log",
        Expect::Succeeds,
        |mut g| async move {
            let prompt = g
                .create_prompt(create_request("slow answer"))
                .await?
                .into_inner();
            let checked = concurrent_streams(g.clone(), prompt.id.clone(), 0, None).await?;
            let stored = get(&mut g, &prompt.id).await?;
            Ok(checked.and(ensure(
                stored.state == PromptState::Completed as i32,
                format!("ended in state {}", stored.state),
            )))
        },
    ));
    let count = cases.len();
    let failures = run_table(&alice, cases).await;

    // Afterwards: healthy, working, and the witness reads back exactly as before.
    assert_eq!(
        serving(channel_to(stack.gateway_url()).await).await,
        ServingStatus::Serving
    );
    let normal = run_to_end(&mut alice, create_request("a normal prompt"))
        .await
        .unwrap();
    assert_eq!(normal.state, PromptState::Completed as i32);
    assert_eq!(get(&mut alice, &witness_id).await.unwrap(), witness);
    assert_eq!(
        read_all(&mut alice, &witness_id, 0).await.unwrap(),
        witness_events
    );
    let read_conversation = alice
        .get_conversation(GetConversationRequest {
            conversation_id: conversation_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(read_conversation, conversation);
    eprintln!("{count} API cases in {:?}", started.elapsed());
    assert!(
        failures.is_empty(),
        "{} of {count} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Opens 2000 streams of one prompt over a few connections at once; every stream must read
/// the same log (`expected`, when given), with at least `at_least` events.
async fn concurrent_streams(
    gateway: Gateway,
    prompt_id: String,
    at_least: usize,
    expected: Option<Vec<PromptEvent>>,
) -> Result<Checked, Status> {
    const STREAMS: usize = 2_000;
    let reads = (0..STREAMS).map(|_| {
        let mut gateway = gateway.clone();
        let prompt_id = prompt_id.clone();
        async move { read_all(&mut gateway, &prompt_id, 0).await }
    });
    let logs = futures::future::try_join_all(reads).await?;
    let first = expected.unwrap_or_else(|| logs[0].clone());
    let differing = logs.iter().filter(|log| **log != first).count();
    let terminal = first.last().map(kind);
    Ok(ensure(
        differing == 0 && first.len() >= at_least && terminal == Some("completed"),
        format!(
            "{differing} of {STREAMS} logs differ; {} events ending in {terminal:?}",
            first.len()
        ),
    ))
}

/// The model answers the prompt whose input contains `input` with `code` in round 1, and
/// with `done()` in round 2 (so the case ends after the model saw round 1's feedback).
fn first_round(input: &str, code: &str) -> Rule {
    Rule::new(
        Match::All(vec![
            Match::AnyMessageContains(input.to_owned()),
            Match::AssistantTurns(0),
        ]),
        Reply::Text(code.to_owned()),
    )
}

/// What a sandbox case expects.
enum Sees {
    /// The model's feedback after round 1 contains every fragment.
    Feedback(&'static [&'static str]),
    /// The prompt finished in round 1; the check reads the stored prompt and its events.
    Finished(fn(&Prompt, &[PromptEvent]) -> Checked),
}

struct SandboxCase {
    name: &'static str,
    code: String,
    sees: Sees,
}

fn sandbox(name: &'static str, code: &str, sees: Sees) -> SandboxCase {
    SandboxCase {
        name,
        code: code.to_owned(),
        sees,
    }
}

/// The text of every `text` output, in order.
fn texts(prompt: &Prompt) -> Vec<String> {
    prompt
        .output
        .iter()
        .filter_map(text_of)
        .map(str::to_owned)
        .collect()
}

fn sandbox_cases() -> Vec<SandboxCase> {
    use Sees::{Feedback, Finished};
    vec![
        sandbox(
            "infinite loop",
            "while (true) {}",
            Feedback(&["Execution timed out after 6000ms"]),
        ),
        sandbox(
            "swallowing the timeout",
            "for (;;) { try { while (true) {} } catch (e) { log('caught', e) } }",
            Feedback(&["Execution timed out after 6000ms"]),
        ),
        sandbox(
            "swallowing a tool call's timeout",
            "try { demoSleep({ms: 60000}) } catch (e) { }\nwhile (true) { try { demoEcho({}) } catch (e) { } }",
            Feedback(&["Execution timed out after 6000ms"]),
        ),
        sandbox(
            "memory bomb",
            "const hoard = [];\nwhile (true) hoard.push(new Array(100000).fill('x'));",
            Feedback(&["Memory limit of 64 MiB exceeded", "line 2"]),
        ),
        sandbox(
            "memory bomb caught",
            "function bomb() { const h = []; while (true) h.push('x'.repeat(1e5) + Math.random()); }\ntry { bomb() } catch (e) { }\n'survived'",
            Feedback(&["Memory limit of 64 MiB exceeded"]),
        ),
        sandbox(
            "endless recursion",
            "function down(n) { return down(n + 1) + 1; }\ndown(0)",
            Feedback(&["call stack", "line 1"]),
        ),
        sandbox(
            "endless recursion caught",
            "function down(n) { return down(n + 1) + 1; }\ntry { down(0) } catch (e) { }\n'survived'",
            Feedback(&["call stack"]),
        ),
        sandbox(
            "catastrophic regex",
            "/^(a+)+$/.test('a'.repeat(40) + 'b')",
            Feedback(&["Execution timed out after 6000ms"]),
        ),
        sandbox(
            "100 MB output()",
            "output('x'.repeat(100 * 1024 * 1024))",
            Feedback(&["Memory limit of 64 MiB exceeded"]),
        ),
        sandbox(
            "output() in a loop",
            "for (let i = 0; i < 100; i++) output('y'.repeat(1024 * 1024));",
            Feedback(&["Output limit of 1048576 bytes exceeded", "line 1"]),
        ),
        sandbox(
            "100,000 tool calls",
            "for (let i = 0; i < 100000; i++) { try { demoEcho({i}) } catch (e) { } }",
            Feedback(&["Tool call limit of 200 reached"]),
        ),
        sandbox(
            "100,000 tool calls in parallel",
            "parallel(Array.from({length: 100000}, (_, i) => ({tool: 'demo.echo', input: {i}})))",
            Feedback(&["Tool call limit of 200 reached"]),
        ),
        sandbox(
            "tampered JSON and Function prototypes",
            "JSON.stringify = () => 'hijacked'; JSON.parse = () => ({evil: true});\nFunction.prototype.call = null; Function.prototype.apply = null; Object.prototype.then = 1;\nconst echoed = demoEcho({n: 1});\noutput({echo: echoed.echo.n});\ndone()",
            Finished(|prompt, _| {
                let texts = texts(prompt);
                ensure(texts == [r#"{"echo":1}"#], format!("texts {texts:?}"))
            }),
        ),
        sandbox(
            "tampered Promise and Array",
            "Promise = undefined; Array.prototype.map = null; Array.prototype.push = null; Object.freeze(Object.prototype);\nconst r = parallel([{tool: 'demo.echo', input: {n: 2}}]);\ncomplete({response: 'slot ' + r[0].echo.n})",
            Finished(|prompt, _| {
                let texts = texts(prompt);
                ensure(texts == ["slot 2"], format!("texts {texts:?}"))
            }),
        ),
        sandbox(
            "host functions replaced and redefined",
            "Object.defineProperty(globalThis, 'output', {get() { throw new Error('trap') }});\noutput.x = 1",
            Feedback(&["Error: trap", "line 1, column"]),
        ),
        sandbox(
            "replacing done() means the round did not finish",
            "done = () => {}; output = () => {}; done(); output('unseen'); 'replaced'",
            Feedback(&["Round 1 result:\n\"replaced\""]),
        ),
        sandbox(
            "a host function's own properties cannot break it",
            "complete.call = complete.apply = complete.bind = null; complete.length;\ndelete complete.name; complete.toString = null;\ncomplete({response: 'still completes'})",
            Finished(|prompt, _| {
                let texts = texts(prompt);
                ensure(texts == ["still completes"], format!("texts {texts:?}"))
            }),
        ),
        sandbox(
            "Function('return this')() is the sandbox global",
            "const g = Function('return this')();\n[g === globalThis, typeof g.process, typeof g.require, typeof g.std, typeof g.os, typeof g.output]",
            Feedback(&[
                "\"undefined\",\n  \"undefined\",\n  \"undefined\",\n  \"undefined\",\n  \"function\"",
            ]),
        ),
        sandbox(
            "the constructor chain leads to the same global",
            "(() => {}).constructor.constructor('return this')() === globalThis",
            Feedback(&["Round 1 result:\ntrue"]),
        ),
        sandbox(
            "a large return value is cut for the model",
            "'z'.repeat(512 * 1024)",
            Feedback(&["Round 1 result:\n\"zzzz", "(truncated)"]),
        ),
        sandbox(
            "a return value too big to record",
            "'w'.repeat(20 * 1024 * 1024)",
            Feedback(&[
                "The result is too large: 20971522 bytes of JSON, the limit is 1048576 bytes",
            ]),
        ),
        sandbox(
            "a huge nested return value",
            "Array.from({length: 300000}, (_, i) => ({i}))",
            Feedback(&["The result is too large", "the limit is 1048576 bytes"]),
        ),
        sandbox(
            "a cyclic return value",
            "const a = {name: 'a'};\na.self = a;\na",
            Feedback(&["The result is not JSON-serialisable", "circular"]),
        ),
        sandbox(
            "a BigInt return value",
            "10n ** 30n",
            Feedback(&["The result is not JSON-serialisable", "BigInt"]),
        ),
        sandbox(
            "a BigInt tool input",
            "demoEcho({n: 1n})",
            Feedback(&["BigInt"]),
        ),
        sandbox(
            "a NUL byte in the code",
            "let a = 1;\nlet b = '\0';",
            Feedback(&["NUL", "line 2, column 10"]),
        ),
        sandbox(
            "NUL bytes round-trip through output() and tools",
            "const echoed = demoEcho({s: 'a\\u0000b'});\noutput(echoed.echo.s);\nconst id = storeArtifact('c\\u0000d');\noutput(getArtifact(id));\ndone()",
            Finished(|prompt, events| {
                let texts = texts(prompt);
                let streamed = streamed_text(events);
                ensure(
                    texts == ["a\0b", "c\0d"] && streamed == "a\0bc\0d",
                    format!("texts {texts:?}, streamed {streamed:?}"),
                )
            }),
        ),
        sandbox(
            "a prose reply",
            "I would store the note first and then answer the user.",
            Feedback(&["SyntaxError", "line 1"]),
        ),
        sandbox("an empty reply", "", Feedback(&["Round 1 result:\nnull"])),
        sandbox(
            "markdown with several code blocks",
            "First store it:\n```js\nstore('k', 1);\n```\nThen finish:\n```javascript\ncomplete({response: 'both blocks ran: ' + recall('k')})\n```\nDone.",
            Finished(|prompt, _| {
                let texts = texts(prompt);
                ensure(texts == ["both blocks ran: 1"], format!("texts {texts:?}"))
            }),
        ),
        sandbox(
            "a promise that never settles",
            "await new Promise(() => {})",
            Feedback(&["never settle"]),
        ),
        sandbox(
            "a proxy whose traps throw",
            "new Proxy({}, {ownKeys() { throw new Error('no keys for you') }})",
            Feedback(&["The result is not JSON-serialisable", "no keys for you"]),
        ),
    ]
}

#[tokio::test]
async fn hostile_code_ends_with_the_exact_error_the_model_sees_and_the_executor_stays_healthy() {
    let started = Instant::now();
    // `HOSTILE_CASE=regex` runs only the cases whose name contains it.
    let only = std::env::var("HOSTILE_CASE").unwrap_or_default();
    let mut cases = sandbox_cases();
    cases.retain(|case| case.name.contains(&only));
    let inputs: Vec<String> = (0..cases.len())
        .map(|i| format!("hostile-sandbox-case-{i:02}#"))
        .collect();
    let mut rules: Vec<Rule> = cases
        .iter()
        .zip(&inputs)
        .map(|(case, input)| first_round(input, &case.code))
        .collect();
    rules.push(Rule::new(
        Match::AssistantTurns(1),
        Reply::Text("done()".into()),
    ));
    rules.push(first_round(
        "be quick",
        "complete({response: 'quick answer'})",
    ));
    let options = StackOptions {
        // Room for 200 sequential tool calls beside 31 runaway cases on a loaded machine
        // (`make test` runs 4 tests at once on 2 cores).
        code_run_timeout_ms: 6_000,
        ..StackOptions::default()
    };
    let stack = Stack::start_with(rules, options).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    let mut alice = gateway_for(&stack, "alice").await;

    // Every case at once: limits are per run, so a runaway case must not slow the others down
    // beyond their own budget.
    let mut prompts = Vec::new();
    for input in &inputs {
        let request = CreatePromptRequest {
            mode: "code".into(),
            ..create_request(input)
        };
        prompts.push(alice.create_prompt(request).await.unwrap().into_inner());
    }
    let mut failures = Vec::new();
    for ((case, input), prompt) in cases.iter().zip(&inputs).zip(&prompts) {
        let events = read_all(&mut alice, &prompt.id, 0).await;
        let stored = get(&mut alice, &prompt.id).await.unwrap();
        let verdict = if let Err(status) = &events {
            Err(format!("the stream failed: {status:?}"))
        } else if stored.state != PromptState::Completed as i32 {
            Err(format!(
                "ended in state {} with {:?}",
                stored.state, stored.error
            ))
        } else {
            match &case.sees {
                Sees::Feedback(fragments) => {
                    let feedback = feedback_after_round_one(&stack, input);
                    match fragments
                        .iter()
                        .find(|fragment| !feedback.contains(**fragment))
                    {
                        None => Ok(()),
                        Some(missing) => Err(format!(
                            "feedback lacks {missing:?}: {:?}",
                            truncated(&feedback)
                        )),
                    }
                }
                Sees::Finished(check) => match stack
                    .model
                    .requests()
                    .iter()
                    .filter(|request| mentions(request, input))
                    .count()
                {
                    1 => check(&stored, events.as_deref().unwrap_or_default()),
                    n => Err(format!(
                        "{n} model requests: the first round did not finish the prompt"
                    )),
                },
            }
        };
        eprintln!(
            "hostile sandbox case {:?}: {:?}",
            case.name,
            verdict.is_ok()
        );
        if let Err(wrong) = verdict {
            eprintln!("  {wrong}");
            failures.push(format!("{}: {wrong}", case.name));
        }
    }

    // Afterwards the executor still runs code.
    assert_eq!(
        serving(channel_to(format!("http://{}", stack.code_address)).await).await,
        ServingStatus::Serving
    );
    let quick = client
        .create_prompt(agentic_client::NewPrompt::new("be quick").mode("code"))
        .await
        .unwrap();
    let events = collect(&client, &quick.id, 0).await;
    assert_eq!(streamed_text(&events), "quick answer");
    eprintln!("{} sandbox cases in {:?}", cases.len(), started.elapsed());
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

fn mentions(request: &agentic_testkit::model::RecordedRequest, input: &str) -> bool {
    request
        .messages()
        .iter()
        .any(|message| message.to_string().contains(input))
}

/// What the model was told after the first round of the prompt with `input`.
fn feedback_after_round_one(stack: &Stack, input: &str) -> String {
    let requests = stack.model.requests();
    let second = requests.iter().find(|request| {
        mentions(request, input)
            && request
                .messages()
                .iter()
                .filter(|message| message["role"] == "assistant")
                .count()
                == 1
    });
    match second {
        Some(request) => request.last_user_message().unwrap_or_default(),
        None => "(no second request)".to_owned(),
    }
}
