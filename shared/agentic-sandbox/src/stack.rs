//! `Error.prepareStackTrace`, our own: stack traces in QuickJS's format, written by the host
//! so that the engine's own memory and stack errors, which the code could catch, stop the run.

use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::rc::Rc;

use rquickjs::function::This;
use rquickjs::{Ctx, Function, Object, Persistent, Value};

use crate::convert;
use crate::errors::cut;
use crate::position::parse_position;
use crate::session::{Session, SessionSlot};

const OUT_OF_MEMORY: &str = "out of memory";
/// Frames of a stack we write; the engine passes `Error.stackTraceLimit` of them (10 unless
/// the code raises it), and code may call the hook itself with any array.
const MAX_FRAMES: u32 = 64;
/// Text of the frames' names we read before the rest of a stack is left out.
const MAX_FRAME_TEXT_BYTES: usize = 16 * 1024;
const STACK_OVERFLOW: &str = "Maximum call stack size exceeded";

/// Installs `Error.prepareStackTrace` as a host function and locks it in place. It serves the
/// run bound to `slot`.
///
/// Two reasons. The engine calls it for every error it builds, including its own "out of
/// memory" and "Maximum call stack size exceeded" errors, which the code could otherwise catch
/// and carry on: the hook records a `Stop`, and the interrupt handler then ends the run.
/// And it writes stacks in QuickJS's own format, so positions parse the same way.
///
/// Once the run is stopping, the hook switches itself off: the engine discards any exception
/// raised while it calls the hook, the interrupt included, so code that builds errors in a
/// loop (catching each) could otherwise have every interrupt swallowed and run forever.
/// Keep the returned [`StackHook`] as long as the context, and drop it before the runtime.
pub(crate) fn install_stack_hook<'js>(
    ctx: &Ctx<'js>,
    slot: &SessionSlot,
) -> rquickjs::Result<StackHook> {
    let slot = slot.clone();
    // The engine's own setter, the only way to clear the hook once the property is locked.
    let engine_setter: Function =
        ctx.eval("Object.getOwnPropertyDescriptor(Error, 'prepareStackTrace').set")?;
    let switch = StackHook {
        engine_setter: Rc::new(RefCell::new(Some(Persistent::save(ctx, engine_setter)))),
    };
    let engine_setter = Rc::clone(&switch.engine_setter);
    let hook = Function::new(
        ctx.clone(),
        move |ctx: Ctx<'js>, error: Value<'js>, sites: Value<'js>| -> Value<'js> {
            // A panic must not unwind into the engine's C frames; a missing stack is harmless.
            let stack = catch_unwind(AssertUnwindSafe(|| {
                // Errors built before a run is bound (none are) need no stack.
                let session = slot.session()?;
                // Not for the limit's own error: the engine asks again for it further up the
                // stack until its position can be read.
                if session.should_interrupt() && limit_hit(&error).is_none() {
                    switch_off(&ctx, &engine_setter);
                }
                prepare_stack(&ctx, &session, &error, &sites)
            }))
            .ok()
            .flatten();
            // `undefined` leaves the error without a stack, so the engine asks again one frame
            // further up while the error unwinds: there, after a stack overflow, there is room.
            stack
                .and_then(|stack| rquickjs::String::from_str(ctx.clone(), &stack).ok())
                .map_or_else(
                    || Value::new_undefined(ctx.clone()),
                    |stack| stack.into_value(),
                )
        },
    )?;
    let error_constructor: Object = ctx.globals().get("Error")?;
    error_constructor.set("prepareStackTrace", hook.clone())?;
    // The engine keeps the hook internally; replacing the accessor with a read-only value stops
    // the code from swapping the hook out (and with it, limit detection).
    let lock: Function = ctx.eval(
        "(hook) => Object.defineProperty(Error, 'prepareStackTrace', \
         { value: hook, writable: false, enumerable: false, configurable: false })",
    )?;
    lock.call::<_, ()>((hook,))?;
    Ok(switch)
}

/// The engine's setter, held outside the context so that the hook can switch itself off.
type EngineSetter = RefCell<Option<Persistent<Function<'static>>>>;

/// The means to switch the stack hook off; released when dropped, which must happen before
/// the runtime goes (the engine does not see the reference it holds).
pub(crate) struct StackHook {
    engine_setter: Rc<EngineSetter>,
}

impl Drop for StackHook {
    fn drop(&mut self) {
        self.engine_setter.borrow_mut().take();
    }
}

/// Clears the engine's hook. A call interrupted on its way in keeps the setter for the next
/// error to try again.
fn switch_off(ctx: &Ctx<'_>, engine_setter: &EngineSetter) {
    let Some(setter) = engine_setter.borrow_mut().take() else {
        return;
    };
    let Ok(setter) = setter.restore(ctx) else {
        return;
    };
    // The setter only needs an object as `this`; the global `Error` may have been replaced.
    let this = This(setter.clone());
    if setter
        .call::<_, ()>((this, Value::new_undefined(ctx.clone())))
        .is_err()
    {
        ctx.catch();
        *engine_setter.borrow_mut() = Some(Persistent::save(ctx, setter));
    }
}

