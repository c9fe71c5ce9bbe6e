//! Tracing across services: one prompt is one trace, from the gateway's prompt span through
//! the executor, the LLM call and the sandbox to the tool-host's tool call, with GenAI
//! attributes on the LLM and tool spans. And metrics: prompts, rounds, tool calls, LLM
//! tokens and durations, sandbox runs.
//!
//! Every service of a `Stack` runs in this process, so one process-wide subscriber and meter
//! provider with in-memory exporters see all their spans and metrics. They are installed
//! once and stay: other tests running meanwhile only add spans of their own traces, which
//! the trace test filters out, and add to the same counters, so the metrics test asserts
//! lower bounds only.

mod edges;

use std::collections::HashMap;
use std::sync::OnceLock;

use agentic_client::NewPrompt;
use agentic_telemetry::genai;
use agentic_testkit::Stack;
use agentic_testkit::model::{Match, Reply, Rule};
use opentelemetry::trace::{SpanId, TraceId, TracerProvider as _};
use opentelemetry::{KeyValue, Value};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData, ResourceMetrics};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde_json::json;
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::support::*;

/// The process-wide telemetry of the tests: spans and metrics of every test in this process.
pub(crate) struct Telemetry {
    spans: InMemorySpanExporter,
    metrics: InMemoryMetricExporter,
    meter_provider: SdkMeterProvider,
    _tracer_provider: SdkTracerProvider,
}

pub(crate) fn telemetry() -> &'static Telemetry {
    static TELEMETRY: OnceLock<Telemetry> = OnceLock::new();
    TELEMETRY.get_or_init(|| {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_resource(agentic_telemetry::resource("agentic-tests"))
            .with_simple_exporter(exporter.clone())
            .build();
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        // Cumulative (the default temporality): every export carries the totals so far.
        let metrics = InMemoryMetricExporter::default();
        let meter_provider = SdkMeterProvider::builder()
            .with_resource(agentic_telemetry::resource("agentic-tests"))
            .with_reader(PeriodicReader::builder(metrics.clone()).build())
            .build();
        opentelemetry::global::set_meter_provider(meter_provider.clone());
        tracing_subscriber::registry()
            .with(
                tracing_opentelemetry::layer()
                    .with_tracer(provider.tracer("agentic-tests"))
                    .with_filter(LevelFilter::INFO),
            )
            .init();
        Telemetry {
            spans: exporter,
            metrics,
            meter_provider,
            _tracer_provider: provider,
        }
    })
}

