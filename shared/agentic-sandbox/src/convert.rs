//! Values across the sandbox boundary: JSON in (tool results, memory, `input`), JSON out
//! (tool inputs, stored values, the round's result) and the text `log()`/`output()` print.
//!
//! Conversions go through the engine's own `JSON.parse`/`JSON.stringify`, so JavaScript
//! semantics hold (`undefined` and functions drop out, `toJSON` is honoured) and no
//! hand-written walker has to agree with them.

use rquickjs::convert::Coerced;
use rquickjs::{CatchResultExt, CaughtError, Ctx, Object, Value};
use serde_json::Value as Json;

pub(crate) fn to_js<'js>(ctx: &Ctx<'js>, value: &Json) -> rquickjs::Result<Value<'js>> {
    ctx.json_parse(value.to_string())
}

/// Why a value did not cross into the host as JSON.
#[derive(Debug)]
pub(crate) enum Refused {
    /// The value has no JSON form (a cycle, a BigInt, a throwing `toJSON`, …): why.
    NotJson(String),
    /// Its JSON text is longer than the host takes; it was not parsed.
    TooLarge { bytes: usize },
}

impl std::fmt::Display for Refused {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::NotJson(reason) => formatter.write_str(reason),
            Refused::TooLarge { bytes } => write!(formatter, "{bytes} bytes of JSON"),
        }
    }
}

/// JSON of a JavaScript value and the length of its JSON text, for values the host keeps
/// outside the engine's memory limit; `undefined` (and anything else JSON drops) is `null`.
/// Text longer than `max_bytes` is refused before it is parsed: parsed JSON takes up to
/// sixteen times the room of its text.
pub(crate) fn to_sized_json<'js>(
    ctx: &Ctx<'js>,
    value: Value<'js>,
    max_bytes: usize,
) -> Result<(Json, usize), Refused> {
    if value.is_undefined() {
        return Ok((Json::Null, 4));
    }
    let text = match ctx.json_stringify(value).catch(ctx) {
        Ok(Some(text)) => text
            .to_string()
            .map_err(|error| Refused::NotJson(error.to_string()))?,
        Ok(None) => return Ok((Json::Null, 4)),
        Err(caught) => return Err(Refused::NotJson(caught_text(ctx, caught))),
    };
    if text.len() > max_bytes {
        return Err(Refused::TooLarge { bytes: text.len() });
    }
    let json = serde_json::from_str(&text).map_err(|error| Refused::NotJson(error.to_string()))?;
    Ok((json, text.len()))
}

/// JSON of the round's result, which is recorded with the prompt and read by the model. `Err`
/// says why there is none: the value has no JSON form (a cycle, a BigInt, a throwing `toJSON`),
/// or its JSON is longer than `max_bytes`.
pub(crate) fn result_json<'js>(
    ctx: &Ctx<'js>,
    value: Value<'js>,
    max_bytes: usize,
) -> Result<Json, String> {
    match to_sized_json(ctx, value, max_bytes) {
        Ok((json, _)) => Ok(json),
        Err(Refused::NotJson(error)) => {
            Err(format!("The result is not JSON-serialisable: {error}"))
        }
        Err(Refused::TooLarge { bytes }) => Err(format!(
            "The result is too large: {bytes} bytes of JSON, the limit is {max_bytes} bytes (return less, or keep data with store())"
        )),
    }
}

/// The `length` of a JavaScript array (or of a proxy of one, or an array-like object) when it
/// is a whole number from 0 to 2^53, read like any other property: a getter or proxy trap that
/// throws is an `Err`. Never rquickjs' `Array::len`, which panics on a length past `i32::MAX`
/// or one that is not a number, and must not be trusted with an allocation either: callers
/// compare it with their limit first.
pub(crate) fn array_length(array: &Object<'_>) -> rquickjs::Result<Option<f64>> {
    let length: Value = array.get("length")?;
    Ok(length
        .as_number()
        .filter(|length| length.fract() == 0.0 && (0.0..=9_007_199_254_740_992.0).contains(length)))
}

/// How `log()` and `output()` print a value: strings raw, numbers and booleans as JavaScript
/// writes them, errors as `Name: message` (their JSON is `{}`), everything else as JSON.
pub(crate) fn display<'js>(ctx: &Ctx<'js>, value: &Value<'js>) -> String {
    if let Some(text) = value.as_string() {
        return text.to_string().unwrap_or_default();
    }
    if value.is_undefined() {
        return "undefined".to_owned();
    }
    if value.is_number()
        || value.is_bool()
        || value.is_error()
        || value.is_big_int()
        || value.is_function()
    {
        return coerce(ctx, value);
    }
    match ctx.json_stringify(value.clone()).catch(ctx) {
        Ok(Some(text)) => text.to_string().unwrap_or_default(),
        _ => coerce(ctx, value),
    }
}

/// `String(value)`, or a placeholder for values that refuse (symbols, odd objects).
fn coerce<'js>(ctx: &Ctx<'js>, value: &Value<'js>) -> String {
    match value.get::<Coerced<String>>().catch(ctx) {
        Ok(text) => text.0,
        Err(_) => format!("[{}]", value.type_name()),
    }
}

/// The message of an exception caught while converting.
pub(crate) fn caught_text<'js>(ctx: &Ctx<'js>, caught: CaughtError<'js>) -> String {
    match caught {
        CaughtError::Exception(exception) => exception
            .message()
            .unwrap_or_else(|| "unknown error".to_owned()),
        CaughtError::Value(value) => display(ctx, &value),
        CaughtError::Error(error) => error.to_string(),
    }
}
