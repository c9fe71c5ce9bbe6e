//! Hosted mode: the provider runs the code in its container (the stand-in's Anthropic
//! Messages and Files endpoints), agentic's tools run through the tool-host, and the
//! timeline, files, state and events are the same as the local modes'.

use agentic_client::v1::PromptState;
use agentic_client::{ChatOptions, NewConversation, NewPrompt};
use agentic_proto::json::struct_to_json;
use agentic_proto::v1::{FileSource, prompt_event, prompt_output};
use agentic_testkit::model::{
    CODE_EXECUTION_BETA, FILES_BETA, HostedBlock, HostedFile, HostedMatch, HostedReply, HostedRule,
    Match, Reply, Rule, SKILLS_BETA,
};
use agentic_testkit::{Stack, StackOptions};
use serde_json::{Value, json};

use crate::support::*;

/// The usual test stack with the hosted executor too.
pub(crate) fn hosted_stack_options() -> StackOptions {
    StackOptions {
        hosted: true,
        ..StackOptions::default()
    }
}

pub(crate) async fn hosted_stack() -> Stack {
    Stack::start_with(Vec::new(), hosted_stack_options())
        .await
        .unwrap()
}

/// A turn that answers any request with `blocks` and ends.
fn answering(blocks: Vec<HostedBlock>) -> HostedRule {
    HostedRule::turn(HostedMatch::Any, blocks, "end_turn")
}

pub(crate) fn hosted(input: &str) -> NewPrompt {
    NewPrompt::new(input).mode("hosted")
}

/// The `code.execute` outputs of a prompt: (code, stdout, return code).
pub(crate) fn executions(prompt: &agentic_proto::v1::Prompt) -> Vec<(String, String, i64)> {
    prompt
        .output
        .iter()
        .filter_map(|output| match &output.kind {
            Some(prompt_output::Kind::Tool(tool)) if tool.function == "code.execute" => {
                let input = agentic_proto::json::from_proto_opt(tool.input.as_ref());
                let (_, result) = tool_of(output)?;
                let result = result.unwrap();
                Some((
                    input["code"].as_str().unwrap().to_owned(),
                    result["stdout"].as_str().unwrap().to_owned(),
                    result["return_code"].as_i64().unwrap(),
                ))
            }
            _ => None,
        })
        .collect()
}

/// A conversation of `client`'s user, for prompts to join.
async fn conversation(client: &agentic_client::Client, title: &str) -> String {
    client
        .create_conversation(NewConversation {
            title: title.to_owned(),
            ..NewConversation::default()
        })
        .await
        .unwrap()
        .id
}

