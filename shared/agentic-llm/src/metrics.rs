//! The GenAI client metrics of LLM calls (OpenTelemetry semantic conventions).

use std::time::Duration;

use agentic_telemetry::genai;
use agentic_telemetry::metrics::Instruments;
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Histogram, Meter};

use crate::{LlmError, Usage};

struct Llm {
    token_usage: Histogram<u64>,
    duration: Histogram<f64>,
}

// A static is fine here: the global meter provider is the process-wide registry anyway.
static INSTRUMENTS: Instruments<Llm> = Instruments::new(|meter: &Meter| Llm {
    token_usage: meter
        .u64_histogram(genai::METRIC_TOKEN_USAGE)
        .with_description("Tokens used per LLM call, by token type")
        .with_unit("{token}")
        // The buckets the GenAI conventions advise.
        .with_boundaries(vec![
            1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0,
            4194304.0, 16777216.0, 67108864.0,
        ])
        .build(),
    duration: meter
        .f64_histogram(genai::METRIC_OPERATION_DURATION)
        .with_description("Duration of LLM calls, retries included")
        .with_unit("s")
        .with_boundaries(vec![
            0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
        ])
        .build(),
});

/// One finished `chat` call to `model`: its duration, and its token usage when it succeeded.
pub(crate) fn chat_finished(model: &str, elapsed: Duration, outcome: Result<&Usage, &LlmError>) {
    let outcome = outcome
        .map(|usage| (usage.input_tokens, usage.output_tokens))
        .map_err(error_type);
    record_chat(genai::PROVIDER_OPENAI, model, elapsed, outcome);
}

/// One finished `chat` call to `provider`'s `model` (the GenAI client metrics): its duration,
/// and its input and output tokens when it succeeded, else its `error.type`. For clients of
/// other providers than `OpenAiChatModel` (the hosted executor's Anthropic client).
pub fn record_chat(
    provider: &str,
    model: &str,
    elapsed: Duration,
    outcome: Result<(u64, u64), String>,
) {
    let instruments = INSTRUMENTS.get();
    let mut attributes = vec![
        KeyValue::new(genai::OPERATION_NAME, genai::OPERATION_CHAT),
        KeyValue::new(genai::PROVIDER_NAME, provider.to_owned()),
        KeyValue::new(genai::REQUEST_MODEL, model.to_owned()),
    ];
    match outcome {
        Ok((input, output)) => {
            for (token_type, count) in [
                (genai::TOKEN_TYPE_INPUT, input),
                (genai::TOKEN_TYPE_OUTPUT, output),
            ] {
                let mut attributes = attributes.clone();
                attributes.push(KeyValue::new(genai::TOKEN_TYPE, token_type));
                instruments.token_usage.record(count, &attributes);
            }
        }
        Err(error_type) => attributes.push(KeyValue::new(genai::ERROR_TYPE, error_type)),
    }
    instruments
        .duration
        .record(elapsed.as_secs_f64(), &attributes);
}

fn error_type(error: &LlmError) -> String {
    match error {
        LlmError::Status { status, .. } => status.as_u16().to_string(),
        LlmError::Timeout { .. } => "timeout".into(),
        LlmError::Connection { .. } => "connection".into(),
        LlmError::InvalidResponse { .. } => "invalid_response".into(),
        LlmError::Setup { .. } => "setup".into(),
        LlmError::Recording { .. } => "recording".into(),
    }
}

/// The span of one `chat` call to `provider`'s `model` (GenAI conventions), retries included;
/// [`chat_span_ended`] records how it ended.
pub fn chat_span(provider: &str, model: &str) -> tracing::Span {
    tracing::info_span!(
        "chat",
        otel.name = %format_args!("chat {model}"),
        otel.kind = "client",
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = provider,
        gen_ai.request.model = %model,
        gen_ai.usage.input_tokens = tracing::field::Empty,
        gen_ai.usage.output_tokens = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
        otel.status_message = tracing::field::Empty,
    )
}

/// Records on a [`chat_span`] the tokens of the answer, or the error.
pub fn chat_span_ended(span: &tracing::Span, outcome: Result<(u64, u64), &dyn std::fmt::Display>) {
    match outcome {
        Ok((input, output)) => {
            // As i64: tracing-opentelemetry exports u64 values as strings.
            let tokens = |count: u64| i64::try_from(count).unwrap_or(i64::MAX);
            span.record("gen_ai.usage.input_tokens", tokens(input));
            span.record("gen_ai.usage.output_tokens", tokens(output));
        }
        Err(error) => {
            span.record("otel.status_code", "ERROR");
            span.record("otel.status_message", tracing::field::display(error));
        }
    }
}
