//! One run on its sandbox thread: a sandbox no code has run in yet (a warm thread's spare, or
//! one made on the spot), the run's limits and globals bound to it, the evaluation of the code
//! until its promise settles, and the outcome.
//!
//! The code is evaluated as a global script with `promise: true`: top-level `await` works,
//! and the promise resolves to `{ value: <last expression> }`, which is the round's result.
//! The only jobs are promise reactions (tools block instead of returning promises), so the
//! driver runs jobs until that promise settles; a promise that can never settle is an error
//! rather than a hang.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use rquickjs::context::EvalOptions;
use rquickjs::promise::PromiseState;
use rquickjs::{CatchResultExt, Ctx, Promise, Value};
use serde_json::Value as Json;

use crate::errors::{self, Source};
use crate::host::Host;
use crate::limits::Limits;
use crate::modules::{ModuleLoader, ModuleResolver, rewrite_static_imports};
use crate::outcome::{Admission, CodeError, RunOutcome};
use crate::position::CODE_FILE;
use crate::program::{Program, SandboxTool};
use crate::session::{CancelSignal, Session, SessionSlot};
use crate::spare::Spare;
use crate::{convert, globals, tools};

/// Host functions run on the same thread stack as the deepest JavaScript frame: keep at least
/// half a mebibyte of a blocking thread's 2 MiB for them.
const MAX_STACK_BYTES: usize = 1536 * 1024;
const MIN_STACK_BYTES: usize = 64 * 1024;
/// Below this the engine cannot even create its global objects.
const MIN_MEMORY_BYTES: usize = 1024 * 1024;

const NEVER_SETTLES: &str = "The code awaits a promise that can never settle (the sandbox has no timers or events; tool calls return their results directly)";

/// Runs `program` in `spare`, or, without one, in a sandbox made now and dropped before this
/// returns. A spare is left to the caller to discard once the outcome is on its way.
/// `started` is when the run was handed to its sandbox thread.
pub(crate) fn execute(
    program: Program,
    host: Arc<dyn Host>,
    limits: Limits,
    cancel: CancelSignal,
    runtime: tokio::runtime::Handle,
    started: Instant,
    spare: Option<&Spare>,
) -> RunOutcome {
    let Program {
        code,
        tools,
        modules,
        input,
        memory,
        spent,
        entropy,
    } = program;
    // Limits the engine cannot honour are adjusted here, so error messages quote real values.
    let limits = Limits {
        memory_bytes: limits.memory_bytes.max(MIN_MEMORY_BYTES),
        stack_bytes: limits.stack_bytes.clamp(MIN_STACK_BYTES, MAX_STACK_BYTES),
        ..limits
    };
    let session = Rc::new(Session::new(
        host,
        limits,
        runtime,
        cancel,
        (memory, spent, entropy),
    ));
    let run = Run {
        code: &code,
        tools,
        modules,
        input: input.as_ref(),
    };
    let result = run_code(&session, run, spare);
    tracing::debug!(
        elapsed_ms = started.elapsed().as_millis() as u64,
        tool_calls = session.tool_calls(),
        failed = result.is_err(),
        "sandbox run finished"
    );
    RunOutcome {
        result,
        logs: session.logs.take(),
        completion: session.completion.take(),
        memory: session.memory.take(),
        spent: session.budget.spent(),
        tool_calls: session.tool_calls(),
        admission: Admission::Ran {
            elapsed: started.elapsed(),
        },
    }
}

/// The program's parts the sandbox takes in.
struct Run<'a> {
    code: &'a str,
    tools: Vec<SandboxTool>,
    modules: Vec<(String, String)>,
    input: Option<&'a Json>,
}

fn run_code(session: &Rc<Session>, run: Run<'_>, spare: Option<&Spare>) -> Result<Json, CodeError> {
    let code = run.code;
    if let Some(offset) = code.find('\0') {
        return Err(errors::nul_error(code, offset));
    }
    let rewrite = rewrite_static_imports(code);
    let source = Source {
        code,
        imports: &rewrite.imports,
    };
    let run = Run {
        code: &rewrite.code,
        ..run
    };
    // The caller may have gone away while the run waited for a sandbox thread.
    let result = if session.should_interrupt() {
        Err(CodeError::unpositioned("Execution did not start"))
    } else {
        match spare {
            Some(spare) => run_in(spare, session, run, &source),
            None => Spare::new()
                .map_err(could_not_start)
                .and_then(|spare| run_in(&spare, session, run, &source)),
        }
    };
    // A limit or cancellation overrides whatever the code made of it (it may have caught the
    // error we threw, or finished before the interrupt handler's next check).
    match (session.take_stop(), result) {
        (Some(stop), _) => Err(errors::stop_error(stop, &source)),
        (None, Err(error)) if errors::is_out_of_memory_null(&error, code) => {
            Err(errors::stop_error(session.memory_stop(), &source))
        }
        (None, result) => result,
    }
}

