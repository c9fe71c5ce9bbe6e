//! The globals the code sees and what they do.

use std::time::{Duration, Instant};

use serde_json::json;

use super::{limits_with_timeout, program, run_code, run_program, value_of};
use crate::{Completion, Limits};

#[tokio::test(flavor = "multi_thread")]
async fn the_last_expression_is_the_result() {
    assert_eq!(value_of("const a = 2;\na * 21").await, json!(42));
    assert_eq!(
        value_of("({ list: [1, 'two'], nested: { ok: true } })").await,
        json!({ "list": [1, "two"], "nested": { "ok": true } })
    );
    assert_eq!(value_of("let nothing = 1;").await, json!(null));
    assert_eq!(value_of("undefined").await, json!(null));
    // A promise as the last expression (an async helper called without `await`) is awaited.
    assert_eq!(
        value_of("(async () => mathAdd({ a: 1, b: 1 }).sum)()").await,
        json!(2)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn reactions_the_code_did_not_await_still_run() {
    let (outcome, host) = run_code("Promise.resolve('later').then(output);\n'now'").await;
    assert_eq!(outcome.result, Ok(json!("now")));
    assert_eq!(host.outputs(), ["later"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn tools_can_be_called_synchronously_and_with_await() {
    let (outcome, host) = run_code("const a = mathAdd({ a: 1, b: 2 });\nconst b = await mathAdd({ a: 3, b: 4 });\n[a.sum, b.sum]").await;
    assert_eq!(outcome.result, Ok(json!([3, 7])));
    assert_eq!(outcome.tool_calls, 2);
    assert_eq!(
        host.calls()[0],
        ("math.add".to_owned(), json!({ "a": 1, "b": 2 }))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_tool_throws_an_error_the_code_can_catch() {
    let caught =
        value_of("try { fail({}) } catch (error) { [error instanceof Error, error.message] }")
            .await;
    assert_eq!(caught, json!([true, "Tool \"fail\" failed: boom"]));
    let (outcome, _) = run_code("await fail({})").await;
    assert_eq!(
        outcome.result.unwrap_err().message,
        "Error: Tool \"fail\" failed: boom"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn call_tool_reaches_every_tool_and_rejects_unknown_ids() {
    assert_eq!(
        value_of("callTool('math.add', { a: 1, b: 1 }).sum").await,
        json!(2)
    );
    assert_eq!(
        value_of("try { callTool('nope', {}) } catch (error) { error.message }").await,
        json!("Tool \"nope\" not found")
    );
    // An omitted input is an empty object.
    assert_eq!(value_of("callTool('echo').input").await, json!({}));
}

#[tokio::test(flavor = "multi_thread")]
async fn tool_functions_are_named_in_lower_camel_case_and_never_shadow_the_api() {
    assert_eq!(
        value_of("weatherGetWeather({ city: 'Oslo' })").await,
        json!({ "city": "Oslo", "temperature": 21 })
    );
    // `a.b` and `a-b` are both `aB`: the first keeps it, the other is reachable by id, and
    // (as the seed has it) as a global under its id.
    assert_eq!(
        value_of("[aB().tool, callTool('a-b').tool, globalThis['a-b']().tool]").await,
        json!(["a.b", "a-b", "a-b"])
    );
    // A tool named like the host API gets no global at all, not even under its id.
    assert_eq!(
        value_of("globalThis['output'] === output && typeof globalThis['a.b']").await,
        json!("undefined")
    );
    // A tool named `output` must not replace the host's output().
    let (outcome, host) = run_code("output('text'); callTool('output').tool").await;
    assert_eq!(outcome.result, Ok(json!("output")));
    assert_eq!(host.outputs(), ["text"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn output_reaches_the_host_while_the_code_runs() {
    let (outcome, host) = run_code("output('hello');\noutput({ n: 1 });\noutputsCount()").await;
    assert_eq!(outcome.result, Ok(json!(2)));
    assert_eq!(host.outputs(), ["hello", r#"{"n":1}"#]);
}

#[tokio::test(flavor = "multi_thread")]
async fn done_and_complete_record_a_completion_and_let_the_code_continue() {
    let (outcome, _) = run_code("done();\n'still running'").await;
    assert_eq!(outcome.result, Ok(json!("still running")));
    assert_eq!(outcome.completion, Some(Completion::default()));

    let (outcome, _) = run_code(
        "complete({ response: 'All done', data: { rows: 3 }, followUp: 'More?' }); recall('_lastData').rows - 2",
    )
    .await;
    let expected = Completion {
        response: Some("All done".into()),
        data: Some(json!({ "rows": 3 })),
        follow_up: Some("More?".into()),
    };
    assert_eq!(outcome.completion, Some(expected));
    assert_eq!(outcome.result, Ok(json!(1)), "data is kept as _lastData");
    assert_eq!(outcome.memory.get("_lastData"), Some(&json!({ "rows": 3 })));

    let (outcome, _) = run_code("1").await;
    assert_eq!(outcome.completion, None);
}

#[tokio::test(flavor = "multi_thread")]
async fn store_and_recall_carry_values_into_the_next_run() {
    let (first, _) = run_code("store('city', { name: 'Oslo' });\nstore('gone', 1);\nstore('gone', undefined);\nrecall('missing') === undefined").await;
    assert_eq!(first.result, Ok(json!(true)));
    assert_eq!(
        serde_json::Value::Object(first.memory.clone()),
        json!({ "city": { "name": "Oslo" } })
    );

    let mut second = program("recall('city').name");
    second.memory = first.memory;
    let (second, _) = run_program(second, Limits::default()).await;
    assert_eq!(second.result, Ok(json!("Oslo")));
    assert_eq!(second.memory.len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn log_and_console_write_one_line_per_call() {
    let code = "log('text', 1, { b: 2 }, [3], null, undefined);\nconsole.log('c');\nconsole.error(new TypeError('bad'));\nconsole.warn(1.5, true)";
    let (outcome, _) = run_code(code).await;
    assert_eq!(
        outcome.logs,
        [
            r#"text 1 {"b":2} [3] null undefined"#,
            "c",
            "TypeError: bad",
            "1.5 true"
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_log_call_prints_its_first_thousand_values_and_counts_the_rest() {
    let code = "console.log(...Array(65535).fill(0).map((_, i) => i));\n\
                log(...Array(1000).fill('x'));\n\
                console.log(...Array(65535).fill(new Proxy({}, { get() { throw new Error('trap') } })))";
    let (outcome, _) = run_code(code).await;
    assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    let numbers: Vec<String> = (0..1000).map(|i| i.to_string()).collect();
    assert_eq!(
        outcome.logs[0],
        format!("{} … (64535 more values not printed)", numbers.join(" "))
    );
    assert_eq!(outcome.logs[1], vec!["x"; 1000].join(" "));
    assert!(
        outcome.logs[2].ends_with("… (64535 more values not printed)"),
        "{}",
        &outcome.logs[2][outcome.logs[2].len().saturating_sub(200)..]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn discover_tools_and_tool_schema_describe_the_tools() {
    let tools = value_of("discoverTools()").await;
    assert_eq!(
        tools[0],
        json!({ "id": "math.add", "name": "mathAdd", "description": "the math.add tool" })
    );
    assert_eq!(
        tools[9],
        json!({ "id": "a-b", "name": null, "description": "the a-b tool" })
    );
    assert_eq!(
        value_of("toolSchema('math.add')").await,
        json!({ "type": "object", "title": "math.add" })
    );
    assert_eq!(
        value_of("try { toolSchema('nope') } catch (error) { error.message }").await,
        json!("Tool \"nope\" not found")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn parallel_runs_its_calls_concurrently() {
    let code = "parallel(Array.from({ length: 10 }, (_, i) => ({ tool: 'sleep', input: { ms: 50 + i } }))).map(r => r.slept)";
    let started = Instant::now();
    let (outcome, _) = run_code(code).await;
    let elapsed = started.elapsed();
    assert_eq!(
        outcome.result,
        Ok(json!([50, 51, 52, 53, 54, 55, 56, 57, 58, 59]))
    );
    assert_eq!(outcome.tool_calls, 10);
    assert!(
        elapsed < Duration::from_millis(300),
        "10 calls of ~50 ms took {elapsed:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn parallel_reports_failed_slots_and_rejects_bad_arguments() {
    let results = value_of("parallel([{ tool: 'fail', input: {} }, { tool: 'nope', input: {} }, { tool: 'math.add', input: { a: 1, b: 2 } }])").await;
    assert_eq!(
        results,
        json!([{ "error": "Tool \"fail\" failed: boom" }, { "error": "Tool \"nope\" not found" }, { "sum": 3 }])
    );
    let usage = json!("parallel() expects an array of {tool, input} objects");
    assert_eq!(
        value_of("try { parallel({ tool: 'echo' }) } catch (error) { error.message }").await,
        usage
    );
    assert_eq!(
        value_of("try { parallel([42]) } catch (error) { error.message }").await,
        usage
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn llm_answers_text_and_llm_json_answers_parsed_json() {
    assert_eq!(value_of("llm('hello')").await, json!("echo: hello"));
    assert_eq!(value_of("llmJson('question').answer").await, json!(42));
    assert_eq!(value_of("llmJson('bad json')").await, json!("not json {"));
    assert_eq!(
        value_of("try { llm('fail') } catch (error) { error.message }").await,
        json!("llm() failed: model down")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn artifact_helpers_call_the_artifact_tools() {
    let code =
        "[storeArtifact('report text', 'the report'), getArtifact('art-1'), listArtifacts()]";
    let (outcome, host) = run_code(code).await;
    assert_eq!(
        outcome.result,
        Ok(json!(["art-1", { "stored": "art-1" }, [{ "id": "art-1" }]]))
    );
    let calls = host.calls();
    assert_eq!(
        calls[0],
        (
            "artifact.store".to_owned(),
            json!({ "data": "report text", "description": "the report" })
        )
    );
    assert_eq!(
        calls[1],
        ("artifact.get".to_owned(), json!({ "id": "art-1" }))
    );
    assert_eq!(outcome.tool_calls, 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn input_is_a_global_only_when_given() {
    let mut with_input = program("input.n * 2");
    with_input.input = Some(json!({ "n": 5 }));
    let (outcome, _) = run_program(with_input, Limits::default()).await;
    assert_eq!(outcome.result, Ok(json!(10)));
    assert_eq!(value_of("typeof input").await, json!("undefined"));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_sandbox_has_no_ambient_capabilities() {
    let kinds = value_of(
        "[typeof fetch, typeof require, typeof process, typeof setTimeout, typeof std, typeof os]",
    )
    .await;
    assert_eq!(kinds, json!(vec!["undefined"; 6]));
}

#[tokio::test(flavor = "multi_thread")]
async fn plugin_modules_can_be_imported_statically() {
    let mut with_modules = program(
        "// uses the greeting module\nimport greet, { greeting as hello } from \"greet\";\nimport * as math from 'math';\n[greet('Bob'), hello, math.add(2, 3)]",
    );
    with_modules.modules = vec![
        ("greet".into(), "export const greeting = 'hi';\nexport default function greet(name) { return `${greeting} ${name}`; }".into()),
        // Modules see the same globals as the code, tools included.
        ("math".into(), "export function add(a, b) { return mathAdd({ a, b }).sum; }".into()),
    ];
    let (outcome, _) = run_program(with_modules, Limits::default()).await;
    assert_eq!(outcome.result, Ok(json!(["hi Bob", "hi", 5])));
}

#[tokio::test(flavor = "multi_thread")]
async fn importing_an_unknown_module_is_an_error_naming_it() {
    let mut code = program("const a = 1;\nimport('nowhere')");
    code.modules = vec![("greet".into(), "export const greeting = 'hi';".into())];
    let error = super::error_of(code, Limits::default()).await;
    assert_eq!(
        error.message,
        "Error: Unknown module \"nowhere\" (available modules: greet)"
    );

    let error = super::error_of(
        program("\nimport { x } from \"nowhere\";\nx"),
        Limits::default(),
    )
    .await;
    assert!(error.message.contains("\"nowhere\""), "{error:?}");
    assert_eq!(
        (error.line, error.context.as_deref()),
        (Some(2), Some("import { x } from \"nowhere\";"))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_do_not_share_globals() {
    assert_eq!(
        value_of("globalThis.leak = 1; var declared = 2; leak + declared").await,
        json!(3)
    );
    assert_eq!(
        value_of("[typeof leak, typeof declared]").await,
        json!(["undefined", "undefined"])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn sandboxes_run_concurrently() {
    let limits = limits_with_timeout(5_000);
    let started = Instant::now();
    let (first, second) = tokio::join!(
        run_program(program("sleep({ ms: 200 }); 'first'"), limits.clone()),
        run_program(program("sleep({ ms: 200 }); 'second'"), limits),
    );
    assert_eq!(
        (first.0.result, second.0.result),
        (Ok(json!("first")), Ok(json!("second")))
    );
    assert!(
        started.elapsed() < Duration::from_millis(380),
        "two runs of 200 ms took {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rejected_or_unanswered_approval_throws_an_error_the_code_can_catch() {
    let caught = value_of(
        "let seen = [];\ntry { approval({ ms: 1, approve: false }) } catch (error) { seen.push(error.message) }\ntry { approvalExpire({ ms: 1 }) } catch (error) { seen.push(error.message) }\nseen.push('carried on');\nseen",
    )
    .await;
    assert_eq!(
        caught,
        json!([
            "Tool \"approval\" rejected: not today",
            "Tool \"approval.expire\" approval timed out after 0.001s",
            "carried on"
        ])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_given_its_record_reads_the_same_time_and_random_numbers_again() {
    let code = "const a = Date.now(); const b = new Date().getTime(); const c = Date();\n\
                const d = performance.now(); const r = [Math.random(), Math.random()];\n\
                [a, b, c, d, r, new Date(0).toISOString(), new Date() instanceof Date,\n\
                 new Date().constructor === Date, typeof Date.UTC(2020, 0)]";
    let first = program(code);
    let entropy = first.entropy.clone();
    let (outcome, _) = run_program(first, Limits::default()).await;
    let value = outcome.result.unwrap();
    let record = entropy.record();
    assert!(record.complete);
    // Date.now(), then four dates made without a value.
    assert_eq!(record.times.len(), 5, "{record:?}");
    assert_eq!(record.elapsed.len(), 1, "{record:?}");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as f64;
    assert!(
        (now - value[0].as_f64().unwrap()).abs() < 60_000.0,
        "{value}"
    );
    assert_eq!(value[5], json!("1970-01-01T00:00:00.000Z"));
    assert_eq!(value[6], json!(true));
    assert_eq!(value[7], json!(true));
    assert_eq!(value[8], json!("number"));

    // Later, elsewhere: the same reads.
    std::thread::sleep(Duration::from_millis(5));
    let again = crate::Program {
        entropy: crate::Entropy::replaying(&record),
        ..program(code)
    };
    let (outcome, _) = run_program(again, Limits::default()).await;
    assert_eq!(outcome.result.unwrap(), value);
}