fn texts(prompt: &agentic_proto::v1::Prompt) -> Vec<String> {
    prompt
        .output
        .iter()
        .filter_map(text_of)
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn a_turn_paused_twice_goes_on_in_the_same_container_and_its_file_reaches_the_conversation() {
    let stack = hosted_stack().await;
    let report = "quarter,total\nQ1,12\nQ2,30\n";
    stack.model.add_hosted_rule(
        HostedRule::turn(
            HostedMatch::AssistantTurns(0),
            vec![
                HostedBlock::text("Let me look at the data."),
                HostedBlock::bash("ls /tmp/inputs", "sales.csv\n"),
            ],
            "pause_turn",
        )
        .usage(100, 20)
        .times(1),
    );
    stack.model.add_hosted_rule(
        HostedRule::turn(
            HostedMatch::Continuing,
            vec![HostedBlock::bash_making(
                "python make_report.py",
                "wrote report.csv\n",
                vec![HostedFile::new(
                    "/tmp/outputs/report.csv",
                    "text/csv",
                    report,
                )],
            )],
            "pause_turn",
        )
        .usage(150, 30)
        .times(1),
    );
    stack.model.add_hosted_rule(
        HostedRule::turn(
            HostedMatch::Continuing,
            vec![HostedBlock::text("The report is in report.csv.")],
            "end_turn",
        )
        .usage(200, 10),
    );
    let client = stack.client("alice").await.unwrap();
    let conversation = conversation(&client, "sales").await;
    let created = client
        .create_prompt(hosted("Summarise the sales").conversation(&conversation))
        .await
        .unwrap();
    let events = collect(&client, &created.id, 0).await;
    let prompt = client.get_prompt(&created.id).await.unwrap();
    assert_eq!(
        prompt.state,
        PromptState::Completed as i32,
        "{}",
        prompt.error
    );

    // Text streamed in fragments, code executions show as code mode's rounds do.
    assert_eq!(
        streamed_text(&events),
        "Let me look at the data.The report is in report.csv."
    );
    assert_eq!(
        texts(&prompt),
        ["Let me look at the data.", "The report is in report.csv."]
    );
    assert_eq!(
        executions(&prompt),
        [
            ("ls /tmp/inputs".to_owned(), "sales.csv\n".to_owned(), 0),
            (
                "python make_report.py".to_owned(),
                "wrote report.csv\n".to_owned(),
                0
            ),
        ]
    );
    let usage = prompt.usage.unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens), (450, 60));
    assert_eq!((usage.rounds, usage.llm_calls), (3, 3));

    // The continuations ran in the first answer's container, and sent the paused turn back.
    let requests = stack.model.hosted_requests();
    assert_eq!(requests.len(), 3);
    let container = requests[0].container.clone().unwrap();
    for request in &requests {
        assert_eq!(request.api_key.as_deref(), Some("stand-in"));
        assert!(request.betas.iter().any(|beta| beta == CODE_EXECUTION_BETA));
        assert!(request.betas.iter().any(|beta| beta == FILES_BETA));
        assert_eq!(request.body["stream"], true);
        assert_eq!(request.body["tools"][0]["type"], "code_execution_20250825");
    }
    assert_eq!(requests[0].body.get("container"), None);
    for continuation in &requests[1..] {
        assert_eq!(continuation.body["container"], json!(container));
        assert_eq!(continuation.container.as_deref(), Some(container.as_str()));
    }
    let last = requests[2].body["messages"].as_array().unwrap();
    let paused: Vec<&str> = last[1]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|block| block["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        paused,
        [
            "text",
            "server_tool_use",
            "bash_code_execution_tool_result",
            "server_tool_use",
            "bash_code_execution_tool_result"
        ]
    );

    // The file is the prompt's and the conversation's, with its bytes and source.
    let files: Vec<_> = prompt
        .output
        .iter()
        .filter_map(|output| match &output.kind {
            Some(prompt_output::Kind::File(file)) => Some(file.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].filename, "report.csv");
    assert_eq!(files[0].source(), FileSource::Hosted);
    let listed = client.list_conversation_files(&conversation).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        listed[0].file.as_ref().unwrap().source(),
        FileSource::Hosted
    );
    let file = client.get_file(&files[0].id).await.unwrap();
    assert_eq!(file.content, report.as_bytes());
    assert_eq!(file.file.unwrap().mime_type, "text/csv");
    // Kept here, the provider's copy is deleted from its Files API.
    assert!(
        stack.model.hosted_file_ids().is_empty(),
        "{:?}",
        stack.model.hosted_file_ids()
    );

    // The container is kept, sealed, in the conversation's state.
    let kept = client.get_conversation(&conversation).await.unwrap();
    let state = struct_to_json(kept.state.as_ref());
    assert_eq!(state["hosted_container"]["id"], json!(container));
    assert!(state["hosted_container"]["seal"].is_string());
}