/// The spans every test in this process produced so far.
fn exporter() -> &'static InMemorySpanExporter {
    &telemetry().spans
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
/// (gateway and executor) have ended. The prompt span keeps the `CreatePrompt` request span
/// it was opened in alive, which ends (and is exported) just after it: wait for that too.
pub(crate) async fn trace_of_prompt(prompt_id: &str) -> (TraceId, Vec<SpanData>) {
    let prompt_span = format!("prompt {prompt_id}");
    let ended = |spans: &[SpanData]| {
        let prompt = spans.iter().find(|span| span.name == prompt_span)?;
        let trace = prompt.span_context.trace_id();
        let parent_ended = spans
            .iter()
            .any(|span| span.span_context.span_id() == prompt.parent_span_id);
        let agent_ended = spans.iter().any(|span| {
            span.span_context.trace_id() == trace && span.name.starts_with("invoke_agent ")
        });
        (parent_ended && agent_ended).then_some(trace)
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
    telemetry();
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
    // The gateway's writes of the prompt's events are in it too.
    let db = named("INSERT prompt_events");
    assert!(
        matches!(
            string_attribute(db, "db.system.name").as_deref(),
            Some("sqlite" | "postgresql")
        ),
        "the database span names its system"
    );

    // Every span but the trace's root has its parent in the same trace.
    let by_id: HashMap<SpanId, &SpanData> = spans
        .iter()
        .map(|span| (span.span_context.span_id(), span))
        .collect();
    for span in [prompt_span, agent, sandbox, tool, chat, db] {
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

/// The totals of every metric recorded in this process so far.
fn metrics_now() -> ResourceMetrics {
    let telemetry = telemetry();
    telemetry.metrics.reset();
    telemetry.meter_provider.force_flush().unwrap();
    telemetry
        .metrics
        .get_finished_metrics()
        .unwrap()
        .pop()
        .expect("an export after the flush")
}

/// One data point: a counter's value, or a histogram's sum and count.
struct Point {
    attributes: Vec<KeyValue>,
    value: f64,
    count: u64,
}

fn points(metrics: &ResourceMetrics, name: &str) -> Vec<Point> {
    fn collect<T: Copy>(data: &MetricData<T>, to_f64: fn(T) -> f64, found: &mut Vec<Point>) {
        match data {
            MetricData::Sum(sum) => found.extend(sum.data_points().map(|point| Point {
                attributes: point.attributes().cloned().collect(),
                value: to_f64(point.value()),
                count: 1,
            })),
            MetricData::Histogram(histogram) => {
                found.extend(histogram.data_points().map(|point| Point {
                    attributes: point.attributes().cloned().collect(),
                    value: to_f64(point.sum()),
                    count: point.count(),
                }))
            }
            MetricData::Gauge(_) | MetricData::ExponentialHistogram(_) => {}
        }
    }
    let mut found = Vec::new();
    for scope in metrics.scope_metrics() {
        for metric in scope.metrics().filter(|metric| metric.name() == name) {
            match metric.data() {
                AggregatedMetrics::U64(data) => collect(data, |value| value as f64, &mut found),
                AggregatedMetrics::I64(data) => collect(data, |value| value as f64, &mut found),
                AggregatedMetrics::F64(data) => collect(data, |value| value, &mut found),
            }
        }
    }
    found
}

/// The data points of `name` that carry every attribute in `wanted`.
fn matching(metrics: &ResourceMetrics, name: &str, wanted: &[(&str, &str)]) -> Vec<Point> {
    points(metrics, name)
        .into_iter()
        .filter(|point| {
            wanted.iter().all(|(key, value)| {
                point.attributes.iter().any(|attribute| {
                    attribute.key.as_str() == *key && attribute.value.as_str() == *value
                })
            })
        })
        .collect()
}

/// A counter's total over the data points that carry `wanted`.
fn total(metrics: &ResourceMetrics, name: &str, wanted: &[(&str, &str)]) -> f64 {
    matching(metrics, name, wanted)
        .iter()
        .map(|point| point.value)
        .sum()
}

/// How many values a histogram recorded in the data points that carry `wanted`.
fn recorded(metrics: &ResourceMetrics, name: &str, wanted: &[(&str, &str)]) -> u64 {
    matching(metrics, name, wanted)
        .iter()
        .map(|point| point.count)
        .sum()
}

#[tokio::test]
async fn prompts_rounds_tool_calls_tokens_and_sandbox_runs_are_counted() {
    telemetry();
    let classic_marker = format!("metrics-classic-{}", uuid::Uuid::new_v4());
    let code_marker = format!("metrics-code-{}", uuid::Uuid::new_v4());
    let stack = Stack::start(vec![
        calls(
            Match::All(vec![
                Match::AnyMessageContains(classic_marker.clone()),
                Match::NoToolResults,
            ]),
            vec![call("demo__echo", json!({"a": 1}))],
        )
        .usage(11, 7),
        text(
            Match::All(vec![
                Match::AnyMessageContains(classic_marker.clone()),
                Match::HasToolResults,
            ]),
            "Echoed.",
        ),
        Rule::new(
            Match::All(vec![
                Match::AnyMessageContains(code_marker.clone()),
                Match::AssistantTurns(0),
            ]),
            Reply::Text("demoEcho({a: 1}); complete({response: 'ok'});".into()),
        ),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    for (marker, mode) in [(&classic_marker, "classic"), (&code_marker, "code")] {
        let prompt = client
            .create_prompt(NewPrompt::new(marker.as_str()).mode(mode))
            .await
            .unwrap();
        let events = collect(&client, &prompt.id, 0).await;
        assert_eq!(kind(events.last().unwrap()), "completed", "{mode} prompt");
    }

    // The gateway counts a run once it has published its last event: wait for both.
    let completed = |metrics: &ResourceMetrics, mode: &str| {
        total(
            metrics,
            "agentic.prompts",
            &[("mode", mode), ("state", "COMPLETED")],
        )
    };
    let mut metrics = None;
    eventually("both prompts counted", || {
        let now = metrics_now();
        let counted = completed(&now, "classic") >= 1.0 && completed(&now, "code") >= 1.0;
        metrics = Some(now);
        counted
    })
    .await;
    let metrics = metrics.unwrap();

    // Only present: its value is not checked, because a run of another test that started
    // before this process's meter provider was installed ends on it with a lone -1.
    assert!(
        !matching(&metrics, "agentic.prompts.active", &[("mode", "code")]).is_empty(),
        "no active-prompts count for code mode"
    );
    assert!(total(&metrics, "agentic.rounds", &[("mode", "classic")]) >= 2.0);
    assert!(total(&metrics, "agentic.rounds", &[("mode", "code")]) >= 1.0);
    assert!(
        total(
            &metrics,
            "agentic.tool_calls",
            &[("tool", "demo.echo"), ("result", "success")]
        ) >= 2.0,
        "one demo.echo call per prompt"
    );
    let model = [(genai::REQUEST_MODEL, "stand-in-normal")];
    let input_tokens = matching(
        &metrics,
        genai::METRIC_TOKEN_USAGE,
        &[model[0], (genai::TOKEN_TYPE, genai::TOKEN_TYPE_INPUT)],
    );
    assert!(input_tokens.iter().map(|point| point.count).sum::<u64>() >= 3);
    assert!(input_tokens.iter().map(|point| point.value).sum::<f64>() >= 11.0);
    assert!(
        recorded(
            &metrics,
            genai::METRIC_TOKEN_USAGE,
            &[model[0], (genai::TOKEN_TYPE, genai::TOKEN_TYPE_OUTPUT)]
        ) >= 3
    );
    let durations = matching(
        &metrics,
        genai::METRIC_OPERATION_DURATION,
        &[model[0], (genai::OPERATION_NAME, genai::OPERATION_CHAT)],
    );
    assert!(durations.iter().map(|point| point.count).sum::<u64>() >= 3);
    assert!(durations.iter().map(|point| point.value).sum::<f64>() > 0.0);
    assert!(recorded(&metrics, "agentic.sandbox.duration", &[("outcome", "ok")]) >= 1);
}

#[tokio::test]
async fn a_prompt_created_over_http_joins_the_callers_trace_through_an_http_server_span() {
    telemetry();
    let marker = format!("http-trace-{}", uuid::Uuid::new_v4());
    let stack = Stack::start(vec![Rule::new(
        Match::All(vec![
            Match::AnyMessageContains(marker.clone()),
            Match::AssistantTurns(0),
        ]),
        Reply::Text("demoEcho({a: 1}); complete({response: 'ok'});".into()),
    )])
    .await
    .unwrap();
    // The caller's trace and span, as a W3C traceparent.
    let trace = TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap();
    let caller = SpanId::from_hex("00f067aa0ba902b7").unwrap();
    let answer: serde_json::Value = reqwest::Client::new()
        .post(format!("{}/v1/prompts", stack.gateway_http_url()))
        .header("x-user-id", "alice")
        .header("traceparent", format!("00-{trace}-{caller}-01"))
        .json(&serde_json::json!({"input": marker, "mode": "code"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let prompt_id = answer["id"].as_str().unwrap().to_owned();
    let (found, spans) = trace_of_prompt(&prompt_id).await;
    assert_eq!(found, trace, "the prompt is in the caller's trace");
    let server = spans
        .iter()
        .find(|span| span.name == "POST /v1/prompts")
        .unwrap_or_else(|| {
            let names: Vec<_> = spans.iter().map(|span| span.name.to_string()).collect();
            panic!("no HTTP server span in {names:?}")
        });
    assert_eq!(
        server.parent_span_id, caller,
        "a child of the caller's span"
    );
    assert_eq!(server.span_kind, opentelemetry::trace::SpanKind::Server);
    assert_eq!(
        string_attribute(server, "http.route").as_deref(),
        Some("/v1/prompts")
    );
    // The gateway's work for the prompt hangs under it.
    assert!(
        spans
            .iter()
            .any(|span| span.name == format!("prompt {prompt_id}")),
        "{spans:?}"
    );
}
