//! Long-term memory's namespaces: the tool-host's `memory` plugin keeps items by them, and
//! agent definitions name them. One rule for every service that checks one.

/// Parts of a namespace, and characters of each, at most.
pub const MAX_NAMESPACE_PARTS: usize = 8;
pub const MAX_PART_CHARS: usize = 64;

/// Checks a namespace's parts: 1 to [`MAX_NAMESPACE_PARTS`], each 1 to [`MAX_PART_CHARS`]
/// letters, digits, `_`, `-` or `.`; the error says what is wrong, naming a wrong part.
pub fn check_namespace<S: AsRef<str>>(parts: &[S]) -> Result<(), String> {
    if parts.is_empty() || parts.len() > MAX_NAMESPACE_PARTS {
        return Err(format!("a namespace has 1 to {MAX_NAMESPACE_PARTS} parts"));
    }
    for part in parts {
        let part = part.as_ref();
        let valid = !part.is_empty()
            && part.chars().count() <= MAX_PART_CHARS
            && part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
        if !valid {
            let shown: String = part.chars().take(40).collect();
            let cut = if part.chars().count() > 40 { "…" } else { "" };
            return Err(format!(
                "namespace part {:?}: 1 to {MAX_PART_CHARS} letters, digits, '_', '-' or '.'",
                format!("{shown}{cut}")
            ));
        }
    }
    Ok(())
}
