//! Every host function against hostile shapes of value: huge, sparse and negative lengths,
//! getters and proxy traps that throw, cyclic values, re-entrant calls, thousands of large
//! arguments. A run may end with a value or an error, but never with a panic of ours or a
//! crash, and the process must live on to serve the next run.
//!
//! The functions come from `globals::API_NAMES` (plus a tool and the stack hook), so a host
//! function added later is covered without anyone adding it here.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use serde_json::{Value as Json, json};

use super::{TestHost, program, run, value_of};
use crate::globals::API_NAMES;
use crate::{Limits, PromptLimits};

/// Host functions outside `API_NAMES`: a tool function and the engine's stack hook.
const OTHER_FUNCTIONS: &[&str] = &["echo", "Error.prepareStackTrace"];

/// JavaScript expressions, each evaluated afresh for every argument (`v()`). Huge arrays print
/// short (`toJSON`), so the engine does not spend the run printing them: what is tested is
/// what the host makes of their lengths.
const SHAPES: &[&str] = &[
    "(() => { const a = []; a.length = 2 ** 31 - 1; a.toJSON = () => 'sparse'; return a })()",
    "(() => { const a = []; a.length = 2 ** 32 - 1; a.toJSON = () => 'sparse'; return a })()",
    "({ length: -1, 0: { tool: 'echo' } })",
    "new Proxy([], { get: (target, key) => key === 'length' ? 2 ** 32 - 1 : key === 'toJSON' ? () => 'proxy' : target[key] })",
    "new Proxy([], { get: (target, key) => key === 'length' ? -5 : key === 'toJSON' ? () => 'proxy' : { tool: 'echo' } })",
    "new Proxy([1], { get() { throw new Error('trap') } })",
    "new Proxy({}, { get() { throw new Error('trap') }, ownKeys() { throw new Error('trap') }, getOwnPropertyDescriptor() { throw new Error('trap') }, has() { throw new Error('trap') } })",
    "Object.defineProperty([1, 2], 0, { get() { throw new Error('getter') } })",
    "({ get tool() { throw new Error('getter') }, get input() { throw new Error('getter') }, get response() { throw new Error('getter') }, get data() { throw new Error('getter') }, get followUp() { throw new Error('getter') }, toJSON() { throw new Error('toJSON') }, toString() { throw new Error('toString') } })",
    "(() => { const a = [{ tool: 'echo' }]; const o = { tool: 'echo', input: a, response: a, data: a }; a.push(a, o); return a })()",
    // Re-entrant: reading the value calls the same host function again, without end.
    "({ get tool() { return f(this) }, get input() { return f(this) }, get response() { return f(this) }, toJSON() { return f(this) }, toString() { return f(this) } })",
    "Symbol('s')",
    "10n ** 100n",
    "'x'.repeat(1024 * 1024)",
    // Call sites for the stack hook: many of them, each with a long name.
    "Object.assign(Array(100000).fill({ getFunctionName: () => 'f'.repeat(1 << 20), getFileName: () => 'code.js', getLineNumber: () => 1, getColumnNumber: () => 1, isNative: () => false }), { toJSON: () => 'sites' })",
];

/// How each function is called with the shape (`f` is the function, `v()` a fresh value):
/// in first and second place, as a `parallel()` slot, as every field `complete()` reads, and
/// as each of the most arguments the engine passes.
const CALLS: &[&str] = &[
    "f(v(), v())",
    "f('echo', v())",
    "f([{ tool: 'echo', input: v() }, v()])",
    "f({ tool: 'echo', input: v(), response: v(), data: v(), followUp: v() })",
    "f(...Array(65535).fill(v()))",
];

/// `f` is the function at `path`, called on its owner; the run's value is what the call threw.
fn code(path: &str, shape: &str, call: &str) -> String {
    format!(
        "const owner = {path:?}.split('.').slice(0, -1).reduce((object, key) => object[key], globalThis);\n\
         const method = owner[{path:?}.split('.').pop()];\n\
         const f = (...args) => Reflect.apply(method, owner, args);\n\
         const v = () => ({shape});\n\
         let thrown = null;\n\
         try {{ {call} }} catch (error) {{ try {{ thrown = String(error && error.message !== undefined ? error.message : error) }} catch (_) {{ thrown = '(unprintable)' }} }}\n\
         typeof thrown === 'string' ? thrown.slice(0, 300) : thrown"
    )
}

/// Small enough that runaway conversions hit the memory limit quickly.
fn limits() -> Limits {
    Limits {
        timeout: Duration::from_secs(1),
        memory_bytes: 8 * 1024 * 1024,
        prompt: PromptLimits::default(),
        ..Limits::default()
    }
}

/// Every function of the host API: its globals, and the methods of those that are objects.
async fn host_functions() -> Vec<String> {
    let names = serde_json::to_string(API_NAMES).unwrap();
    let found = value_of(&format!(
        "{names}.flatMap(name => {{\n\
           const value = globalThis[name];\n\
           if (typeof value === 'function') return [name];\n\
           if (value !== null && typeof value === 'object')\n\
             return Object.keys(value).filter(key => typeof value[key] === 'function').map(key => name + '.' + key);\n\
           return [];\n\
         }})"
    ))
    .await;
    let mut functions: Vec<String> = serde_json::from_value(found).unwrap();
    functions.extend(OTHER_FUNCTIONS.iter().map(|name| (*name).to_owned()));
    functions
}

/// What a run must never say: that the host panicked or the sandbox crashed.
fn broke(text: &str) -> bool {
    text.contains("internal error in the sandbox host")
        || text.contains("The sandbox failed")
        || text.contains("panicked")
}

#[tokio::test(flavor = "multi_thread")]
async fn every_host_function_survives_hostile_shapes_and_the_next_run_works() {
    let functions = host_functions().await;
    // The whole API is here: a mistake in discovery must not pass silently.
    for expected in [
        "parallel",
        "console.log",
        "performance.now",
        "store",
        "echo",
    ] {
        assert!(
            functions.iter().any(|name| name == expected),
            "{expected} missing from {functions:?}"
        );
    }
    let cases: Vec<(String, &str, &str)> = functions
        .iter()
        .flat_map(|path| {
            SHAPES
                .iter()
                .flat_map(move |shape| CALLS.iter().map(move |call| (path.clone(), *shape, *call)))
        })
        .collect();
    let failures: Vec<String> = futures::stream::iter(cases)
        .map(|(path, shape, call)| async move {
            let mut program = program(&code(&path, shape, call));
            program.input = Some(json!({ "n": 1 }));
            let host = Arc::new(TestHost::default());
            let outcome =
                tokio::time::timeout(Duration::from_secs(60), run(program, host, limits()))
                    .await
                    .map_err(|_| format!("{path} / {shape} / {call}: no answer"))?;
            let text = match &outcome.result {
                Ok(Json::String(thrown)) => thrown.clone(),
                Ok(value) => value.to_string(),
                Err(error) => error.message.clone(),
            };
            if broke(&text) {
                return Err(format!("{path} / {shape} / {call}: {text}"));
            }
            Ok(())
        })
        .buffer_unordered(4)
        .filter_map(|result| async move { result.err() })
        .collect()
        .await;
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );

    assert_eq!(value_of("mathAdd({ a: 1, b: 2 }).sum").await, json!(3));
}
