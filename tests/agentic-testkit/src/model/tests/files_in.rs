//! Files in, over real TCP: uploads through the Files API, `container_upload` and `image`
//! blocks of Messages requests, and `image_url` parts of Chat Completions requests.

use serde_json::{Value, json};

use super::super::http::{HttpAnswer, multipart, post, request, send};
use super::super::{
    HostedBlock, HostedImage, HostedMatch, HostedRule, ImagePart, Match, Reply, Rule, StandInModel,
};

const BETAS: &str = "code-execution-2025-08-25,files-api-2025-04-14";
/// The eight bytes of the PNG signature, base64-encoded.
const PNG_BASE64: &str = "iVBORw0KGgo=";

fn headers() -> Vec<(&'static str, &'static str)> {
    vec![
        ("x-api-key", "key"),
        ("anthropic-version", "2023-06-01"),
        ("anthropic-beta", BETAS),
    ]
}

/// A Messages request offering code execution whose one user message is `content`.
fn asking(content: Value) -> Value {
    json!({
        "model": "claude-test",
        "max_tokens": 100,
        "tools": [{"type": "code_execution_20250825", "name": "code_execution"}],
        "messages": [{"role": "user", "content": content}],
    })
}

async fn hosted_model() -> StandInModel {
    let model = StandInModel::start(Vec::new()).await.unwrap();
    model.add_hosted_rule(HostedRule::turn(
        HostedMatch::Any,
        vec![HostedBlock::text("ok")],
        "end_turn",
    ));
    model
}

async fn messages(model: &StandInModel, body: &Value) -> HttpAnswer {
    request(
        model.local_addr(),
        "POST",
        "/v1/messages",
        &headers(),
        Some(body),
    )
    .await
}

async fn upload(
    model: &StandInModel,
    part_name: &str,
    filename: &str,
    content: &[u8],
) -> HttpAnswer {
    let (content_type, payload) = multipart(part_name, filename, "text/csv", content);
    let mut upload_headers: Vec<(&str, &str)> = headers();
    upload_headers.push(("content-type", content_type.as_str()));
    send(
        model.local_addr(),
        "POST",
        "/v1/files",
        &upload_headers,
        &payload,
    )
    .await
}

#[tokio::test]
async fn an_uploaded_file_goes_into_the_container_with_container_upload() {
    let model = hosted_model().await;
    let uploaded = upload(&model, "file", "data.csv", b"a,b\n1,2\n").await;
    assert_eq!(uploaded.status, 200, "{}", uploaded.body);
    let file = uploaded.json();
    assert_eq!(file["type"], "file");
    assert_eq!(file["filename"], "data.csv");
    assert_eq!(file["mime_type"], "text/csv");
    assert_eq!(file["size_bytes"], 8);
    assert_eq!(file["downloadable"], false);
    assert!(file["created_at"].is_string());
    let file_id = file["id"].as_str().unwrap().to_owned();
    assert!(file_id.starts_with("file_"));
    assert!(
        model.hosted_file_ids().is_empty(),
        "uploads are not files code made"
    );

    let body = asking(json!([
        {"type": "text", "text": "sum the csv"},
        {"type": "container_upload", "file_id": file_id.as_str()},
    ]));
    let answer = messages(&model, &body).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let container = answer.json()["container"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        model.hosted_requests()[0].container_uploads,
        std::slice::from_ref(&file_id)
    );
    assert_eq!(
        model.container_files(&container),
        Some(vec![file_id.clone()])
    );

    // Described like any file, but not downloadable; then deleted.
    let address = model.local_addr();
    let path = format!("/v1/files/{file_id}");
    let described = request(address, "GET", &path, &headers(), None).await;
    assert_eq!(described.json()["downloadable"], false);
    let content = request(address, "GET", &format!("{path}/content"), &headers(), None).await;
    assert_eq!(content.status, 400);
    assert_eq!(content.json()["error"]["type"], "invalid_request_error");
    let deleted = request(address, "DELETE", &path, &headers(), None).await;
    assert_eq!(deleted.status, 200);
    let uploads = model.uploaded_files();
    assert_eq!(uploads.len(), 1);
    assert!(uploads[0].deleted);
    assert_eq!(uploads[0].content, b"a,b\n1,2\n");

    // A deleted file can no longer be put in a container.
    let refused = messages(&model, &body).await;
    assert_eq!(refused.status, 400);
}

