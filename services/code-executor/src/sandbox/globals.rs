//! The host API every sandbox gets besides its tools: `output`, `log` and `console`, `done`,
//! `complete`, `store`/`recall`, `llm`/`llmJson` and `input`; and `define`, the one way a host
//! function is made (panics caught, errors thrown, limits enforced, the session read from the
//! sandbox's slot at each call).

use std::panic::{AssertUnwindSafe, catch_unwind};

use rquickjs::function::Rest;
use rquickjs::{Ctx, Exception, Function, Object, Value};
use serde_json::Value as Json;

use super::Completion;
use super::convert::{display, to_js, to_json, to_sized_json};
use super::errors;
use super::session::{HostError, HostResult, Session, SessionSlot};

/// The names of the host API, which tools never shadow.
pub(super) const API_NAMES: &[&str] = &[
    "callTool",
    "complete",
    "console",
    "discoverTools",
    "done",
    "getArtifact",
    "input",
    "listArtifacts",
    "llm",
    "llmJson",
    "log",
    "output",
    "parallel",
    "recall",
    "store",
    "storeArtifact",
    "toolSchema",
    "writeFile",
];

/// Defines `target[name]` as a host function. The body runs only while the run bound to
/// `slot` may go on, a panic in it becomes a JavaScript error instead of unwinding into the
/// engine (the runtime is discarded after every run anyway), and its [`HostError`]s are thrown.
pub(super) fn define<'js, F>(
    ctx: &Ctx<'js>,
    target: &Object<'js>,
    name: &str,
    slot: &SessionSlot,
    body: F,
) -> rquickjs::Result<()>
where
    F: Fn(&Ctx<'js>, &Session, Vec<Value<'js>>) -> HostResult<Value<'js>> + 'js,
{
    let slot = slot.clone();
    let label = name.to_owned();
    let function = Function::new(
        ctx.clone(),
        move |ctx: Ctx<'js>, args: Rest<Value<'js>>| -> rquickjs::Result<Value<'js>> {
            // No code runs before a session is bound: this is only a safeguard.
            let Some(session) = slot.session() else {
                return Err(Exception::throw_internal(
                    &ctx,
                    &format!("{label}() was called outside a run"),
                ));
            };
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                session.check_running()?;
                body(&ctx, &session, args.0)
            }));
            match outcome {
                Ok(Ok(value)) => Ok(value),
                Ok(Err(error)) => Err(throw(&ctx, &session, error)),
                Err(panic) => {
                    // The panic's text is for the log; the script (and the user) get its reference.
                    let reason = panic_message(panic.as_ref());
                    let reference = agentic_telemetry::errors::ErrorRef::current();
                    tracing::error!(
                        function = %label,
                        %reason,
                        trace_id = %reference.id(),
                        "sandbox host function panicked"
                    );
                    Err(Exception::throw_message(
                        &ctx,
                        &format!(
                            "{label}() failed: internal error in the sandbox host; {reference}"
                        ),
                    ))
                }
            }
        },
    )?
    .with_name(name)?;
    target.set(name, function)
}

fn throw<'js>(ctx: &Ctx<'js>, session: &Session, error: HostError) -> rquickjs::Error {
    match error {
        HostError::Js(error) => error,
        HostError::Error(message) => Exception::throw_message(ctx, &message),
        HostError::Type(message) => Exception::throw_type(ctx, &message),
        HostError::Stop(stop) => {
            // Thrown so the call does not return, but the code may catch it: the recorded stop
            // is what ends the run (through the interrupt handler, and in the driver).
            let stop = session.record(stop);
            session.locate(errors::current_position(ctx));
            Exception::throw_message(ctx, &stop.message)
        }
    }
}

pub(super) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|text| (*text).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".to_owned())
}

