//! What the gateway sends, made safe to show in a terminal: a file name, id, title or message
//! from the server cannot recolour the screen, move the cursor, retitle the window or
//! reorder the text after it. Every string from the server goes through here before the CLI
//! prints it.

use std::fmt;

/// `text` without any control character or bidirectional override: for names, ids, titles
/// and one-line messages (a tab or line break would break the listing's columns).
pub fn name(text: &str) -> Clean<'_> {
    Clean {
        text,
        keep_layout: false,
    }
}

/// `text` without control characters or bidirectional overrides, except line breaks and
/// tabs: for what the model wrote.
pub fn text(text: &str) -> Clean<'_> {
    Clean {
        text,
        keep_layout: true,
    }
}

/// A file of a prompt's timeline on one line, as the stream and `show` print it:
/// `name (type, N bytes) id`.
/// An amount in millionths of the price table's currency, with six decimals: `0.001250`.
pub fn money(micros: u64) -> String {
    format!("{}.{:06}", micros / 1_000_000, micros % 1_000_000)
}

pub fn file_summary(file: &agentic_proto::v1::FileOutput) -> String {
    let source = match file.source() {
        agentic_proto::v1::FileSource::Hosted => ", made in the provider's container",
        _ => "",
    };
    format!(
        "{} ({}, {} bytes{source}) {}",
        name(&file.filename),
        name(&file.mime_type),
        file.size,
        name(&file.id)
    )
}

/// Serialised JSON whose strings cannot drive a terminal either: the characters [`name`]
/// drops are written as `\uXXXX` escapes instead, so the document means the same. (serde_json
/// escapes C0 controls itself; DEL, C1 controls and bidirectional overrides it writes raw.)
pub fn json(serialized: &str) -> String {
    let mut escaped = String::with_capacity(serialized.len());
    for character in serialized.chars() {
        // Outside strings, JSON has only ASCII; a raw line break is the pretty printer's.
        if is_unsafe(character) && character != '\n' {
            escaped.push_str(&format!("\\u{:04x}", u32::from(character)));
        } else {
            escaped.push(character);
        }
    }
    escaped
}

/// Text shown with the unsafe characters left out (see [`name`] and [`text`]).
pub struct Clean<'a> {
    text: &'a str,
    keep_layout: bool,
}

impl fmt::Display for Clean<'_> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut start = 0;
        for (index, character) in self.text.char_indices() {
            let kept =
                !is_unsafe(character) || (self.keep_layout && matches!(character, '\n' | '\t'));
            if !kept {
                formatter.write_str(&self.text[start..index])?;
                start = index + character.len_utf8();
            }
        }
        formatter.write_str(&self.text[start..])
    }
}

/// C0 and C1 control characters and DEL (terminal escape sequences start with ESC or CSI),
/// and the bidirectional embeddings, overrides and isolates that make text read differently
/// from what it is.
pub fn is_unsafe(character: char) -> bool {
    character.is_control() || matches!(character, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_and_overrides_do_not_reach_the_terminal() {
        let hostile = "re\u{1b}[31md\u{7}\u{9b}2J\u{202e}txt.exe\u{7f}\r\nnext\tcolumn";
        assert_eq!(name(hostile).to_string(), "re[31md2Jtxt.exenextcolumn");
        assert_eq!(text(hostile).to_string(), "re[31md2Jtxt.exe\nnext\tcolumn");
        assert_eq!(name("plain café ✓").to_string(), "plain café ✓");
    }

    #[test]
    fn json_keeps_its_meaning_but_not_the_raw_controls() {
        let value = serde_json::json!({"name": "a\u{9b}b\u{202e}c\u{1b}d"});
        let shown = json(&serde_json::to_string_pretty(&value).unwrap());
        assert!(!shown.chars().any(|c| is_unsafe(c) && c != '\n'), "{shown}");
        let back: serde_json::Value = serde_json::from_str(&shown).unwrap();
        assert_eq!(back, value);
    }
}
