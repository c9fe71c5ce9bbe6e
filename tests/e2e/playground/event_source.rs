//! A browser's own `EventSource` (not the playground's reader) on a prompt's event stream:
//! it authenticates with `?access_token=` (it cannot send headers), gets every event, the
//! `end` event, and, when it ignores that and reconnects as `EventSource` does, a 204 that
//! makes it stop instead of reconnecting forever.

use agentic_client::NewPrompt;
use agentic_testkit::model::Match;
use agentic_testkit::{Stack, StackOptions};
use serde_json::{Value, json};

use super::browser::Browser;
use crate::support::*;

#[tokio::test]
async fn a_browser_event_source_gets_every_event_and_the_end_and_stops_reconnecting() {
    let options = StackOptions {
        auth_tokens: vec!["tok-alice=alice".into()],
        ..StackOptions::default()
    };
    let stack = Stack::start_with(vec![text(Match::Any, "Streamed to a browser.")], options)
        .await
        .unwrap();
    let client = stack.client_with_token("tok-alice").await.unwrap();
    let prompt = client.create_prompt(NewPrompt::new("hello")).await.unwrap();
    collect(&client, &prompt.id, 0).await;

    let browser = Browser::start().await;
    browser
        .goto(&format!("{}/", stack.gateway_http_url()))
        .await;
    browser
        .run(
            "window.seen = {opens: 0, messages: [], ends: [], state: null}; \
             const source = new EventSource(\
                 `/v1/prompts/${arguments[0]}/events?access_token=${arguments[1]}`); \
             source.onopen = () => { seen.opens += 1; }; \
             source.onmessage = (event) => seen.messages.push(JSON.parse(event.data)); \
             source.addEventListener('end', (event) => seen.ends.push(JSON.parse(event.data))); \
             source.onerror = () => { seen.state = source.readyState; };",
            vec![json!(prompt.id), json!("tok-alice")],
        )
        .await;
    // It ignores `end`, so it reconnects once (after the stream's `retry:` of 1 s) and is
    // told 204: CLOSED (2), not CONNECTING (0) again and again.
    browser
        .until(
            "the EventSource is closed for good",
            "return window.seen.state === 2",
        )
        .await;
    let seen = browser.run("return window.seen", vec![]).await;
    browser.close().await;

    assert_eq!(seen["opens"], 1, "{seen}");
    assert_eq!(seen["ends"], json!([{"reason": "completed"}]), "{seen}");
    let messages = seen["messages"].as_array().unwrap();
    assert!(
        messages
            .first()
            .is_some_and(|event: &Value| event.get("created").is_some()),
        "{seen}"
    );
    assert!(
        messages
            .last()
            .is_some_and(|event: &Value| event.get("completed").is_some()),
        "{seen}"
    );
    assert!(
        seen.to_string().contains("Streamed to a browser."),
        "{seen}"
    );

    // The token in the query opens event streams only, and only a good one.
    let http = reqwest::Client::new();
    let base = stack.gateway_http_url();
    let status = |url: String| {
        let http = http.clone();
        async move { http.get(url).send().await.unwrap().status().as_u16() }
    };
    let events = format!("{base}/v1/prompts/{}/events", prompt.id);
    assert_eq!(status(format!("{events}?access_token=wrong")).await, 401);
    assert_eq!(
        status(format!("{base}/v1/prompts?access_token=tok-alice")).await,
        401
    );
    assert_eq!(
        status(format!("{events}?access_token=tok-alice")).await,
        200
    );
    assert_eq!(
        status(format!("{events}?access_token=tok-alice&after=1000000")).await,
        204
    );
}
