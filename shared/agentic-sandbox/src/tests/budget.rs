//! The prompt's budget: what all rounds of one prompt may spend together. Each test runs
//! rounds the way the executor does, handing every run the memory and the spending of the
//! ones before it.

use serde_json::{Map, json};

use super::{program, run_code, run_program, value_of};
use crate::{Limits, PromptLimits, RunOutcome, Spent};

/// Runs `codes` as consecutive rounds of one prompt.
async fn rounds(codes: &[&str], limits: Limits) -> Vec<RunOutcome> {
    let mut memory = Map::new();
    let mut spent = Spent::default();
    let mut outcomes = Vec::new();
    for code in codes {
        let mut round = program(code);
        round.memory = memory;
        round.spent = spent;
        let (outcome, _) = run_program(round, limits.clone()).await;
        memory = outcome.memory.clone();
        spent = outcome.spent;
        outcomes.push(outcome);
    }
    outcomes
}

fn with_prompt_limits(prompt: PromptLimits) -> Limits {
    Limits {
        prompt,
        ..Limits::default()
    }
}

fn error_message(outcome: &RunOutcome) -> String {
    match &outcome.result {
        Ok(value) => panic!("the round succeeded with {value}"),
        Err(error) => error.message.clone(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn values_stored_in_earlier_rounds_count_against_the_prompt_storage_limit() {
    let limits = with_prompt_limits(PromptLimits {
        max_stored_bytes: 3 * 1024 * 1024,
        ..PromptLimits::default()
    });
    let store = |key: &str| format!("store('{key}', 'x'.repeat(1024 * 1024)); 'kept {key}'");
    let (first, second, third) = (store("a"), store("b"), store("c"));
    let outcomes = rounds(&[&first, &second, &third], limits.clone()).await;
    assert_eq!(outcomes[0].result, Ok(json!("kept a")));
    assert_eq!(outcomes[1].result, Ok(json!("kept b")));
    assert_eq!(
        error_message(&outcomes[2]),
        "Storage limit of 3 MiB per prompt exceeded by store() (remove values you no longer need with store(key, undefined))"
    );
    assert_eq!(
        outcomes[2].memory.len(),
        2,
        "the refused value was not kept"
    );

    // Removing a value makes room again.
    let replace = "store('a', undefined); store('c', 'x'.repeat(1024 * 1024)); 'replaced'";
    let outcomes = rounds(&[&first, &second, replace], limits).await;
    assert_eq!(outcomes[2].result, Ok(json!("replaced")));
}

#[tokio::test(flavor = "multi_thread")]
async fn millions_of_tiny_stored_values_cannot_hide_in_a_small_total() {
    let limits = with_prompt_limits(PromptLimits {
        max_stored_bytes: 64 * 1024,
        ..PromptLimits::default()
    });
    let (outcome, _) = run_program(
        program("for (let i = 0; i < 1e6; i++) store('k' + i, 1)"),
        limits,
    )
    .await;
    assert!(
        error_message(&outcome).starts_with("Storage limit of 65536 bytes per prompt exceeded"),
        "{:?}",
        outcome.result
    );
    // Each entry costs its overhead too, not only the few bytes of its key and value.
    assert!(
        outcome.memory.len() < 1_000,
        "{} kept",
        outcome.memory.len()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_empty_log_lines_ends_at_the_line_limit() {
    let (outcome, _) = run_code("for (;;) log('')").await;
    assert_eq!(
        error_message(&outcome),
        "Log limit of 10000 lines per prompt reached"
    );
    assert_eq!(outcome.logs.len(), 10_000);
    assert_eq!(outcome.spent.log_entries, 10_000);
}

#[tokio::test(flavor = "multi_thread")]
async fn log_lines_and_bytes_add_up_over_the_rounds_of_a_prompt() {
    let limits = with_prompt_limits(PromptLimits {
        max_log_entries: 5,
        ..PromptLimits::default()
    });
    let three = "log(1); log(2); log(3); 'logged'";
    let outcomes = rounds(&[three, three], limits).await;
    assert_eq!(outcomes[0].result, Ok(json!("logged")));
    assert_eq!(
        error_message(&outcomes[1]),
        "Log limit of 5 lines per prompt reached"
    );
    assert_eq!(outcomes[1].logs, ["1", "2"]);

    let half = "log('x'.repeat(600 * 1024)); 'logged'";
    let outcomes = rounds(&[half, half], Limits::default()).await;
    assert_eq!(outcomes[0].result, Ok(json!("logged")));
    assert_eq!(
        error_message(&outcomes[1]),
        "Log limit of 1 MiB per prompt exceeded"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_log_call_with_thousands_of_large_values_stops_at_the_limit() {
    let (outcome, _) =
        run_code("const big = 'x'.repeat(1024 * 1024);\nlog(...Array(65535).fill(big))").await;
    assert_eq!(
        error_message(&outcome),
        "Log limit of 1 MiB per prompt exceeded"
    );
    assert!(outcome.logs.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_empty_outputs_ends_at_the_call_limit() {
    let (outcome, host) = run_code("for (;;) output('')").await;
    assert_eq!(
        error_message(&outcome),
        "Output limit of 1000 output() calls per prompt reached"
    );
    assert_eq!(host.outputs().len(), 1_000);
}

#[tokio::test(flavor = "multi_thread")]
async fn output_calls_and_text_add_up_over_the_rounds_and_complete_text_counts() {
    let limits = with_prompt_limits(PromptLimits {
        max_output_calls: 3,
        ..PromptLimits::default()
    });
    let two = "output('a'); output('b'); 'shown'";
    let outcomes = rounds(&[two, two], limits).await;
    assert_eq!(outcomes[0].result, Ok(json!("shown")));
    assert_eq!(
        error_message(&outcomes[1]),
        "Output limit of 3 output() calls per prompt reached"
    );

    let limits = with_prompt_limits(PromptLimits {
        max_output_bytes: 10,
        ..PromptLimits::default()
    });
    let outcomes = rounds(
        &[
            "output('12345'); 'shown'",
            "complete({ response: '123456' })",
        ],
        limits,
    )
    .await;
    assert_eq!(outcomes[0].result, Ok(json!("shown")));
    assert!(
        error_message(&outcomes[1]).starts_with("Output limit of 10 bytes exceeded"),
        "{:?}",
        outcomes[1].result
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_llm_calls_ends_at_the_call_limit_over_the_rounds() {
    let (outcome, _) = run_code("for (;;) llm('again')").await;
    assert_eq!(
        error_message(&outcome),
        "llm() call limit of 100 per prompt reached"
    );
    assert_eq!(outcome.spent.llm_calls, 100);

    let limits = with_prompt_limits(PromptLimits {
        max_llm_calls: 3,
        ..PromptLimits::default()
    });
    let two = "llm('a'); llmJson('b'); 'asked'";
    let outcomes = rounds(&[two, two], limits).await;
    assert_eq!(outcomes[0].result, Ok(json!("asked")));
    assert_eq!(
        error_message(&outcomes[1]),
        "llm() call limit of 3 per prompt reached"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn events_from_outputs_tools_and_llm_calls_are_limited_per_prompt() {
    let limits = with_prompt_limits(PromptLimits {
        max_events: 5,
        ..PromptLimits::default()
    });
    let three = "echo({}); output('a'); llm('b'); 'three'";
    let outcomes = rounds(&[three, three], limits).await;
    assert_eq!(outcomes[0].result, Ok(json!("three")));
    let error = outcomes[1].result.clone().unwrap_err();
    assert_eq!(
        error.message,
        "Event limit of 5 per prompt reached (output(), tool and llm() calls)"
    );
    // The refused call (llm()) was not counted.
    assert_eq!(
        (outcomes[1].spent.events, outcomes[1].spent.llm_calls),
        (5, 1)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn performance_now_is_as_coarse_as_date_now() {
    let samples = value_of(
        "const samples = [];\nfor (let i = 0; i < 5000; i++) samples.push(performance.now());\n[samples.every(Number.isInteger), samples.every((t, i) => i === 0 || t >= samples[i - 1]), typeof performance.timeOrigin]",
    )
    .await;
    assert_eq!(samples, json!([true, true, "undefined"]));
    // It still tells time.
    let waited =
        value_of("const start = performance.now();\nsleep({ ms: 30 });\nperformance.now() - start")
            .await;
    let waited = waited.as_f64().unwrap();
    assert!(
        (29.0..1_000.0).contains(&waited),
        "30 ms read as {waited} ms"
    );
}
