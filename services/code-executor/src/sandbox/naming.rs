//! The global function name of a tool: `lowerCamelCase` of its id, exactly as `heck` (which
//! the system prompt uses) writes it, and whether that name can be a function at all.
//!
//! Naming is on every run's critical path, once per tool: `heck` takes ~0.25 µs a name (it
//! writes through `fmt`), so ASCII ids, which tool ids are in practice, take a direct path with
//! heck's word rules (a property test holds the two together); other ids go through `heck`.

use heck::ToLowerCamelCase;

/// `lowerCamelCase(id)`: `weather.get-weather` → `weatherGetWeather`.
pub(super) fn lower_camel_case(id: &str) -> String {
    if !id.is_ascii() {
        return id.to_lower_camel_case();
    }
    let mut name = String::with_capacity(id.len());
    for word in ascii_words(id) {
        let mut chars = word.chars();
        if let Some(first) = chars.next() {
            if name.is_empty() {
                name.push(first.to_ascii_lowercase());
            } else {
                name.push(first.to_ascii_uppercase());
            }
        }
        name.extend(chars.map(|c| c.to_ascii_lowercase()));
    }
    name
}

/// The words of an ASCII id, split as heck's `transform` splits them: at every character that
/// is not a letter or digit, between a lowercase letter and an uppercase one (`getWeather`),
/// and before the last capital of a run followed by a lowercase letter (`HTTPServer`).
fn ascii_words(id: &str) -> Vec<&str> {
    #[derive(Clone, Copy, PartialEq)]
    enum Case {
        None,
        Lower,
        Upper,
    }
    let mut words = Vec::new();
    for part in id.split(|c: char| !c.is_ascii_alphanumeric()) {
        let bytes = part.as_bytes();
        let mut start = 0;
        let mut case = Case::None;
        for (index, &byte) in bytes.iter().enumerate() {
            let Some(&next) = bytes.get(index + 1) else {
                words.push(&part[start..]);
                break;
            };
            let case_with_this = if byte.is_ascii_lowercase() {
                Case::Lower
            } else if byte.is_ascii_uppercase() {
                Case::Upper
            } else {
                case
            };
            if case_with_this == Case::Lower && next.is_ascii_uppercase() {
                words.push(&part[start..=index]);
                start = index + 1;
                case = Case::None;
            } else if case == Case::Upper && byte.is_ascii_uppercase() && next.is_ascii_lowercase()
            {
                words.push(&part[start..index]);
                start = index;
                case = Case::None;
            } else {
                case = case_with_this;
            }
        }
    }
    words
}

/// Words a tool function cannot be called by, even though a property of that name could exist.
const RESERVED_WORDS: &[&str] = &[
    "arguments",
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "debugger",
    "default",
    "delete",
    "do",
    "else",
    "enum",
    "eval",
    "export",
    "extends",
    "false",
    "finally",
    "for",
    "function",
    "if",
    "implements",
    "import",
    "in",
    "instanceof",
    "interface",
    "let",
    "new",
    "null",
    "package",
    "private",
    "protected",
    "public",
    "return",
    "static",
    "super",
    "switch",
    "this",
    "throw",
    "true",
    "try",
    "typeof",
    "var",
    "void",
    "while",
    "with",
    "yield",
];

/// Whether code can call a global function of this name: an identifier, and no reserved word.
pub(super) fn is_callable_name(name: &str) -> bool {
    is_identifier(name) && !RESERVED_WORDS.contains(&name)
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_alphanumeric() || c == '_' || c == '$')
}

#[cfg(test)]
mod tests {
    use heck::ToLowerCamelCase;
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn tool_ids_become_lower_camel_case() {
        for (id, name) in [
            ("weather.get-weather", "weatherGetWeather"),
            ("bench.tool-07", "benchTool07"),
            ("HTTPServer_status", "httpServerStatus"),
            ("a..b", "aB"),
            ("", ""),
            ("--", ""),
            ("ünïcode.tool", "ünïcodeTool"),
        ] {
            assert_eq!(lower_camel_case(id), name, "{id}");
        }
    }

    #[test]
    fn reserved_words_and_non_identifiers_cannot_be_called() {
        assert!(is_callable_name("mathAdd"));
        assert!(is_callable_name("$_x1"));
        assert!(!is_callable_name("delete"));
        assert!(!is_callable_name("7days"));
        assert!(!is_callable_name(""));
    }

    proptest! {
        #[test]
        fn ascii_ids_are_named_as_heck_names_them(id in "[ -~]{0,40}") {
            prop_assert_eq!(lower_camel_case(&id), id.to_lower_camel_case());
        }

        #[test]
        fn id_like_ascii_is_named_as_heck_names_them(id in "[a-zA-Z0-9._ -]{0,24}") {
            prop_assert_eq!(lower_camel_case(&id), id.to_lower_camel_case());
        }

        #[test]
        fn any_id_is_named_as_heck_names_it(id in any::<String>()) {
            prop_assert_eq!(lower_camel_case(&id), id.to_lower_camel_case());
        }
    }
}
