//! The edges of files in: HTTP multipart and the CLI, the upload limit (a 100 MiB file over
//! gRPC and HTTP), the count and inline bounds, another user's files, and deletion; each
//! limit hit while the gateway goes on serving everyone else.

use agentic_client::NewPrompt;
use agentic_proto::v1::{CreatePromptRequest, FileSource, InlineAttachment};
use agentic_testkit::Stack;
use agentic_testkit::model::Match;
use serde_json::Value;
use tonic::Code;

use super::{PNG, attached_names, conversation, upload};
use crate::support::*;

/// 100 MiB: far over the gateway's upload limit (8 MiB by default).
const HUGE: usize = 100 * 1024 * 1024;

#[tokio::test]
async fn a_file_uploaded_over_http_as_multipart_is_attached_over_http_and_downloads_whole() {
    let stack = Stack::start(vec![text(Match::Any, "Seen.")]).await.unwrap();
    let http = reqwest::Client::new();
    let base = stack.gateway_http_url();
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(b"a,b\n1,2\n".to_vec())
            .file_name("table.csv")
            .mime_str("text/csv")
            .unwrap(),
    );
    let uploaded: Value = http
        .post(format!("{base}/v1/files"))
        .header("x-user-id", "alice")
        .multipart(form)
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(uploaded["filename"], "table.csv");
    assert_eq!(uploaded["mimeType"], "text/csv");
    assert_eq!(uploaded["size"], "8");
    assert_eq!(uploaded["source"], "FILE_SOURCE_USER");
    let id = uploaded["id"].as_str().unwrap();

    let created: Value = http
        .post(format!("{base}/v1/prompts"))
        .header("x-user-id", "alice")
        .json(&serde_json::json!({"input": "Sum the table", "attachments": [id]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let attachment = &created["attachments"][0];
    assert_eq!(attachment["filename"], "table.csv");
    assert_eq!(attachment["artifactId"], id);
    let client = stack.client("alice").await.unwrap();
    ends_completed(&client, created["id"].as_str().unwrap()).await;
    let content = http
        .get(format!(
            "{base}/v1/files/{}/content",
            attachment["id"].as_str().unwrap()
        ))
        .header("x-user-id", "alice")
        .send()
        .await
        .unwrap();
    assert_eq!(content.status(), 200);
    assert_eq!(content.bytes().await.unwrap().as_ref(), b"a,b\n1,2\n");
}

#[tokio::test]
async fn a_hundred_mib_upload_is_refused_over_grpc_and_http_while_others_are_served() {
    let stack = Stack::start(vec![text(Match::Any, "Fine.")]).await.unwrap();
    let alice = stack.client("alice").await.unwrap();
    let refused = alice
        .upload_file("huge.bin", None, vec![7; HUGE], None)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some(Code::InvalidArgument), "{refused}");
    assert!(
        refused.to_string().contains("larger than 8388608 bytes"),
        "{refused}"
    );

    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(vec![7; HUGE]).file_name("huge.bin"),
    );
    let answer = reqwest::Client::new()
        .post(format!("{}/v1/files", stack.gateway_http_url()))
        .header("x-user-id", "alice")
        .multipart(form)
        .send()
        .await;
    // The gateway answers 413 as soon as the body passes the limit; a client still sending
    // may see the connection close instead.
    if let Ok(answer) = answer {
        assert_eq!(answer.status(), 413);
    }

    // Nothing of it was kept, and another user is served as before.
    assert_eq!(artifacts_of(&stack, "alice").await, 0);
    let bob = stack.client("bob").await.unwrap();
    let file = bob
        .upload_file("ok.txt", None, b"fine".to_vec(), None)
        .await
        .unwrap();
    completed(&bob, NewPrompt::new("hello").attach(&file.id)).await;
}

