//! Wire-format tests over real TCP, the way the services' HTTP client sees the server.

use std::time::Duration;

use serde_json::{Value, json};

use super::http::post;
use super::{Match, Reply, Rule, ScriptedCall, StandInModel, demo_rules};

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
