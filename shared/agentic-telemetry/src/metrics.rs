//! Metrics: every crate records on instruments of the global meter provider (meter
//! [`METER`]), so library code needs no plumbing. [`init`](crate::init) installs an OTLP
//! provider when `OTEL_EXPORTER_OTLP_ENDPOINT` is set; otherwise the global provider is the
//! no-op one and recording costs next to nothing.

use std::sync::{Arc, Mutex, PoisonError};

use opentelemetry::metrics::{Meter, MeterProvider};

/// The instrumentation scope of every agentic instrument.
pub const METER: &str = "agentic";

/// Attribute names of our own (non-GenAI) metrics.
pub const MODE: &str = "mode";
pub const STATE: &str = "state";
pub const TOOL: &str = "tool";
pub const RESULT: &str = "result";
pub const OUTCOME: &str = "outcome";

/// A crate's instruments, built once per global meter provider.
///
/// Meant for a `static`: the OpenTelemetry global meter provider *is* the process-wide
/// registry of instruments, so caching its instruments process-wide adds no hidden state.
/// They are rebuilt when the global provider changes, because an instrument keeps the
/// provider it was built from: one built before `init` (or, in tests, before the in-memory
/// provider is installed) would otherwise stay a no-op forever.
pub struct Instruments<T> {
    build: fn(&Meter) -> T,
    current: Mutex<Option<Current<T>>>,
}

type Current<T> = (Arc<dyn MeterProvider + Send + Sync>, Arc<T>);

impl<T> Instruments<T> {
    pub const fn new(build: fn(&Meter) -> T) -> Instruments<T> {
        Instruments {
            build,
            current: Mutex::new(None),
        }
    }

    /// The instruments of the current global meter provider.
    pub fn get(&self) -> Arc<T> {
        let provider = opentelemetry::global::meter_provider();
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((built_for, instruments)) = current.as_ref()
            && Arc::ptr_eq(built_for, &provider)
        {
            return Arc::clone(instruments);
        }
        let instruments = Arc::new((self.build)(&provider.meter(METER)));
        *current = Some((provider, Arc::clone(&instruments)));
        instruments
    }
}
