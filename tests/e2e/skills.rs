//! Skills end to end: code saved from a finished code prompt (or by the agent itself with
//! `skill.save`) becomes the tool `skill.<name>` of its owner's later prompts, in classic
//! and code mode, run through the code runner with the caller's tools, its calls nested
//! under it on the timeline and the version that ran named in its answer. Saving again
//! makes a new version that replaces the tool; another user can neither see nor call it;
//! every part of a skill and each user's share are bounded.

use agentic_client::{Client, NewPrompt};
use agentic_proto::json;
use agentic_proto::v1::{CreateSkillRequest, Prompt, PromptState};
use agentic_testkit::Stack;
use agentic_testkit::model::{Match, Rule};
use serde_json::{Value, json};
use tonic::Code;

use crate::support::*;

/// The round a code prompt solves the problem in: its last expression is the answer a
/// skill made of it gives.
const WORD_COUNT: &str = r#"
const text = (typeof input === 'object' && input !== null && input.text) || 'one two three';
const counted = {words: text.split(/\s+/).filter(Boolean).length};
demoEcho(counted);
output('words: ' + counted.words);
done();
counted
"#;

/// A classic prompt whose input contains `input` calls `tool` with `arguments`, then
/// answers with the tool's result.
fn classic_call(input: &str, tool: &str, arguments: Value) -> Vec<Rule> {
    vec![
        calls(
            Match::All(vec![
                Match::NoToolResults,
                Match::LastUserContains(input.to_owned()),
            ]),
            vec![call(tool, arguments)],
        ),
        text(
            Match::All(vec![
                Match::HasToolResults,
                Match::AnyMessageContains(input.to_owned()),
            ]),
            "Got: {last_tool_result}",
        ),
    ]
}

/// Runs `prompt`, approving each call that waits for approval (`skill.save` does), to its
/// end; the ended prompt, which must have asked at least once.
async fn approved(client: &Client, prompt: NewPrompt) -> Prompt {
    let created = client.create_prompt(prompt).await.unwrap();
    let mut asked = 0;
    loop {
        collect(client, &created.id, 0).await;
        let prompt = client.get_prompt(&created.id).await.unwrap();
        if prompt.state != PromptState::WaitingForApproval as i32 {
            assert_eq!(
                prompt.state,
                PromptState::Completed as i32,
                "{}",
                prompt.error
            );
            assert!(asked > 0, "nothing asked for approval");
            return prompt;
        }
        for tool in crate::tidy::tool_outputs(&prompt) {
            let pending = tool.approval.as_ref().is_some_and(|approval| {
                approval.state == agentic_proto::v1::ApprovalState::Pending as i32
            });
            if pending {
                asked += 1;
                client
                    .approve_tool_call(&created.id, &tool.id)
                    .await
                    .unwrap();
            }
        }
    }
}

/// The result of the first call of `function` on the prompt's timeline.
fn result_of(prompt: &Prompt, function: &str) -> Result<Value, String> {
    prompt
        .output
        .iter()
        .filter_map(tool_of)
        .find(|(called, _)| *called == function)
        .map(|(_, result)| result)
        .unwrap_or_else(|| Err(format!("no call of {function}")))
}

fn skill_request(name: &str, code: &str) -> CreateSkillRequest {
    CreateSkillRequest {
        name: name.to_owned(),
        description: format!("the {name} skill"),
        code: code.to_owned(),
        ..CreateSkillRequest::default()
    }
}

fn word_count_schema() -> prost_types::Value {
    json::to_proto(&json!({
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    }))
}

