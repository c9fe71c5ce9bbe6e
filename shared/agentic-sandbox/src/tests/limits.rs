//! Errors the model sees, limits that end a run, and cancellation.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::json;

use super::{
    TestHost, error_of, limits_with_timeout, program, run, run_program, value_of,
    without_tool_call_limits,
};
use crate::{Limits, PromptLimits};

#[tokio::test(flavor = "multi_thread")]
async fn a_reference_error_points_at_the_line_that_caused_it() {
    let error = error_of(
        program("const a = 1;\nconst b = 2;\nfoo(a + b);\n"),
        Limits::default(),
    )
    .await;
    assert_eq!(error.message, "ReferenceError: foo is not defined");
    assert_eq!((error.line, error.column), (Some(3), Some(1)));
    assert_eq!(error.context.as_deref(), Some("foo(a + b);"));
    assert!(!error.timeout);
}

#[tokio::test(flavor = "multi_thread")]
async fn positions_stay_exact_after_rewritten_imports_and_inside_functions() {
    let mut code = program(
        "import {\n  greeting\n} from \"greet\";\nfunction f() {\n    return greeting.missing.deeper;\n}\nf();",
    );
    code.modules = vec![("greet".into(), "export const greeting = {};".into())];
    let error = error_of(code, Limits::default()).await;
    assert!(error.message.starts_with("TypeError: "), "{error:?}");
    assert_eq!(error.line, Some(5));
    assert_eq!(
        error.context.as_deref(),
        Some("return greeting.missing.deeper;")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_syntax_error_points_at_its_position() {
    let error = error_of(program("let x = 1;\nx = ;"), Limits::default()).await;
    assert!(error.message.starts_with("SyntaxError: "), "{error:?}");
    assert_eq!(
        (error.line, error.context.as_deref()),
        (Some(2), Some("x = ;"))
    );

    let error = error_of(
        program("const a = 1;\nimport { x } from \"m\";"),
        Limits::default(),
    )
    .await;
    assert!(
        error
            .message
            .contains("static imports are only supported at the top"),
        "{error:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn thrown_values_that_are_not_errors_still_read_well() {
    let error = error_of(program("throw 'boom'"), Limits::default()).await;
    assert_eq!(error.message, "Uncaught exception: boom");
    let error = error_of(program("throw { code: 1 }"), Limits::default()).await;
    assert_eq!(error.message, r#"Uncaught exception: {"code":1}"#);
    let error = error_of(program("throw null"), Limits::default()).await;
    assert_eq!(error.message, "Uncaught exception: null");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_endless_loop_times_out() {
    let started = Instant::now();
    let error = error_of(
        program("let i = 0;\nwhile (true) { i++ }"),
        limits_with_timeout(300),
    )
    .await;
    assert_eq!(error.message, "Execution timed out after 300ms");
    assert!(error.timeout);
    assert!(
        started.elapsed() < Duration::from_millis(1_000),
        "took {:?}",
        started.elapsed()
    );
    // Catching does not help: the interrupt is not a JavaScript exception.
    let error = error_of(
        program("for (;;) { try { while (true) {} } catch (e) {} }"),
        limits_with_timeout(300),
    )
    .await;
    assert!(error.timeout);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_tool_counts_against_the_time_budget() {
    let started = Instant::now();
    let (outcome, host) = run_program(
        program("try { sleep({ ms: 5000 }) } catch (e) { }\n'carried on'"),
        limits_with_timeout(300),
    )
    .await;
    let elapsed = started.elapsed();
    let error = outcome.result.unwrap_err();
    assert_eq!(error.message, "Execution timed out after 300ms");
    assert!(error.timeout);
    assert_eq!(error.line, Some(1));
    assert!(elapsed < Duration::from_millis(1_000), "took {elapsed:?}");
    assert_eq!(host.abandoned_sleeps.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_memory_bomb_ends_with_a_memory_error_even_when_caught() {
    let limits = Limits {
        memory_bytes: 16 * 1024 * 1024,
        ..limits_with_timeout(5_000)
    };
    let bomb = "const hoard = [];\nwhile (true) hoard.push(new Array(100000).fill(1));";
    let error = error_of(program(bomb), limits.clone()).await;
    assert_eq!(error.message, "Memory limit of 16 MiB exceeded");
    assert_eq!(error.line, Some(2));

    let caught = "function bomb() { const hoard = []; while (true) hoard.push('x'.repeat(1e5) + Math.random()); }\ntry { bomb() } catch (e) { }\n'survived'";
    let error = error_of(program(caught), limits.clone()).await;
    assert_eq!(error.message, "Memory limit of 16 MiB exceeded");

    // Small objects fill the heap to the last byte: the engine then throws `null`.
    let small = "function bomb() { const hoard = []; while (true) hoard.push({ n: hoard.length }); }\nbomb()";
    let error = error_of(program(small), limits).await;
    assert_eq!(error.message, "Memory limit of 16 MiB exceeded");
}

#[tokio::test(flavor = "multi_thread")]
async fn values_held_outside_the_engine_answer_to_the_memory_limit_too() {
    let limits = Limits {
        memory_bytes: 2 * 1024 * 1024,
        ..Limits::default()
    };
    // One string of 0.5 MiB in the engine, stored (or sent) many times over.
    let store =
        "const big = 'x'.repeat(512 * 1024);\nfor (let i = 0; i < 10; i++) store('k' + i, big);";
    let error = error_of(program(store), limits.clone()).await;
    assert!(
        error
            .message
            .starts_with("Storage limit of 2 MiB per prompt exceeded by store()"),
        "{error:?}"
    );
    assert_eq!(error.line, Some(2));
    // Overwriting a key does not add up.
    let overwrite = "const big = 'x'.repeat(512 * 1024);\nfor (let i = 0; i < 10; i++) store('k', big);\nrecall('k').length";
    let (outcome, _) = run_program(program(overwrite), limits.clone()).await;
    assert_eq!(outcome.result, Ok(json!(512 * 1024)));

    let parallel = "const big = 'x'.repeat(512 * 1024);\nparallel(Array.from({ length: 10 }, () => ({ tool: 'echo', input: { big } })))";
    let (outcome, host) = run_program(program(parallel), limits).await;
    assert_eq!(
        outcome.result.unwrap_err().message,
        "Memory limit of 2 MiB exceeded by the inputs of parallel()"
    );
    assert!(host.calls().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn endless_recursion_ends_with_a_stack_error_even_when_caught() {
    let error = error_of(
        program("function down(n) { return down(n + 1) + 1; }\ndown(0)"),
        Limits::default(),
    )
    .await;
    assert!(
        error.message.contains("call stack") && error.message.contains("recursion"),
        "{error:?}"
    );
    assert_eq!(error.line, Some(1));

    let caught =
        "function down(n) { return down(n + 1) + 1; }\ntry { down(0) } catch (e) { }\n'survived'";
    let error = error_of(program(caught), Limits::default()).await;
    assert!(error.message.contains("call stack"), "{error:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_tool_call_limit_ends_the_run() {
    let limits = Limits {
        max_tool_calls: 3,
        ..Limits::default()
    };
    let (outcome, host) = run_program(
        program("for (let i = 0; i < 10; i++) { try { echo({ i }) } catch (e) { } }"),
        limits.clone(),
    )
    .await;
    assert_eq!(
        outcome.result.unwrap_err().message,
        "Tool call limit of 3 reached"
    );
    assert_eq!((outcome.tool_calls, host.calls().len()), (3, 3));

    let (outcome, host) = run_program(
        program("parallel([1, 2, 3, 4].map(i => ({ tool: 'echo', input: { i } })))"),
        limits,
    )
    .await;
    assert_eq!(
        outcome.result.unwrap_err().message,
        "Tool call limit of 3 reached"
    );
    assert!(host.calls().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_output_limit_ends_the_run() {
    let limits = Limits {
        prompt: PromptLimits {
            max_output_bytes: 10,
            ..PromptLimits::default()
        },
        ..Limits::default()
    };
    let (outcome, host) = run_program(
        program("output('12345');\nlog('1234');\ntry { output('too much') } catch (e) { }\n1"),
        limits,
    )
    .await;
    let error = outcome.result.unwrap_err();
    assert_eq!(
        error.message,
        "Output limit of 10 bytes exceeded (text of output() and complete(), per prompt)"
    );
    assert_eq!(error.line, Some(3));
    assert_eq!(
        (host.outputs(), outcome.logs),
        (vec!["12345".to_owned()], vec!["1234".to_owned()])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_panicking_host_becomes_a_javascript_error() {
    let message = value_of("try { callTool('panic', {}) } catch (error) { error.message }").await;
    let message = message.as_str().unwrap();
    assert!(message.contains("internal error"), "{message}");
    assert!(
        message.contains("; trace "),
        "names its trace reference: {message}"
    );
    assert!(
        !message.contains("exploded"),
        "the panic's text stays in the log: {message}"
    );
    assert_eq!(
        value_of("try { callTool('panic', {}) } catch (e) { }\nmathAdd({ a: 1, b: 1 }).sum").await,
        json!(2)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_nul_byte_in_the_code_is_a_clear_error() {
    let error = error_of(program("let a = 1;\nlet b = '\0';"), Limits::default()).await;
    assert!(error.message.contains("NUL"), "{error:?}");
    assert_eq!((error.line, error.column), (Some(2), Some(10)));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_promise_that_can_never_settle_is_an_error_not_a_hang() {
    let error = error_of(
        program("await new Promise(() => {})"),
        limits_with_timeout(5_000),
    )
    .await;
    assert!(error.message.contains("never settle"), "{error:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn dropping_the_run_stops_the_code() {
    let host = Arc::new(TestHost::default());
    let limits = without_tool_call_limits(limits_with_timeout(30_000));
    let running = run(
        program("while (true) { tick() }"),
        host.clone(),
        limits.clone(),
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(100), running)
            .await
            .is_err()
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    let ticks = host.ticks.load(Ordering::SeqCst);
    assert!(ticks > 0);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        host.ticks.load(Ordering::SeqCst),
        ticks,
        "the code kept running after the run was dropped"
    );

    // A host call in flight is dropped too.
    let running = run(program("sleep({ ms: 5000 })"), host.clone(), limits);
    assert!(
        tokio::time::timeout(Duration::from_millis(100), running)
            .await
            .is_err()
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(host.abandoned_sleeps.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wait_for_approval_does_not_count_against_the_time_budget() {
    let (outcome, _) = run_program(
        program("approval({ ms: 600 }).approved"),
        limits_with_timeout(300),
    )
    .await;
    assert_eq!(outcome.result, Ok(json!(true)));

    // A plain tool that takes as long still runs out of time.
    let error = error_of(program("sleep({ ms: 600 })"), limits_with_timeout(300)).await;
    assert_eq!(error.message, "Execution timed out after 300ms");
    assert!(error.timeout);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_budget_runs_on_after_a_wait_for_approval() {
    let started = Instant::now();
    let error = error_of(
        program("approval({ ms: 400 });\nwhile (true) {}"),
        limits_with_timeout(300),
    )
    .await;
    let elapsed = started.elapsed();
    assert!(error.timeout, "{error:?}");
    assert!(
        elapsed >= Duration::from_millis(650) && elapsed < Duration::from_millis(1_500),
        "300 ms of budget around a 400 ms wait ended after {elapsed:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn parallel_slots_waiting_for_approval_stop_the_clock_for_the_whole_batch() {
    let (outcome, _) = run_program(
        program("parallel([{ tool: 'approval', input: { ms: 500 } }, { tool: 'sleep', input: { ms: 100 } }, { tool: 'approval', input: { ms: 400, approve: false } }])"),
        limits_with_timeout(300),
    )
    .await;
    assert_eq!(
        outcome.result,
        Ok(json!([
            { "approved": true },
            { "slept": 100 },
            { "error": "Tool \"approval\" rejected: not today" }
        ]))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn dropping_the_run_ends_a_wait_for_approval() {
    let host = Arc::new(TestHost::default());
    let running = run(
        program("approval({ ms: 30000 })"),
        host.clone(),
        limits_with_timeout(300),
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(100), running)
            .await
            .is_err()
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(host.abandoned_approvals.load(Ordering::SeqCst), 1);
}
