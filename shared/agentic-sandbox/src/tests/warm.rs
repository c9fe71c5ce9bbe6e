//! Runs on warm threads: a spare serves one run only, limits and cancellation hold on it as
//! on a sandbox made on the spot, no run waits for a spare, and idle threads go away.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::{Value as Json, json};

use super::{TestHost, limits_with_timeout, program, without_tool_call_limits};
use crate::warm::{Config, THREAD_NAME};
use crate::{Limits, Program, RunOutcome, Sandboxes};

fn pool(config: Config) -> Sandboxes {
    Sandboxes::with_config(
        config,
        crate::Shares::new(crate::DEFAULT_MAX_SANDBOXES, crate::DEFAULT_MAX_SANDBOXES),
    )
}

/// One warm thread, never ended for being idle.
fn one_thread() -> Sandboxes {
    pool(Config {
        kept_idle: 1,
        most_threads: 1,
        keep_alive: Duration::from_secs(60),
    })
}

/// Waits (boundedly) until `pool` counts `threads` threads, `idle` of them idle.
async fn eventually_counts(pool: &Sandboxes, threads: usize, idle: usize) {
    let started = Instant::now();
    while pool.counts() != (threads, idle) {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the pool stayed at {:?} (threads, idle), not ({threads}, {idle})",
            pool.counts()
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// A run on `pool`, with the host it used.
async fn run_with(
    pool: &Sandboxes,
    program: Program,
    limits: Limits,
) -> (RunOutcome, Arc<TestHost>) {
    let host = Arc::new(TestHost::default());
    let outcome = pool.run("user", program, host.clone(), limits).await;
    (outcome, host)
}

/// Asserts that every tool call of the run came from the warm thread.
fn assert_ran_warm(host: &TestHost) {
    let threads = host.threads();
    assert!(!threads.is_empty(), "the run made no tool call");
    for (_, name) in threads {
        assert_eq!(name, THREAD_NAME, "the run did not run on a warm thread");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_warm_sandbox_shows_nothing_an_earlier_run_left_behind() {
    let pool = one_thread();
    // Leaves something behind in every place code can reach, after reporting what it found.
    // A reused context would also refuse the second `const found` and `let lexical`.
    let code = "const found = [typeof leak, typeof declared, Object.prototype.polluted, Array.prototype.extra, typeof mathAdd, Object.isFrozen(JSON), globalThis.runs ?? 0, Error.prepareStackTrace === undefined];\n\
        echo({});\n\
        globalThis.leak = 1; var declared = 2; let lexical = 3;\n\
        Object.prototype.polluted = 'yes'; Array.prototype.extra = 1;\n\
        mathAdd = 'replaced'; Object.freeze(JSON); globalThis.runs = (globalThis.runs ?? 0) + 1;\n\
        found";
    let clean = json!([
        "undefined",
        "undefined",
        null,
        null,
        "function",
        false,
        0,
        false
    ]);
    let mut warm_threads = Vec::new();
    for run in 0..30 {
        // The first run starts the warm thread; every later one finds it ready.
        if run > 0 {
            eventually_counts(&pool, 1, 1).await;
        }
        let (outcome, host) = run_with(&pool, program(code), Limits::default()).await;
        assert_eq!(outcome.result, Ok(clean.clone()), "run {run}");
        if run > 0 {
            assert_ran_warm(&host);
            warm_threads.extend(host.threads().into_iter().map(|(id, _)| id));
        }
    }
    warm_threads.dedup();
    assert_eq!(
        warm_threads.len(),
        1,
        "the runs did not share the warm thread"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_beyond_the_warm_threads_all_complete_without_waiting_for_a_spare() {
    let pool = pool(Config {
        kept_idle: 2,
        most_threads: 2,
        keep_alive: Duration::from_secs(60),
    });
    // Two warm threads, ready.
    let (first, second) = tokio::join!(
        run_with(&pool, program("1"), Limits::default()),
        run_with(&pool, program("2"), Limits::default()),
    );
    assert_eq!(
        (first.0.result, second.0.result),
        (Ok(json!(1)), Ok(json!(2)))
    );
    eventually_counts(&pool, 2, 2).await;

    let started = Instant::now();
    let runs = (0..20).map(|index| {
        let code = format!("sleep({{ ms: 300 }});\n{index}");
        run_with(&pool, program(&code), limits_with_timeout(10_000))
    });
    let outcomes = futures::future::join_all(runs).await;
    let elapsed = started.elapsed();
    let mut names = Vec::new();
    for (index, (outcome, host)) in outcomes.into_iter().enumerate() {
        assert_eq!(outcome.result, Ok(json!(index)));
        names.extend(host.threads().into_iter().map(|(_, name)| name));
    }
    // Twenty runs of 300 ms at once: any waiting for a spare would take seconds.
    assert!(elapsed < Duration::from_millis(1_500), "took {elapsed:?}");
    let warm = names.iter().filter(|name| *name == THREAD_NAME).count();
    assert_eq!(
        warm, 2,
        "two runs had warm threads, the rest made their own sandbox"
    );
    // Never more warm threads than allowed.
    assert_eq!(pool.counts().0, 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn limits_hold_on_a_warm_sandbox() {
    let pool = one_thread();
    let warm_run = |code: &str, limits: Limits| {
        let program = program(&format!("echo({{}});\n{code}"));
        let pool = &pool;
        async move {
            eventually_counts(pool, 1, 1).await;
            let (outcome, host) = run_with(pool, program, limits).await;
            assert_ran_warm(&host);
            outcome.result.unwrap_err()
        }
    };
    // Starts the warm thread.
    run_with(&pool, program("1"), Limits::default()).await;

    let memory = Limits {
        memory_bytes: 16 * 1024 * 1024,
        ..limits_with_timeout(5_000)
    };
    let error = warm_run(
        "const hoard = [];\nwhile (true) hoard.push(new Array(100000).fill(1));",
        memory.clone(),
    )
    .await;
    assert_eq!(error.message, "Memory limit of 16 MiB exceeded");
    assert_eq!(error.line, Some(3));
    let error = warm_run(
        "function bomb() { const hoard = []; while (true) hoard.push('x'.repeat(1e5) + Math.random()); }\ntry { bomb() } catch (e) { }\n'survived'",
        memory.clone(),
    )
    .await;
    assert_eq!(error.message, "Memory limit of 16 MiB exceeded");
    // Small objects fill the heap to the last byte: the engine then throws `null`.
    let error = warm_run(
        "function bomb() { const hoard = []; while (true) hoard.push({ n: hoard.length }); }\nbomb()",
        memory,
    )
    .await;
    assert_eq!(error.message, "Memory limit of 16 MiB exceeded");

    let error = warm_run(
        "function down(n) { return down(n + 1) + 1; }\ntry { down(0) } catch (e) { }\n'survived'",
        Limits::default(),
    )
    .await;
    assert!(error.message.contains("call stack"), "{error:?}");
    assert_eq!(error.line, Some(2));

    for code in [
        "while (true) {}",
        // The stack hook must switch itself off here, or every interrupt is swallowed.
        "for (;;) { try { null.x } catch (e) { } }",
    ] {
        let started = Instant::now();
        let error = warm_run(code, limits_with_timeout(300)).await;
        assert_eq!(error.message, "Execution timed out after 300ms", "{code}");
        assert!(error.timeout);
        assert!(started.elapsed() < Duration::from_secs(2), "{code}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_memory_limit_counts_the_sandbox_made_before_the_run() {
    let pool = one_thread();
    run_with(&pool, program("1"), Limits::default()).await;
    // Too small a limit is raised to what the engine needs for its own globals.
    let tiny = Limits {
        memory_bytes: 1,
        ..limits_with_timeout(5_000)
    };
    eventually_counts(&pool, 1, 1).await;
    let (outcome, host) = run_with(&pool, program("echo({}).tool"), tiny.clone()).await;
    assert_ran_warm(&host);
    assert_eq!(outcome.result, Ok(json!("echo")));
    // The context made before the limit was set counts against it: 1 MiB is soon spent.
    eventually_counts(&pool, 1, 1).await;
    let (outcome, host) = run_with(
        &pool,
        program("echo({});\nconst hoard = [];\nwhile (true) hoard.push('x'.repeat(1000) + hoard.length);"),
        tiny,
    )
    .await;
    assert_ran_warm(&host);
    assert_eq!(
        outcome.result.unwrap_err().message,
        "Memory limit of 1 MiB exceeded"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn dropping_a_run_stops_its_code_on_a_warm_sandbox() {
    let pool = one_thread();
    run_with(&pool, program("1"), Limits::default()).await;
    eventually_counts(&pool, 1, 1).await;
    let host = Arc::new(TestHost::default());
    let limits = without_tool_call_limits(limits_with_timeout(30_000));
    let running = pool.run(
        "user",
        program("while (true) { tick() }"),
        host.clone(),
        limits,
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(100), running)
            .await
            .is_err()
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    let ticks = host.ticks.load(Ordering::SeqCst);
    assert!(ticks > 0);
    assert_ran_warm(&host);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        host.ticks.load(Ordering::SeqCst),
        ticks,
        "the code kept running after the run was dropped"
    );
    // The thread made a new spare and serves the next run.
    eventually_counts(&pool, 1, 1).await;
    let (outcome, host) = run_with(&pool, program("echo({}).tool"), Limits::default()).await;
    assert_eq!(outcome.result, Ok(json!("echo")));
    assert_ran_warm(&host);
}

#[tokio::test(flavor = "multi_thread")]
async fn idle_warm_threads_beyond_the_kept_ones_end_after_the_keep_alive() {
    let pool = pool(Config {
        kept_idle: 1,
        most_threads: 3,
        keep_alive: Duration::from_millis(50),
    });
    // Three runs at once find no warm thread: each starts one once it has answered.
    let runs = (0..3).map(|index| run_with(&pool, program(&index.to_string()), Limits::default()));
    for (index, (outcome, _)) in futures::future::join_all(runs)
        .await
        .into_iter()
        .enumerate()
    {
        assert_eq!(outcome.result, Ok(Json::from(index)));
    }
    eventually_counts(&pool, 3, 3).await;
    // Two of them end; the kept one stays, however long it is idle.
    eventually_counts(&pool, 1, 1).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(pool.counts(), (1, 1));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_warm_thread_whose_job_panics_ends_and_the_pool_carries_on() {
    let pool = one_thread();
    run_with(&pool, program("1"), Limits::default()).await;
    eventually_counts(&pool, 1, 1).await;
    // Runs catch their own panics; this job stands for one that escapes anyway.
    pool.pool.submit(Box::new(|_| panic!("a job that escapes")));
    eventually_counts(&pool, 0, 0).await;
    let (outcome, _) = run_with(&pool, program("echo({}).tool"), Limits::default()).await;
    assert_eq!(outcome.result, Ok(json!("echo")));
    eventually_counts(&pool, 1, 1).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn dropping_the_last_handle_ends_the_warm_threads() {
    let pool = pool(Config {
        kept_idle: 2,
        most_threads: 2,
        keep_alive: Duration::from_secs(60),
    });
    let counts = pool.pool.counter();
    let clone = pool.clone();
    // Two runs at once: both threads start and then wait, kept idle.
    let (first, second) = tokio::join!(
        run_with(&pool, program("1"), Limits::default()),
        run_with(&clone, program("2"), Limits::default())
    );
    assert_eq!(first.0.result, Ok(json!(1)));
    assert_eq!(second.0.result, Ok(json!(2)));
    eventually_counts(&pool, 2, 2).await;
    drop(pool);
    // A clone still holds them.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(counts(), (2, 2));
    drop(clone);
    let started = Instant::now();
    while counts() != (0, 0) {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the warm threads outlived their pool: {:?}",
            counts()
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_beyond_the_sandbox_slots_wait_for_one_and_give_up_at_their_time_limit() {
    let pool = Sandboxes::with_config(Config::default(), crate::Shares::new(1, 1));
    // Takes the only slot first, and holds it inside a tool call.
    let holding = run_with(
        &pool,
        program("sleep({ ms: 1500 });\n1"),
        limits_with_timeout(10_000),
    );
    let later = |code: &'static str, timeout_ms: u64| {
        let pool = pool.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            run_with(&pool, program(code), limits_with_timeout(timeout_ms)).await
        }
    };
    let (held, impatient, patient) = tokio::join!(holding, later("2", 300), later("3", 10_000));
    assert_eq!(held.0.result, Ok(json!(1)));
    let refused = impatient.0.result.unwrap_err();
    assert!(
        refused
            .message
            .contains("all 1 sandboxes of the code-executor stayed busy"),
        "{refused:?}"
    );
    assert_eq!(patient.0.result, Ok(json!(3)), "a run waits its turn");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_users_runs_past_their_share_wait_while_another_users_run_goes_at_once() {
    let pool = Sandboxes::with_config(Config::default(), crate::Shares::new(3, 1));
    let host = || Arc::new(TestHost::default());
    // Alice holds her one slot inside a tool call; her second run waits for it.
    let holding = async {
        let outcome = pool
            .run(
                "alice",
                program("sleep({ ms: 1500 });\n1"),
                host(),
                limits_with_timeout(10_000),
            )
            .await;
        (outcome, std::time::Instant::now())
    };
    let alice_again = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        pool.run("alice", program("2"), host(), limits_with_timeout(300))
            .await
    };
    let bob = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let outcome = pool
            .run("bob", program("3"), host(), limits_with_timeout(10_000))
            .await;
        (outcome, std::time::Instant::now())
    };
    let ((held, alice_done), alice_again, (bob, bob_done)) =
        tokio::join!(holding, alice_again, bob);
    assert_eq!(held.result, Ok(json!(1)));
    let refused = alice_again.result.unwrap_err();
    assert!(
        refused
            .message
            .contains("your other runs held all 1 sandboxes one user may hold"),
        "{refused:?}"
    );
    assert_eq!(bob.result, Ok(json!(3)));
    assert!(bob_done < alice_done, "bob did not wait for alice's slot");
}
