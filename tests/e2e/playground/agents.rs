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
