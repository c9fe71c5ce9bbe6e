//! Conversions between `serde_json::Value` and the protobuf `google.protobuf.Value` family,
//! plus timestamp helpers. JSON payloads travel as protobuf values on every contract.

use std::time::SystemTime;

use prost_types::{ListValue, Struct, Timestamp, Value, value::Kind};
use serde_json::{Map, Number, Value as Json};

/// Converts a JSON value into a protobuf value. Numbers become doubles (protobuf has no
/// integer kind), so integers beyond 2^53 lose precision, as they do in JavaScript.
pub fn to_proto(json: &Json) -> Value {
    let kind = match json {
        Json::Null => Kind::NullValue(0),
        Json::Bool(value) => Kind::BoolValue(*value),
        Json::Number(number) => Kind::NumberValue(number.as_f64().unwrap_or(f64::NAN)),
        Json::String(value) => Kind::StringValue(value.clone()),
        Json::Array(items) => Kind::ListValue(ListValue {
            values: items.iter().map(to_proto).collect(),
        }),
        Json::Object(map) => Kind::StructValue(map_to_struct(map)),
    };
    Value { kind: Some(kind) }
}

/// Converts a protobuf value into JSON. Whole doubles become integers so that `3` stays `3`.
pub fn from_proto(value: &Value) -> Json {
    match &value.kind {
        None | Some(Kind::NullValue(_)) => Json::Null,
        Some(Kind::BoolValue(value)) => Json::Bool(*value),
        Some(Kind::NumberValue(number)) => number_to_json(*number),
        Some(Kind::StringValue(value)) => Json::String(value.clone()),
        Some(Kind::ListValue(list)) => Json::Array(list.values.iter().map(from_proto).collect()),
        Some(Kind::StructValue(fields)) => Json::Object(struct_to_map(fields)),
    }
}

/// `from_proto` for an optional field: a missing value is JSON `null`.
pub fn from_proto_opt(value: Option<&Value>) -> Json {
    value.map(from_proto).unwrap_or(Json::Null)
}

pub fn map_to_struct(map: &Map<String, Json>) -> Struct {
    Struct {
        fields: map
            .iter()
            .map(|(key, value)| (key.clone(), to_proto(value)))
            .collect(),
    }
}

pub fn struct_to_map(fields: &Struct) -> Map<String, Json> {
    fields
        .fields
        .iter()
        .map(|(key, value)| (key.clone(), from_proto(value)))
        .collect()
}

/// A JSON object as a protobuf struct; anything that is not an object becomes an empty struct.
pub fn json_to_struct(json: &Json) -> Struct {
    match json {
        Json::Object(map) => map_to_struct(map),
        _ => Struct::default(),
    }
}

pub fn struct_to_json(fields: Option<&Struct>) -> Json {
    Json::Object(fields.map(struct_to_map).unwrap_or_default())
}

fn number_to_json(number: f64) -> Json {
    const MAX_EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if number.fract() == 0.0 && number.abs() <= MAX_EXACT {
        // Exact: the value is whole and within the range a double represents exactly.
        #[allow(clippy::cast_possible_truncation)]
        return Json::Number(Number::from(number as i64));
    }
    Number::from_f64(number)
        .map(Json::Number)
        .unwrap_or(Json::Null)
}

pub fn now() -> Timestamp {
    Timestamp::from(SystemTime::now())
}

/// Milliseconds since the Unix epoch, the storage form of timestamps.
pub fn timestamp_millis(timestamp: &Timestamp) -> i64 {
    timestamp.seconds * 1000 + i64::from(timestamp.nanos) / 1_000_000
}

pub fn timestamp_from_millis(millis: i64) -> Timestamp {
    Timestamp {
        seconds: millis.div_euclid(1000),
        nanos: (millis.rem_euclid(1000) * 1_000_000) as i32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_survives_a_round_trip_through_protobuf_values() {
        let original = json!({"a": 1, "b": [true, null, "x", 2.5], "c": {"d": -7}});
        assert_eq!(from_proto(&to_proto(&original)), original);
    }

    #[test]
    fn timestamps_round_trip_through_millis() {
        let stamp = timestamp_from_millis(1_700_000_000_123);
        assert_eq!(timestamp_millis(&stamp), 1_700_000_000_123);
    }
}
