//! Figures, their targets and how they are shown: the printed table and `results.json`.

use std::time::Duration;

use serde::Serialize;
use serde_json::{Value as Json, json};

/// Latency samples in microseconds.
#[derive(Debug, Clone, Default)]
pub struct Samples(Vec<f64>);

impl Samples {
    pub fn new() -> Samples {
        Samples(Vec::new())
    }

    pub fn push(&mut self, duration: Duration) {
        self.0.push(duration.as_secs_f64() * 1e6);
    }

    pub fn push_micros(&mut self, micros: f64) {
        self.0.push(micros);
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Nearest-rank percentile (`p` in 0..=100); 0 when there are no samples.
    pub fn percentile(&self, p: f64) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        let mut sorted = self.0.clone();
        sorted.sort_by(f64::total_cmp);
        let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
        sorted[rank.clamp(1, sorted.len()) - 1]
    }

    pub fn latency(&self) -> Latency {
        Latency {
            p50_us: self.percentile(50.0),
            p99_us: self.percentile(99.0),
            samples: self.len(),
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Latency {
    pub p50_us: f64,
    pub p99_us: f64,
    pub samples: usize,
}

/// What a figure is checked against. Latency targets are checked against the p50, except
/// [`Target::MaxP99Micros`].
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Target {
    /// p50 at most this many microseconds.
    MaxMicros { micros: f64 },
    /// p50 at most this many baseline round trips (p50 of the baseline).
    MaxRoundTrips { round_trips: f64 },
    /// p99 at most this many microseconds.
    MaxP99Micros { micros: f64 },
    /// The value at most this (in the figure's unit).
    Max { value: f64 },
    /// The value at least this (in the figure's unit).
    Min { value: f64 },
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Measured {
    Latency(Latency),
    Value { value: f64, unit: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Status {
    Pass,
    Miss,
    /// Measured for information; no target.
    Info,
    Skipped,
    /// The measurement itself failed.
    Error,
}

#[derive(Debug, Clone, Serialize)]
pub struct Figure {
    /// The item of the issue (`1`, `2a`, …).
    pub item: String,
    pub name: String,
    pub measured: Option<Measured>,
    pub target: Option<Target>,
    /// p50 and p99 in baseline round trips (latencies only).
    pub round_trips: Option<(f64, f64)>,
    pub status: Status,
    /// How it was measured, or why it was skipped.
    pub note: String,
    /// Extra numbers (per-service RSS, byte counts, …).
    #[serde(skip_serializing_if = "Json::is_null")]
    pub details: Json,
}

impl Figure {
    pub fn latency(item: &str, name: &str, latency: Latency, target: Option<Target>) -> Figure {
        Figure {
            item: item.to_owned(),
            name: name.to_owned(),
            measured: Some(Measured::Latency(latency)),
            target,
            round_trips: None,
            status: Status::Info,
            note: String::new(),
            details: Json::Null,
        }
    }

    pub fn value(item: &str, name: &str, value: f64, unit: &str, target: Option<Target>) -> Figure {
        Figure {
            item: item.to_owned(),
            name: name.to_owned(),
            measured: Some(Measured::Value {
                value,
                unit: unit.to_owned(),
            }),
            target,
            round_trips: None,
            status: Status::Info,
            note: String::new(),
            details: Json::Null,
        }
    }

    pub fn skipped(item: &str, name: &str, why: &str) -> Figure {
        Figure {
            item: item.to_owned(),
            name: name.to_owned(),
            measured: None,
            target: None,
            round_trips: None,
            status: Status::Skipped,
            note: why.to_owned(),
            details: Json::Null,
        }
    }

    pub fn failed(item: &str, name: &str, error: &anyhow::Error) -> Figure {
        Figure {
            status: Status::Error,
            ..Figure::skipped(item, name, &format!("{error:#}"))
        }
    }

    pub fn note(mut self, note: impl Into<String>) -> Figure {
        self.note = note.into();
        self
    }

    pub fn details(mut self, details: Json) -> Figure {
        self.details = details;
        self
    }

    /// Adds the baseline units and decides PASS/MISS.
    pub fn judged(mut self, baseline: &Latency) -> Figure {
        if let Some(Measured::Latency(latency)) = &self.measured {
            self.round_trips = Some((
                latency.p50_us / baseline.p50_us,
                latency.p99_us / baseline.p50_us,
            ));
        }
        let (Some(measured), Some(target)) = (&self.measured, self.target) else {
            return self;
        };
        let pass = match (measured, target) {
            (Measured::Latency(latency), Target::MaxMicros { micros }) => latency.p50_us <= micros,
            (Measured::Latency(latency), Target::MaxRoundTrips { round_trips }) => {
                latency.p50_us / baseline.p50_us <= round_trips
            }
            (Measured::Latency(latency), Target::MaxP99Micros { micros }) => {
                latency.p99_us <= micros
            }
            (Measured::Value { value, .. }, Target::Max { value: limit }) => *value <= limit,
            (Measured::Value { value, .. }, Target::Min { value: limit }) => *value >= limit,
            _ => false,
        };
        self.status = if pass { Status::Pass } else { Status::Miss };
        self
    }
}

/// `850 µs`, `12.3 ms`, `1.20 s`.
pub fn micros_text(micros: f64) -> String {
    if micros < 10.0 {
        format!("{micros:.2} µs")
    } else if micros < 1000.0 {
        format!("{micros:.0} µs")
    } else if micros < 1_000_000.0 {
        format!("{:.2} ms", micros / 1000.0)
    } else {
        format!("{:.2} s", micros / 1e6)
    }
}

fn value_text(value: f64, unit: &str) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{value:.0} {unit}")
    } else {
        format!("{value:.2} {unit}")
    }
}

fn target_text(target: Option<Target>, unit: &str) -> String {
    match target {
        None => "-".to_owned(),
        Some(Target::MaxMicros { micros }) => format!("≤ {}", micros_text(micros)),
        Some(Target::MaxRoundTrips { round_trips }) => format!("≤ {round_trips} RT"),
        Some(Target::MaxP99Micros { micros }) => format!("p99 ≤ {}", micros_text(micros)),
        Some(Target::Max { value }) => format!("≤ {}", value_text(value, unit)),
        Some(Target::Min { value }) => format!("≥ {}", value_text(value, unit)),
    }
}

/// The table `make bench` prints (Markdown, so it can be pasted into README.md).
pub fn table(baseline: &Latency, figures: &[Figure]) -> String {
    let mut lines = vec![
        "| # | figure | p50 / value | p99 | in baseline RT (p50 / p99) | target | result |"
            .to_owned(),
        "|---|---|---|---|---|---|---|".to_owned(),
        format!(
            "| 0 | baseline: tonic unary round trip on loopback (health Check) | {} | {} | 1 | - | - |",
            micros_text(baseline.p50_us),
            micros_text(baseline.p99_us)
        ),
    ];
    for figure in figures {
        let (value, p99, unit) = match &figure.measured {
            Some(Measured::Latency(latency)) => (
                micros_text(latency.p50_us),
                micros_text(latency.p99_us),
                String::new(),
            ),
            Some(Measured::Value { value, unit }) => {
                (value_text(*value, unit), "-".to_owned(), unit.clone())
            }
            None => ("-".to_owned(), "-".to_owned(), String::new()),
        };
        let round_trips = figure
            .round_trips
            .map(|(p50, p99)| format!("{p50:.1} / {p99:.1}"))
            .unwrap_or_else(|| "-".to_owned());
        let status = match figure.status {
            Status::Pass => "PASS".to_owned(),
            Status::Miss => "**MISS**".to_owned(),
            Status::Info => "info".to_owned(),
            Status::Skipped => format!("SKIPPED ({})", figure.note),
            Status::Error => format!("**ERROR** ({})", figure.note),
        };
        lines.push(format!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            figure.item,
            figure.name,
            value,
            p99,
            round_trips,
            target_text(figure.target, &unit),
            status
        ));
    }
    lines.join("\n")
}

/// Everything `results.json` holds.
pub fn results_json(baseline: &Latency, figures: &[Figure], quick: bool) -> Json {
    json!({
        "quick": quick,
        "machine": machine(),
        "git_commit": git_commit(),
        "baseline": {
            "name": "tonic unary round trip on 127.0.0.1 (grpc.health.v1 Check)",
            "latency": baseline,
        },
        "targets_checked_against": "p50 for latencies, p99 for max_p99_micros",
        "figures": figures,
    })
}

fn machine() -> Json {
    let cores = std::thread::available_parallelism()
        .map(|cores| cores.get())
        .unwrap_or(0);
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split(':').nth(1))
                .map(|name| name.trim().to_owned())
        });
    json!({
        "cores": cores,
        "cpu": cpu,
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
    })
}

fn git_commit() -> Option<String> {
    let output = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let commit = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let dirty = std::process::Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .map(|status| !status.stdout.is_empty())
        .unwrap_or(false);
    Some(if dirty {
        format!("{commit}-dirty")
    } else {
        commit
    })
}
