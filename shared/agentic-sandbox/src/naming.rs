//! The global function name of a tool: `lowerCamelCase` of its id, as `heck` writes it (the
//! system prompt names tools the same way), and whether that name can be a function at all.

use heck::ToLowerCamelCase;

/// `lowerCamelCase(id)`: `weather.get-weather` → `weatherGetWeather`.
pub(crate) fn lower_camel_case(id: &str) -> String {
    id.to_lower_camel_case()
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
pub(crate) fn is_callable_name(name: &str) -> bool {
    is_identifier(name) && !RESERVED_WORDS.contains(&name)
}

/// Whether `text` is an identifier: a letter, `_` or `$`, then letters, digits, `_` and `$`
/// (no escapes, nor the rarer characters JavaScript allows).
pub(crate) fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    chars.next().is_some_and(is_identifier_start) && chars.all(is_identifier_part)
}

pub(crate) fn is_identifier_start(c: char) -> bool {
    c.is_alphabetic() || c == '_' || c == '$'
}

pub(crate) fn is_identifier_part(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$'
}

#[cfg(test)]
mod tests {
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
        /// Whatever the id, no separator or space is left in its name (letters' case
        /// mappings may add combining marks, so that is all that can be said of any text).
        #[test]
        fn any_id_is_named_without_separators_or_spaces(id in any::<String>()) {
            let name = lower_camel_case(&id);
            prop_assert!(!name.chars().any(|c| c.is_ascii_punctuation() || c.is_whitespace()));
        }

        /// An ASCII id is named with ASCII letters and digits only.
        #[test]
        fn ascii_ids_are_named_with_letters_and_digits_only(id in "[ -~]{0,40}") {
            prop_assert!(lower_camel_case(&id).chars().all(|c| c.is_ascii_alphanumeric()));
        }

        /// Ids as tool-hosts write them (`namespace.tool-name`): the first word as it is,
        /// every later word capitalised, the separators gone; such a name can be called.
        #[test]
        fn dotted_and_dashed_ids_join_their_words(
            words in proptest::collection::vec("[a-z][a-z0-9]{0,8}", 1..5),
            separators in proptest::collection::vec(prop_oneof![Just('.'), Just('-'), Just('_')], 4),
        ) {
            let mut id = words[0].clone();
            let mut expected = words[0].clone();
            for (word, separator) in words[1..].iter().zip(&separators) {
                id.push(*separator);
                id.push_str(word);
                expected.push_str(&word[..1].to_ascii_uppercase());
                expected.push_str(&word[1..]);
            }
            prop_assert_eq!(lower_camel_case(&id), expected.clone());
            prop_assert!(is_callable_name(&expected) || RESERVED_WORDS.contains(&expected.as_str()));
        }
    }
}
