//! One run on its blocking thread: a fresh runtime with the run's limits, the globals, the
//! evaluation of the code until its promise settles, and the outcome.
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
use rquickjs::{CatchResultExt, Context, Ctx, Promise, Runtime, Value};
use serde_json::Value as Json;

use super::errors::{self, CODE_FILE, Source};
use super::modules::{ModuleLoader, ModuleResolver, rewrite_static_imports};
use super::session::{CancelSignal, Session};
use super::{CodeError, Host, Limits, Program, RunOutcome, SandboxTool, convert, globals, tools};

/// Host functions run on the same thread stack as the deepest JavaScript frame: keep at least
/// half a mebibyte of a blocking thread's 2 MiB for them.
const MAX_STACK_BYTES: usize = 1536 * 1024;
const MIN_STACK_BYTES: usize = 64 * 1024;
/// Below this the engine cannot even create its global objects.
const MIN_MEMORY_BYTES: usize = 1024 * 1024;

const NEVER_SETTLES: &str = "The code awaits a promise that can never settle (the sandbox has no timers or events; tool calls return their results directly)";

pub(super) fn execute(
    program: Program,
    host: Arc<dyn Host>,
    limits: Limits,
    cancel: CancelSignal,
    runtime: tokio::runtime::Handle,
) -> RunOutcome {
    let started = Instant::now();
    let Program {
        code,
        tools,
        modules,
        input,
        memory,
    } = program;
    // Limits the engine cannot honour are adjusted here, so error messages quote real values.
    let limits = Limits {
        memory_bytes: limits.memory_bytes.max(MIN_MEMORY_BYTES),
        stack_bytes: limits.stack_bytes.clamp(MIN_STACK_BYTES, MAX_STACK_BYTES),
        ..limits
    };
    let session = Rc::new(Session::new(host, limits, runtime, cancel, memory));
    let result = run_code(&session, &code, tools, modules, input.as_ref());
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
        tool_calls: session.tool_calls(),
    }
}

fn run_code(
    session: &Rc<Session>,
    code: &str,
    tools: Vec<SandboxTool>,
    modules: Vec<(String, String)>,
    input: Option<&Json>,
) -> Result<Json, CodeError> {
    if let Some(offset) = code.find('\0') {
        return Err(errors::nul_error(code, offset));
    }
    let rewrite = rewrite_static_imports(code);
    let source = Source {
        code,
        imports: &rewrite.imports,
    };
    // The caller may have gone away while the run waited for a blocking thread.
    let result = if session.should_interrupt() {
        Err(CodeError::unpositioned("Execution did not start"))
    } else {
        run_in_fresh_runtime(session, &rewrite.code, &source, tools, modules, input)
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

fn run_in_fresh_runtime(
    session: &Rc<Session>,
    code: &str,
    source: &Source<'_>,
    tools: Vec<SandboxTool>,
    modules: Vec<(String, String)>,
    input: Option<&Json>,
) -> Result<Json, CodeError> {
    let runtime = Runtime::new().map_err(could_not_start)?;
    runtime.set_memory_limit(session.limits.memory_bytes);
    runtime.set_max_stack_size(session.limits.stack_bytes);
    let watched = Rc::clone(session);
    runtime.set_interrupt_handler(Some(Box::new(move || watched.should_interrupt())));
    runtime.set_loader(ModuleResolver::new(&modules), ModuleLoader::new(modules));
    // Declared after the runtime, so dropped before it.
    let context = Context::full(&runtime).map_err(could_not_start)?;

    context.with(|ctx| {
        let _stack_hook = install(&ctx, session, tools, input)
            .map_err(|error| could_not_start(convert::caught_text(&ctx, error)))?;
        evaluate(&ctx, session, code, source)
    })
}

fn install<'js>(
    ctx: &Ctx<'js>,
    session: &Rc<Session>,
    tools: Vec<SandboxTool>,
    input: Option<&Json>,
) -> Result<errors::StackHook<'js>, rquickjs::CaughtError<'js>> {
    let stack_hook = errors::install_stack_hook(ctx, session).catch(ctx)?;
    globals::install(ctx, session, input).catch(ctx)?;
    tools::install(ctx, session, tools).catch(ctx)?;
    Ok(stack_hook)
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
    convert::result_json(ctx, value, session.limits.max_output_bytes)
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
