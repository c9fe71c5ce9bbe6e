//! Tracing across services: one prompt is one trace, from the gateway's prompt span through
//! the executor, the LLM call and the sandbox to the tool-host's tool call, with GenAI
//! attributes on the LLM and tool spans.
//!
//! Every service of a `Stack` runs in this process, so one process-wide subscriber with an
//! in-memory exporter sees all their spans. It is installed once and stays: other tests
//! running meanwhile only add spans of their own traces, which this test filters out.

use std::collections::HashMap;
use std::sync::OnceLock;

use agentic_client::NewPrompt;
use agentic_telemetry::genai;
use agentic_testkit::Stack;
use agentic_testkit::model::{Match, Reply, Rule};
use opentelemetry::trace::{SpanId, TraceId, TracerProvider as _};
use opentelemetry::{KeyValue, Value};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::support::*;

/// The spans every test in this process produced so far.
fn exporter() -> &'static InMemorySpanExporter {
    static EXPORTER: OnceLock<(InMemorySpanExporter, SdkTracerProvider)> = OnceLock::new();
    let (exporter, _provider) = EXPORTER.get_or_init(|| {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_resource(agentic_telemetry::resource("agentic-tests"))
            .with_simple_exporter(exporter.clone())
            .build();
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        tracing_subscriber::registry()
            .with(
                tracing_opentelemetry::layer()
                    .with_tracer(provider.tracer("agentic-tests"))
                    .with_filter(LevelFilter::INFO),
            )
            .init();
        (exporter, provider)
    });
    exporter
}

fn attribute<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    span.attributes
        .iter()
        .find(|KeyValue { key: name, .. }| name.as_str() == key)
        .map(|KeyValue { value, .. }| value)
}

fn string_attribute(span: &SpanData, key: &str) -> Option<String> {
    attribute(span, key).map(|value| value.as_str().into_owned())
}

fn int_attribute(span: &SpanData, key: &str) -> Option<i64> {
    match attribute(span, key) {
        Some(Value::I64(value)) => Some(*value),
        _ => None,
    }
}

/// The spans of the trace the prompt's span belongs to, once the run's outermost spans
/// (gateway and executor) have ended.
async fn trace_of_prompt(prompt_id: &str) -> (TraceId, Vec<SpanData>) {
    let prompt_span = format!("prompt {prompt_id}");
    let ended = |spans: &[SpanData]| {
        let trace = spans
            .iter()
            .find(|span| span.name == prompt_span)
            .map(|span| span.span_context.trace_id())?;
        spans
            .iter()
            .any(|span| span.span_context.trace_id() == trace && span.name == "invoke_agent code")
            .then_some(trace)
    };
    eventually("the prompt's spans ended", || {
        ended(&exporter().get_finished_spans().unwrap()).is_some()
    })
    .await;
    let spans = exporter().get_finished_spans().unwrap();
    let trace = ended(&spans).unwrap();
    let spans = spans
        .into_iter()
        .filter(|span| span.span_context.trace_id() == trace)
        .collect();
    (trace, spans)
}

#[tokio::test]
async fn a_code_prompt_that_calls_a_tool_is_one_trace_across_all_services() {
    exporter();
    let marker = format!("trace-marker-{}", uuid::Uuid::new_v4());
    let stack = Stack::start(vec![
        Rule::new(
            Match::All(vec![
                Match::AnyMessageContains(marker.clone()),
                Match::AssistantTurns(0),
            ]),
            Reply::Text("demoEcho({a: 1}); complete({response: 'ok'});".into()),
        )
        .usage(11, 7),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client
        .create_prompt(NewPrompt::new(marker.as_str()).mode("code"))
        .await
        .unwrap();
    let events = collect(&client, &prompt.id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "completed");

    let (trace, spans) = trace_of_prompt(&prompt.id).await;
    let named = |name: &str| {
        spans
            .iter()
            .find(|span| span.name == name)
            .unwrap_or_else(|| {
                let names: Vec<&str> = spans.iter().map(|span| span.name.as_ref()).collect();
                panic!("no span {name:?} in the prompt's trace, only {names:?}")
            })
    };
    let prompt_span = named(&format!("prompt {}", prompt.id));
    let agent = named("invoke_agent code");
    let sandbox = named("sandbox.run");
    let tool = named("execute_tool demo.echo");
    let chat = spans
        .iter()
        .find(|span| span.name.starts_with("chat "))
        .expect("a chat span in the prompt's trace");

    // Every span but the trace's root has its parent in the same trace.
    let by_id: HashMap<SpanId, &SpanData> = spans
        .iter()
        .map(|span| (span.span_context.span_id(), span))
        .collect();
    for span in [prompt_span, agent, sandbox, tool, chat] {
        assert_eq!(span.span_context.trace_id(), trace);
        assert!(
            by_id.contains_key(&span.parent_span_id),
            "the parent of {:?} is not in the prompt's trace",
            span.name
        );
    }
    // The tool call's ancestors lead through the sandbox and the executor to the prompt.
    let mut ancestors = Vec::new();
    let mut current = tool;
    while let Some(parent) = by_id.get(&current.parent_span_id) {
        ancestors.push(parent.span_context.span_id());
        current = parent;
    }
    for (expected, what) in [
        (sandbox, "sandbox.run"),
        (agent, "invoke_agent code"),
        (prompt_span, "the prompt span"),
    ] {
        assert!(
            ancestors.contains(&expected.span_context.span_id()),
            "{what} is not an ancestor of the tool call"
        );
    }
    let mut current = chat;
    let mut reaches_agent = false;
    while let Some(parent) = by_id.get(&current.parent_span_id) {
        reaches_agent |= parent.span_context.span_id() == agent.span_context.span_id();
        current = parent;
    }
    assert!(reaches_agent, "the chat span is not inside the agent's run");

    // GenAI semantic conventions.
    let model = chat.name.strip_prefix("chat ").unwrap();
    assert_eq!(
        string_attribute(chat, genai::OPERATION_NAME).as_deref(),
        Some(genai::OPERATION_CHAT)
    );
    assert_eq!(
        string_attribute(chat, genai::REQUEST_MODEL).as_deref(),
        Some(model)
    );
    assert_eq!(int_attribute(chat, genai::USAGE_INPUT_TOKENS), Some(11));
    assert_eq!(int_attribute(chat, genai::USAGE_OUTPUT_TOKENS), Some(7));
    assert_eq!(
        string_attribute(tool, genai::OPERATION_NAME).as_deref(),
        Some(genai::OPERATION_EXECUTE_TOOL)
    );
    assert_eq!(
        string_attribute(tool, genai::TOOL_NAME).as_deref(),
        Some("demo.echo")
    );
    assert!(
        string_attribute(tool, genai::TOOL_CALL_ID).is_some_and(|id| !id.is_empty()),
        "the tool span has no call id"
    );
    assert_eq!(
        string_attribute(agent, genai::OPERATION_NAME).as_deref(),
        Some(genai::OPERATION_INVOKE_AGENT)
    );
}
