//! Hostile code against the sandbox alone: limits that must hold even when the code fights
//! them, and values that cannot cross the boundary.

use std::time::{Duration, Instant};

use super::{error_of, limits_with_timeout, program, without_tool_call_limits};
use crate::Limits;

#[tokio::test(flavor = "multi_thread")]
async fn a_swallowed_tool_timeout_followed_by_a_loop_of_tool_calls_still_ends() {
    let started = Instant::now();
    let run = error_of(
        program(
            "try { sleep({ ms: 60000 }) } catch (e) { }\nwhile (true) { try { echo({}) } catch (e) { } }",
        ),
        limits_with_timeout(300),
    );
    let error = tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .expect("the run outlived its time budget");
    assert_eq!(error.message, "Execution timed out after 300ms");
    assert!(error.timeout);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_loop_of_caught_failing_host_calls_after_the_timeout_still_ends() {
    let error = error_of(
        program("while (true) { try { echo({}) } catch (e) { } }"),
        without_tool_call_limits(limits_with_timeout(300)),
    )
    .await;
    assert_eq!(error.message, "Execution timed out after 300ms");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_loop_that_builds_and_catches_errors_still_times_out() {
    for code in [
        "while (true) { try { throw new Error('again') } catch (e) { } }",
        "for (;;) { try { null.x } catch (e) { } }",
        "let i = 0;\nwhile (true) { try { i++; undefinedThing } catch (e) { } }",
    ] {
        let run = error_of(program(code), limits_with_timeout(300));
        let error = tokio::time::timeout(Duration::from_secs(5), run)
            .await
            .unwrap_or_else(|_| panic!("{code:?} outlived its time budget"));
        assert_eq!(error.message, "Execution timed out after 300ms", "{code}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn results_without_json_or_too_large_are_clear_errors() {
    let cases = [
        (
            "const a = {};\na.self = a;\na",
            "The result is not JSON-serialisable: circular reference",
        ),
        (
            "10n ** 30n",
            "The result is not JSON-serialisable: BigInt are forbidden in JSON.stringify",
        ),
        (
            "'x'.repeat(2 * 1024 * 1024)",
            "The result is too large: 2097154 bytes of JSON, the limit is 1048576 bytes (return less, or keep data with store())",
        ),
    ];
    for (code, expected) in cases {
        let error = error_of(program(code), Limits::default()).await;
        assert_eq!(error.message, expected, "{code}");
    }
}
