//! The host API every sandbox gets besides its tools: `output`, `log` and `console`, `done`,
//! `complete`, `store`/`recall`, `llm`/`llmJson`, `input`, a coarse `performance.now()`,
//! and `Date`/`Math.random` reading the run's recorded entropy;
//! and `define`, the one way a host function is made (panics caught, errors thrown, limits
//! enforced, the session read from the sandbox's slot at each call).
//!
//! Every size or count a host function takes from a sandbox value is checked against a limit
//! before the host allocates for it: text is charged as it is read, JSON before it is parsed.

use std::panic::{AssertUnwindSafe, catch_unwind};

use rquickjs::function::Rest;
use rquickjs::{Ctx, Exception, Function, Object, Value};
use serde_json::Value as Json;

use crate::convert::{Refused, display, to_js, to_sized_json};
use crate::outcome::Completion;
use crate::position::current_position;
use crate::session::{Session, SessionSlot};
use crate::stop::{HostError, HostResult};

/// The names of the host API, which tools never shadow: every host function is one of them or
/// a method of one (`console.log`, `performance.now`), except `Error.prepareStackTrace` (see
/// `stack`).
pub(crate) const API_NAMES: &[&str] = &[
    "ask",
    "callTool",
    "complete",
    "console",
    "discoverTools",
    "deleteArtifact",
    "done",
    "getArtifact",
    "input",
    "listArtifacts",
    "llm",
    "llmJson",
    "log",
    "output",
    "parallel",
    "performance",
    "readFile",
    "recall",
    "store",
    "storeArtifact",
    "toolSchema",
    "writeFile",
];

/// Defines `target[name]` as a host function. The body runs only while the run bound to
/// `slot` may go on, a panic in it becomes a JavaScript error instead of unwinding into the
/// engine (the runtime is discarded after every run anyway), and its [`HostError`]s are thrown.
pub(crate) fn define<'js, F>(
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
            session.locate(current_position(ctx));
            Exception::throw_message(ctx, &stop.message)
        }
    }
}

pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|text| (*text).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".to_owned())
}