#[tokio::test]
async fn a_tool_of_the_tool_host_runs_inside_the_hosted_loop_after_its_approval() {
    let stack = hosted_stack().await;
    stack.model.add_hosted_rule(HostedRule::turn(
        HostedMatch::AssistantTurns(0),
        vec![
            HostedBlock::text("I need to launch it."),
            HostedBlock::tool_use("demo__dangerous", json!({"action": "launch"})),
            HostedBlock::tool_use("demo__echo", json!({"n": 7})),
        ],
        "tool_use",
    ));
    stack.model.add_hosted_rule(HostedRule::turn(
        HostedMatch::ToolResultContains("launch".into()),
        vec![HostedBlock::text("Launched, and the echo said 7.")],
        "end_turn",
    ));
    let client = stack.client("alice").await.unwrap();
    let created = client.create_prompt(hosted("Launch it")).await.unwrap();
    let events = until_waiting(&client, &created.id).await;
    let requested: Vec<&str> = events
        .iter()
        .filter_map(|event| match &event.kind {
            Some(prompt_event::Kind::ApprovalRequested(request)) => Some(request.tool_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(requested, ["demo.dangerous"]);
    assert_eq!(
        stack.model.hosted_requests().len(),
        1,
        "nothing sent while it waits"
    );
    let waiting = client.get_prompt(&created.id).await.unwrap();
    let dangerous = call_id(&waiting, Some("demo.dangerous")).unwrap();
    client
        .approve_tool_call(&created.id, &dangerous)
        .await
        .unwrap();
    let prompt = ends_completed(&client, &created.id).await;
    assert_eq!(
        texts(&prompt),
        ["I need to launch it.", "Launched, and the echo said 7."]
    );
    let results: Vec<(String, Value)> = prompt
        .output
        .iter()
        .filter_map(tool_of)
        .filter(|(function, _)| *function != "hosted.container")
        .map(|(function, result)| (function.to_owned(), result.unwrap()))
        .collect();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0].0, "demo.dangerous");
    assert_eq!(
        results[1],
        ("demo.echo".to_owned(), json!({"echo": {"n": 7}}))
    );

    // The resumed run sent the tool results as the user's next message, for each tool_use,
    // in the container the paused run had.
    let requests = stack.model.hosted_requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[1].body["container"],
        json!(requests[0].container.clone().unwrap())
    );
    assert_eq!(prompt.usage.unwrap().rounds, 2);
    let messages = requests[1].body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    let uses: Vec<&Value> = messages[1]["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|block| block["type"] == "tool_use")
        .collect();
    let results: Vec<&Value> = messages[2]["content"].as_array().unwrap().iter().collect();
    assert_eq!(uses.len(), 2);
    assert_eq!(results.len(), 2);
    for (tool_use, result) in uses.iter().zip(&results) {
        assert_eq!(result["type"], "tool_result");
        assert_eq!(result["tool_use_id"], tool_use["id"]);
    }
    let offered: Vec<&str> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert!(offered.contains(&"demo__dangerous"), "{offered:?}");
    let echo = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["name"] == "demo__echo")
        .unwrap();
    assert!(echo["input_schema"].is_object());
}

#[tokio::test]
async fn a_conversation_reuses_its_container_and_replaces_it_once_the_provider_expired_it() {
    let stack = hosted_stack().await;
    stack.model.add_hosted_rule(answering(vec![
        HostedBlock::bash("cat notes.txt", "remembered\n"),
        HostedBlock::text("Done."),
    ]));
    let client = stack.client("alice").await.unwrap();
    let conversation = conversation(&client, "reuse").await;
    let run = |input: &str| hosted(input).conversation(&conversation);
    let first = completed(&client, run("first")).await;
    let second = completed(&client, run("second")).await;
    let requests = stack.model.hosted_requests();
    let container = requests[0].container.clone().unwrap();
    assert_eq!(requests[1].body["container"], json!(container), "reused");
    assert_eq!(requests[1].container.as_deref(), Some(container.as_str()));
    // The second prompt read the first as history: its code as the container's own blocks
    // (it runs in the same container), then its text.
    let messages = requests[1].body["messages"].as_array().unwrap();
    assert_eq!(messages[0]["content"], "first");
    let answer = messages[1]["content"].as_array().unwrap();
    let types: Vec<&str> = answer
        .iter()
        .filter_map(|block| block["type"].as_str())
        .collect();
    assert_eq!(
        types,
        ["server_tool_use", "bash_code_execution_tool_result", "text"]
    );
    assert_eq!(answer[0]["input"]["command"], "cat notes.txt");
    assert_eq!(answer[1]["content"]["stdout"], "remembered\n");
    assert_eq!(answer[2]["text"], "Done.");
    // The first prompt's timeline says a container started; the second's says nothing.
    let notes = |prompt: &agentic_proto::v1::Prompt| -> Vec<Value> {
        prompt
            .output
            .iter()
            .filter_map(tool_of)
            .filter(|(function, _)| *function == "hosted.container")
            .map(|(_, result)| result.unwrap())
            .collect()
    };
    let started = notes(&first);
    assert_eq!(started.len(), 1);
    assert_eq!(started[0]["container"], json!(container));
    assert!(notes(&second).is_empty());

    assert!(stack.model.expire_container(&container));
    let third = completed(&client, run("third")).await;
    let requests = stack.model.hosted_requests();
    assert_eq!(
        requests.len(),
        4,
        "the refused request, then one in a new container"
    );
    assert_eq!(requests[2].body["container"], json!(container));
    assert_eq!(requests[2].container, None, "refused");
    assert_eq!(requests[3].body.get("container"), None);
    let replacement = requests[3].container.clone().unwrap();
    assert_ne!(replacement, container);
    let replaced = notes(&third);
    assert_eq!(
        replaced.len(),
        1,
        "the timeline says the container was replaced"
    );
    assert_eq!(replaced[0]["container"], json!(replacement));
    assert!(replaced[0]["note"].as_str().unwrap().contains("expired"));
    let input = third
        .output
        .iter()
        .find_map(|output| match &output.kind {
            Some(prompt_output::Kind::Tool(tool)) if tool.function == "hosted.container" => {
                Some(agentic_proto::json::from_proto_opt(tool.input.as_ref()))
            }
            _ => None,
        })
        .unwrap();
    assert_eq!(input["expired"], json!(container));
    let kept = client.get_conversation(&conversation).await.unwrap();
    let state = struct_to_json(kept.state.as_ref());
    assert_eq!(state["hosted_container"]["id"], json!(replacement));

    // The next prompt runs in the replacement; the code the first prompts ran in the lost
    // container reaches it as text, that of the third as the replacement's own blocks.
    completed(&client, run("fourth")).await;
    let requests = stack.model.hosted_requests();
    assert_eq!(requests[4].body["container"], json!(replacement));
    let messages = requests[4].body["messages"].as_array().unwrap();
    assert_eq!(messages[0]["content"], "first");
    assert_eq!(messages[1]["content"][0]["type"], "text");
    let first = messages[1]["content"][0]["text"].as_str().unwrap();
    assert!(
        first.contains("since expired") && first.contains("cat notes.txt"),
        "{first}"
    );
    assert_eq!(messages[4]["content"], "third");
    assert_eq!(messages[5]["content"][0]["type"], "server_tool_use");
}

