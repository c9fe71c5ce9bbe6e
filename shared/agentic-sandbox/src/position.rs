//! Positions in the model's code: line and column, where they come from (QuickJS stacks, byte
//! offsets) and the source line they point at.
//!
//! QuickJS errors carry no line/column properties, only a `stack` text, so positions come from
//! the first `code.js:<line>:<column>` frame. Static imports are rewritten line for line
//! (see `modules`), so engine lines are the model's lines.

use rquickjs::{Ctx, Exception};

/// The file name the model's code runs under; frames in it are positions in that code.
pub(crate) const CODE_FILE: &str = "code.js";

/// 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Position {
    pub line: u32,
    pub column: u32,
}

impl Position {
    /// The position of byte `offset` of `code`, columns counted in characters.
    pub(crate) fn at_offset(code: &str, offset: usize) -> Position {
        let before = &code[..offset];
        let line = before.matches('\n').count() + 1;
        let column = before
            .rsplit('\n')
            .next()
            .map_or(0, |text| text.chars().count())
            + 1;
        Position {
            line: u32::try_from(line).unwrap_or(u32::MAX),
            column: u32::try_from(column).unwrap_or(u32::MAX),
        }
    }
}

/// Line `line` of `code`, trimmed: the context an error shows. `None` for a blank line or
/// one past the end.
pub(crate) fn line_text(code: &str, line: u32) -> Option<&str> {
    let index = usize::try_from(line.checked_sub(1)?).ok()?;
    let text = code.lines().nth(index)?.trim();
    (!text.is_empty()).then_some(text)
}

/// The first frame in the model's code, from a stack in QuickJS's format.
pub(crate) fn parse_position(stack: &str) -> Option<Position> {
    let marker = format!("{CODE_FILE}:");
    stack.match_indices(&marker).find_map(|(at, _)| {
        // `mycode.js:` is another file.
        if !matches!(stack[..at].chars().next_back(), Some('(' | ' ') | None) {
            return None;
        }
        let mut numbers = stack[at + marker.len()..].splitn(2, ':');
        let line = leading_number(numbers.next()?)?;
        let column = leading_number(numbers.next()?)?;
        Some(Position { line, column })
    })
}

fn leading_number(text: &str) -> Option<u32> {
    let end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    text[..end].parse().ok()
}

/// Where the code is now, for errors thrown by host functions: the stack of a fresh error.
pub(crate) fn current_position(ctx: &Ctx<'_>) -> Option<Position> {
    let probe = Exception::from_message(ctx.clone(), "").ok()?;
    parse_position(&probe.stack()?)
}
