//! Texts cut to a bound before they are shown to a caller or a model: provider error messages,
//! validation errors, tool results and feedback in a prompt.

/// `text` cut to its first `max_chars` characters, with `marker` (`"…"`, `"… (truncated)"`)
/// appended when anything was cut; a text of at most `max_chars` characters comes back whole,
/// without the marker.
///
/// The bound counts characters (Unicode scalar values), not bytes: a cut never splits a
/// character, and a bound reads the same in every script. The marker is not counted, so a cut
/// text is `max_chars` characters plus the marker. Callers that must fit a byte budget (a
/// protobuf message, a database column) cut with `str::floor_char_boundary` instead.
pub fn truncate_chars(text: &str, max_chars: usize, marker: &str) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => {
            let mut shortened = String::with_capacity(cut + marker.len());
            shortened.push_str(&text[..cut]);
            shortened.push_str(marker);
            shortened
        }
        None => text.to_owned(),
    }
}
