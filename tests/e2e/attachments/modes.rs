//! What each mode's model sees of a prompt's attachments, and that the files are the
//! conversation's afterwards.

use agentic_client::NewPrompt;
use agentic_proto::v1::FileSource;
use agentic_testkit::model::{HostedBlock, HostedMatch, HostedRule, Match};
use serde_json::Value;

use super::{PNG, attached_names, conversation, upload};
use crate::hosted::{hosted, hosted_stack};
use crate::support::*;

/// The last user message of the last request the OpenAI-compatible side received.
fn last_user_message(stack: &agentic_testkit::Stack) -> Value {
    let requests = stack.model.requests();
    let body = &requests.last().expect("the model was asked").body;
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|message| message["role"] == "user")
        .cloned()
        .unwrap()
}

#[tokio::test]
async fn a_classic_model_sees_an_attached_image_as_an_image_part_and_a_text_file_inline() {
    let stack = agentic_testkit::Stack::start(vec![text(Match::Any, "A pixel and a list.")])
        .await
        .unwrap();
    let client = stack.client("alice").await.unwrap();
    let conversation = conversation(&client).await;
    let image = upload(&client, "pixel.png", PNG, &conversation).await;
    let list = upload(&client, "list.txt", b"milk\neggs\n", &conversation).await;
    assert_eq!(image.source(), FileSource::User);
    assert_eq!(image.mime_type, "image/png");
    assert_eq!(list.mime_type, "text/plain");
    assert_eq!(
        image.id, image.artifact_id,
        "an upload's id is its artifact's"
    );

    let prompt = completed(
        &client,
        NewPrompt::new("What did I send?")
            .conversation(&conversation)
            .attach(&image.id)
            .attach(&list.id),
    )
    .await;
    assert_eq!(attached_names(&prompt), ["pixel.png", "list.txt"]);

    let user = last_user_message(&stack);
    let parts = user["content"].as_array().expect("content parts");
    assert_eq!(parts[0]["type"], "text");
    let text = parts[0]["text"].as_str().unwrap();
    assert!(text.starts_with("What did I send?"), "{text}");
    assert!(text.contains("\"list.txt\" (text/plain, 10 bytes") && text.contains("milk\neggs"));
    assert!(text.contains("\"pixel.png\" (image/png") && text.contains("shown as an image"));
    assert_eq!(parts[1]["type"], "image_url");
    let url = parts[1]["image_url"]["url"].as_str().unwrap();
    assert!(
        url.starts_with("data:image/png;base64,iVBORw0KGgo"),
        "{url}"
    );

    // Both are files of the conversation now, readable by the ids the prompt shows.
    let files = client.list_conversation_files(&conversation).await.unwrap();
    let listed: Vec<&str> = files
        .iter()
        .filter_map(|file| file.file.as_ref())
        .filter(|file| file.source() == FileSource::User)
        .map(|file| file.filename.as_str())
        .collect();
    assert_eq!(listed, ["pixel.png", "list.txt"]);
    let read = client.get_file(&prompt.attachments[1].id).await.unwrap();
    assert_eq!(read.content, b"milk\neggs\n");

    // The next prompt of the conversation names them in its history, without their bytes.
    completed(
        &client,
        NewPrompt::new("And now?").conversation(&conversation),
    )
    .await;
    let requests = stack.model.requests();
    let history = &requests.last().unwrap().body["messages"];
    let first = history
        .as_array()
        .unwrap()
        .iter()
        .find(|message| message["role"] == "user")
        .unwrap();
    let named = first["content"]
        .as_str()
        .expect("a past input is text only");
    assert!(
        named.contains("(The user attached: \"pixel.png\""),
        "{named}"
    );
}

