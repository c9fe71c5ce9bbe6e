//! Tests of the stand-in model itself.

use std::net::SocketAddr;

use agentic_testkit::{Match, Reply, Rule, StandInModel};
use serde_json::{Value, json};

/// Posts a non-streaming chat completion over plain HTTP/1.1 and returns (status, body).
async fn complete(address: SocketAddr, request: &Value) -> (u16, Value) {
    let answer = agentic_testkit::model::http::post(address, "/v1/chat/completions", request).await;
    (answer.status, answer.json())
}

fn user_says(text: &str) -> Value {
    json!({"model": "stand-in", "messages": [{"role": "user", "content": text}]})
}

fn answer_text(body: &Value) -> &str {
    body["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or_default()
}

#[tokio::test]
async fn rules_answer_in_order_until_their_uses_run_out() {
    let model = StandInModel::start(vec![
        Rule::new(
            Match::LastUserContains("weather".into()),
            Reply::text("sunny"),
        )
        .times(1),
        Rule::new(
            Match::LastUserContains("weather".into()),
            Reply::text("rainy"),
        )
        .times(1),
    ])
    .await
    .expect("start the stand-in model");
    let address = model.local_addr();

    let (_, first) = complete(address, &user_says("weather today?")).await;
    let (_, second) = complete(address, &user_says("and the weather tomorrow?")).await;
    assert_eq!(answer_text(&first), "sunny");
    assert_eq!(answer_text(&second), "rainy");

    model.add_rule(Rule::new(Match::Any, Reply::text("no idea")));
    let (status, third) = complete(address, &user_says("weather next week?")).await;
    assert_eq!(status, 200);
    assert_eq!(answer_text(&third), "no idea");

    let answered_by: Vec<Option<usize>> = model
        .requests()
        .iter()
        .map(|request| request.answered_by)
        .collect();
    assert_eq!(answered_by, [Some(0), Some(1), Some(2)]);
}

#[tokio::test]
async fn a_request_no_rule_matches_gets_a_500_and_is_still_recorded() {
    let model = StandInModel::start(vec![Rule::new(
        Match::HasToolResults,
        Reply::text("thanks"),
    )])
    .await
    .expect("start the stand-in model");

    let (status, body) = complete(model.local_addr(), &user_says("hello there")).await;

    assert_eq!(status, 500);
    assert_eq!(body["error"]["type"], "server_error");
    assert_eq!(
        body["error"]["message"],
        r#"stand-in model: no rule matches this request (last user message: "hello there")"#
    );
    let requests = model.requests();
    assert_eq!(model.request_count(), 1);
    assert_eq!(requests[0].answered_by, None);
    assert_eq!(
        requests[0].last_user_message().as_deref(),
        Some("hello there")
    );
}

#[tokio::test]
async fn a_tool_round_is_recorded_and_its_result_can_be_quoted() {
    let model = StandInModel::start(vec![
        Rule::new(
            Match::All(vec![
                Match::LastMessageIsToolResult,
                Match::ToolResultContains("12°C".into()),
                Match::AssistantTurns(1),
                Match::ToolOffered("weather".into()),
            ]),
            Reply::text("It is {last_tool_result} in {last_user}."),
        )
        .usage(120, 8),
    ])
    .await
    .expect("start the stand-in model");
    let request = json!({
        "model": "stand-in",
        "tools": [{"type": "function", "function": {"name": "weather", "parameters": {}}}],
        "messages": [
            {"role": "system", "content": "answer briefly"},
            {"role": "user", "content": "Oslo"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_9",
                "type": "function", "function": {"name": "weather", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_9", "content": "12°C"},
        ],
    });

    let (status, body) = complete(model.local_addr(), &request).await;

    assert_eq!(status, 200);
    assert_eq!(answer_text(&body), "It is 12°C in Oslo.");
    assert_eq!(body["usage"]["total_tokens"], 128);
    let recorded = &model.requests()[0];
    assert!(!recorded.stream);
    assert_eq!(recorded.messages().len(), 4);
    assert_eq!(recorded.tool_names(), ["weather"]);
    assert_eq!(
        recorded.tool_results(),
        [("call_9".to_owned(), "12°C".to_owned())]
    );
}