#[tokio::test]
async fn a_container_id_written_into_state_by_a_user_is_never_sent() {
    let stack = hosted_stack().await;
    stack
        .model
        .add_hosted_rule(answering(vec![HostedBlock::text("Hi.")]));
    let alice = stack.client("alice").await.unwrap();
    let conversation = conversation(&alice, "alice's").await;
    completed(&alice, hosted("hello").conversation(&conversation)).await;
    let alices = stack.model.hosted_requests()[0].container.clone().unwrap();
    let sealed = struct_to_json(
        alice
            .get_conversation(&conversation)
            .await
            .unwrap()
            .state
            .as_ref(),
    )["hosted_container"]
        .clone();

    // Mallory writes Alice's container into her prompt's state: as a bare id, and with the
    // seal Alice's conversation holds.
    let mallory = stack.client("mallory").await.unwrap();
    for forged in [json!(alices), json!({"id": alices}), sealed] {
        let mut state = serde_json::Map::new();
        state.insert("hosted_container".into(), forged);
        completed(&mallory, hosted("let me in").state(state)).await;
    }
    let requests = stack.model.hosted_requests();
    assert_eq!(requests.len(), 4);
    for request in &requests[1..] {
        assert_eq!(request.body.get("container"), None, "{:?}", request.body);
        assert_ne!(request.container.as_deref(), Some(alices.as_str()));
    }
}