/// Binds the run to a sandbox no code has run in yet, and evaluates its code.
fn run_in(
    spare: &Spare,
    session: &Rc<Session>,
    run: Run<'_>,
    source: &Source<'_>,
) -> Result<Json, CodeError> {
    let runtime = &spare.runtime;
    // The engine counts every allocation since the runtime was made, so a limit set now holds
    // the context's own memory to it as well.
    runtime.set_memory_limit(session.limits.memory_bytes);
    runtime.set_max_stack_size(session.limits.stack_bytes);
    let watched = Rc::clone(session);
    runtime.set_interrupt_handler(Some(Box::new(move || watched.should_interrupt())));
    let dates = globals::reads_dates(run.code, &run.modules);
    runtime.set_loader(
        ModuleResolver::new(&run.modules),
        ModuleLoader::new(run.modules),
    );
    spare.slot.bind(Rc::clone(session));

    spare.context.with(|ctx| {
        install(&ctx, &spare.slot, run.tools, run.input, dates)
            .catch(&ctx)
            .map_err(|error| could_not_start(convert::caught_text(&ctx, error)))?;
        evaluate(&ctx, session, run.code, source)
    })
}

/// The globals that differ from run to run.
fn install(
    ctx: &Ctx<'_>,
    slot: &SessionSlot,
    tools: Vec<SandboxTool>,
    input: Option<&Json>,
    dates: bool,
) -> rquickjs::Result<()> {
    globals::install_input(ctx, input)?;
    if dates {
        globals::install_date(ctx, slot)?;
    }
    tools::install(ctx, slot, tools)
}

fn could_not_start(error: impl std::fmt::Display) -> CodeError {
    CodeError::unpositioned(format!("The sandbox could not start: {error}"))
}

fn evaluate<'js>(
    ctx: &Ctx<'js>,
    session: &Session,
    code: &str,
    source: &Source<'_>,
) -> Result<Json, CodeError> {
    let mut options = EvalOptions::default();
    options.global = true;
    // Sloppy mode, like a plain Node.js script: what models expect when they write one.
    options.strict = false;
    options.promise = true;
    options.backtrace_barrier = true;
    options.filename = Some(CODE_FILE.to_owned());
    let promise: Promise = ctx
        .eval_with_options(code, options)
        .catch(ctx)
        .map_err(|caught| errors::code_error(ctx, caught, source))?;
    let completion = settle(ctx, session, promise, source)?;
    let value: Value = match completion.as_object() {
        Some(completion) => completion
            .get("value")
            .catch(ctx)
            .map_err(|caught| errors::code_error(ctx, caught, source))?,
        None => completion,
    };
    // `async` code may end in a promise (`fetchAll()` without `await`): its value is meant.
    let value = match value.clone().into_promise() {
        Some(promise) => settle(ctx, session, promise, source)?,
        None => value,
    };
    // Reactions the code scheduled without awaiting them (`promise.then(output)`) still run,
    // as they would before a Node.js script exits.
    while !session.should_interrupt() && ctx.execute_pending_job() {}
    convert::result_json(ctx, value, session.limits.max_result_bytes)
        .map_err(CodeError::unpositioned)
}

/// Runs jobs until `promise` settles.
fn settle<'js>(
    ctx: &Ctx<'js>,
    session: &Session,
    promise: Promise<'js>,
    source: &Source<'_>,
) -> Result<Value<'js>, CodeError> {
    loop {
        if promise.state() != PromiseState::Pending
            && let Some(result) = promise.result::<Value>()
        {
            return result
                .catch(ctx)
                .map_err(|caught| errors::code_error(ctx, caught, source));
        }
        // A job loop (`for (;;) await null`) never runs long enough for the engine's own
        // interrupt check: check here too. The recorded stop becomes the run's error.
        if session.should_interrupt() || !ctx.execute_pending_job() {
            return Err(CodeError::unpositioned(NEVER_SETTLES));
        }
    }
}