#[tokio::test]
async fn attachments_are_bounded_in_count_and_inline_bytes_and_must_be_the_callers() {
    let stack = Stack::start(vec![text(Match::Any, "Ok.")]).await.unwrap();
    let alice = stack.client("alice").await.unwrap();
    let bob = stack.client("bob").await.unwrap();
    let conversation = conversation(&alice).await;
    let hers = upload(&alice, "secret.txt", b"alice only", &conversation).await;

    // Bob cannot attach Alice's upload, nor her conversation's file, by any id.
    let prompt = completed(&alice, NewPrompt::new("keep it").attach(&hers.id)).await;
    for id in [hers.id.as_str(), prompt.attachments[0].id.as_str()] {
        let refused = bob
            .create_prompt(NewPrompt::new("steal").attach(id))
            .await
            .unwrap_err();
        assert_eq!(refused.code(), Some(Code::NotFound), "{refused}");
    }
    assert!(bob.get_file(&hers.id).await.is_err());

    let mut seventeen = NewPrompt::new("too many");
    for _ in 0..17 {
        seventeen = seventeen.attach(&hers.id);
    }
    let refused = alice.create_prompt(seventeen).await.unwrap_err();
    assert_eq!(refused.code(), Some(Code::InvalidArgument));
    assert!(
        refused.to_string().contains("at most 16 attachments"),
        "{refused}"
    );

    // Inline attachments: small ones are stored as the caller's; more than 1 MiB is refused.
    let mut gateway = gateway_for(&stack, "alice").await;
    let inline = |bytes: Vec<u8>| InlineAttachment {
        filename: "pixel.png".into(),
        mime_type: String::new(),
        content: bytes,
    };
    let request = |files: Vec<InlineAttachment>| CreatePromptRequest {
        input: "look".into(),
        inline_attachments: files,
        ..CreatePromptRequest::default()
    };
    let refused = gateway
        .create_prompt(request(vec![inline(vec![0; 1024 * 1024 + 1])]))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    let created = gateway
        .create_prompt(request(vec![inline(PNG.to_vec())]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(attached_names(&created), ["pixel.png"]);
    assert_eq!(created.attachments[0].mime_type, "image/png");
    let ended = ends_completed(&alice, &created.id).await;
    assert_eq!(ended.attachments, created.attachments);
}

#[tokio::test]
async fn an_upload_past_the_storage_quota_is_refused_and_deleting_an_upload_frees_it() {
    let options = agentic_testkit::StackOptions {
        tool_host_storage: tool_host::StorageLimits {
            user_quota_bytes: 64 * 1024,
            ..tool_host::StorageLimits::default()
        },
        ..agentic_testkit::StackOptions::default()
    };
    let stack = Stack::start_with(Vec::new(), options).await.unwrap();
    let alice = stack.client("alice").await.unwrap();
    let first = alice
        .upload_file("a.bin", None, vec![1; 48 * 1024], None)
        .await
        .unwrap();
    let refused = alice
        .upload_file("b.bin", None, vec![2; 48 * 1024], None)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some(Code::ResourceExhausted), "{refused}");
    // Bob's share is his own.
    let bob = stack.client("bob").await.unwrap();
    bob.upload_file("b.bin", None, vec![2; 48 * 1024], None)
        .await
        .unwrap();

    alice.delete_file(&first.id).await.unwrap();
    assert!(alice.get_file(&first.id).await.is_err());
    let again = alice
        .upload_file(
            "b.bin",
            Some("application/x-thing"),
            vec![2; 48 * 1024],
            None,
        )
        .await
        .unwrap();
    assert_eq!(again.source(), FileSource::User);
    assert_eq!(again.mime_type, "application/x-thing");
}

#[tokio::test]
async fn the_cli_attaches_files_to_a_prompt_and_refuses_a_missing_one_before_creating_anything() {
    let stack = Stack::start(vec![text(Match::Any, "Read it.")])
        .await
        .unwrap();
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("todo.md");
    std::fs::write(&path, "- ship files in\n").unwrap();
    let path = path.to_str().unwrap();
    let url = stack.gateway_url();
    let ran = crate::cli::agentic_with(
        &[
            "--server",
            &url,
            "--user",
            "alice",
            "prompt",
            "--attach",
            path,
            "Read my todo",
        ],
        "",
    )
    .await;
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let requests = stack.model.requests();
    let shown = requests.last().unwrap().body["messages"].to_string();
    assert!(
        shown.contains("todo.md") && shown.contains("- ship files in"),
        "{shown}"
    );

    let alice = stack.client("alice").await.unwrap();
    let before = alice.list_conversations(100).await.unwrap().len();
    let ran = crate::cli::agentic_with(
        &[
            "--server",
            &url,
            "--user",
            "alice",
            "prompt",
            "--attach",
            "/no/such/file",
            "x",
        ],
        "",
    )
    .await;
    assert_ne!(ran.code, 0);
    assert!(
        ran.stderr.contains("cannot attach /no/such/file"),
        "{}",
        ran.stderr
    );
    assert_eq!(alice.list_conversations(100).await.unwrap().len(), before);
}

#[tokio::test]
async fn a_user_with_every_upload_slot_in_flight_is_refused_one_more_while_another_user_uploads() {
    use agentic_proto::v1::upload_file_request::Kind;
    use agentic_proto::v1::{UploadFileHeader, UploadFileRequest};
    let stack = Stack::start(Vec::new()).await.unwrap();
    let header = || UploadFileRequest {
        kind: Some(Kind::Header(UploadFileHeader {
            filename: "slow.txt".into(),
            ..UploadFileHeader::default()
        })),
    };
    let chunk = || UploadFileRequest {
        kind: Some(Kind::Chunk(b"some bytes".to_vec())),
    };
    // Alice's uploads that never finish sending: each holds one of her slots.
    let hold = || async {
        let (sender, receiver) = tokio::sync::mpsc::channel(4);
        sender.send(header()).await.unwrap();
        let mut gateway = gateway_for(&stack, "alice").await;
        let call = tokio::spawn(async move {
            gateway
                .upload_file(tokio_stream::wrappers::ReceiverStream::new(receiver))
                .await
        });
        (sender, call)
    };
    let mut held = Vec::new();
    for _ in 0..prompt_gateway::MAX_UPLOADS_PER_USER {
        held.push(hold().await);
    }
    let alice = stack.client("alice").await.unwrap();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let refused = loop {
        // One that arrived while the probe below held a slot was refused: it holds again.
        for slot in &mut held {
            if slot.1.is_finished() {
                *slot = hold().await;
            }
        }
        match alice
            .upload_file("one.txt", None, b"x".to_vec(), None)
            .await
        {
            Err(refused) => break refused,
            Ok(_) => assert!(tokio::time::Instant::now() < deadline, "never refused"),
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(refused.code(), Some(Code::ResourceExhausted), "{refused}");
    assert!(
        refused.to_string().contains("uploads in flight"),
        "{refused}"
    );

    // Bob's uploads are his own share.
    let bob = stack.client("bob").await.unwrap();
    bob.upload_file("b.txt", None, b"bob".to_vec(), None)
        .await
        .unwrap();

    // One of Alice's ends: its slot is hers again.
    let (sender, call) = held.pop().unwrap();
    sender.send(chunk()).await.unwrap();
    drop(sender);
    let stored = call.await.unwrap().unwrap().into_inner();
    assert_eq!(stored.size, 10);
    alice
        .upload_file("two.txt", None, b"y".to_vec(), None)
        .await
        .unwrap();
    drop(held);
}
