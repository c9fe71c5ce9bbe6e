//! One prompt is one trace through every edge: MCP tool calls (stdio and Streamable HTTP)
//! run inside the tool-host's response stream yet stay in the prompt's trace, and the
//! hosted mode's provider calls make `chat` spans and GenAI metrics as the local modes' do,
//! each naming its provider.

use std::collections::HashMap;

use agentic_client::NewPrompt;
use agentic_telemetry::genai;
use agentic_testkit::model::{HostedBlock, HostedMatch, HostedRule, Match};
use agentic_testkit::{Stack, StackOptions};
use opentelemetry::trace::SpanId;
use opentelemetry_sdk::trace::SpanData;
use serde_json::json;

use super::{int_attribute, matching, metrics_now, string_attribute, telemetry, trace_of_prompt};
use crate::mcp_tools::servers::{HttpEverything, config_file, everything_stdio};
use crate::support::*;

/// `name`'s span in `spans`, whose parent is in `spans` too (the trace is whole there).
fn in_trace<'a>(spans: &'a [SpanData], name: &str) -> &'a SpanData {
    let by_id: HashMap<SpanId, &SpanData> = spans
        .iter()
        .map(|span| (span.span_context.span_id(), span))
        .collect();
    let span = spans
        .iter()
        .find(|span| span.name == name)
        .unwrap_or_else(|| {
            let names: Vec<&str> = spans.iter().map(|span| span.name.as_ref()).collect();
            panic!("no span {name:?} in the prompt's trace, only {names:?}")
        });
    assert!(
        by_id.contains_key(&span.parent_span_id),
        "the parent of {name:?} is not in the prompt's trace"
    );
    span
}

/// The first `chat …` span of `spans`, with its parent in them.
fn chat_span(spans: &[SpanData]) -> &SpanData {
    let name = spans
        .iter()
        .find(|span| span.name.starts_with("chat "))
        .map(|span| span.name.to_string())
        .unwrap_or_else(|| {
            let names: Vec<&str> = spans.iter().map(|span| span.name.as_ref()).collect();
            panic!("no chat span in the prompt's trace, only {names:?}")
        });
    in_trace(spans, &name)
}

#[tokio::test]
async fn mcp_calls_over_stdio_and_http_are_spans_of_the_prompts_trace() {
    telemetry();
    let marker = format!("mcp-trace-{}", uuid::Uuid::new_v4());
    let http = HttpEverything::start().await;
    let dir = tempfile::tempdir().unwrap();
    let servers = json!({
        "everything": everything_stdio(),
        "web": {"type": "http", "url": http.url},
    });
    let options = StackOptions {
        tool_host_mcp_config: Some(config_file(dir.path(), servers)),
        ..StackOptions::default()
    };
    let rules = vec![
        calls(
            Match::All(vec![
                Match::AnyMessageContains(marker.clone()),
                Match::NoToolResults,
            ]),
            vec![
                call("everything__echo", json!({"message": "over stdio"})),
                call("web__echo", json!({"message": "over http"})),
            ],
        ),
        text(Match::HasToolResults, "Both echoed."),
    ];
    let stack = Stack::start_with(rules, options).await.unwrap();
    crate::mcp_tools::until_listed(&stack, &["everything", "web"]).await;
    let client = stack.client("alice").await.unwrap();
    let prompt = client
        .create_prompt(NewPrompt::new(marker.as_str()))
        .await
        .unwrap();
    let events = collect(&client, &prompt.id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "completed");

    let (_, spans) = trace_of_prompt(&prompt.id).await;
    in_trace(&spans, "execute_tool everything.echo");
    in_trace(&spans, "execute_tool web.echo");
    assert_eq!(
        string_attribute(chat_span(&spans), genai::PROVIDER_NAME).as_deref(),
        Some(genai::PROVIDER_OPENAI)
    );
}

