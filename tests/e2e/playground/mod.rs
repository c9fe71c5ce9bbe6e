//! The web playground in a real browser (headless Chromium over WebDriver) against a real
//! stack with the stand-in model: what a person sees and clicks. Screenshots land in
//! `target/playground/`.

mod agents;
mod attachments;
mod browser;
mod decisions;
mod event_source;
mod lifecycle;
mod skills;

use agentic_testkit::model::{Match, Rule};
use agentic_testkit::{Stack, StackOptions};
use serde_json::{Value, json};

use self::browser::Browser;
use crate::support::*;

/// A script body with `last` bound to the newest prompt on the page (or null), then `body`.
fn on_last(body: &str) -> String {
    format!(
        "const all = document.querySelectorAll('#prompts .prompt'); \
         const last = all.length ? all[all.length - 1] : null; {body}"
    )
}

/// Waits until the newest prompt on the page is in `state` (running, waiting, completed,
/// failed, cancelled).
async fn until_state(browser: &Browser, state: &str) {
    browser
        .until(
            &format!("the prompt is {state}"),
            &on_last(&format!(
                "return !!last && last.dataset.state === '{state}'"
            )),
        )
        .await;
}

/// The newest prompt's timeline as `kind:function` entries, in page order.
async fn timeline_of(browser: &Browser) -> Vec<String> {
    let value = browser
        .run(
            &on_last(
                "return [...last.querySelectorAll('.timeline > *')]\
                 .map(e => (e.dataset.kind || e.className) + ':' + (e.dataset.function || ''))",
            ),
            vec![],
        )
        .await;
    serde_json::from_value(value).unwrap()
}

/// The text outputs of the newest prompt.
async fn texts_of(browser: &Browser) -> Vec<String> {
    let value = browser
        .run(
            &on_last(
                "return [...last.querySelectorAll('.timeline > [data-kind=text]')]\
                 .map(e => e.textContent)",
            ),
            vec![],
        )
        .await;
    serde_json::from_value(value).unwrap()
}

async fn open_playground(stack: &Stack) -> Browser {
    let browser = Browser::start().await;
    browser
        .goto(&format!("{}/", stack.gateway_http_url()))
        .await;
    browser
}

#[tokio::test]
async fn a_classic_answer_streams_into_the_page_and_ends_completed_with_its_usage() {
    let answer = "The playground shows this answer while it arrives, one word after another, \
                  until the model has said all of it.";
    let stack = Stack::start(vec![
        text(Match::Any, answer).chunk_delay_ms(60).usage(120, 30),
    ])
    .await
    .unwrap();
    let browser = open_playground(&stack).await;
    browser.send_prompt("tell me something", "classic").await;

    let partial = browser
        .until(
            "part of the answer is on the page",
            &on_last(
                "const s = last && last.querySelector('.streaming'); \
                 return !!s && s.textContent.length > 0 && s.textContent",
            ),
        )
        .await;
    let partial = partial.as_str().unwrap();
    assert!(
        partial.len() < answer.len() && answer.starts_with(partial.trim_end()),
        "a prefix of the answer while it streams: {partial:?}"
    );
    until_state(&browser, "completed").await;
    assert_eq!(texts_of(&browser).await, [answer]);
    let footer = browser
        .run(
            &on_last("return last.querySelector('.usage').textContent"),
            vec![],
        )
        .await;
    assert!(
        footer
            .as_str()
            .unwrap()
            .contains("120 tokens in, 30 out · 1 round · 0 tool calls"),
        "{footer}"
    );
    // The conversation the prompt started is in the sidebar, titled after the prompt.
    let titles = browser
        .run(
            "return [...document.querySelectorAll('#conversations li')].map(li => li.textContent)",
            vec![],
        )
        .await;
    assert_eq!(titles, json!(["tell me something"]));
    browser.screenshot("classic").await;
    browser.close().await;
}

