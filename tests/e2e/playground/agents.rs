//! The playground's Agent menu: the caller's agents (and the operator's) to run the next
//! prompt as, whose own mode and model win over the menus'.

use agentic_testkit::Stack;
use agentic_testkit::model::Match;

use super::open_playground;
use crate::support::*;

#[tokio::test]
async fn a_prompt_sent_with_an_agent_chosen_runs_as_it() {
    let stack = Stack::start(vec![text(Match::Any, "Arr.")]).await.unwrap();
    let user = stack.client("local").await.unwrap();
    user.create_agent(agentic_proto::v1::Agent {
        name: "pirate".into(),
        instructions: "TALK-LIKE-A-PIRATE".into(),
        mode: "classic".into(),
        tools: Some(agentic_proto::v1::ToolScope::default()),
        ..agentic_proto::v1::Agent::default()
    })
    .await
    .unwrap();
    let browser = open_playground(&stack).await;
    browser
        .until(
            "the agent is offered",
            "return !!document.querySelector('#agent option[value=\"pirate\"]')",
        )
        .await;
    browser
        .run("document.getElementById('agent').value = 'pirate'", vec![])
        .await;
    // The mode menu says code; the agent's own mode wins, as the page sends none.
    browser.send_prompt("ahoy", "code").await;
    super::until_state(&browser, "completed").await;
    let id = browser
        .run(&super::on_last("return last.dataset.promptId"), vec![])
        .await;
    let prompt = user.get_prompt(id.as_str().unwrap()).await.unwrap();
    assert_eq!(prompt.mode, "classic");
    assert_eq!(prompt.agent.unwrap().name, "pirate");
    let system = stack.model.requests()[0].messages()[0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(system.contains("TALK-LIKE-A-PIRATE"), "{system}");
    browser.close().await;
}

#[tokio::test]
async fn a_sub_agents_run_shows_under_its_call_and_its_approval_is_decided_there() {
    use agentic_testkit::model::{Reply, Rule};
    let coder = r#"const done = demoDangerous({action: "build"});
complete({response: "built: " + done.done});"#;
    let stack = Stack::start(vec![
        Rule::new(
            Match::AnyMessageContains("CODER-AGENT".into()),
            Reply::Text(coder.into()),
        ),
        Rule::new(
            Match::All(vec![
                Match::AnyMessageContains("LEAD-AGENT".into()),
                Match::NoToolResults,
            ]),
            Reply::ToolCalls {
                content: None,
                calls: vec![call(
                    "agent__coder",
                    serde_json::json!({"task": "build it"}),
                )],
            },
        ),
        text(Match::Any, "The coder built it."),
    ])
    .await
    .unwrap();
    let user = stack.client("local").await.unwrap();
    for (name, instructions, mode, calls) in [
        ("coder", "CODER-AGENT", "code", vec![]),
        ("lead", "LEAD-AGENT", "classic", vec!["coder"]),
    ] {
        user.create_agent(agentic_proto::v1::Agent {
            name: name.into(),
            instructions: instructions.into(),
            mode: mode.into(),
            sub_agents: calls
                .into_iter()
                .map(|name| agentic_proto::v1::SubAgent {
                    name: name.into(),
                    r#final: false,
                })
                .collect(),
            ..agentic_proto::v1::Agent::default()
        })
        .await
        .unwrap();
    }
    let browser = open_playground(&stack).await;
    browser
        .until(
            "the agent is offered",
            "return !!document.querySelector('#agent option[value=\"lead\"]')",
        )
        .await;
    browser
        .run("document.getElementById('agent').value = 'lead'", vec![])
        .await;
    browser.send_prompt("build the thing", "classic").await;
    // The child's call waits under the parent's agent.coder call, with its own buttons.
    let waiting = ".tool[data-function='agent.coder'] .sub-agent[data-agent='coder'] \
                   .sub-tool[data-function='demo.dangerous'] button.approve";
    browser
        .until(
            "the sub-agent's approval shows under the call",
            &format!("return !!document.querySelector(\"{waiting}\")"),
        )
        .await;
    // Nobody is offered a decision on the parent's own call of the sub-agent.
    let own = browser
        .run(
            "return document.querySelectorAll(\".tool[data-function='agent.coder'] > .approval\").length",
            vec![],
        )
        .await;
    assert_eq!(own, 0);
    browser.click(waiting).await;
    super::until_state(&browser, "completed").await;
    browser
        .until(
            "the sub-agent shows completed under the call",
            "return !!document.querySelector(\".sub-agent[data-agent='coder'][data-state='completed']\")",
        )
        .await;
    let id = browser
        .run(&super::on_last("return last.dataset.promptId"), vec![])
        .await;
    let prompt = user.get_prompt(id.as_str().unwrap()).await.unwrap();
    assert_eq!(
        text_of(prompt.output.last().unwrap()),
        Some("The coder built it.")
    );
    browser.close().await;
}