#[tokio::test]
async fn a_hosted_prompts_provider_calls_are_chat_spans_of_its_trace_and_are_counted() {
    telemetry();
    let marker = format!("hosted-trace-{}", uuid::Uuid::new_v4());
    let options = StackOptions {
        hosted: true,
        ..StackOptions::default()
    };
    let stack = Stack::start_with(Vec::new(), options).await.unwrap();
    stack.model.add_hosted_rule(
        HostedRule::turn(
            HostedMatch::Any,
            vec![HostedBlock::text("Hosted hello.")],
            "end_turn",
        )
        .usage(123, 45),
    );
    let client = stack.client("alice").await.unwrap();
    let prompt = client
        .create_prompt(crate::hosted::hosted(&marker))
        .await
        .unwrap();
    let events = collect(&client, &prompt.id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "completed");

    let (_, spans) = trace_of_prompt(&prompt.id).await;
    let chat = chat_span(&spans);
    assert_eq!(
        string_attribute(chat, genai::PROVIDER_NAME).as_deref(),
        Some(genai::PROVIDER_ANTHROPIC)
    );
    assert_eq!(int_attribute(chat, genai::USAGE_INPUT_TOKENS), Some(123));
    assert_eq!(int_attribute(chat, genai::USAGE_OUTPUT_TOKENS), Some(45));
    let model = string_attribute(chat, genai::REQUEST_MODEL).unwrap();

    eventually("the hosted call's tokens are counted", || {
        let metrics = metrics_now();
        let counted: f64 = matching(
            &metrics,
            genai::METRIC_TOKEN_USAGE,
            &[
                (genai::PROVIDER_NAME, genai::PROVIDER_ANTHROPIC),
                (genai::REQUEST_MODEL, &model),
                (genai::TOKEN_TYPE, genai::TOKEN_TYPE_INPUT),
            ],
        )
        .iter()
        .map(|point| point.value)
        .sum();
        counted >= 123.0
    })
    .await;
}

#[tokio::test]
async fn a_run_that_takes_up_a_durable_pause_continues_the_prompts_trace() {
    telemetry();
    let marker = format!("pause-trace-{}", uuid::Uuid::new_v4());
    let rules = vec![
        calls(
            Match::All(vec![
                Match::AnyMessageContains(marker.clone()),
                Match::NoToolResults,
            ]),
            vec![call("demo__dangerous", json!({"action": "launch"}))],
        ),
        text(Match::HasToolResults, "Launched."),
    ];
    let stack = Stack::start(rules).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client
        .create_prompt(NewPrompt::new(marker.as_str()))
        .await
        .unwrap();
    let paused = collect(&client, &prompt.id, 0).await;
    assert_eq!(kind(paused.last().unwrap()), "waiting");
    let waiting = client.get_prompt(&prompt.id).await.unwrap();
    let call = call_id(&waiting, None).unwrap();
    // The paused run's span ends with it; wait for it before a new one starts.
    let prompt_span = format!("prompt {}", prompt.id);
    let ended = |count: usize| {
        super::exporter()
            .get_finished_spans()
            .unwrap()
            .into_iter()
            .filter(|span| span.name == prompt_span)
            .count()
            >= count
    };
    eventually("the paused run's span ended", || ended(1)).await;
    client.approve_tool_call(&prompt.id, &call).await.unwrap();
    let rest = collect(&client, &prompt.id, paused.last().unwrap().sequence).await;
    assert_eq!(kind(rest.last().unwrap()), "completed");
    eventually("the resumed run's span ended", || ended(2)).await;

    let runs: Vec<SpanData> = super::exporter()
        .get_finished_spans()
        .unwrap()
        .into_iter()
        .filter(|span| span.name == prompt_span)
        .collect();
    let (first, resumed) = (&runs[0], &runs[1]);
    assert_eq!(
        resumed.span_context.trace_id(),
        first.span_context.trace_id(),
        "the resumed run is in the prompt's trace"
    );
    assert_eq!(
        resumed.parent_span_id,
        first.span_context.span_id(),
        "it continues the paused run"
    );
    // What resumed it (the ApproveToolCall request) is linked.
    let links: Vec<_> = resumed.links.iter().collect();
    assert_eq!(links.len(), 1, "{links:?}");
    let approve = super::exporter()
        .get_finished_spans()
        .unwrap()
        .into_iter()
        .find(|span| span.span_context == links[0].span_context)
        .expect("the linked span is exported");
    assert_eq!(approve.name, "agentic.v1.PromptGateway/ApproveToolCall");
}
