//! A prompt's output schema (typed answers), checked before anything is stored: an object
//! within its bounds that compiles as a JSON Schema (no remote references are fetched: the
//! validator's network features are off). The modes check the answer against it.

use agentic_proto::json::struct_to_json;
use serde_json::Value as Json;

use crate::error::GatewayError;

/// Encoded bytes of an output schema, at most.
pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;
/// Properties an output schema declares, all levels together, at most.
pub const MAX_SCHEMA_PROPERTIES: usize = 1_000;

/// Refuses an output schema past its bounds or that is no JSON Schema.
pub fn check_schema(schema: Option<&prost_types::Struct>) -> Result<(), GatewayError> {
    let Some(schema) = schema else {
        return Ok(());
    };
    let invalid = |reason: String| Err(GatewayError::InvalidArgument(reason));
    let bytes = prost::Message::encoded_len(schema);
    if bytes > MAX_SCHEMA_BYTES {
        return invalid(format!(
            "output_schema is {bytes} bytes, more than the {MAX_SCHEMA_BYTES} it may have"
        ));
    }
    let json = struct_to_json(Some(schema));
    let properties = properties(&json);
    if properties > MAX_SCHEMA_PROPERTIES {
        return invalid(format!(
            "output_schema declares {properties} properties, more than the {MAX_SCHEMA_PROPERTIES} it may"
        ));
    }
    if let Err(error) = jsonschema::validator_for(&json) {
        return invalid(format!("output_schema is no valid JSON Schema: {error}"));
    }
    Ok(())
}

/// The properties `schema` declares at every level (`properties` objects' keys).
fn properties(schema: &Json) -> usize {
    match schema {
        Json::Object(fields) => fields
            .iter()
            .map(|(key, value)| {
                let own = match (key.as_str(), value) {
                    ("properties", Json::Object(declared)) => declared.len(),
                    _ => 0,
                };
                own + properties(value)
            })
            .sum(),
        Json::Array(items) => items.iter().map(properties).sum(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentic_proto::json::json_to_struct;
    use serde_json::json;

    fn check(schema: Json) -> Result<(), GatewayError> {
        check_schema(Some(&json_to_struct(&schema)))
    }

    #[test]
    fn a_schema_is_refused_past_its_bounds_or_when_it_does_not_compile() {
        check(json!({"type": "object", "properties": {"city": {"type": "string"}}})).unwrap();
        assert!(check_schema(None).is_ok());
        let many: serde_json::Map<String, Json> = (0..10_000)
            .map(|n| (format!("p{n}"), json!({"type": "integer"})))
            .collect();
        let refused = check(json!({"type": "object", "properties": many})).unwrap_err();
        assert!(
            refused.to_string().contains("bytes") || refused.to_string().contains("properties")
        );
        let nested = json!({"properties": {"a": {"properties": (0..600)
            .map(|n| (format!("q{n}"), json!({})))
            .collect::<serde_json::Map<_, _>>()}}, "items": [{"properties": (0..600)
            .map(|n| (format!("r{n}"), json!({})))
            .collect::<serde_json::Map<_, _>>()}]});
        assert!(
            check(nested)
                .unwrap_err()
                .to_string()
                .contains("1201 properties")
        );
        let bad = check(json!({"type": "no-such-type"})).unwrap_err();
        assert!(bad.to_string().contains("no valid JSON Schema"), "{bad}");
        let remote = check(json!({"$ref": "http://127.0.0.1:9/schema.json"})).unwrap_err();
        assert!(
            remote.to_string().contains("no valid JSON Schema"),
            "{remote}"
        );
    }
}