#[tokio::test]
async fn a_code_prompt_shows_its_failed_round_with_the_line_then_code_three_tool_calls_and_text_in_order()
 {
    let failing = "const a = 1;\nconst b = 2;\nnotDefined(a + b);\n";
    let working = "const a = demoEcho({n: 1});\nconst b = demoEcho({n: 2});\n\
                   const c = demoEcho({n: 3});\n\
                   output('Echoed ' + [a, b, c].map(r => r.echo.n).join(', '));\ndone();\n";
    let stack = Stack::start(vec![
        code_for("echo three", 1, failing),
        code_for("echo three", 2, working),
    ])
    .await
    .unwrap();
    let browser = open_playground(&stack).await;
    browser.send_prompt("echo three numbers", "code").await;
    until_state(&browser, "completed").await;

    assert_eq!(
        timeline_of(&browser).await,
        [
            "code:",
            "code:",
            "tool:demo.echo",
            "tool:demo.echo",
            "tool:demo.echo",
            "text:"
        ]
    );
    assert_eq!(texts_of(&browser).await, ["Echoed 1, 2, 3"]);
    let footer = browser
        .run(
            &on_last("return last.querySelector('.usage').textContent"),
            vec![],
        )
        .await;
    assert!(
        footer
            .as_str()
            .unwrap()
            .ends_with("2 rounds · 3 tool calls"),
        "{footer}"
    );
    let rounds = browser
        .run(
            &on_last(
                "return [...last.querySelectorAll('[data-kind=code]')].map(c => ({\
                   status: c.dataset.status, \
                   code: [...c.querySelectorAll('.line')].map(l => l.textContent).join('\\n'), \
                   marked: [...c.querySelectorAll('.error-line')].map(l => l.dataset.line), \
                   error: (c.querySelector('.field.error') || {}).textContent || ''}))",
            ),
            vec![],
        )
        .await;
    assert_eq!(rounds[0]["status"], "error");
    assert_eq!(
        rounds[0]["marked"],
        json!(["3"]),
        "the failing line is marked"
    );
    assert!(
        rounds[0]["error"].as_str().unwrap().contains("notDefined"),
        "{rounds}"
    );
    assert_eq!(rounds[1]["status"], "done");
    assert_eq!(rounds[1]["code"], json!(working.trim_end()));
    assert_eq!(rounds[1]["marked"], json!([]));
    // Each tool call opens to its input and output.
    browser.click("#prompts .prompt details.tool summary").await;
    let first_call = browser
        .run(
            &on_last("return last.querySelector('details.tool[open]').textContent"),
            vec![],
        )
        .await;
    let first_call = first_call.as_str().unwrap();
    assert!(
        first_call.contains("\"n\": 1") && first_call.contains("\"echo\""),
        "{first_call}"
    );
    browser.screenshot("code").await;
    browser.close().await;
}

fn dangerous_rules() -> Vec<Rule> {
    vec![
        calls(
            Match::NoToolResults,
            vec![call("demo__dangerous", json!({"action": "launch"}))],
        ),
        text(Match::HasToolResults, "Outcome: {last_tool_result}"),
    ]
}

#[tokio::test]
async fn approve_resumes_a_waiting_prompt_and_reject_ends_the_call_with_the_reason() {
    let stack = Stack::start(dangerous_rules()).await.unwrap();
    let browser = open_playground(&stack).await;

    browser.send_prompt("launch it", "classic").await;
    until_state(&browser, "waiting").await;
    browser.screenshot("approval").await;
    browser.click("#prompts .prompt button.approve").await;
    until_state(&browser, "completed").await;
    let status = browser
        .run(
            &on_last("return last.querySelector('details.tool').dataset.status"),
            vec![],
        )
        .await;
    assert_eq!(status, "done");
    let answer = texts_of(&browser).await;
    assert!(answer[0].starts_with("Outcome:"), "{answer:?}");
    assert!(
        browser
            .run(
                &on_last("return last.querySelectorAll('button.approve, button.reject').length"),
                vec![]
            )
            .await
            == 0,
        "no decision is offered once it is made"
    );

    // A new conversation, where the call is rejected with a reason.
    browser.click("#new-conversation").await;
    browser
        .until(
            "the page is empty",
            "return document.querySelectorAll('#prompts .prompt').length === 0",
        )
        .await;
    browser.send_prompt("launch it again", "classic").await;
    until_state(&browser, "waiting").await;
    browser
        .type_into("#prompts .prompt .approval input.reason", "not today")
        .await;
    browser.click("#prompts .prompt button.reject").await;
    until_state(&browser, "completed").await;
    let call = browser
        .run(
            &on_last(
                "const t = last.querySelector('details.tool'); \
                 return {status: t.dataset.status, text: t.textContent}",
            ),
            vec![],
        )
        .await;
    assert_eq!(call["status"], "rejected", "{call}");
    assert!(
        call["text"].as_str().unwrap().contains("not today"),
        "{call}"
    );
    browser.close().await;
}

