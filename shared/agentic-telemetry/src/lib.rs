//! Logging and tracing set-up shared by every agentic binary: `tracing` to stderr, filtered by
//! `RUST_LOG` (default `info`), as JSON lines when `AGENTIC_LOG_FORMAT=json`; spans exported
//! as OpenTelemetry traces, and metrics (see [`metrics`]), over OTLP gRPC when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set. [`errors`]: what callers are told about failures whose
//! details only the log may see; [`text`]: texts cut to a bound before a caller or a model
//! sees them.

pub mod errors;
pub mod genai;
pub mod metrics;
pub mod text;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// Keeps the trace and metric exporters alive; dropping it flushes the spans and metrics not
/// yet exported. `main` holds it until the service has stopped.
#[must_use = "dropping the guard stops trace and metric export"]
pub struct TelemetryGuard {
    provider: Option<SdkTracerProvider>,
    meter_provider: Option<SdkMeterProvider>,
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take()
            && let Err(error) = provider.shutdown()
        {
            eprintln!("cannot flush traces: {error}");
        }
        if let Some(provider) = self.meter_provider.take()
            && let Err(error) = provider.shutdown()
        {
            eprintln!("cannot flush metrics: {error}");
        }
    }
}

/// Installs the global subscriber (and, with an OTLP endpoint, the global W3C trace-context
/// propagator and the global meter provider). Call once, from `main`, inside the tokio runtime (the OTLP exporter's channel
/// lives on it), never from library code or tests.
pub fn init(service: &str) -> TelemetryGuard {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Listed in `agentic_rpc::config::TELEMETRY_SETTINGS`, so `--check-config` accepts it.
    let json = std::env::var("AGENTIC_LOG_FORMAT").is_ok_and(|format| format == "json");
    let logs = if json {
        tracing_subscriber::fmt::layer()
            .json()
            .with_writer(std::io::stderr)
            .boxed()
    } else {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .boxed()
    };
    // The variable is read by the exporter itself; here it only switches export on.
    let export = std::env::var_os("OTEL_EXPORTER_OTLP_ENDPOINT").is_some_and(|url| !url.is_empty());
    let (provider, exporter_error) = if export {
        match tracer_provider(service) {
            Ok(provider) => (Some(provider), None),
            Err(error) => (None, Some(error)),
        }
    } else {
        (None, None)
    };
    let (meter_provider, metrics_error) = if export {
        match meter_provider(service) {
            Ok(provider) => {
                opentelemetry::global::set_meter_provider(provider.clone());
                (Some(provider), None)
            }
            Err(error) => (None, Some(error)),
        }
    } else {
        (None, None)
    };
    let traces = provider.as_ref().map(|provider| {
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        tracing_opentelemetry::layer().with_tracer(provider.tracer(service.to_owned()))
    });
    tracing_subscriber::registry()
        .with(filter)
        .with(logs)
        .with(traces)
        .init();
    if let Some(error) = exporter_error {
        tracing::error!(%error, "cannot set up trace export, traces are not exported");
    }
    if let Some(error) = metrics_error {
        tracing::error!(%error, "cannot set up metric export, metrics are not exported");
    }
    tracing::info!(
        service,
        traces = provider.is_some(),
        metrics = meter_provider.is_some(),
        "starting"
    );
    TelemetryGuard {
        provider,
        meter_provider,
    }
}

/// Metrics are collected and pushed every `OTEL_METRIC_EXPORT_INTERVAL` (default 60 s) and
/// when the guard is dropped.
fn meter_provider(
    service: &str,
) -> Result<SdkMeterProvider, opentelemetry_otlp::ExporterBuildError> {
    let exporter = opentelemetry_otlp::MetricExporter::builder()
        .with_tonic()
        .build()?;
    Ok(SdkMeterProvider::builder()
        .with_resource(resource(service))
        .with_periodic_exporter(exporter)
        .build())
}

fn tracer_provider(
    service: &str,
) -> Result<SdkTracerProvider, opentelemetry_otlp::ExporterBuildError> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .build()?;
    Ok(SdkTracerProvider::builder()
        .with_resource(resource(service))
        .with_batch_exporter(exporter)
        .build())
}

/// The resource every span and metric of `service` carries: `service.name` is the service, plus what
/// `OTEL_RESOURCE_ATTRIBUTES` adds.
pub fn resource(service: &str) -> Resource {
    Resource::builder()
        .with_service_name(service.to_owned())
        .build()
}
