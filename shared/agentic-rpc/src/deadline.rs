//! The caller's gRPC deadline (`grpc-timeout`), for work that outlives its handler's future
//! (a streamed answer): tonic bounds only the time until the answer's headers.

use std::time::Duration;

/// The deadline `metadata` carries (`grpc-timeout`: at most 8 digits and a unit), if any.
pub fn grpc_deadline(metadata: &tonic::metadata::MetadataMap) -> Option<Duration> {
    let value = metadata.get("grpc-timeout")?.to_str().ok()?;
    if value.len() < 2 || value.len() > 9 {
        return None;
    }
    let (amount, unit) = value.split_at(value.len() - 1);
    let amount: u64 = amount.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(amount.saturating_mul(3600)),
        "M" => Duration::from_secs(amount.saturating_mul(60)),
        "S" => Duration::from_secs(amount),
        "m" => Duration::from_millis(amount),
        "u" => Duration::from_micros(amount),
        "n" => Duration::from_nanos(amount),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(value: &str) -> Option<Duration> {
        let mut metadata = tonic::metadata::MetadataMap::new();
        metadata.insert("grpc-timeout", value.parse().unwrap());
        grpc_deadline(&metadata)
    }

    #[test]
    fn every_unit_reads_and_anything_else_is_no_deadline() {
        assert_eq!(of("100m"), Some(Duration::from_millis(100)));
        assert_eq!(of("2S"), Some(Duration::from_secs(2)));
        assert_eq!(of("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(of("5u"), Some(Duration::from_micros(5)));
        assert_eq!(of("123456789S"), None, "nine digits");
        assert_eq!(of("10x"), None);
        assert_eq!(of("m"), None);
    }
}