/// The first argument, or `undefined`.
pub(crate) fn argument<'js>(ctx: &Ctx<'js>, args: &[Value<'js>], index: usize) -> Value<'js> {
    args.get(index)
        .cloned()
        .unwrap_or_else(|| Value::new_undefined(ctx.clone()))
}

/// Installs the host API that is the same for every run, before the run is known: everything
/// but `input` (see [`install_input`]) and the tools (see `tools::install`).
pub(crate) fn install(ctx: &Ctx<'_>, slot: &SessionSlot) -> rquickjs::Result<()> {
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
    install_performance(ctx, slot)?;
    let math: Object = ctx.globals().get("Math")?;
    define(ctx, &math, "random", slot, |ctx, session, _| {
        Ok(Value::new_number(ctx.clone(), session.entropy.random()))
    })?;
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

/// `performance.now()` in whole milliseconds since the run started, as coarse as `Date.now()`:
/// the engine's own (sub-microsecond, with a `timeOrigin` to match) would be a fine clock for
/// timing attacks on the host.
fn install_performance(ctx: &Ctx<'_>, slot: &SessionSlot) -> rquickjs::Result<()> {
    let performance = Object::new(ctx.clone())?;
    define(ctx, &performance, "now", slot, |ctx, session, _| {
        let elapsed = session
            .entropy
            .elapsed_ms(|| session.clock.coarse_elapsed_ms());
        Ok(Value::new_number(ctx.clone(), elapsed))
    })?;
    ctx.globals().set("performance", performance)
}

/// Whether a run of `code` with `modules` needs [`install_date`]: only code that names `Date`
/// reads the time through it. (Code that reaches the engine's own `Date` without naming it
/// reads a time the run does not record: a replay of it diverges, and fails, rather than
/// repeating anything.)
pub(crate) fn reads_dates(code: &str, modules: &[(String, String)]) -> bool {
    code.contains("Date") || modules.iter().any(|(_, source)| source.contains("Date"))
}

/// `Date.now()`, `new Date()` and `Date()` read the run's [`Entropy`] (as `Math.random()` and
/// `performance.now()` always do), so that a run can be repeated exactly; dates made from
/// values are the engine's own. Installed per run, and only for code that needs it (see
/// [`reads_dates`]): compiled into every sandbox, the replacement measurably slowed a fresh
/// sandbox (bench item 1).
///
/// [`Entropy`]: crate::entropy::Entropy
pub(crate) fn install_date(ctx: &Ctx<'_>, slot: &SessionSlot) -> rquickjs::Result<()> {
    let sources = Object::new(ctx.clone())?;
    define(ctx, &sources, "now", slot, |ctx, session, _| {
        Ok(Value::new_number(ctx.clone(), session.entropy.now_ms()))
    })?;
    let wrap: Function = ctx.eval(DATE_PRELUDE)?;
    wrap.call((sources.get::<_, Value>("now")?,))
}

/// Replaces `Date` by a constructor that reads the time from `now` when given no value (the
/// same prototype and statics, so `instanceof Date` and subclasses still work).
const DATE_PRELUDE: &str = r#"(function (now) {
  const NativeDate = Date;
  const Replacement = function Date(...args) {
    if (new.target === undefined) return new NativeDate(now()).toString();
    return Reflect.construct(NativeDate, args.length === 0 ? [now()] : args, new.target);
  };
  Object.setPrototypeOf(Replacement, NativeDate);
  Object.defineProperty(Replacement, "prototype", { value: NativeDate.prototype });
  Object.defineProperty(Replacement, "length", { value: 7 });
  Object.defineProperty(Replacement, "now", { value: now, writable: true, configurable: true });
  Object.defineProperty(NativeDate.prototype, "constructor", { value: Replacement, writable: true, configurable: true });
  Object.defineProperty(globalThis, "Date", { value: Replacement, writable: true, configurable: true });
})"#;

/// `input`, when the run has one (`CodeRunner.RunCode`).
pub(crate) fn install_input(ctx: &Ctx<'_>, input: Option<&Json>) -> rquickjs::Result<()> {
    match input {
        Some(input) => ctx.globals().set("input", to_js(ctx, input)?),
        None => Ok(()),
    }
}

fn output<'js>(ctx: &Ctx<'js>, session: &Session, args: Vec<Value<'js>>) -> HostResult<Value<'js>> {
    let text = display(ctx, &argument(ctx, &args, 0));
    session.budget.count_output(text.len())?;
    session.block_on(session.host.output(text))?;
    Ok(Value::new_undefined(ctx.clone()))
}

/// Values one `log()` or `console.*` call prints; the rest are counted, not printed. Printing a
/// value may run the code's own `toJSON` and getters (and throw), so a call spread over the
/// engine's 65,535 arguments would otherwise spend the run's time limit in one line.
const MAX_LOG_VALUES: usize = 1_000;

fn log<'js>(ctx: &Ctx<'js>, session: &Session, args: Vec<Value<'js>>) -> HostResult<Value<'js>> {
    // Built one value at a time: a call with thousands of large values stops at the limit
    // instead of holding all their text at once.
    let left = session.budget.log_bytes_left();
    let mut line = String::new();
    let unprinted = args.len().saturating_sub(MAX_LOG_VALUES);
    let printed = args
        .iter()
        .take(MAX_LOG_VALUES)
        .map(|arg| display_running(ctx, session, arg));
    let more = (unprinted > 0).then(|| Ok(format!("… ({unprinted} more values not printed)")));
    for (index, text) in printed.chain(more).enumerate() {
        let text = text?;
        let separator = usize::from(index > 0);
        // `>=`: the line's newline counts too.
        if line.len() + separator + text.len() >= left {
            return Err(session.budget.log_bytes_stop());
        }
        if separator > 0 {
            line.push(' ');
        }
        line.push_str(&text);
    }
    session.budget.count_log(line.len())?;
    session.logs.borrow_mut().push(line.clone());
    session.block_on(session.host.log(line))?;
    Ok(Value::new_undefined(ctx.clone()))
}

