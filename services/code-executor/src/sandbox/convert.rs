//! Values across the sandbox boundary: JSON in (tool results, memory, `input`), JSON out
//! (tool inputs, stored values, the round's result) and the text `log()`/`output()` print.
//!
//! Conversions go through the engine's own `JSON.parse`/`JSON.stringify`, so JavaScript
//! semantics hold (`undefined` and functions drop out, `toJSON` is honoured) and no
//! hand-written walker has to agree with them.

use rquickjs::convert::Coerced;
use rquickjs::{CatchResultExt, CaughtError, Ctx, Value};
use serde_json::Value as Json;

pub(super) fn to_js<'js>(ctx: &Ctx<'js>, value: &Json) -> rquickjs::Result<Value<'js>> {
    ctx.json_parse(value.to_string())
}

/// JSON of a JavaScript value; `undefined` (and anything else JSON drops) is `null`. `Err`
/// says why the value has no JSON form (a cycle, a BigInt, …).
pub(super) fn to_json<'js>(ctx: &Ctx<'js>, value: Value<'js>) -> Result<Json, String> {
    to_sized_json(ctx, value).map(|(json, _)| json)
}

/// [`to_json`] with the length of the JSON text, for values the host keeps outside the
/// engine's memory limit.
pub(super) fn to_sized_json<'js>(
    ctx: &Ctx<'js>,
    value: Value<'js>,
) -> Result<(Json, usize), String> {
    if value.is_undefined() {
        return Ok((Json::Null, 4));
    }
    let text = match ctx.json_stringify(value).catch(ctx) {
        Ok(Some(text)) => text.to_string().map_err(|error| error.to_string())?,
        Ok(None) => return Ok((Json::Null, 4)),
        Err(caught) => return Err(caught_text(ctx, caught)),
    };
    let json = serde_json::from_str(&text).map_err(|error| error.to_string())?;
    Ok((json, text.len()))
}

/// JSON of the round's result, which is recorded with the prompt and read by the model. `Err`
/// says why there is none: the value has no JSON form (a cycle, a BigInt, a throwing `toJSON`),
/// or its JSON is longer than `max_bytes`.
pub(super) fn result_json<'js>(
    ctx: &Ctx<'js>,
    value: Value<'js>,
    max_bytes: usize,
) -> Result<Json, String> {
    let (json, bytes) = to_sized_json(ctx, value)
        .map_err(|error| format!("The result is not JSON-serialisable: {error}"))?;
    if bytes > max_bytes {
        return Err(format!(
            "The result is too large: {bytes} bytes of JSON, the limit is {max_bytes} bytes (return less, or keep data with store())"
        ));
    }
    Ok(json)
}

/// How `log()` and `output()` print a value: strings raw, numbers and booleans as JavaScript
/// writes them, errors as `Name: message` (their JSON is `{}`), everything else as JSON.
pub(super) fn display<'js>(ctx: &Ctx<'js>, value: &Value<'js>) -> String {
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
pub(super) fn caught_text<'js>(ctx: &Ctx<'js>, caught: CaughtError<'js>) -> String {
    match caught {
        CaughtError::Exception(exception) => exception
            .message()
            .unwrap_or_else(|| "unknown error".to_owned()),
        CaughtError::Value(value) => display(ctx, &value),
        CaughtError::Error(error) => error.to_string(),
    }
}
