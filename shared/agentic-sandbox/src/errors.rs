//! JavaScript errors as the model sees them: [`CodeError`]s with their position in the model's
//! code and the offending line, for uncaught errors, stopped runs and code the engine cannot
//! take.

use rquickjs::convert::Coerced;
use rquickjs::{CaughtError, Ctx};

use crate::convert;
use crate::modules::Import;
use crate::outcome::CodeError;
use crate::position::{Position, line_text, parse_position};
use crate::stop::Stop;

/// An error's message and source line are cut to this many bytes: the code chooses what it
/// throws, and the message is recorded with the prompt and read by the model.
const MAX_MESSAGE_BYTES: usize = 4 * 1024;
const MAX_CONTEXT_BYTES: usize = 512;

/// The model's code, for positions and the offending line.
pub(crate) struct Source<'a> {
    pub code: &'a str,
    pub imports: &'a [Import],
}

impl Source<'_> {
    fn error(&self, message: String, position: Option<Position>, timeout: bool) -> CodeError {
        CodeError {
            message: cut(message, MAX_MESSAGE_BYTES),
            line: position.map(|position| position.line),
            column: position.map(|position| position.column),
            context: position
                .and_then(|position| line_text(self.code, position.line))
                .map(|context| cut(context.to_owned(), MAX_CONTEXT_BYTES)),
            timeout,
        }
    }
}

/// `text`, or its first `max_bytes` (at a character boundary) and a mark that it was cut.
pub(crate) fn cut(mut text: String, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text;
    }
    let end = text.floor_char_boundary(max_bytes);
    text.truncate(end);
    text.push_str("… (cut)");
    text
}

/// The error the run ends with when a limit or cancellation stopped it.
pub(crate) fn stop_error(stop: Stop, source: &Source<'_>) -> CodeError {
    source.error(stop.message, stop.position, stop.timeout)
}

/// A JavaScript error (or thrown value) the code did not catch.
pub(crate) fn code_error<'js>(
    ctx: &Ctx<'js>,
    caught: CaughtError<'js>,
    source: &Source<'_>,
) -> CodeError {
    let (message, stack) = match caught {
        CaughtError::Exception(exception) => {
            let name = exception
                .get::<_, Option<Coerced<String>>>("name")
                .ok()
                .flatten()
                .map(|name| name.0);
            let text = exception.message().unwrap_or_default();
            let message = match name.filter(|name| !name.is_empty()) {
                Some(name) if text.is_empty() => name,
                Some(name) => format!("{name}: {text}"),
                None if text.is_empty() => "Error".to_owned(),
                None => text,
            };
            (message, exception.stack())
        }
        CaughtError::Value(value) => (
            format!("{UNCAUGHT} {}", convert::display(ctx, &value)),
            None,
        ),
        CaughtError::Error(error) => (error.to_string(), None),
    };
    let position = stack
        .as_deref()
        .and_then(parse_position)
        .or_else(|| import_position(&message, stack.as_deref(), source));
    let mut error = source.error(message, position, false);
    if error.message.starts_with("SyntaxError")
        && error.context.as_deref().is_some_and(is_static_import)
    {
        error.message.push_str(" (static imports are only supported at the top of the code, before any other statement)");
    }
    error
}

const UNCAUGHT: &str = "Uncaught exception:";

/// Whether `error` is most likely the engine running out of memory, which it reports by
/// throwing `null` when even the error object does not fit (small allocations fill the heap
/// to the last bytes). Nothing else of ours sees that moment, so a thrown `null` counts as
/// running out of memory unless the code visibly throws or rejects with `null` itself.
/// A swallowed `null` (`catch (e) {}`) goes unnoticed, but the engine's limit still held.
/// Likewise an `InternalError` whose message could not be read: the engine's own "out of
/// memory" error, met when even its message no longer fits (unless the code names
/// `InternalError` itself).
pub(crate) fn is_out_of_memory_null(error: &CodeError, code: &str) -> bool {
    let null = error.message == format!("{UNCAUGHT} null")
        && !code.contains("throw null")
        && !code.contains("reject(null)");
    null || (error.message == "InternalError" && !code.contains("InternalError"))
}

/// Errors of a module (unknown, or failing while it loads) have no frame in the model's code:
/// point at the import that asked for it.
fn import_position(message: &str, stack: Option<&str>, source: &Source<'_>) -> Option<Position> {
    source
        .imports
        .iter()
        .find(|import| {
            let module = &import.module;
            message.contains(&format!("\"{module}\""))
                || message.contains(&format!("'{module}'"))
                || stack.is_some_and(|stack| {
                    stack.contains(&format!("({module}:"))
                        || stack.contains(&format!("at {module}:"))
                })
        })
        .map(|import| Position {
            line: import.line,
            column: import.column,
        })
}

fn is_static_import(line: &str) -> bool {
    line.strip_prefix("import")
        .is_some_and(|rest| rest.starts_with([' ', '{', '*', '"', '\'']))
}

/// The code contained a NUL byte, which QuickJS cannot take.
pub(crate) fn nul_error(code: &str, offset: usize) -> CodeError {
    let position = Position::at_offset(code, offset);
    let source = Source { code, imports: &[] };
    let mut error = source.error(
        "SyntaxError: the code contains a NUL byte (\\0), which is not allowed".to_owned(),
        Some(position),
        false,
    );
    error.context = error.context.map(|context| context.replace('\0', "\\0"));
    error
}
