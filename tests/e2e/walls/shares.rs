//! Each user's share of the code-executor's pools: one user's backlog in sandboxes or in
//! paused runs never takes another user's place.

use agentic_client::NewPrompt;
use agentic_proto::v1::PromptState;
use agentic_testkit::model::{Match, Reply, Rule};
use agentic_testkit::{Stack, StackOptions};

use crate::support::*;

fn code_prompt(input: &str) -> NewPrompt {
    NewPrompt::new(input).mode("code")
}

#[tokio::test]
async fn one_users_runs_asleep_in_tools_hold_only_their_share_of_sandboxes_and_another_users_code_runs_meanwhile()
 {
    let stack = Stack::start_with(
        vec![
            Rule::new(
                Match::LastUserContains("nap".into()),
                Reply::text("demoSleep({ms: 4000});\ncomplete({response: 'slept'})"),
            ),
            Rule::new(
                Match::Any,
                Reply::text("complete({response: String(1 + 1)})"),
            ),
        ],
        StackOptions {
            code_max_sandboxes: 4,
            code_shares_per_user: (2, 0),
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();
    let alice = stack.client("alice").await.unwrap();
    let bob = stack.client("bob").await.unwrap();
    let mut naps = Vec::new();
    for n in 0..4 {
        naps.push(
            alice
                .create_prompt(code_prompt(&format!("nap {n}")))
                .await
                .unwrap(),
        );
    }
    // Bob's `1 + 1` is answered while alice's first two still sleep in their sandboxes and
    // her other two wait for her own slots.
    let sum = bob.create_prompt(code_prompt("1 + 1")).await.unwrap();
    let events = collect(&bob, &sum.id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "completed");
    assert_eq!(
        bob.get_prompt(&sum.id)
            .await
            .unwrap()
            .output
            .last()
            .and_then(text_of),
        Some("2")
    );
    for nap in &naps {
        let state = alice.get_prompt(&nap.id).await.unwrap().state;
        assert_eq!(state, PromptState::Running as i32, "bob came first");
    }
    // Nothing of alice's was lost: her waiting runs ran once her slots came free.
    for nap in &naps {
        let events = collect(&alice, &nap.id, 0).await;
        assert_eq!(
            kind(events.last().unwrap()),
            "completed",
            "{:?}",
            kinds(&events)
        );
    }
}

#[tokio::test]
async fn one_users_pauses_fill_only_their_share_of_paused_runs_and_another_users_call_still_waits_for_approval()
 {
    let code = r#"let message;
try {
  message = "ran: " + demoDangerous({action: "deploy"}).done;
} catch (error) {
  message = "caught: " + error.message;
}
complete({response: message});"#;
    let stack = Stack::start_with(
        vec![Rule::new(
            Match::LastUserContains("deploy".into()),
            Reply::text(code),
        )],
        StackOptions {
            code_max_paused_runs: 4,
            code_shares_per_user: (0, 1),
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();
    let alice = stack.client("alice").await.unwrap();
    let bob = stack.client("bob").await.unwrap();

    let first = alice.create_prompt(code_prompt("deploy")).await.unwrap();
    until_waiting(&alice, &first.id).await;
    // Alice's second pause is past her share: her code hears why at once.
    let second = alice.create_prompt(code_prompt("deploy")).await.unwrap();
    collect(&alice, &second.id, 0).await;
    let answer = alice.get_prompt(&second.id).await.unwrap();
    let answer = answer.output.iter().find_map(text_of).unwrap_or_default();
    assert!(
        answer.contains("caught: ") && answer.contains("1 of your runs already wait"),
        "{answer:?}"
    );
    // Bob's call waits for his approval as if alice had none waiting.
    let his = bob.create_prompt(code_prompt("deploy")).await.unwrap();
    until_waiting(&bob, &his.id).await;
    // Alice's first pause is untouched.
    let state = alice.get_prompt(&first.id).await.unwrap().state;
    assert_eq!(state, PromptState::WaitingForApproval as i32);
}