#[tokio::test]
async fn code_reads_an_attachment_whole_with_read_file() {
    let stack = agentic_testkit::Stack::start(Vec::new()).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    let conversation = conversation(&client).await;
    let csv = upload(&client, "sales.csv", b"q,total\nQ1,12\n", &conversation).await;
    let image = upload(&client, "pixel.png", PNG, &conversation).await;
    let code = format!(
        "const csv = readFile({csv:?}); const png = readFile({png:?});\n\
         complete({{response: csv.data.split('\\n')[1] + ' ' + png.encoding + ' ' + png.size}});",
        csv = csv.artifact_id,
        png = image.artifact_id,
    );
    stack.model.add_rule(code_for("Total of Q1?", 1, &code));
    let prompt = completed(
        &client,
        NewPrompt::new("Total of Q1?")
            .mode("code")
            .conversation(&conversation)
            .attach(&csv.id)
            .attach(&image.id),
    )
    .await;
    let answer = prompt
        .output
        .iter()
        .filter_map(text_of)
        .next_back()
        .unwrap();
    assert_eq!(answer, format!("Q1,12 base64 {}", PNG.len()));
    // The model's first round was shown the files too.
    let first = &stack.model.requests()[0].body["messages"];
    let shown = first.to_string();
    assert!(
        shown.contains("sales.csv") && shown.contains("image_url"),
        "{shown}"
    );
}

#[tokio::test]
async fn hosted_mode_puts_attachments_in_the_container_and_deletes_the_providers_copies_after() {
    let stack = hosted_stack().await;
    stack.model.add_hosted_rule(HostedRule::turn(
        HostedMatch::Any,
        vec![
            HostedBlock::bash("ls", "notes.md\npixel.png\n"),
            HostedBlock::text("Both files are here."),
        ],
        "end_turn",
    ));
    let client = stack.client("alice").await.unwrap();
    let conversation = conversation(&client).await;
    let notes = upload(&client, "notes.md", b"# Notes\n", &conversation).await;
    let image = upload(&client, "pixel.png", PNG, &conversation).await;
    let prompt = completed(
        &client,
        hosted("List my files")
            .conversation(&conversation)
            .attach(&notes.id)
            .attach(&image.id),
    )
    .await;
    assert_eq!(attached_names(&prompt), ["notes.md", "pixel.png"]);

    let requests = stack.model.hosted_requests();
    let content = requests[0].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["content"]
        .clone();
    let blocks = content.as_array().expect("content blocks");
    let types: Vec<&str> = blocks.iter().map(|b| b["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        ["text", "image", "container_upload", "container_upload"]
    );
    assert!(blocks[0]["text"].as_str().unwrap().contains("# Notes"));
    assert_eq!(blocks[1]["source"]["media_type"], "image/png");
    let uploaded: Vec<String> = blocks[2..]
        .iter()
        .map(|block| block["file_id"].as_str().unwrap().to_owned())
        .collect();
    // The provider received both files, and they are gone from it once the run ended.
    let stored = stack.model.uploaded_files();
    for id in &uploaded {
        let file = stored.iter().find(|file| &file.id == id).expect("uploaded");
        assert!(
            file.deleted,
            "{id} is deleted from the Files API after the run"
        );
    }
    let mut names: Vec<&str> = stored.iter().map(|file| file.filename.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["notes.md", "pixel.png"]);
}

#[tokio::test]
async fn an_attached_json_artifact_reads_inline_as_its_data() {
    use agentic_proto::v1::StoreArtifactRequest;
    use agentic_proto::v1::artifact_store_client::ArtifactStoreClient;
    let stack = agentic_testkit::Stack::start(vec![text(Match::Any, "Three rows.")])
        .await
        .unwrap();
    let mut artifacts = ArtifactStoreClient::connect(format!("http://{}", stack.tool_host_address))
        .await
        .unwrap();
    let stored = artifacts
        .store_artifact(StoreArtifactRequest {
            user_id: "alice".into(),
            description: "rows".into(),
            data: Some(agentic_proto::json::to_proto(
                &serde_json::json!({"rows": [1, 2, 3]}),
            )),
            ..StoreArtifactRequest::default()
        })
        .await
        .unwrap()
        .into_inner();
    let client = stack.client("alice").await.unwrap();
    let prompt = completed(&client, NewPrompt::new("Count them").attach(&stored.id)).await;
    assert_eq!(prompt.attachments[0].mime_type, "application/json");
    let user = last_user_message(&stack);
    let text = user["content"].as_str().expect("no image: one text");
    assert!(text.contains(r#"{"rows":[1,2,3]}"#), "{text}");
}