#[tokio::test]
async fn a_skill_saved_from_a_code_prompt_runs_from_classic_and_from_code_mode() {
    let mut rules = vec![
        code_for("count the words", 1, WORD_COUNT),
        code_for(
            "use the skill",
            1,
            "const r = skillWordCount({text: 'x y'}); output('n=' + r.result.words + ' v' + r.skill.version); done();",
        ),
    ];
    rules.extend(classic_call(
        "count these",
        "skill__word-count",
        json!({"text": "a b c d"}),
    ));
    let stack = Stack::start(rules).await.unwrap();
    let alice = stack.client("alice").await.unwrap();
    let solved = completed(&alice, NewPrompt::new("count the words").mode("code")).await;

    let skill = alice
        .create_skill(CreateSkillRequest {
            name: "word-count".into(),
            description: "Counts the words of `text`".into(),
            input_schema: Some(word_count_schema()),
            from_prompt_id: solved.id.clone(),
            ..CreateSkillRequest::default()
        })
        .await
        .unwrap();
    assert_eq!(skill.version, 1);
    assert_eq!(
        skill.code,
        WORD_COUNT.trim(),
        "the round's code is the skill's"
    );
    assert_eq!(skill.source_prompt_id, solved.id);
    let listed = alice.list_tools().await.unwrap();
    let offered = listed
        .tools
        .iter()
        .find(|tool| tool.definition.as_ref().unwrap().id == "skill.word-count")
        .expect("the skill is one of alice's tools");
    assert_eq!(offered.source, "skill");

    // From classic: a tool like any other, its calls nested under it.
    let classic = completed(&alice, NewPrompt::new("count these")).await;
    let calls = crate::tidy::tool_outputs(&classic);
    let summary: Vec<(&str, bool)> = calls
        .iter()
        .map(|tool| (tool.function.as_str(), tool.parent_id.is_empty()))
        .collect();
    assert_eq!(
        summary,
        [("skill.word-count", true), ("demo.echo", false)],
        "{calls:?}"
    );
    assert_eq!(calls[1].parent_id, calls[0].id);
    let output = result_of(&classic, "skill.word-count").unwrap();
    assert_eq!(output["result"], json!({"words": 4}), "{output}");
    assert_eq!(output["skill"], json!({"name": "word-count", "version": 1}));
    let answer = classic.output.iter().find_map(text_of).unwrap();
    assert!(answer.contains(r#""words":4"#), "{answer}");

    // From code: a function named after the tool.
    let code = completed(&alice, NewPrompt::new("use the skill").mode("code")).await;
    let texts: Vec<&str> = code.output.iter().filter_map(text_of).collect();
    assert_eq!(texts, ["n=2 v1"]);
    let functions: Vec<&str> = crate::tidy::tool_outputs(&code)
        .iter()
        .map(|tool| tool.function.as_str())
        .collect();
    assert_eq!(functions, ["code.execute", "skill.word-count", "demo.echo"]);
}

#[tokio::test]
async fn saving_a_skill_again_makes_a_new_version_that_replaces_the_tool() {
    let stack = Stack::start(classic_call("which version", "skill__pick", json!({})))
        .await
        .unwrap();
    let alice = stack.client("alice").await.unwrap();
    let first = alice
        .create_skill(skill_request("pick", "({v: 1})"))
        .await
        .unwrap();
    let second = alice
        .create_skill(skill_request("pick", "({v: 2})"))
        .await
        .unwrap();
    assert_eq!((first.version, second.version), (1, 2));

    let listed = alice.list_skills().await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].version, 2);
    assert_eq!(listed[0].code, "", "listing leaves the code out");
    assert_eq!(alice.get_skill("pick", 1).await.unwrap().code, "({v: 1})");
    assert_eq!(alice.get_skill("pick", 0).await.unwrap().code, "({v: 2})");
    let tool_ids: Vec<String> = alice
        .list_tools()
        .await
        .unwrap()
        .tools
        .into_iter()
        .filter_map(|tool| tool.definition.map(|definition| definition.id))
        .filter(|id| id == "skill.pick")
        .collect();
    assert_eq!(tool_ids, ["skill.pick"], "one tool, whatever the versions");

    let prompt = completed(&alice, NewPrompt::new("which version")).await;
    let output = result_of(&prompt, "skill.pick").unwrap();
    assert_eq!(output["result"], json!({"v": 2}), "{output}");
    assert_eq!(
        output["skill"]["version"], 2,
        "the prompt records the version"
    );

    assert_eq!(alice.delete_skill("pick").await.unwrap(), 2);
    let gone = alice.get_skill("pick", 0).await.unwrap_err();
    assert_eq!(gone.code(), Some(Code::NotFound), "{gone}");
}

