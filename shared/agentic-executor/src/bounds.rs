//! What a run may put into the prompt's log, whatever the model, the code or a tool produced:
//! values nested no deeper than every reader decodes (protobuf decoders stop at 100 message
//! levels, and each JSON level costs up to three), values and texts of bounded size, and a
//! bounded timeline per run. Past a bound the stored value is replaced by a marker that says
//! what was there, so everything stored can be read back and no prompt or conversation
//! becomes unreadable.

use serde_json::{Map, Value as Json, json};

/// Deepest JSON nesting stored (a tool's input or result, code's result).
pub const MAX_STORED_DEPTH: usize = 24;
/// Largest JSON value stored whole, in bytes of its JSON text (approximately).
pub const MAX_STORED_VALUE_BYTES: usize = 256 * 1024;
/// Largest text output or error stored whole.
pub const MAX_STORED_TEXT_BYTES: usize = 1024 * 1024;
/// What one run may add to the timeline in all, approximately; past it, outputs are kept as
/// markers only. Well below the message limit, so the whole prompt always fits one answer.
pub const MAX_TIMELINE_BYTES: usize = 8 * 1024 * 1024;
/// How much of a cut value's JSON text the marker keeps.
const PREVIEW_BYTES: usize = 4 * 1024;

/// Whether `value` is nested deeper than `limit` levels (a scalar is level 0).
pub fn deeper_than(value: &Json, limit: usize) -> bool {
    let mut stack = vec![(value, 0_usize)];
    while let Some((value, depth)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Json>> = match value {
            Json::Array(items) => Box::new(items.iter()),
            Json::Object(fields) => Box::new(fields.values()),
            _ => continue,
        };
        if depth >= limit {
            return true;
        }
        stack.extend(children.map(|child| (child, depth + 1)));
    }
    false
}

/// About how many bytes `value`'s JSON text has, counting up to `limit` at most (so a huge
/// value costs no more than `limit` to measure).
pub fn approximate_size(value: &Json, limit: usize) -> usize {
    let mut size = 0_usize;
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        size = size.saturating_add(match value {
            Json::Null | Json::Bool(_) => 5,
            Json::Number(_) => 20,
            Json::String(text) => text.len() + 2,
            Json::Array(items) => {
                stack.extend(items.iter());
                2 + items.len()
            }
            Json::Object(fields) => {
                stack.extend(fields.values());
                fields.keys().map(|key| key.len() + 4).sum::<usize>() + 2
            }
        });
        if size > limit {
            return size;
        }
    }
    size
}

/// `value` as it may be stored: itself when within the bounds, else a marker object saying
/// why and (for a large value) a preview of its JSON text.
pub fn storable_value(value: Json) -> Json {
    storable_sized(value).0
}

/// [`storable_value`] with about how many bytes of JSON text the stored value has.
pub fn storable_sized(value: Json) -> (Json, usize) {
    /// What a marker adds besides its preview.
    const MARKER_BYTES: usize = 128;
    if deeper_than(&value, MAX_STORED_DEPTH) {
        let marker = json!({
            "_not_stored": format!("the value is nested deeper than {MAX_STORED_DEPTH} levels"),
        });
        return (marker, MARKER_BYTES);
    }
    let size = approximate_size(&value, MAX_STORED_VALUE_BYTES);
    if size <= MAX_STORED_VALUE_BYTES {
        return (value, size);
    }
    let text = value.to_string();
    let mut marker = Map::new();
    marker.insert(
        "_truncated".into(),
        Json::String(format!(
            "the value's JSON text is {} bytes; the first {PREVIEW_BYTES} are in preview",
            text.len()
        )),
    );
    marker.insert(
        "preview".into(),
        Json::String(text[..text.floor_char_boundary(PREVIEW_BYTES)].to_owned()),
    );
    (Json::Object(marker), PREVIEW_BYTES + MARKER_BYTES)
}

/// `text` as it may be stored: itself up to `limit` bytes, else its start and a line saying
/// how long it was.
pub fn storable_text(text: String, limit: usize) -> String {
    if text.len() <= limit {
        return text;
    }
    let total = text.len();
    let mut cut = text[..text.floor_char_boundary(limit)].to_owned();
    cut.push_str(&format!("\n[… truncated: {total} bytes in all]"));
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(depth: usize) -> Json {
        let mut value = json!(1);
        for _ in 0..depth {
            value = json!({ "n": [value] });
        }
        value
    }

    #[test]
    fn depth_counts_every_array_and_object_level() {
        assert!(!deeper_than(&json!(1), 0));
        assert!(deeper_than(&json!([1]), 0));
        assert!(!deeper_than(&json!({"a": [1]}), 2));
        assert!(deeper_than(&json!({"a": [[1]]}), 2));
        // 2 levels per `nested` step.
        assert!(!deeper_than(&nested(12), MAX_STORED_DEPTH));
        assert!(deeper_than(&nested(13), MAX_STORED_DEPTH));
    }

    #[test]
    fn values_within_the_bounds_are_stored_as_they_are() {
        let value = json!({"a": [1, "two", null], "b": {"c": true}});
        assert_eq!(storable_value(value.clone()), value);
        let deep_enough = nested(12);
        assert_eq!(storable_value(deep_enough.clone()), deep_enough);
    }

    #[test]
    fn too_deep_or_too_large_values_become_markers_that_say_so() {
        let deep = storable_value(nested(100));
        assert!(
            deep["_not_stored"]
                .as_str()
                .unwrap()
                .contains("deeper than 24")
        );
        let large = storable_value(json!({"text": "é".repeat(MAX_STORED_VALUE_BYTES)}));
        assert!(large["_truncated"].as_str().unwrap().contains("bytes"));
        let preview = large["preview"].as_str().unwrap();
        assert!(preview.len() <= PREVIEW_BYTES && preview.starts_with("{\"text\":\"é"));
    }

    #[test]
    fn long_texts_are_cut_on_a_character_boundary_with_their_length() {
        let text = "é".repeat(10);
        assert_eq!(storable_text(text.clone(), 20), text);
        let cut = storable_text(text, 5);
        assert!(
            cut.starts_with("éé\n[… truncated: 20 bytes in all]"),
            "{cut}"
        );
    }

    #[test]
    fn measuring_a_huge_value_stops_once_past_the_limit() {
        let huge = Json::Array(vec![json!("xxxxxxxxxx"); 1_000_000]);
        let measured = approximate_size(&huge, 1000);
        assert!(measured > 1000 && measured < 2_000_000, "{measured}");
    }
}
