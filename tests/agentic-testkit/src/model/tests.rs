//! Wire-format tests over real TCP, the way the services' HTTP client sees the server.

use std::time::Duration;

use serde_json::{Value, json};

use super::http::post;
use super::{Match, Reply, Rule, ScriptedCall, StandInModel, demo_rules};

mod files_in;

fn conversation(user: &str) -> Value {
    json!({"model": "gpt-test", "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": user},
    ]})
}

fn streamed(mut body: Value, include_usage: bool) -> Value {
    body["stream"] = json!(true);
    if include_usage {
        body["stream_options"] = json!({"include_usage": true});
    }
    body
}

#[tokio::test]
async fn whole_answer_has_the_openai_shape_and_default_usage() {
    let model = StandInModel::start(vec![Rule::new(Match::Any, Reply::text("Hi, {last_user}!"))])
        .await
        .expect("start");
    let answer = post(
        model.local_addr(),
        "/v1/chat/completions",
        &conversation("Ada"),
    )
    .await;

    assert_eq!(answer.status, 200);
    let body = answer.json();
    assert!(
        body["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("chatcmpl-"))
    );
    assert_eq!(body["object"], "chat.completion");
    assert!(body["created"].is_u64());
    assert_eq!(body["model"], "gpt-test");
    let choice = &body["choices"][0];
    assert_eq!(choice["index"], 0);
    assert_eq!(choice["message"]["role"], "assistant");
    assert_eq!(choice["message"]["content"], "Hi, Ada!");
    assert!(choice["message"].get("tool_calls").is_none());
    assert_eq!(choice["finish_reason"], "stop");
    assert_eq!(
        body["usage"],
        json!({"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15})
    );
}

#[tokio::test]
async fn whole_tool_call_answer_carries_arguments_as_a_json_string() {
    let model = StandInModel::start(vec![
        Rule::new(
            Match::Any,
            Reply::tool_call("search", json!({"query": "{last_user}"})),
        )
        .usage(7, 3),
    ])
    .await
    .expect("start");
    let answer = post(
        model.local_addr(),
        "/chat/completions",
        &conversation("rust"),
    )
    .await;

    let body = answer.json();
    let message = &body["choices"][0]["message"];
    assert_eq!(message["content"], Value::Null);
    assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
    let call = &message["tool_calls"][0];
    assert_eq!(call["id"], "call_1");
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "search");
    assert_eq!(call["function"]["arguments"], r#"{"query":"rust"}"#);
    assert_eq!(body["usage"]["total_tokens"], 10);
}

#[tokio::test]
async fn streamed_text_arrives_in_word_chunks_with_the_role_first() {
    let model = StandInModel::start(vec![Rule::new(Match::Any, Reply::text("one two three"))])
        .await
        .expect("start");
    let answer = post(
        model.local_addr(),
        "/v1/chat/completions",
        &streamed(conversation("count"), false),
    )
    .await;

    assert_eq!(answer.status, 200);
    assert!(answer.head.contains("content-type: text/event-stream"));
    let chunks = answer.chunks();
    let (last, content_chunks) = chunks.split_last().expect("chunks");
    assert!(content_chunks.len() >= 2);
    let text: String = content_chunks
        .iter()
        .map(|chunk| {
            chunk["choices"][0]["delta"]["content"]
                .as_str()
                .expect("text")
        })
        .collect();
    assert_eq!(text, "one two three");
    assert_eq!(
        content_chunks[0]["choices"][0]["delta"]["role"],
        "assistant"
    );
    assert!(
        content_chunks[1..]
            .iter()
            .all(|chunk| chunk["choices"][0]["delta"].get("role").is_none())
    );
    assert!(
        chunks
            .iter()
            .all(|chunk| chunk["object"] == "chat.completion.chunk")
    );
    assert_eq!(last["choices"][0]["delta"], json!({}));
    assert_eq!(last["choices"][0]["finish_reason"], "stop");
    assert!(chunks.iter().all(|chunk| chunk.get("usage").is_none()));
}

#[tokio::test]
async fn streamed_tool_calls_send_a_header_then_argument_fragments() {
    let model = StandInModel::start(vec![Rule::new(
        Match::Any,
        Reply::ToolCalls {
            content: None,
            calls: vec![
                ScriptedCall::new("search", json!({"query": "{last_user}", "limit": 3})),
                ScriptedCall::raw("broken", "{not json"),
            ],
        },
    )])
    .await
    .expect("start");
    let answer = post(
        model.local_addr(),
        "/v1/chat/completions",
        &streamed(conversation("weather in Oslo"), true),
    )
    .await;

    let chunks = answer.chunks();
    let usage_chunk = chunks.last().expect("a usage chunk");
    assert_eq!(usage_chunk["choices"], json!([]));
    assert_eq!(usage_chunk["usage"]["total_tokens"], 15);
    let finish = &chunks[chunks.len() - 2];
    assert_eq!(finish["choices"][0]["finish_reason"], "tool_calls");
    assert!(
        chunks[..chunks.len() - 1]
            .iter()
            .all(|chunk| chunk["usage"].is_null())
    );

    let deltas: Vec<&Value> = chunks[..chunks.len() - 2]
        .iter()
        .map(|chunk| &chunk["choices"][0]["delta"]["tool_calls"][0])
        .collect();
    let search_arguments = json!({"query": "weather in Oslo", "limit": 3}).to_string();
    for (index, (name, arguments)) in [
        ("search", search_arguments.as_str()),
        ("broken", "{not json"),
    ]
    .into_iter()
    .enumerate()
    {
        let of_call: Vec<&&Value> = deltas
            .iter()
            .filter(|delta| delta["index"] == index)
            .collect();
        let (header, fragments) = of_call.split_first().expect("a header chunk");
        assert_eq!(header["id"], format!("call_{}", index + 1));
        assert_eq!(header["type"], "function");
        assert_eq!(header["function"], json!({"name": name, "arguments": ""}));
        assert!(fragments.len() >= 2);
        assert!(fragments.iter().all(|fragment| fragment.get("id").is_none()
            && fragment.get("type").is_none()
            && fragment["function"].get("name").is_none()));
        let joined: String = fragments
            .iter()
            .map(|fragment| {
                fragment["function"]["arguments"]
                    .as_str()
                    .expect("a fragment")
            })
            .collect();
        assert_eq!(joined, arguments);
    }
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
}

#[tokio::test]
async fn scripted_errors_answer_with_the_status_in_both_modes() {
    let model = StandInModel::start(vec![Rule::new(Match::Any, Reply::error(429, "slow down"))])
        .await
        .expect("start");
    for body in [conversation("a"), streamed(conversation("b"), true)] {
        let answer = post(model.local_addr(), "/v1/chat/completions", &body).await;
        assert_eq!(answer.status, 429);
        assert_eq!(
            answer.json(),
            json!({"error": {"message": "slow down", "type": "server_error", "code": null}})
        );
    }
}

#[tokio::test]
async fn a_hanging_answer_is_recorded_and_ends_when_the_model_shuts_down() {
    let model = StandInModel::start(vec![Rule::new(Match::Any, Reply::Hang)])
        .await
        .expect("start");
    let address = model.local_addr();
    let call = tokio::spawn(async move {
        post(address, "/v1/chat/completions", &conversation("hello?")).await
    });
    let recorded = async {
        while model.request_count() == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), recorded)
        .await
        .expect("the request is recorded while it hangs");
    assert!(!call.is_finished());

    model.shutdown().await;
    let answer = call.await.expect("the client task");
    assert_eq!(answer.status, 503);
}

#[test]
fn scripts_read_from_json() {
    let script = json!([
        {"when": {"all": [{"tool_offered": "search"}, "no_tool_results"]},
         "reply": {"tool_calls": {"calls": [{"name": "search", "arguments": {"q": "{last_user}"}}]}},
         "times": 1},
        {"when": {"not": {"last_user_contains": "secret"}}, "reply": {"text": "ok"},
         "delay_ms": 20, "usage": [100, 20]},
        {"reply": "hang"},
    ]);
    let rules: Vec<Rule> = serde_json::from_value(script).expect("a valid script");
    assert_eq!(
        rules,
        vec![
            Rule::new(
                Match::All(vec![
                    Match::ToolOffered("search".into()),
                    Match::NoToolResults
                ]),
                Reply::tool_call("search", json!({"q": "{last_user}"})),
            )
            .times(1),
            Rule::new(!Match::LastUserContains("secret".into()), Reply::text("ok"),)
                .delay_ms(20)
                .usage(100, 20),
            Rule::new(Match::Any, Reply::Hang),
        ]
    );

    let demo = serde_json::to_value(demo_rules()).expect("serializable");
    let read_back: Vec<Rule> = serde_json::from_value(demo).expect("round trip");
    assert_eq!(read_back, demo_rules());
}

#[tokio::test]
async fn garbage_is_a_200_whose_body_or_stream_event_is_the_text_verbatim() {
    let model = StandInModel::start(vec![Rule::new(
        Match::Any,
        Reply::Garbage("<html>502 Bad Gateway</html>".into()),
    )])
    .await
    .expect("start");
    let plain = post(
        model.local_addr(),
        "/v1/chat/completions",
        &conversation("Ada"),
    )
    .await;
    assert_eq!(plain.status, 200);
    assert!(plain.head.contains("content-type: application/json"));
    assert_eq!(plain.body, "<html>502 Bad Gateway</html>");

    let stream = post(
        model.local_addr(),
        "/v1/chat/completions",
        &streamed(conversation("Ada"), true),
    )
    .await;
    assert_eq!(stream.status, 200);
    assert!(stream.head.contains("content-type: text/event-stream"));
    assert_eq!(stream.events(), ["<html>502 Bad Gateway</html>", "[DONE]"]);
}

mod hosted {
    //! The Anthropic Messages and Files endpoints, over real TCP.

    use serde_json::{Value, json};

    use super::super::http::{HttpAnswer, request};
    use super::super::{
        CODE_EXECUTION_BETA, FILES_BETA, HostedBlock, HostedFile, HostedMatch, HostedReply,
        HostedRule, StandInModel,
    };

    const BETAS: &str = "code-execution-2025-08-25,files-api-2025-04-14";

    fn headers() -> Vec<(&'static str, &'static str)> {
        vec![
            ("x-api-key", "key"),
            ("anthropic-version", "2023-06-01"),
            ("anthropic-beta", BETAS),
        ]
    }

    fn body(container: Option<&str>, stream: bool) -> Value {
        let mut body = json!({
            "model": "claude-test",
            "max_tokens": 100,
            "stream": stream,
            "tools": [{"type": "code_execution_20250825", "name": "code_execution"}],
            "messages": [{"role": "user", "content": "make a file"}],
        });
        if let Some(container) = container {
            body["container"] = json!(container);
        }
        body
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

    /// The `(event name, data)` pairs of an Anthropic event stream.
    fn events(answer: &HttpAnswer) -> Vec<(String, Value)> {
        answer
            .body
            .split("\n\n")
            .filter(|event| !event.is_empty())
            .map(|event| {
                let (name, data) = event.split_once('\n').expect("event and data lines");
                (
                    name.strip_prefix("event: ")
                        .expect("an event line")
                        .to_owned(),
                    serde_json::from_str(data.strip_prefix("data: ").expect("a data line"))
                        .expect("JSON data"),
                )
            })
            .collect()
    }

    fn making_a_file() -> HostedRule {
        HostedRule::turn(
            HostedMatch::Any,
            vec![
                HostedBlock::text("Working on it."),
                HostedBlock::bash_making(
                    "echo hi > /tmp/outputs/hi.txt",
                    "",
                    vec![HostedFile::new("hi.txt", "text/plain", "hi\n")],
                ),
                HostedBlock::tool_use("lookup", json!({"q": "x"})),
            ],
            "tool_use",
        )
        .usage(42, 7)
    }

    #[tokio::test]
    async fn a_streamed_turn_has_the_documented_event_order_and_fragments() {
        let model = StandInModel::start(Vec::new()).await.unwrap();
        model.add_hosted_rule(making_a_file());
        let answer = messages(&model, &body(None, true)).await;
        assert_eq!(answer.status, 200);
        assert!(answer.head.contains("content-type: text/event-stream"));
        let events = events(&answer);
        let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names.first(), Some(&"message_start"));
        assert_eq!(&names[names.len() - 2..], ["message_delta", "message_stop"]);
        for (name, data) in &events {
            assert_eq!(
                data["type"],
                name.as_str(),
                "the data's type names the event"
            );
        }
        let (_, start) = &events[0];
        assert_eq!(start["message"]["role"], "assistant");
        assert_eq!(start["message"]["usage"]["input_tokens"], 42);
        assert_eq!(start["message"]["stop_reason"], Value::Null);
        // Four blocks: text, server_tool_use, its result, tool_use; each opened and closed.
        let opened: Vec<&str> = events
            .iter()
            .filter(|(name, _)| name == "content_block_start")
            .map(|(_, data)| data["content_block"]["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            opened,
            [
                "text",
                "server_tool_use",
                "bash_code_execution_tool_result",
                "tool_use"
            ]
        );
        let text: String = events
            .iter()
            .filter(|(_, data)| data["delta"]["type"] == "text_delta")
            .map(|(_, data)| data["delta"]["text"].as_str().unwrap())
            .collect();
        assert_eq!(text, "Working on it.");
        let partial: Vec<&str> = events
            .iter()
            .filter(|(_, data)| data["delta"]["type"] == "input_json_delta" && data["index"] == 3)
            .map(|(_, data)| data["delta"]["partial_json"].as_str().unwrap())
            .collect();
        assert!(partial.len() > 1, "tool input arrives in fragments");
        assert_eq!(
            serde_json::from_str::<Value>(&partial.concat()).unwrap(),
            json!({"q": "x"})
        );
        let (_, delta) = &events[events.len() - 2];
        assert_eq!(delta["delta"]["stop_reason"], "tool_use");
        assert_eq!(delta["usage"]["output_tokens"], 7);
        let container = delta["delta"]["container"]["id"].as_str().unwrap();
        assert!(container.starts_with("container_"));
        assert!(delta["delta"]["container"]["expires_at"].is_string());
    }

    #[tokio::test]
    async fn files_made_in_a_container_are_listed_described_and_downloaded() {
        let model = StandInModel::start(Vec::new()).await.unwrap();
        model.add_hosted_rule(making_a_file());
        let answer = messages(&model, &body(None, false)).await.json();
        let result = &answer["content"][2];
        assert_eq!(result["type"], "bash_code_execution_tool_result");
        assert_eq!(result["tool_use_id"], answer["content"][1]["id"]);
        let file_id = result["content"]["content"][0]["file_id"].as_str().unwrap();
        let get = |path: String, headers: Vec<(&'static str, &'static str)>| {
            let address = model.local_addr();
            async move { request(address, "GET", &path, &headers, None).await }
        };
        let listed = get("/v1/files?limit=10".into(), headers()).await.json();
        assert_eq!(listed["data"][0]["id"], file_id);
        assert_eq!(listed["has_more"], false);
        let described = get(format!("/v1/files/{file_id}"), headers()).await.json();
        assert_eq!(described["filename"], "hi.txt");
        assert_eq!(described["size_bytes"], 3);
        assert_eq!(described["type"], "file");
        let content = get(format!("/v1/files/{file_id}/content"), headers()).await;
        assert_eq!((content.status, content.body.as_str()), (200, "hi\n"));
        assert!(content.head.contains("content-type: text/plain"));
        let missing = get("/v1/files/file_nope".into(), headers()).await;
        assert_eq!(missing.status, 404);
        assert_eq!(missing.json()["error"]["type"], "not_found_error");
        let without_beta = get(
            format!("/v1/files/{file_id}/content"),
            vec![
                ("x-api-key", "key"),
                ("anthropic-beta", CODE_EXECUTION_BETA),
            ],
        )
        .await;
        assert_eq!(without_beta.status, 400);
        assert!(without_beta.body.contains(FILES_BETA));
    }

    #[tokio::test]
    async fn requests_the_api_refuses_are_refused_with_its_error_shape() {
        let model = StandInModel::start(Vec::new()).await.unwrap();
        model.add_hosted_rule(HostedRule::turn(
            HostedMatch::Any,
            vec![HostedBlock::text("ok")],
            "end_turn",
        ));
        let address = model.local_addr();
        let no_key = request(
            address,
            "POST",
            "/v1/messages",
            &[("anthropic-version", "2023-06-01")],
            Some(&body(None, false)),
        )
        .await;
        assert_eq!(no_key.status, 401);
        assert_eq!(no_key.json()["type"], "error");
        assert_eq!(no_key.json()["error"]["type"], "authentication_error");
        let no_beta = request(
            address,
            "POST",
            "/v1/messages",
            &[("x-api-key", "k"), ("anthropic-version", "2023-06-01")],
            Some(&body(None, false)),
        )
        .await;
        assert_eq!(no_beta.status, 400);
        let mut unanswered = body(None, false);
        unanswered["messages"] = json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "x", "input": {}}]},
            {"role": "user", "content": "no result"},
        ]);
        let refused = messages(&model, &unanswered).await;
        assert_eq!(refused.status, 400);
        assert!(refused.body.contains("toolu_1"));

        // A container is reused until it expires; then requests naming it are refused.
        let first = messages(&model, &body(None, false)).await.json();
        let container = first["container"]["id"].as_str().unwrap().to_owned();
        let again = messages(&model, &body(Some(&container), false))
            .await
            .json();
        assert_eq!(again["container"]["id"], container.as_str());
        assert!(model.expire_container(&container));
        let expired = messages(&model, &body(Some(&container), false)).await;
        assert_eq!(expired.status, 400);
        assert_eq!(expired.json()["error"]["type"], "invalid_request_error");
        assert!(expired.body.contains("expired"));
        let requests = model.hosted_requests();
        assert_eq!(requests.len(), 6);
        assert_eq!(requests[4].container.as_deref(), Some(container.as_str()));
        assert_eq!(requests[5].container, None);
    }

    #[tokio::test]
    async fn scripted_errors_and_continuations_answer_as_written() {
        let model = StandInModel::start(Vec::new()).await.unwrap();
        model.add_hosted_rule(HostedRule::turn(
            HostedMatch::Continuing,
            vec![HostedBlock::text("continued")],
            "end_turn",
        ));
        model.add_hosted_rule(HostedRule::new(
            HostedMatch::Any,
            HostedReply::Error {
                status: 529,
                kind: "overloaded_error".into(),
                message: "busy".into(),
            },
        ));
        let overloaded = messages(&model, &body(None, false)).await;
        assert_eq!(overloaded.status, 529);
        assert_eq!(overloaded.json()["error"]["type"], "overloaded_error");
        assert!(overloaded.head.contains("request-id: req_"));
        let mut paused = body(None, false);
        paused["messages"] = json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "text", "text": "half"}]},
        ]);
        let continued = messages(&model, &paused).await.json();
        assert_eq!(continued["content"][0]["text"], "continued");
        assert_eq!(continued["stop_reason"], "end_turn");
    }
}