#[tokio::test]
async fn another_users_skill_cannot_be_seen_called_or_taken_from_their_prompts() {
    let mut rules = classic_call("call alices skill", "skill__secret", json!({}));
    rules.push(code_for("bobs code", 1, "output('bob ran'); done();"));
    let stack = Stack::start(rules).await.unwrap();
    let alice = stack.client("alice").await.unwrap();
    let bob = stack.client("bob").await.unwrap();
    alice
        .create_skill(skill_request("secret", "'alice only'"))
        .await
        .unwrap();

    assert!(bob.list_skills().await.unwrap().is_empty());
    let hidden = bob.get_skill("secret", 0).await.unwrap_err();
    assert_eq!(hidden.code(), Some(Code::NotFound), "{hidden}");
    let refused = bob.delete_skill("secret").await.unwrap_err();
    assert_eq!(refused.code(), Some(Code::NotFound), "{refused}");
    let bobs_tools = bob.list_tools().await.unwrap().tools;
    assert!(
        !bobs_tools
            .iter()
            .any(|tool| tool.definition.as_ref().unwrap().id == "skill.secret")
    );

    // Bob's model asks for it anyway: an unknown tool, and the skill never ran.
    let prompt = completed(&bob, NewPrompt::new("call alices skill")).await;
    let error = tool_of(&prompt.output[0]).unwrap().1.unwrap_err();
    assert!(error.contains("unknown tool"), "{error}");

    // Alice cannot save a skill from Bob's prompt either.
    let bobs = completed(&bob, NewPrompt::new("bobs code").mode("code")).await;
    let taken = alice
        .create_skill(CreateSkillRequest {
            name: "stolen".into(),
            from_prompt_id: bobs.id,
            ..CreateSkillRequest::default()
        })
        .await
        .unwrap_err();
    assert_eq!(taken.code(), Some(Code::NotFound), "{taken}");
    assert_eq!(alice.list_skills().await.unwrap().len(), 1);
}

#[tokio::test]
async fn the_agent_saves_the_code_of_its_round_and_running_it_saves_nothing_again() {
    let round = "const n = 6 * 7; skillSave({name: 'answer', description: 'The answer'}); output('saved'); done(); ({n})";
    let mut rules = vec![code_for("keep this", 1, round)];
    rules.extend(classic_call(
        "what is the answer",
        "skill__answer",
        json!({}),
    ));
    rules.extend(classic_call(
        "save a doubler",
        "skill__save",
        json!({"name": "double", "description": "Doubles x", "code": "input.x * 2",
               "input_schema": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}}),
    ));
    rules.extend(classic_call("double it", "skill__double", json!({"x": 21})));
    let stack = Stack::start(rules).await.unwrap();
    let alice = stack.client("alice").await.unwrap();

    let saving = approved(&alice, NewPrompt::new("keep this").mode("code")).await;
    let saved = result_of(&saving, "skill.save").unwrap();
    assert_eq!(
        saved,
        json!({"saved": "skill.answer", "version": 1, "function": "skillAnswer"})
    );
    let skill = alice.get_skill("answer", 0).await.unwrap();
    assert_eq!(skill.code, round);
    assert_eq!(skill.source_prompt_id, saving.id);

    let asked = completed(&alice, NewPrompt::new("what is the answer")).await;
    let answer = result_of(&asked, "skill.answer").unwrap();
    assert_eq!(answer["result"], json!({"n": 42}), "{answer}");
    // The skill's own skillSave() call is on the timeline, and saved nothing.
    let resave = result_of(&asked, "skill.save").unwrap();
    assert_eq!(resave["saved"], false, "{resave}");
    assert_eq!(alice.get_skill("answer", 0).await.unwrap().version, 1);

    // From classic, the agent gives the code.
    let saving = approved(&alice, NewPrompt::new("save a doubler")).await;
    let saved = result_of(&saving, "skill.save").unwrap();
    assert_eq!(saved["saved"], "skill.double", "{saved}");
    let doubled = completed(&alice, NewPrompt::new("double it")).await;
    let output = result_of(&doubled, "skill.double").unwrap();
    assert_eq!(output["result"], 42, "{output}");
}