#[tokio::test]
async fn cancel_stops_a_running_prompt() {
    let stack = Stack::start(vec![calls(
        Match::NoToolResults,
        vec![call("demo__sleep", json!({"ms": 60000}))],
    )])
    .await
    .unwrap();
    let browser = open_playground(&stack).await;
    browser.send_prompt("sleep a minute", "classic").await;
    browser
        .until(
            "the sleep is running",
            &on_last(
                "return !!last && !!last.querySelector('details.tool[data-function=\"demo.sleep\"]')",
            ),
        )
        .await;
    browser.click("#prompts .prompt button.cancel").await;
    until_state(&browser, "cancelled").await;
    let after = browser
        .run(
            &on_last(
                "return {cancel: last.querySelectorAll('button.cancel').length, \
                 notice: last.querySelector('.notice').textContent}",
            ),
            vec![],
        )
        .await;
    assert_eq!(after["cancel"], 0, "{after}");
    assert!(
        after["notice"].as_str().unwrap().contains("playground"),
        "the reason is shown: {after}"
    );
    browser.close().await;
}

#[tokio::test]
async fn a_reload_mid_stream_resumes_after_the_last_event_seen_with_nothing_lost_or_repeated() {
    let answer: String = (1..=60).map(|n| format!("word{n} ")).collect();
    let answer = answer.trim_end().to_owned();
    let stack = Stack::start(vec![text(Match::Any, &answer).chunk_delay_ms(80)])
        .await
        .unwrap();
    let browser = open_playground(&stack).await;
    browser.send_prompt("a long answer", "classic").await;
    browser
        .until(
            "part of the answer arrived",
            &on_last(
                "const s = last && last.querySelector('.streaming'); \
                 return !!s && s.textContent.includes('word5 ')",
            ),
        )
        .await;
    browser.client.refresh().await.unwrap();
    until_state(&browser, "completed").await;
    let seen = browser
        .run(
            &on_last(
                "return {events: last.dataset.events, last: last.dataset.lastSequence, \
                 duplicates: last.dataset.duplicates, resumedFrom: last.dataset.resumedFrom}",
            ),
            vec![],
        )
        .await;
    let number = |field: &str| -> u64 { seen[field].as_str().unwrap().parse().unwrap() };
    assert!(
        number("resumedFrom") > 1,
        "the reloaded page took up where it was: {seen}"
    );
    assert_eq!(
        number("events"),
        number("last"),
        "every event from 1 to the last applied once: {seen}"
    );
    assert_eq!(number("duplicates"), 0, "{seen}");
    assert_eq!(texts_of(&browser).await, [answer]);
    // The gateway's record agrees on how many events there were.
    let client = stack.client("local").await.unwrap();
    let prompt_id = browser
        .run(&on_last("return last.dataset.promptId"), vec![])
        .await;
    let events = collect(&client, prompt_id.as_str().unwrap(), 0).await;
    assert_eq!(events.len() as u64, number("last"));
    browser.close().await;
}

#[tokio::test]
async fn a_file_of_the_prompt_downloads_with_its_bytes() {
    let stack = Stack::start(vec![
        calls(
            Match::NoToolResults,
            vec![call(
                "demo__report",
                json!({"title": "Browser", "lines": ["one", "two"]}),
            )],
        ),
        text(Match::HasToolResults, "Reported."),
    ])
    .await
    .unwrap();
    let browser = open_playground(&stack).await;
    browser.send_prompt("write a report", "classic").await;
    until_state(&browser, "completed").await;
    let name = browser
        .run(
            &on_last("return last.querySelector('.file a.download').textContent"),
            vec![],
        )
        .await;
    assert_eq!(name, "browser.md");
    browser.click("#prompts .prompt .file a.download").await;
    assert_eq!(
        browser.downloaded("browser.md").await,
        "# Browser\n\n- one\n- two\n"
    );
    browser.close().await;
}