/// The stack text of `error`, or `None` when the frames cannot be read right now.
fn prepare_stack<'js>(
    ctx: &Ctx<'js>,
    session: &Session,
    error: &Value<'js>,
    sites: &Value<'js>,
) -> Option<String> {
    // Recorded before anything else allocates: after an out-of-memory or stack-overflow error,
    // reading the frames may fail.
    let limit = limit_hit(error);
    if let Some(limit) = &limit {
        session.record(match limit {
            Limit::Memory => session.memory_stop(),
            Limit::Stack => session.stack_stop(),
        });
    }
    let frames = read_frames(sites);
    if frames.is_none() {
        // Reading failed with an exception of its own: it must not linger.
        ctx.catch();
    }
    let stack = frames?.iter().map(Frame::to_line).collect::<String>();
    if limit.is_some() {
        session.locate(parse_position(&stack));
    }
    Some(stack)
}

/// At most [`MAX_FRAMES`] frames, and no more once their names add up to
/// [`MAX_FRAME_TEXT_BYTES`]: `sites` is the engine's array, or whatever the code passed.
fn read_frames(sites: &Value<'_>) -> Option<Vec<Frame>> {
    let sites = sites.as_object().filter(|_| sites.is_array())?;
    let length = convert::array_length(sites).ok()??;
    // Exact: a whole number below `MAX_FRAMES`.
    let length = length.min(f64::from(MAX_FRAMES)) as u32;
    let mut frames = Vec::new();
    let mut text_bytes = 0_usize;
    for index in 0..length {
        if text_bytes > MAX_FRAME_TEXT_BYTES {
            break;
        }
        let frame = Frame::read(sites.get(index).ok()?)?;
        text_bytes = text_bytes
            .saturating_add(frame.function.as_ref().map_or(0, String::len))
            .saturating_add(frame.file.as_ref().map_or(0, String::len));
        frames.push(frame);
    }
    Some(frames)
}

enum Limit {
    Memory,
    Stack,
}

fn limit_hit(error: &Value<'_>) -> Option<Limit> {
    if !error.is_error() {
        return None;
    }
    let error = error.as_object()?;
    let name: Option<String> = error.get("name").ok()?;
    let message: Option<String> = error.get("message").ok()?;
    match (name.as_deref()?, message.as_deref()?) {
        ("InternalError", OUT_OF_MEMORY) => Some(Limit::Memory),
        ("RangeError", STACK_OVERFLOW) => Some(Limit::Stack),
        _ => None,
    }
}

/// One frame of a stack, read from a QuickJS `CallSite`.
struct Frame {
    function: Option<String>,
    file: Option<String>,
    line: Option<i64>,
    column: Option<i64>,
    native: bool,
}

impl Frame {
    fn read(site: Object<'_>) -> Option<Frame> {
        fn call<'js, T: rquickjs::FromJs<'js>>(site: &Object<'js>, method: &str) -> Option<T> {
            let method: Function = site.get(method).ok()?;
            method.call((This(site.clone()),)).ok()
        }
        const MAX_NAME_BYTES: usize = 1024;
        let name = |name: Option<String>| name.map(|name| cut(name, MAX_NAME_BYTES));
        Some(Frame {
            function: name(call::<Option<String>>(&site, "getFunctionName")?),
            file: name(call::<Option<String>>(&site, "getFileName")?),
            line: call::<Option<i64>>(&site, "getLineNumber")?.filter(|line| *line > 0),
            column: call::<Option<i64>>(&site, "getColumnNumber")?.filter(|column| *column > 0),
            native: call::<bool>(&site, "isNative")?,
        })
    }

    /// QuickJS's own format: `    at f (code.js:3:7)`, `    at code.js:3:7` (syntax errors),
    /// `    at f (native)`.
    fn to_line(&self) -> String {
        let function = match self.function.as_deref() {
            Some("") => Some("<anonymous>"),
            other => other,
        };
        let location = match (&self.file, self.line, self.column) {
            (Some(file), Some(line), Some(column)) => Some(format!("{file}:{line}:{column}")),
            (Some(file), _, _) => Some(file.clone()),
            _ if self.native => Some("native".to_owned()),
            _ => None,
        };
        match (function, location) {
            (Some(function), Some(location)) => format!("    at {function} ({location})\n"),
            (None, Some(location)) => format!("    at {location}\n"),
            (Some(function), None) => format!("    at {function}\n"),
            (None, None) => "    at <unknown>\n".to_owned(),
        }
    }
}