#[tokio::test]
async fn container_upload_of_an_unknown_file_is_refused() {
    let model = hosted_model().await;
    let unknown = asking(json!([
        {"type": "text", "text": "hi"},
        {"type": "container_upload", "file_id": "file_nope"},
    ]));
    let refused = messages(&model, &unknown).await;
    assert_eq!(refused.status, 400);
    let error = refused.json();
    assert_eq!(error["type"], "error");
    assert_eq!(error["error"]["type"], "invalid_request_error");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("messages.0.content.1.container_upload.file_id")
            && message.contains("file_nope"),
        "{message}"
    );

    let mut without_tool = unknown.clone();
    without_tool["tools"] = json!([]);
    let refused = messages(&model, &without_tool).await;
    assert_eq!(refused.status, 400);
    assert!(
        refused.body.contains("code execution tool"),
        "{}",
        refused.body
    );

    let requests = model.hosted_requests();
    assert_eq!(requests.len(), 2);
    assert!(requests.iter().all(|request| request.container.is_none()));
    assert!(
        requests
            .iter()
            .all(|request| request.container_uploads.is_empty())
    );

    let no_file_part = upload(&model, "document", "data.csv", b"x").await;
    assert_eq!(no_file_part.status, 400);
    assert_eq!(
        no_file_part.json()["error"]["type"],
        "invalid_request_error"
    );
    assert!(model.uploaded_files().is_empty());
}

#[tokio::test]
async fn image_blocks_are_checked_and_recorded() {
    let model = hosted_model().await;
    let image = |media_type: &str, data: &str| {
        asking(json!([
            {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}},
            {"type": "text", "text": "what is this?"},
        ]))
    };
    let bmp = messages(&model, &image("image/bmp", PNG_BASE64)).await;
    assert_eq!(bmp.status, 400);
    let error = bmp.json();
    assert_eq!(error["error"]["type"], "invalid_request_error");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("messages.0.content.0.image.source.base64.media_type"),
        "{error}"
    );
    let not_base64 = messages(&model, &image("image/png", "not base64!")).await;
    assert_eq!(not_base64.status, 400);

    let png = messages(&model, &image("image/png", PNG_BASE64)).await;
    assert_eq!(png.status, 200, "{}", png.body);
    let by_url = asking(json!([
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}},
    ]));
    assert_eq!(messages(&model, &by_url).await.status, 200);
    let requests = model.hosted_requests();
    assert_eq!(
        requests[2].images,
        [HostedImage::Base64 {
            media_type: "image/png".into(),
            data: PNG_BASE64.into(),
        }]
    );
    assert_eq!(
        requests[3].images,
        [HostedImage::Url("https://example.com/cat.png".into())]
    );
}

fn chat(messages: Value) -> Value {
    json!({"model": "gpt-test", "messages": messages})
}

#[tokio::test]
async fn image_url_parts_are_recorded_and_unknown_parts_refused() {
    let model = StandInModel::start(vec![Rule::new(
        Match::LastUserContains("what is".into()),
        Reply::text("you asked: {last_user}"),
    )])
    .await
    .unwrap();
    let address = model.local_addr();
    let data_url = format!("data:image/png;base64,{PNG_BASE64}");
    let with_image = chat(json!([{"role": "user", "content": [
        {"type": "text", "text": "what is"},
        {"type": "image_url", "image_url": {"url": data_url.as_str(), "detail": "low"}},
        {"type": "text", "text": "this?"},
    ]}]));
    let answer = post(address, "/v1/chat/completions", &with_image).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(
        answer.json()["choices"][0]["message"]["content"],
        "you asked: what is\nthis?"
    );
    let recorded = &model.requests()[0];
    assert_eq!(
        recorded.images,
        [ImagePart {
            message: 0,
            url: data_url.clone(),
            detail: Some("low".into()),
        }]
    );

    let unknown = chat(json!([{"role": "user", "content": [
        {"type": "input_audio", "input_audio": {"data": PNG_BASE64, "format": "wav"}},
    ]}]));
    let refused = post(address, "/v1/chat/completions", &unknown).await;
    assert_eq!(refused.status, 400);
    assert_eq!(
        refused.json(),
        json!({"error": {
            "message": "Invalid value: 'input_audio'. Supported values are: 'text' and 'image_url'.",
            "type": "invalid_request_error",
            "param": "messages.[0].content.[0].type",
            "code": "invalid_value",
        }})
    );

    // Images only from the user, only https or image data URLs, only valid base64.
    let image = |role: &str, url: &str| {
        chat(json!([{"role": role, "content": [
            {"type": "image_url", "image_url": {"url": url}},
        ]}]))
    };
    for (body, param) in [
        (
            image("system", data_url.as_str()),
            "messages.[0].content.[0]",
        ),
        (
            image("user", "http://example.com/a.png"),
            "messages.[0].content.[0].image_url.url",
        ),
        (
            image("user", "data:image/bmp;base64,AAAA"),
            "messages.[0].content.[0].image_url.url",
        ),
        (
            image("user", "data:image/png;base64,@@@"),
            "messages.[0].content.[0].image_url.url",
        ),
    ] {
        let refused = post(address, "/v1/chat/completions", &body).await;
        assert_eq!(refused.status, 400, "{body}");
        assert_eq!(refused.json()["error"]["type"], "invalid_request_error");
        assert_eq!(refused.json()["error"]["param"], param, "{body}");
    }
    let requests = model.requests();
    assert_eq!(requests.len(), 6);
    assert!(
        requests[1..]
            .iter()
            .all(|request| request.answered_by.is_none())
    );
    assert!(
        requests[1..]
            .iter()
            .all(|request| request.images.is_empty())
    );
}
