//! Conversations: prompts of any mode in one conversation see each other, and the files
//! they create are listed and fetched per conversation.

use agentic_client::NewPrompt;
use agentic_proto::v1::{
    CreateConversationRequest, GetConversationRequest, GetFileRequest,
    ListConversationFilesRequest, ListPromptsRequest,
};
use agentic_testkit::Stack;
use agentic_testkit::model::{Match, Reply, Rule};
use serde_json::json;
use tonic::Code;

use crate::support::*;

#[tokio::test]
async fn classic_code_classic_in_one_conversation_each_see_the_earlier_prompts_and_share_files() {
    let stack = Stack::start(vec![
        // 1: classic writes a report, then answers.
        calls(
            Match::All(vec![
                Match::LastUserContains("first question".into()),
                Match::NoToolResults,
            ]),
            vec![call(
                "demo__report",
                json!({"title": "First Report", "lines": ["alpha"]}),
            )],
        ),
        text(
            Match::All(vec![
                Match::AnyMessageContains("first question".into()),
                Match::HasToolResults,
            ]),
            "first answer",
        ),
        // 2: code mode writes a report too.
        Rule::new(
            Match::LastUserContains("second question".into()),
            Reply::Text(
                "demoReport({title: 'Second Report'}); writeFile('notes.txt', 'hello'); complete({response: 'second answer'})"
                    .into(),
            ),
        ),
        // 3: classic again.
        text(
            Match::LastUserContains("third question".into()),
            "third answer",
        ),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let mut gateway = gateway_for(&stack, "alice").await;
    let conversation = gateway
        .create_conversation(CreateConversationRequest {
            title: "mixed".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();

    let mut ids = Vec::new();
    for (input, mode) in [
        ("first question", None),
        ("second question", Some("code")),
        ("third question", None),
    ] {
        let mut request = NewPrompt::new(input);
        request.mode = mode.map(str::to_owned);
        let prompt = create_in(&mut gateway, &conversation.id, request).await;
        let events = collect(&client, &prompt.id, 0).await;
        assert_eq!(kind(events.last().unwrap()), "completed", "{input}");
        ids.push(prompt.id);
    }

    let requests = stack.model.requests();
    let code_request = requests
        .iter()
        .find(|request| request.last_user_message().as_deref() == Some("second question"))
        .unwrap();
    let seen_by_code = code_request.body.to_string();
    assert!(
        seen_by_code.contains("first question") && seen_by_code.contains("first answer"),
        "{seen_by_code}"
    );
    let third_request = requests.last().unwrap().body.to_string();
    for earlier in [
        "first question",
        "first answer",
        "second question",
        "second answer",
    ] {
        assert!(
            third_request.contains(earlier),
            "the third prompt sees {earlier:?}"
        );
    }
    assert!(
        third_request.contains("demoReport"),
        "classic reads the code prompt's code"
    );

    let modes: Vec<String> = gateway
        .list_prompts(ListPromptsRequest {
            conversation_id: conversation.id.clone(),
            limit: 0,
            page_token: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .prompts
        .into_iter()
        .map(|prompt| prompt.mode)
        .collect();
    assert_eq!(
        modes,
        ["classic", "code", "classic"]
            .iter()
            .rev()
            .map(|mode| mode.to_string())
            .collect::<Vec<_>>()
    );

    let files = gateway
        .list_conversation_files(ListConversationFilesRequest {
            conversation_id: conversation.id.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .files;
    let names: Vec<(String, String)> = files
        .iter()
        .map(|file| (file.prompt_id.clone(), file.file.clone().unwrap().filename))
        .collect();
    assert_eq!(
        names,
        [
            (ids[0].clone(), "first-report.md".to_owned()),
            (ids[1].clone(), "second-report.md".to_owned()),
            (ids[1].clone(), "notes.txt".to_owned())
        ]
    );
    let first = files[0].file.clone().unwrap();
    let content = gateway
        .get_file(GetFileRequest {
            file_id: first.id.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .content;
    assert_eq!(
        String::from_utf8(content).unwrap(),
        "# First Report\n\n- alpha\n"
    );
    assert_eq!(first.size, "# First Report\n\n- alpha\n".len() as u64);

    let mut bob = gateway_for(&stack, "bob").await;
    let foreign = bob
        .get_file(GetFileRequest { file_id: first.id })
        .await
        .unwrap_err();
    assert_eq!(foreign.code(), Code::NotFound);
    let foreign = bob
        .list_conversation_files(ListConversationFilesRequest {
            conversation_id: conversation.id.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(foreign.code(), Code::NotFound);
}

#[tokio::test]
async fn a_conversations_default_mode_applies_unless_a_prompt_names_another() {
    let stack = Stack::start(vec![
        Rule::new(
            Match::AnyMessageContains("You act by writing JavaScript".into()),
            Reply::Text("complete({response: 'from code'})".into()),
        ),
        text(Match::Any, "from classic"),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let mut gateway = gateway_for(&stack, "alice").await;
    let conversation = gateway
        .create_conversation(CreateConversationRequest {
            default_mode: "code".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let fetched = gateway
        .get_conversation(GetConversationRequest {
            conversation_id: conversation.id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(fetched.default_mode, "code");

    let by_default = create_in(&mut gateway, &conversation.id, NewPrompt::new("hello")).await;
    assert_eq!(by_default.mode, "code");
    assert_eq!(
        streamed_text(&collect(&client, &by_default.id, 0).await),
        "from code"
    );
    let overridden = create_in(
        &mut gateway,
        &conversation.id,
        NewPrompt::new("hello again").mode("classic"),
    )
    .await;
    assert_eq!(overridden.mode, "classic");
    assert_eq!(
        streamed_text(&collect(&client, &overridden.id, 0).await),
        "from classic"
    );
}

#[tokio::test]
async fn unknown_and_foreign_conversations_are_not_found_and_unknown_default_modes_are_refused() {
    let stack = Stack::start(vec![]).await.unwrap();
    let mut alice = gateway_for(&stack, "alice").await;
    let mut bob = gateway_for(&stack, "bob").await;
    let conversation = alice
        .create_conversation(CreateConversationRequest::default())
        .await
        .unwrap()
        .into_inner();

    let foreign = bob
        .get_conversation(GetConversationRequest {
            conversation_id: conversation.id.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(foreign.code(), Code::NotFound);
    let request = agentic_proto::v1::CreatePromptRequest {
        input: "hi".into(),
        conversation_id: conversation.id.clone(),
        ..Default::default()
    };
    assert_eq!(
        bob.create_prompt(request).await.unwrap_err().code(),
        Code::NotFound
    );
    let missing = alice
        .get_conversation(GetConversationRequest {
            conversation_id: "nope".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(missing.code(), Code::NotFound);
    let bad_mode = alice
        .create_conversation(CreateConversationRequest {
            default_mode: "x".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(bad_mode.code(), Code::InvalidArgument);
    assert_eq!(bad_mode.message(), r#"Unknown execution mode: "x""#);
}