/// The first argument, or `undefined`.
pub(super) fn argument<'js>(ctx: &Ctx<'js>, args: &[Value<'js>], index: usize) -> Value<'js> {
    args.get(index)
        .cloned()
        .unwrap_or_else(|| Value::new_undefined(ctx.clone()))
}

/// Installs the host API that is the same for every run, before the run is known: everything
/// but `input` (see [`install_input`]) and the tools (see `tools::install`).
pub(super) fn install(ctx: &Ctx<'_>, slot: &SessionSlot) -> rquickjs::Result<()> {
    let globals = ctx.globals();
    define(ctx, &globals, "output", slot, output)?;
    define(ctx, &globals, "log", slot, log)?;
    let console = Object::new(ctx.clone())?;
    for level in ["log", "info", "warn", "error", "debug"] {
        define(ctx, &console, level, slot, log)?;
    }
    globals.set("console", console)?;
    define(ctx, &globals, "done", slot, |ctx, session, _| {
        *session.completion.borrow_mut() = Some(Completion::default());
        Ok(Value::new_undefined(ctx.clone()))
    })?;
    define(ctx, &globals, "complete", slot, complete)?;
    define(ctx, &globals, "store", slot, store)?;
    define(ctx, &globals, "recall", slot, recall)?;
    define(ctx, &globals, "llm", slot, |ctx, session, args| {
        let text = ask(ctx, session, &args, false)?;
        Ok(rquickjs::String::from_str(ctx.clone(), &text)?.into_value())
    })?;
    define(ctx, &globals, "llmJson", slot, |ctx, session, args| {
        let text = ask(ctx, session, &args, true)?;
        match serde_json::from_str::<Json>(&text) {
            Ok(json) => Ok(to_js(ctx, &json)?),
            // JSON mode is a request, not a guarantee: hand the code what the model said.
            Err(_) => Ok(rquickjs::String::from_str(ctx.clone(), &text)?.into_value()),
        }
    })
}

/// `input`, when the run has one (`CodeRunner.RunCode`).
pub(super) fn install_input(ctx: &Ctx<'_>, input: Option<&Json>) -> rquickjs::Result<()> {
    match input {
        Some(input) => ctx.globals().set("input", to_js(ctx, input)?),
        None => Ok(()),
    }
}

fn output<'js>(ctx: &Ctx<'js>, session: &Session, args: Vec<Value<'js>>) -> HostResult<Value<'js>> {
    let text = display(ctx, &argument(ctx, &args, 0));
    session.count_output(text.len())?;
    session.block_on(session.host.output(text))?;
    Ok(Value::new_undefined(ctx.clone()))
}

fn log<'js>(ctx: &Ctx<'js>, session: &Session, args: Vec<Value<'js>>) -> HostResult<Value<'js>> {
    let line = args
        .iter()
        .map(|arg| display(ctx, arg))
        .collect::<Vec<_>>()
        .join(" ");
    session.count_output(line.len())?;
    session.logs.borrow_mut().push(line);
    Ok(Value::new_undefined(ctx.clone()))
}

fn complete<'js>(
    ctx: &Ctx<'js>,
    session: &Session,
    args: Vec<Value<'js>>,
) -> HostResult<Value<'js>> {
    let argument = argument(ctx, &args, 0);
    let completion = if let Some(text) = argument.as_string() {
        Completion {
            response: Some(text.to_string()?),
            ..Completion::default()
        }
    } else if let Some(fields) = argument
        .as_object()
        .filter(|_| !argument.is_array() && !argument.is_function())
    {
        let text = |name: &str| -> HostResult<Option<String>> {
            let value: Value = fields.get(name)?;
            Ok((!value.is_undefined() && !value.is_null()).then(|| display(ctx, &value)))
        };
        let data: Value = fields.get("data")?;
        let data = if data.is_undefined() {
            None
        } else {
            Some(to_json(ctx, data).map_err(|error| {
                HostError::Type(format!(
                    "complete(): data is not JSON-serialisable: {error}"
                ))
            })?)
        };
        Completion {
            response: text("response")?,
            data,
            follow_up: text("followUp")?,
        }
    } else {
        return Err(HostError::Type(
            "complete() expects an object {response, data?, followUp?}".into(),
        ));
    };
    // `data` is kept as `_lastData`, like store() would keep it.
    if let Some(data) = &completion.data {
        let key = "_lastData".to_owned();
        session.count_stored(&key, Some(data.to_string().len()))?;
        session.memory.borrow_mut().insert(key, data.clone());
    }
    *session.completion.borrow_mut() = Some(completion);
    Ok(Value::new_undefined(ctx.clone()))
}

fn store<'js>(ctx: &Ctx<'js>, session: &Session, args: Vec<Value<'js>>) -> HostResult<Value<'js>> {
    let key = memory_key(ctx, &args, "store")?;
    let value = argument(ctx, &args, 1);
    if value.is_undefined() {
        session.count_stored(&key, None)?;
        session.memory.borrow_mut().remove(&key);
    } else {
        let (json, bytes) = to_sized_json(ctx, value).map_err(|error| {
            HostError::Type(format!(
                "store(\"{key}\"): the value is not JSON-serialisable: {error}"
            ))
        })?;
        session.count_stored(&key, Some(bytes))?;
        session.memory.borrow_mut().insert(key, json);
    }
    Ok(Value::new_undefined(ctx.clone()))
}

fn recall<'js>(ctx: &Ctx<'js>, session: &Session, args: Vec<Value<'js>>) -> HostResult<Value<'js>> {
    let key = memory_key(ctx, &args, "recall")?;
    let stored = session.memory.borrow().get(&key).cloned();
    match stored {
        Some(json) => Ok(to_js(ctx, &json)?),
        None => Ok(Value::new_undefined(ctx.clone())),
    }
}

fn memory_key<'js>(ctx: &Ctx<'js>, args: &[Value<'js>], function: &str) -> HostResult<String> {
    match argument(ctx, args, 0).as_string() {
        Some(key) => Ok(key.to_string()?),
        None => Err(HostError::Type(format!(
            "{function}() expects a string key"
        ))),
    }
}

fn ask<'js>(
    ctx: &Ctx<'js>,
    session: &Session,
    args: &[Value<'js>],
    json: bool,
) -> HostResult<String> {
    let prompt = display(ctx, &argument(ctx, args, 0));
    let function = if json { "llmJson" } else { "llm" };
    session
        .block_on(session.host.llm(prompt, json))?
        .map_err(|error| HostError::Error(format!("{function}() failed: {error}")))
}