#[tokio::test]
async fn skills_from_the_executor_or_the_state_load_into_the_container_and_bad_ones_fail_clearly() {
    let stack = Stack::start_with(
        Vec::new(),
        StackOptions {
            hosted_skills: r#"[{"type": "anthropic", "skill_id": "xlsx", "version": "latest"}]"#
                .into(),
            ..hosted_stack_options()
        },
    )
    .await
    .unwrap();
    stack
        .model
        .add_hosted_rule(answering(vec![HostedBlock::text("Ready.")]));
    // The operator's custom skill, uploaded to the provider beforehand (its version 3).
    let version = |version: &str| agentic_testkit::model::ProviderSkillVersion {
        version: version.into(),
        name: "reports".into(),
        description: "Writes reports.".into(),
        files: [("SKILL.md".to_owned(), b"---\nname: reports\n---\n".to_vec())].into(),
    };
    stack
        .model
        .add_provider_skill(agentic_testkit::model::ProviderSkill {
            id: "skill_01abc".into(),
            display_title: "reports".into(),
            versions: vec![version("2"), version("3")],
        });
    let client = stack.client("alice").await.unwrap();
    completed(&client, hosted("default skills")).await;
    let mut state = serde_json::Map::new();
    state.insert(
        "hosted_skills".into(),
        json!([{"type": "custom", "skill_id": "skill_01abc", "version": "3"}]),
    );
    completed(&client, hosted("my skills").state(state)).await;
    let requests = stack.model.hosted_requests();
    assert_eq!(
        requests[0].body["container"]["skills"],
        json!([{"type": "anthropic", "skill_id": "xlsx", "version": "latest"}])
    );
    assert_eq!(
        requests[1].body["container"]["skills"],
        json!([{"type": "custom", "skill_id": "skill_01abc", "version": "3"}])
    );
    for request in &requests {
        assert!(request.betas.iter().any(|beta| beta == SKILLS_BETA));
    }
    let container = requests[1].container.clone().unwrap();
    assert_eq!(
        stack.model.container_skills(&container).unwrap()[0]["skill_id"],
        "skill_01abc"
    );

    for (skills, refusal) in [
        (
            json!([{"type": "custom", "skill_id": "../../v1/files"}]),
            "hosted_skills[0].skill_id",
        ),
        (
            // Another tenant's skill in the same provider workspace.
            json!([{"type": "custom", "skill_id": "skill_someone_elses"}]),
            "custom skill skill_someone_elses is not one this server offers",
        ),
    ] {
        let mut bad = serde_json::Map::new();
        bad.insert("hosted_skills".into(), skills);
        let created = client
            .create_prompt(hosted("bad skills").state(bad))
            .await
            .unwrap();
        collect(&client, &created.id, 0).await;
        let failed = client.get_prompt(&created.id).await.unwrap();
        assert_eq!(failed.state, PromptState::Failed as i32);
        assert!(failed.error.contains(refusal), "{}", failed.error);
    }
    assert_eq!(stack.model.hosted_requests().len(), 2, "nothing sent");
}

#[tokio::test]
async fn a_turn_the_provider_keeps_pausing_stops_at_the_round_limit() {
    let stack = Stack::start_with(
        Vec::new(),
        StackOptions {
            classic_max_rounds: Some(3),
            ..hosted_stack_options()
        },
    )
    .await
    .unwrap();
    stack.model.add_hosted_rule(HostedRule::turn(
        HostedMatch::Any,
        vec![HostedBlock::bash("sleep 60", "")],
        "pause_turn",
    ));
    let client = stack.client("alice").await.unwrap();
    let prompt = completed(&client, hosted("never ends")).await;
    assert_eq!(stack.model.hosted_requests().len(), 3);
    assert_eq!(executions(&prompt).len(), 3);
    assert_eq!(
        texts(&prompt),
        ["Stopped after reaching the limit of 3 rounds without a final answer."]
    );
    assert_eq!(prompt.usage.unwrap().rounds, 3);
}

#[tokio::test]
async fn cancelling_a_hosted_prompt_mid_turn_stops_it_and_the_mode_keeps_serving() {
    let stack = hosted_stack().await;
    stack.model.add_hosted_rule(
        HostedRule::turn(
            HostedMatch::LastUserContains("long".into()),
            vec![HostedBlock::bash("sleep 1000", "")],
            "pause_turn",
        )
        .times(1),
    );
    stack.model.add_hosted_rule(
        HostedRule::new(
            HostedMatch::All(vec![
                HostedMatch::Continuing,
                HostedMatch::LastUserContains("long".into()),
            ]),
            HostedReply::Hang,
        )
        .times(1),
    );
    stack.model.add_hosted_rule(HostedRule::turn(
        HostedMatch::LastUserContains("short".into()),
        vec![HostedBlock::text("Still here.")],
        "end_turn",
    ));
    let client = stack.client("alice").await.unwrap();
    let created = client.create_prompt(hosted("a long job")).await.unwrap();
    eventually("the continuation is sent", || {
        stack.model.hosted_requests().len() == 2
    })
    .await;
    let cancelled = client.cancel_prompt(&created.id, "enough").await.unwrap();
    assert_eq!(cancelled.state, PromptState::Cancelled as i32);
    let events = collect(&client, &created.id, 0).await;
    assert_eq!(kinds(&events).last(), Some(&"cancelled"));
    let prompt = client.get_prompt(&created.id).await.unwrap();
    assert_eq!(executions(&prompt).len(), 1);

    let after = completed(&client, hosted("a short one")).await;
    assert_eq!(texts(&after), ["Still here."]);
}