#[tokio::test]
async fn a_skills_input_is_checked_against_its_schema_before_its_code_runs() {
    let stack = Stack::start(classic_call(
        "count nothing",
        "skill__word-count",
        json!({"text": 5}),
    ))
    .await
    .unwrap();
    let alice = stack.client("alice").await.unwrap();
    alice
        .create_skill(CreateSkillRequest {
            input_schema: Some(word_count_schema()),
            ..skill_request("word-count", WORD_COUNT)
        })
        .await
        .unwrap();
    let prompt = completed(&alice, NewPrompt::new("count nothing")).await;
    let calls = crate::tidy::tool_outputs(&prompt);
    assert_eq!(calls.len(), 1, "nothing ran: {calls:?}");
    let error = tool_of(&prompt.output[0]).unwrap().1.unwrap_err();
    assert!(error.contains("/text"), "{error}");
}

#[tokio::test]
async fn skills_are_bounded_and_a_refused_save_leaves_everyone_else_working() {
    let stack = Stack::start(classic_call("still works", "skill__s0", json!({})))
        .await
        .unwrap();
    let alice = stack.client("alice").await.unwrap();
    let bob = stack.client("bob").await.unwrap();

    let refused = |error: agentic_client::ClientError, code: Code, says: &str| {
        assert_eq!(error.code(), Some(code), "{error}");
        assert!(error.to_string().contains(says), "{error}");
    };
    for name in ["Bad", "a--b", "save", "x".repeat(49).as_str()] {
        let error = alice
            .create_skill(skill_request(name, "1"))
            .await
            .unwrap_err();
        refused(error, Code::InvalidArgument, "name");
    }
    let huge = "// pad\n".repeat(10_000);
    let error = alice
        .create_skill(skill_request("huge", &huge))
        .await
        .unwrap_err();
    refused(error, Code::InvalidArgument, "65536 bytes");
    let error = alice
        .create_skill(CreateSkillRequest {
            input_schema: Some(json::to_proto(&json!({"type": "string"}))),
            ..skill_request("stringy", "1")
        })
        .await
        .unwrap_err();
    refused(error, Code::InvalidArgument, "\"type\": \"object\"");
    let error = alice
        .create_skill(CreateSkillRequest {
            name: "neither".into(),
            ..CreateSkillRequest::default()
        })
        .await
        .unwrap_err();
    refused(error, Code::InvalidArgument, "code");
    let error = alice
        .create_skill(CreateSkillRequest {
            description: "d".repeat(1001),
            ..skill_request("wordy", "1")
        })
        .await
        .unwrap_err();
    refused(error, Code::InvalidArgument, "description");
    let error = alice
        .create_skill(skill_request("nul", "1\0"))
        .await
        .unwrap_err();
    refused(error, Code::InvalidArgument, "NUL");
    let error = alice
        .create_skill(CreateSkillRequest {
            input_schema: Some(json::to_proto(
                &json!({"type": "object", "description": "x".repeat(5000)}),
            )),
            ..skill_request("big-schema", "1")
        })
        .await
        .unwrap_err();
    refused(error, Code::InvalidArgument, "4096 bytes");

    for n in 0..50 {
        alice
            .create_skill(skill_request(&format!("s{n}"), &format!("({{n: {n}}})")))
            .await
            .unwrap();
    }
    let error = alice
        .create_skill(skill_request("one-too-many", "1"))
        .await
        .unwrap_err();
    refused(error, Code::ResourceExhausted, "50 skills");
    // A new version of a kept skill is no new skill.
    assert_eq!(
        alice
            .create_skill(skill_request("s0", "({n: 'again'})"))
            .await
            .unwrap()
            .version,
        2
    );
    assert_eq!(alice.list_skills().await.unwrap().len(), 50);

    // Bob has a share of his own, and alice's skills still run.
    bob.create_skill(skill_request("mine", "1")).await.unwrap();
    let prompt = completed(&alice, NewPrompt::new("still works")).await;
    let output = result_of(&prompt, "skill.s0").unwrap();
    assert_eq!(output["result"], json!({"n": "again"}), "{output}");
}