#[tokio::test]
async fn markup_in_model_text_and_in_inputs_shows_as_text_and_never_runs() {
    let hostile = "Look: <script>window.__pwned = 1</script> and \
                   <img src=x onerror=\"window.__pwned = 2\"> and **bold** and \
                   [a link](javascript:window.__pwned=3) and [a real one](https://example.com/)";
    let stack = Stack::start(vec![text(Match::Any, hostile).chunk_delay_ms(5)])
        .await
        .unwrap();
    let browser = open_playground(&stack).await;
    let input = "<img src=y onerror=\"window.__pwned = 4\">hi";
    browser.send_prompt(input, "classic").await;
    until_state(&browser, "completed").await;
    let page: Value = browser
        .run(
            &on_last(
                "const t = last.querySelector('[data-kind=text]'); \
                 return {pwned: window.__pwned === undefined ? null : window.__pwned, \
                   text: t.textContent, \
                   elements: document.querySelectorAll('#prompts img, #prompts script, #sidebar img').length, \
                   strong: t.querySelector('strong') && t.querySelector('strong').textContent, \
                   links: [...t.querySelectorAll('a')].map(a => a.href), \
                   input: last.querySelector('.prompt-input').textContent, \
                   title: document.querySelector('#conversations li').textContent}",
            ),
            vec![],
        )
        .await;
    assert_eq!(page["pwned"], Value::Null, "no script ran: {page}");
    assert_eq!(page["elements"], 0, "no element came from the text: {page}");
    let shown = page["text"].as_str().unwrap();
    assert!(
        shown.contains("<script>window.__pwned = 1</script>")
            && shown.contains("<img src=x onerror=\"window.__pwned = 2\">"),
        "the markup shows as the characters it is: {shown}"
    );
    assert_eq!(page["strong"], "bold", "Markdown still renders");
    assert_eq!(page["links"], json!(["https://example.com/"]), "{page}");
    assert_eq!(page["input"], input);
    assert_eq!(page["title"], input);
    browser.screenshot("hostile-markup").await;
    browser.close().await;
}

#[tokio::test]
async fn with_auth_on_the_token_from_the_page_opens_the_sidebar_to_rename_and_switch_conversations()
{
    let stack = Stack::start_with(
        vec![text(Match::Any, "Answered.")],
        StackOptions {
            auth_tokens: vec!["alice-secret=alice".into()],
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();
    let browser = open_playground(&stack).await;
    let refused = browser
        .until(
            "the page says it needs a token",
            "const e = document.getElementById('error'); return !e.hidden && e.textContent",
        )
        .await;
    assert!(
        refused.as_str().unwrap().contains("UNAUTHENTICATED"),
        "{refused}"
    );
    browser.type_into("#token", "alice-secret").await;
    browser.click("#settings-form button[type=submit]").await;

    browser.send_prompt("first question", "classic").await;
    until_state(&browser, "completed").await;
    browser.click("#rename").await;
    browser.type_into("#rename-input", "Renamed").await;
    browser.click("#rename-form button[type=submit]").await;
    browser
        .until(
            "the sidebar shows the new title",
            "return [...document.querySelectorAll('#conversations li')].some(li => li.textContent === 'Renamed')",
        )
        .await;

    browser.click("#new-conversation").await;
    browser.send_prompt("second question", "classic").await;
    until_state(&browser, "completed").await;
    let titles = browser
        .run(
            "return [...document.querySelectorAll('#conversations li')].map(li => li.textContent)",
            vec![],
        )
        .await;
    assert_eq!(titles, json!(["second question", "Renamed"]));
    // Opening the first one shows its prompt again.
    browser
        .click("#conversations li:last-child button.open")
        .await;
    browser
        .until(
            "the first conversation is open",
            &on_last("return !!last && last.querySelector('.prompt-input').textContent === 'first question' && last.dataset.state === 'completed'"),
        )
        .await;
    let stored = browser
        .run(
            "return {session: sessionStorage.getItem('agentic.token'), \
               local: JSON.stringify(Object.assign({}, localStorage)), url: location.href}",
            vec![],
        )
        .await;
    assert_eq!(stored["session"], "alice-secret");
    assert!(
        !stored["local"].as_str().unwrap().contains("alice-secret")
            && !stored["url"].as_str().unwrap().contains("alice-secret"),
        "the token is kept for the tab only and never in the URL: {stored}"
    );
    // The rename is the gateway's, not only the page's.
    let http = reqwest::Client::new();
    let conversations: Value = http
        .get(format!("{}/v1/conversations", stack.gateway_http_url()))
        .bearer_auth("alice-secret")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(conversations["conversations"][1]["title"], "Renamed");
    browser.screenshot("conversations").await;
    browser.close().await;
}
