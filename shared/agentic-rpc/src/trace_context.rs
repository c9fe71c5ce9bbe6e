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