#[tokio::test]
async fn a_provider_error_fails_the_prompt_with_a_readable_message_and_not_the_providers_words() {
    let stack = hosted_stack().await;
    stack.model.add_hosted_rule(HostedRule::new(
        HostedMatch::LastUserContains("overloaded".into()),
        HostedReply::Error {
            status: 529,
            kind: "overloaded_error".into(),
            message: "secret-internal-detail".into(),
        },
    ));
    stack.model.add_hosted_rule(HostedRule::new(
        HostedMatch::LastUserContains("refused".into()),
        HostedReply::Error {
            status: 400,
            kind: "invalid_request_error".into(),
            message: "secret-internal-detail".into(),
        },
    ));
    let client = stack.client("alice").await.unwrap();
    for (input, expected, attempts) in [
        (
            "overloaded",
            "the hosted model provider answered 529 <unknown status code> (overloaded_error): the provider is overloaded; try again later",
            3,
        ),
        (
            "refused",
            "the hosted model provider answered 400 Bad Request (invalid_request_error)",
            1,
        ),
    ] {
        let before = stack.model.hosted_requests().len();
        let created = client.create_prompt(hosted(input)).await.unwrap();
        let events = collect(&client, &created.id, 0).await;
        let prompt = client.get_prompt(&created.id).await.unwrap();
        assert_eq!(prompt.state, PromptState::Failed as i32);
        assert_eq!(prompt.error, expected);
        assert!(!format!("{events:?}").contains("secret-internal-detail"));
        assert_eq!(
            stack.model.hosted_requests().len() - before,
            attempts,
            "retried only what may pass on a retry"
        );
    }
}

