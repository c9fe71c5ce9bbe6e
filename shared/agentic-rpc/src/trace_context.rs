//! W3C trace context over gRPC metadata, through the global propagator (set by
//! `agentic_telemetry::init` when traces are exported; without one nothing travels).

use opentelemetry::propagation::{Extractor, Injector};
use tonic::codegen::http;
use tonic::metadata::{MetadataKey, MetadataMap, MetadataValue};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// Client side: writes the current span's context into outgoing metadata.
pub(crate) fn inject(metadata: &mut MetadataMap) {
    let context = tracing::Span::current().context();
    opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.inject_context(&context, &mut MetadataInjector(metadata));
    });
}

/// Server side: the span a call is served in, child of the caller's context (if any).
/// Health checks and reflection get none: probes every few seconds would drown the traces.
pub(crate) fn server_span(request: &http::Request<()>) -> tracing::Span {
    let path = request.uri().path();
    if path.starts_with("/grpc.health.") || path.starts_with("/grpc.reflection.") {
        return tracing::Span::none();
    }
    let span = tracing::info_span!(
        "grpc",
        otel.name = path.trim_start_matches('/'),
        otel.kind = "server",
        rpc.system = "grpc",
    );
    let parent = opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.extract(&HeaderExtractor(request.headers()))
    });
    // Fails only when no OpenTelemetry layer is installed; then there is nothing to link.
    let _ = span.set_parent(parent);
    span
}

/// The span an HTTP request is served in (the gateway's HTTP API, which calls the gRPC
/// service in process): `METHOD route`, child of the caller's `traceparent` (if any), so a
/// prompt created over HTTP is one trace with its caller's.
pub fn http_server_span(
    method: &http::Method,
    route: &str,
    headers: &http::HeaderMap,
) -> tracing::Span {
    let span = tracing::info_span!(
        "http",
        otel.name = %format!("{method} {route}"),
        otel.kind = "server",
        http.request.method = %method,
        http.route = route,
    );
    let parent = opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.extract(&HeaderExtractor(headers))
    });
    let _ = span.set_parent(parent);
    span
}

/// `span`'s context as a W3C `traceparent`, to keep with what outlives the span (a durable
/// pause); `None` when no propagator is installed or the span is not traced.
pub fn traceparent_of(span: &tracing::Span) -> Option<String> {
    let context = span.context();
    let mut carrier = std::collections::HashMap::new();
    opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.inject_context(&context, &mut carrier);
    });
    carrier.remove("traceparent")
}

/// Makes `span` continue the trace `traceparent` names (as a child of that span), linked to
/// the current span: what made it go on now (a person's decision, a restart).
pub fn continue_trace(span: &tracing::Span, traceparent: &str) {
    use opentelemetry::trace::TraceContextExt as _;
    let carrier =
        std::collections::HashMap::from([("traceparent".to_owned(), traceparent.to_owned())]);
    let parent =
        opentelemetry::global::get_text_map_propagator(|propagator| propagator.extract(&carrier));
    if !parent.span().span_context().is_valid() {
        return;
    }
    let cause = tracing::Span::current()
        .context()
        .span()
        .span_context()
        .clone();
    let _ = span.set_parent(parent);
    if cause.is_valid() {
        span.add_link(cause);
    }
}

struct MetadataInjector<'a>(&'a mut MetadataMap);

impl Injector for MetadataInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(key), Ok(value)) = (
            MetadataKey::from_bytes(key.as_bytes()),
            MetadataValue::try_from(value),
        ) {
            self.0.insert(key, value);
        }
    }
}

struct HeaderExtractor<'a>(&'a http::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|key| key.as_str()).collect()
    }
}