#[tokio::test]
async fn only_the_newest_versions_of_a_skill_are_kept() {
    let stack = Stack::start(Vec::new()).await.unwrap();
    let alice = stack.client("alice").await.unwrap();
    for n in 1..=22 {
        let saved = alice
            .create_skill(skill_request("often", &n.to_string()))
            .await
            .unwrap();
        assert_eq!(saved.version, n);
    }
    for pruned in [1, 2] {
        let error = alice.get_skill("often", pruned).await.unwrap_err();
        assert_eq!(error.code(), Some(Code::NotFound), "{error}");
    }
    assert_eq!(alice.get_skill("often", 3).await.unwrap().code, "3");
    assert_eq!(alice.delete_skill("often").await.unwrap(), 20);
}

#[tokio::test]
async fn skills_have_http_routes_scoped_to_the_caller() {
    let stack = Stack::start(Vec::new()).await.unwrap();
    let base = stack.gateway_http_url();
    let http = reqwest::Client::new();
    let as_user = |request: reqwest::RequestBuilder, user: &str| request.header("x-user-id", user);
    let answer = |request: reqwest::RequestBuilder| async move {
        let response = request.send().await.unwrap();
        let status = response.status();
        let body: Value = response.json().await.unwrap();
        (status, body)
    };
    let skills = format!("{base}/v1/skills");
    let (status, saved) = answer(as_user(http.post(&skills), "alice").json(&json!({
        "name": "greet", "description": "Greets", "code": "'hi ' + input.name",
        "inputSchema": {"type": "object", "required": ["name"]},
        "userId": "mallory",
    })))
    .await;
    assert_eq!(status, 200, "{saved}");
    assert_eq!(saved["version"], 1);
    let (_, again) = answer(
        as_user(http.post(&skills), "alice")
            .json(&json!({"name": "greet", "code": "'hello ' + input.name"})),
    )
    .await;
    assert_eq!(again["version"], 2, "{again}");

    let (_, listed) = answer(as_user(http.get(&skills), "alice")).await;
    assert_eq!(listed["skills"][0]["name"], "greet", "{listed}");
    let (_, first) = answer(as_user(
        http.get(format!("{skills}/greet?version=1")),
        "alice",
    ))
    .await;
    assert_eq!(first["code"], "'hi ' + input.name", "{first}");
    let (status, hidden) = answer(as_user(http.get(format!("{skills}/greet")), "mallory")).await;
    assert_eq!(status, 404, "{hidden}");
    let (_, mallorys) = answer(as_user(http.get(&skills), "mallory")).await;
    assert_eq!(mallorys, json!({}), "the body's userId is not who saves");

    let (status, invalid) = answer(
        as_user(http.post(&skills), "alice").json(&json!({"name": "Bad Name", "code": "1"})),
    )
    .await;
    assert_eq!(status, 400, "{invalid}");
    assert_eq!(invalid["code"], "INVALID_ARGUMENT");
    let (status, deleted) = answer(as_user(http.delete(format!("{skills}/greet")), "alice")).await;
    assert_eq!(status, 200, "{deleted}");
    assert_eq!(deleted["versions"], 2);
}

#[tokio::test]
async fn a_skill_runs_one_deep_and_cannot_call_skills_or_run_code() {
    let stack = Stack::start(classic_call("nest them", "skill__outer", json!({})))
        .await
        .unwrap();
    let alice = stack.client("alice").await.unwrap();
    alice
        .create_skill(skill_request("inner", "'inner ran'"))
        .await
        .unwrap();
    alice
        .create_skill(skill_request(
            "outer",
            "[typeof skillInner, typeof interpreterRunCode, typeof skillSave]",
        ))
        .await
        .unwrap();
    let prompt = completed(&alice, NewPrompt::new("nest them")).await;
    let output = result_of(&prompt, "skill.outer").unwrap();
    assert_eq!(
        output["result"],
        json!(["undefined", "undefined", "function"]),
        "{output}"
    );
}