#[tokio::test]
async fn files_past_the_prompts_share_are_not_kept_and_say_so() {
    let stack = Stack::start_with(
        Vec::new(),
        StackOptions {
            hosted_max_files: 1,
            ..hosted_stack_options()
        },
    )
    .await
    .unwrap();
    stack.model.add_hosted_rule(answering(vec![
        HostedBlock::bash_making(
            "make two",
            "",
            vec![
                HostedFile::new("../../etc/passwd", "text/plain", "one"),
                HostedFile::new("two.txt", "text/plain", "two"),
            ],
        ),
        HostedBlock::text("Made two files."),
    ]));
    let client = stack.client("alice").await.unwrap();
    let created = client.create_prompt(hosted("two files")).await.unwrap();
    let events = collect(&client, &created.id, 0).await;
    let prompt = client.get_prompt(&created.id).await.unwrap();
    assert_eq!(
        prompt.state,
        PromptState::Completed as i32,
        "{}",
        prompt.error
    );
    let files: Vec<String> = prompt
        .output
        .iter()
        .filter_map(|output| match &output.kind {
            Some(prompt_output::Kind::File(file)) => Some(file.filename.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        files,
        ["passwd"],
        "the folder is dropped, the second file is past the share"
    );
    let logged: Vec<&str> = events
        .iter()
        .filter_map(|event| match &event.kind {
            Some(prompt_event::Kind::Log(line)) => Some(line.text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(logged.len(), 1);
    assert!(logged[0].contains("at most 1 files"), "{logged:?}");
}

#[tokio::test]
async fn one_session_runs_a_conversation_through_classic_code_and_hosted() {
    let stack = Stack::start_with(
        vec![
            Rule::new(
                Match::All(vec![
                    Match::AnyMessageContains("You act by writing JavaScript".into()),
                    Match::LastUserContains("How many notes?".into()),
                ]),
                Reply::Text(
                    r#"output("You have " + listArtifacts().length + " note(s)."); done();"#.into(),
                ),
            ),
            calls(
                Match::All(vec![
                    Match::LastUserContains("I like green tea".into()),
                    Match::NoToolResults,
                ]),
                vec![call(
                    "artifact__store",
                    json!({"data": "green tea", "description": "tea", "filename": "tea.txt"}),
                )],
            ),
            text(Match::LastMessageIsToolResult, "Noted: you like green tea."),
        ],
        hosted_stack_options(),
    )
    .await
    .unwrap();
    stack.model.add_hosted_rule(HostedRule::turn(
        HostedMatch::LastUserContains("Chart it".into()),
        vec![
            HostedBlock::bash_making(
                "python chart.py",
                "saved\n",
                vec![HostedFile::new("chart.svg", "image/svg+xml", "<svg/>")],
            ),
            HostedBlock::text("Here is your tea chart."),
        ],
        "end_turn",
    ));
    let client = stack.client("alice").await.unwrap();
    let session = client.session(None).await.unwrap();
    let mut results = Vec::new();
    for (message, mode) in [
        ("I like green tea", "classic"),
        ("How many notes?", "code"),
        ("Chart it", "hosted"),
    ] {
        let result = session
            .chat_with(message, ChatOptions::default().mode(mode))
            .await
            .unwrap();
        assert_eq!(result.state, PromptState::Completed, "{result:#?}");
        assert_eq!(result.mode, mode);
        results.push(result);
    }
    let finals: Vec<&str> = results
        .iter()
        .map(|result| result.final_response.as_str())
        .collect();
    assert_eq!(
        finals,
        [
            "Noted: you like green tea.",
            "You have 1 note(s).",
            "Here is your tea chart."
        ]
    );
    assert_eq!(results[2].rounds, 1);
    assert_eq!(results[2].created_files.len(), 1);
    assert_eq!(results[2].created_files[0].source(), FileSource::Hosted);
    assert_eq!(results[0].created_files[0].source(), FileSource::Local);

    // The hosted prompt read the two before it whole: the classic call and its result as
    // tool blocks, code mode's JavaScript as text (the provider never ran it), the answers.
    let request = &stack.model.hosted_requests()[0];
    let history: Vec<String> = request.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| {
            let content = match &message["content"] {
                Value::String(text) => text.clone(),
                Value::Array(blocks) => blocks
                    .iter()
                    .map(|block| match block["type"].as_str() {
                        Some("text") => block["text"].as_str().unwrap_or_default().to_owned(),
                        Some("tool_use") => format!("tool_use {}", block["name"].as_str().unwrap()),
                        Some(other) => other.to_owned(),
                        None => String::new(),
                    })
                    .collect::<Vec<_>>()
                    .join(" | "),
                _ => String::new(),
            };
            format!("{}: {content}", message["role"].as_str().unwrap())
        })
        .collect();
    assert_eq!(history.len(), 9, "{history:#?}");
    assert_eq!(history[0], "user: I like green tea");
    assert_eq!(history[1], "assistant: tool_use artifact__store");
    assert_eq!(history[2], "user: tool_result");
    assert_eq!(history[3], "assistant: Noted: you like green tea.");
    assert_eq!(history[4], "user: How many notes?");
    // The code's round, then the tool it called, with its result.
    assert!(
        history[5].starts_with("assistant: [I ran JavaScript in agentic's sandbox: output(")
            && history[5].ends_with(" | tool_use artifact__list"),
        "{}",
        history[5]
    );
    assert_eq!(history[6], "user: tool_result");
    assert_eq!(history[7], "assistant: You have 1 note(s).");
    assert_eq!(history[8], "user: Chart it");
    let files = session.created_files().await.unwrap();
    let sources: Vec<(String, FileSource)> = files
        .iter()
        .map(|file| {
            let file = file.file.as_ref().unwrap();
            (file.filename.clone(), file.source())
        })
        .collect();
    assert!(
        sources.contains(&("tea.txt".to_owned(), FileSource::Local)),
        "{sources:?}"
    );
    assert!(
        sources.contains(&("chart.svg".to_owned(), FileSource::Hosted)),
        "{sources:?}"
    );
    let chart = files
        .iter()
        .find(|file| file.file.as_ref().unwrap().filename == "chart.svg")
        .unwrap();
    let downloaded = session
        .download(&chart.file.as_ref().unwrap().id)
        .await
        .unwrap();
    assert_eq!(downloaded.content, b"<svg/>");
}

#[tokio::test]
async fn the_hosted_executor_registers_its_mode_like_every_executor() {
    let stack = Stack::start_with(
        Vec::new(),
        StackOptions {
            executors_register: true,
            internal_token: Some("internal-secret".into()),
            ..hosted_stack_options()
        },
    )
    .await
    .unwrap();
    stack
        .model
        .add_hosted_rule(answering(vec![HostedBlock::text("Registered.")]));
    let client = stack.client("alice").await.unwrap();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let modes = client.list_modes().await.unwrap();
        if modes.iter().any(|mode| mode.id == "hosted") {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{modes:?}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let prompt = completed(&client, hosted("hi")).await;
    assert_eq!(texts(&prompt), ["Registered."]);
}

#[tokio::test]
async fn approvals_after_code_in_the_container_keep_the_round_count_and_a_paused_turn_ending_in_space_goes_on()
 {
    let stack = Stack::start_with(
        Vec::new(),
        StackOptions {
            classic_max_rounds: Some(3),
            ..hosted_stack_options()
        },
    )
    .await
    .unwrap();
    stack.model.add_hosted_rule(
        HostedRule::turn(
            HostedMatch::AssistantTurns(0),
            vec![
                HostedBlock::bash("step 1", ""),
                HostedBlock::bash("step 2", ""),
                HostedBlock::bash("step 3", ""),
                HostedBlock::text("Still working. \n"),
            ],
            "pause_turn",
        )
        .times(1),
    );
    stack.model.add_hosted_rule(
        HostedRule::turn(
            HostedMatch::Continuing,
            vec![HostedBlock::tool_use(
                "demo__dangerous",
                json!({"action": "go"}),
            )],
            "tool_use",
        )
        .times(1),
    );
    stack.model.add_hosted_rule(HostedRule::turn(
        HostedMatch::ToolResultContains("go".into()),
        vec![HostedBlock::text("Finished.")],
        "end_turn",
    ));
    let client = stack.client("alice").await.unwrap();
    let created = client.create_prompt(hosted("three steps")).await.unwrap();
    let events = until_waiting(&client, &created.id).await;
    let call = crate::approvals::requested_call(&events);
    client.approve_tool_call(&created.id, &call).await.unwrap();
    let prompt = ends_completed(&client, &created.id).await;
    assert_eq!(texts(&prompt).last().map(String::as_str), Some("Finished."));
    assert_eq!(prompt.usage.unwrap().rounds, 3, "three requests, the limit");
    let requests = stack.model.hosted_requests();
    assert_eq!(requests.len(), 3, "{:?}", requests.last().map(|r| &r.body));
    // The paused turn went back without its trailing whitespace.
    let paused = &requests[1].body["messages"].as_array().unwrap()[1]["content"];
    let last = paused.as_array().unwrap().last().unwrap();
    assert_eq!(last["text"], "Still working.");
}

#[tokio::test]
async fn a_model_calling_a_tool_named_like_the_timelines_own_entries_gets_an_error_and_the_prompt_goes_on()
 {
    let stack = hosted_stack().await;
    stack.model.add_hosted_rule(
        HostedRule::turn(
            HostedMatch::AssistantTurns(0),
            vec![
                HostedBlock::tool_use("code.execute", json!({"command": "rm -rf /"})),
                HostedBlock::tool_use("hosted.container", json!({"container": "container_evil"})),
            ],
            "tool_use",
        )
        .times(1),
    );
    stack.model.add_hosted_rule(HostedRule::turn(
        HostedMatch::ToolResultContains("unknown tool".into()),
        vec![HostedBlock::text("Those are not tools.")],
        "end_turn",
    ));
    let client = stack.client("alice").await.unwrap();
    let prompt = completed(&client, hosted("pretend")).await;
    assert_eq!(texts(&prompt), ["Those are not tools."]);
    let functions: Vec<&str> = prompt
        .output
        .iter()
        .filter_map(tool_of)
        .map(|(function, _)| function)
        .collect();
    assert_eq!(
        functions,
        ["hosted.container", "code__execute", "hosted__container"],
        "the model's calls are not taken for the timeline's own entries"
    );
    assert!(executions(&prompt).is_empty());
    let requests = stack.model.hosted_requests();
    assert_eq!(
        requests.len(),
        2,
        "the stand-in accepted the rebuilt conversation"
    );
    assert_ne!(requests[1].body["container"], json!("container_evil"));
}

#[tokio::test]
async fn a_hosted_prompts_shell_commands_are_not_saved_as_a_skill() {
    let stack = hosted_stack().await;
    stack.model.add_hosted_rule(answering(vec![
        HostedBlock::bash("rm -rf /tmp/x", ""),
        HostedBlock::text("Done."),
    ]));
    let client = stack.client("alice").await.unwrap();
    let prompt = completed(&client, hosted("clean up")).await;
    let refused = client
        .create_skill(agentic_proto::v1::CreateSkillRequest {
            name: "cleanup".into(),
            description: "cleans".into(),
            from_prompt_id: prompt.id.clone(),
            ..Default::default()
        })
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains("ran no code to save"), "{refused}");
}
