//! Auth and isolation: bearer tokens name users, internal services want the internal token,
//! and nobody reaches what is not theirs.

use agentic_proto::v1::prompt_gateway_client::PromptGatewayClient;
use agentic_proto::v1::tool_host_client::ToolHostClient;
use agentic_proto::v1::{
    ApproveToolCallRequest, CancelPromptRequest, CreateConversationRequest, CreatePromptRequest,
    GetConversationRequest, GetFileRequest, GetPromptRequest, ListConversationFilesRequest,
    ListConversationsRequest, ListPromptsRequest, PrepareRequest, PromptState,
    RejectToolCallRequest, StreamPromptRequest, prompt_event,
};
use agentic_testkit::model::Match;
use agentic_testkit::{Stack, StackOptions};
use serde_json::json;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request, Status};

use crate::support::*;

/// Adds fixed metadata to every request.
pub(crate) type AddHeaders = Box<dyn FnMut(Request<()>) -> Result<Request<()>, Status> + Send>;

pub(crate) type Authed = PromptGatewayClient<InterceptedService<Channel, AddHeaders>>;

/// A gateway client that sends the given metadata with every call.
pub(crate) async fn client_with(address: String, headers: &[(&'static str, &str)]) -> Authed {
    let channel = Endpoint::from_shared(address)
        .unwrap()
        .connect()
        .await
        .unwrap();
    let headers: Vec<(&'static str, tonic::metadata::AsciiMetadataValue)> = headers
        .iter()
        .map(|(key, value)| (*key, value.parse().unwrap()))
        .collect();
    let interceptor: AddHeaders = Box::new(move |mut request| {
        for (key, value) in &headers {
            request.metadata_mut().insert(*key, value.clone());
        }
        Ok(request)
    });
    PromptGatewayClient::with_interceptor(channel, interceptor)
}

fn hello() -> CreatePromptRequest {
    CreatePromptRequest {
        input: "hello".into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn with_tokens_configured_only_a_valid_bearer_token_names_the_user() {
    let options = StackOptions {
        auth_tokens: vec!["alice-secret=alice".into(), "bob-secret=bob".into()],
        ..Default::default()
    };
    let stack = Stack::start_with(vec![text(Match::Any, "hi")], options)
        .await
        .unwrap();
    let url = stack.gateway_url();

    let mut anonymous = client_with(url.clone(), &[]).await;
    assert_eq!(
        anonymous.create_prompt(hello()).await.unwrap_err().code(),
        Code::Unauthenticated
    );
    let mut pretender = client_with(url.clone(), &[("x-user-id", "alice")]).await;
    assert_eq!(
        pretender.create_prompt(hello()).await.unwrap_err().code(),
        Code::Unauthenticated,
        "x-user-id is ignored"
    );
    let mut wrong = client_with(url.clone(), &[("authorization", "Bearer alice-secreT")]).await;
    assert_eq!(
        wrong.create_prompt(hello()).await.unwrap_err().code(),
        Code::Unauthenticated
    );

    let mut alice = client_with(url.clone(), &[("authorization", "Bearer alice-secret")]).await;
    let prompt = alice.create_prompt(hello()).await.unwrap().into_inner();
    assert_eq!(prompt.user_id, "alice");
    let mut bob = client_with(
        url,
        &[
            ("authorization", "Bearer bob-secret"),
            ("x-user-id", "alice"),
        ],
    )
    .await;
    let foreign = bob
        .get_prompt(GetPromptRequest {
            prompt_id: prompt.id.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(
        foreign.code(),
        Code::NotFound,
        "bob cannot become alice by naming her"
    );
}

#[tokio::test]
async fn with_an_internal_token_the_stack_works_and_direct_calls_without_it_are_refused() {
    let options = StackOptions {
        internal_token: Some("internal-secret".into()),
        ..Default::default()
    };
    let stack = Stack::start_with(
        vec![
            calls(
                Match::NoToolResults,
                vec![call(
                    "interpreter__run-code",
                    json!({"code": "demoEcho({x: 1}).echo.x + 1"}),
                )],
            ),
            text(Match::HasToolResults, "{last_tool_result}"),
        ],
        options,
    )
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client
        .create_prompt(agentic_client::NewPrompt::new("run code"))
        .await
        .unwrap();
    let events = collect(&client, &prompt.id, 0).await;
    assert_eq!(
        kind(events.last().unwrap()),
        "completed",
        "gateway → executor → tool-host → code runner all authenticated"
    );
    assert!(
        streamed_text(&events).contains("\"result\":2"),
        "{}",
        streamed_text(&events)
    );

    let channel = Endpoint::from_shared(format!("http://{}", stack.tool_host_address))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let prepare = || PrepareRequest {
        user_id: "alice".into(),
        ..Default::default()
    };
    let refused = ToolHostClient::new(channel.clone())
        .prepare(prepare())
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated);
    let mut request = Request::new(prepare());
    request.metadata_mut().insert(
        agentic_rpc::INTERNAL_TOKEN_HEADER,
        "internal-secret".parse().unwrap(),
    );
    assert!(
        ToolHostClient::new(channel.clone())
            .prepare(request)
            .await
            .is_ok()
    );
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    let check = tonic_health::pb::HealthCheckRequest {
        service: String::new(),
    };
    assert!(
        health.check(check).await.is_ok(),
        "health stays open for probes"
    );

    let executor = Endpoint::from_shared(format!("http://{}", stack.code_address))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let describe = agentic_proto::v1::executor_client::ExecutorClient::new(executor)
        .describe(agentic_proto::v1::DescribeRequest {})
        .await
        .unwrap_err();
    assert_eq!(describe.code(), Code::Unauthenticated);
}

#[tokio::test]
async fn every_gateway_call_on_another_users_things_is_not_found_and_changes_nothing() {
    let stack = Stack::start(vec![
        calls(
            Match::NoToolResults,
            vec![
                call("demo__report", json!({"title": "Secret"})),
                call("demo__dangerous", json!({"action": "x"})),
            ],
        ),
        text(Match::Any, "done"),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let mut alice = gateway_for(&stack, "alice").await;
    let mut bob = gateway_for(&stack, "bob").await;
    let conversation = alice
        .create_conversation(CreateConversationRequest::default())
        .await
        .unwrap()
        .into_inner();
    let prompt = create_in(
        &mut alice,
        &conversation.id,
        agentic_client::NewPrompt::new("report and ask"),
    )
    .await;
    let events = collect(&client, &prompt.id, 0).await;
    let call_id = events
        .iter()
        .find_map(|event| match &event.kind {
            Some(prompt_event::Kind::ApprovalRequested(request)) => {
                Some(request.tool_call_id.clone())
            }
            _ => None,
        })
        .unwrap();
    let files = alice
        .list_conversation_files(ListConversationFilesRequest {
            conversation_id: conversation.id.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .files;
    let file_id = files[0].file.clone().unwrap().id;
    let before = alice
        .get_prompt(GetPromptRequest {
            prompt_id: prompt.id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(before.state, PromptState::WaitingForApproval as i32);

    let id = || prompt.id.clone();
    let codes: Vec<(&str, Code)> = vec![
        (
            "GetPrompt",
            bob.get_prompt(GetPromptRequest { prompt_id: id() })
                .await
                .unwrap_err()
                .code(),
        ),
        (
            "StreamPrompt",
            bob.stream_prompt(StreamPromptRequest {
                prompt_id: id(),
                after_sequence: 0,
            })
            .await
            .unwrap_err()
            .code(),
        ),
        (
            "CancelPrompt",
            bob.cancel_prompt(CancelPromptRequest {
                prompt_id: id(),
                reason: String::new(),
            })
            .await
            .unwrap_err()
            .code(),
        ),
        (
            "ApproveToolCall",
            bob.approve_tool_call(ApproveToolCallRequest {
                prompt_id: id(),
                tool_call_id: call_id.clone(),
                edited_input: None,
            })
            .await
            .unwrap_err()
            .code(),
        ),
        (
            "RejectToolCall",
            bob.reject_tool_call(RejectToolCallRequest {
                prompt_id: id(),
                tool_call_id: call_id.clone(),
                reason: String::new(),
            })
            .await
            .unwrap_err()
            .code(),
        ),
        (
            "GetConversation",
            bob.get_conversation(GetConversationRequest {
                conversation_id: conversation.id.clone(),
            })
            .await
            .unwrap_err()
            .code(),
        ),
        (
            "ListPrompts",
            bob.list_prompts(ListPromptsRequest {
                conversation_id: conversation.id.clone(),
                limit: 0,
                page_token: String::new(),
            })
            .await
            .unwrap_err()
            .code(),
        ),
        (
            "ListConversationFiles",
            bob.list_conversation_files(ListConversationFilesRequest {
                conversation_id: conversation.id.clone(),
            })
            .await
            .unwrap_err()
            .code(),
        ),
        (
            "GetFile",
            bob.get_file(GetFileRequest {
                file_id: file_id.clone(),
            })
            .await
            .unwrap_err()
            .code(),
        ),
        (
            "CreatePrompt",
            bob.create_prompt(CreatePromptRequest {
                input: "x".into(),
                conversation_id: conversation.id.clone(),
                ..Default::default()
            })
            .await
            .unwrap_err()
            .code(),
        ),
    ];
    for (call, code) in codes {
        assert_eq!(code, Code::NotFound, "{call}");
    }
    let bobs_prompts = bob
        .list_prompts(ListPromptsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .prompts;
    assert!(bobs_prompts.is_empty());
    let bobs_conversations = bob
        .list_conversations(ListConversationsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .conversations;
    assert!(bobs_conversations.is_empty());

    let after = alice
        .get_prompt(GetPromptRequest {
            prompt_id: prompt.id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(after, before, "nothing changed");
    assert!(alice.get_file(GetFileRequest { file_id }).await.is_ok());
}