/// One value of a log line. Printing it runs the code's own `toJSON` and getters, which may
/// swallow the engine's interrupt: a run that has to stop stops here instead of printing on.
fn display_running<'js>(
    ctx: &Ctx<'js>,
    session: &Session,
    value: &Value<'js>,
) -> HostResult<String> {
    session.check_running()?;
    Ok(display(ctx, value))
}

fn complete<'js>(
    ctx: &Ctx<'js>,
    session: &Session,
    args: Vec<Value<'js>>,
) -> HostResult<Value<'js>> {
    let argument = argument(ctx, &args, 0);
    let (mut completion, data) = if let Some(text) = argument.as_string() {
        (
            Completion {
                response: Some(text.to_string()?),
                ..Completion::default()
            },
            None,
        )
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
            Some(stored_json(ctx, session, LAST_DATA, data, || {
                "complete(): data".to_owned()
            })?)
        };
        (
            Completion {
                response: text("response")?,
                data: None,
                follow_up: text("followUp")?,
            },
            data,
        )
    } else {
        return Err(HostError::Type(
            "complete() expects an object {response, data?, followUp?}".into(),
        ));
    };
    // The text is shown to the user, like output()'s.
    let text_bytes = [&completion.response, &completion.follow_up]
        .into_iter()
        .flatten()
        .map(String::len)
        .sum();
    session.budget.count_completion_text(text_bytes)?;
    // `data` is kept as `_lastData`, like store() would keep it.
    if let Some((data, bytes)) = data {
        session.budget.count_stored(LAST_DATA, Some(bytes))?;
        session
            .memory
            .borrow_mut()
            .insert(LAST_DATA.to_owned(), data.clone());
        completion.data = Some(data);
    }
    *session.completion.borrow_mut() = Some(completion);
    Ok(Value::new_undefined(ctx.clone()))
}

fn store<'js>(ctx: &Ctx<'js>, session: &Session, args: Vec<Value<'js>>) -> HostResult<Value<'js>> {
    let key = memory_key(ctx, &args, "store")?;
    let value = argument(ctx, &args, 1);
    if value.is_undefined() {
        session.budget.count_stored(&key, None)?;
        session.memory.borrow_mut().remove(&key);
    } else {
        let (json, bytes) = stored_json(ctx, session, &key, value, || {
            format!("store(\"{key}\"): the value")
        })?;
        session.budget.count_stored(&key, Some(bytes))?;
        session.memory.borrow_mut().insert(key, json);
    }
    Ok(Value::new_undefined(ctx.clone()))
}

/// The memory key (and conversation state key) `complete({data})` keeps `data` under.
pub const LAST_DATA: &str = "_lastData";

/// The JSON of a value about to be kept under `key`, refused before it is parsed when it
/// would not fit the prompt's storage limit.
fn stored_json<'js>(
    ctx: &Ctx<'js>,
    session: &Session,
    key: &str,
    value: Value<'js>,
    what: impl FnOnce() -> String,
) -> HostResult<(Json, usize)> {
    match to_sized_json(ctx, value, session.budget.stored_bytes_left_for(key)) {
        Ok(sized) => Ok(sized),
        Err(Refused::TooLarge { .. }) => Err(session.budget.stored_stop()),
        Err(Refused::NotJson(error)) => Err(HostError::Type(format!(
            "{} is not JSON-serialisable: {error}",
            what()
        ))),
    }
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
    session.budget.count_llm_call()?;
    let prompt = display(ctx, &argument(ctx, args, 0));
    let function = if json { "llmJson" } else { "llm" };
    session
        .block_on(session.host.llm(prompt, json))?
        .map_err(|error| HostError::Error(format!("{function}() failed: {error}")))
}
