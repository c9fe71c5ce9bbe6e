//! Listings stay small whatever is stored: summaries (no state, no outputs, inputs cut to
//! 200 characters) in pages bounded by count and by bytes, each page naming the next.

use agentic_client::{NewConversation, NewPrompt};
use agentic_testkit::Stack;
use agentic_testkit::model::{Match, Reply, Rule};
use prost::Message as _;
use serde_json::json;
use tonic::Code;

use crate::support::*;

/// A state of about `bytes` bytes as stored.
fn big_state(bytes: usize) -> serde_json::Map<String, serde_json::Value> {
    let mut state = serde_json::Map::new();
    state.insert("blob".into(), json!("s".repeat(bytes)));
    state
}

#[tokio::test]
async fn listings_carry_summaries_without_state_outputs_or_whole_inputs_and_stay_under_a_mebibyte()
{
    let stack = Stack::start(vec![Rule::new(Match::Any, Reply::text("done"))])
        .await
        .unwrap();
    let alice = stack.client("alice").await.unwrap();
    let mut conversations = Vec::new();
    for n in 0..4 {
        let conversation = alice
            .create_conversation(NewConversation {
                title: format!("big {n}"),
                state: Some(big_state(900 * 1024)),
                ..NewConversation::default()
            })
            .await
            .unwrap();
        conversations.push(conversation.id);
    }
    let long_input = "é".repeat(100 * 1024);
    let mut prompts = Vec::new();
    for conversation in &conversations {
        let prompt = alice
            .create_prompt(
                NewPrompt::new(long_input.clone())
                    .conversation(conversation)
                    .state(big_state(900 * 1024)),
            )
            .await
            .unwrap();
        collect(&alice, &prompt.id, 0).await;
        prompts.push(prompt.id);
    }

    let listed = alice.list_conversations_page(500, "").await.unwrap();
    assert!(listed.encoded_len() < 64 * 1024, "{}", listed.encoded_len());
    assert_eq!(listed.conversations.len(), 4);
    for conversation in &listed.conversations {
        assert_eq!(conversation.state, None, "a listing carries no state");
        assert!(conversation.state_bytes > 900 * 1024, "but its size");
    }
    assert_eq!(listed.next_page_token, "", "nothing more");

    let listed = alice.list_prompts_page(None, 500, "").await.unwrap();
    assert!(listed.encoded_len() < 64 * 1024, "{}", listed.encoded_len());
    assert_eq!(listed.prompts.len(), 4);
    for prompt in &listed.prompts {
        assert_eq!(prompt.input.chars().count(), 200);
        assert!(prompt.input_cut);
        assert_eq!(prompt.state_data, None);
        assert!(prompt.output.is_empty());
    }
    // Nothing is lost: the whole prompt and conversation read back.
    let whole = alice.get_prompt(&prompts[0]).await.unwrap();
    assert_eq!(whole.input, long_input);
    assert!(!whole.input_cut);
    assert_eq!(whole.output.last().and_then(text_of), Some("done"));
    let whole = alice.get_conversation(&conversations[0]).await.unwrap();
    let state = agentic_proto::json::struct_to_json(whole.state.as_ref());
    assert_eq!(state["blob"].as_str().map(str::len), Some(900 * 1024));
}

#[tokio::test]
async fn pages_follow_one_another_newest_first_without_gaps_or_repeats() {
    let stack = Stack::start(vec![Rule::new(Match::Any, Reply::text("done"))])
        .await
        .unwrap();
    let alice = stack.client("alice").await.unwrap();
    let bob = stack.client("bob").await.unwrap();
    let mut created = Vec::new();
    for n in 0..7 {
        let conversation = alice
            .create_conversation(NewConversation {
                title: format!("conversation {n}"),
                ..NewConversation::default()
            })
            .await
            .unwrap();
        created.push(conversation.id);
    }
    bob.create_conversation(NewConversation::default())
        .await
        .unwrap();

    let mut seen = Vec::new();
    let mut token = String::new();
    let mut pages = 0;
    loop {
        let page = alice.list_conversations_page(3, &token).await.unwrap();
        pages += 1;
        seen.extend(
            page.conversations
                .into_iter()
                .map(|conversation| conversation.id),
        );
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    assert_eq!(pages, 3);
    created.reverse();
    assert_eq!(seen, created, "newest first, each once, none of bob's");

    // The same for prompts, in one conversation.
    let mut prompt_ids = Vec::new();
    for n in 0..5 {
        let prompt = alice
            .create_prompt(NewPrompt::new(format!("question {n}")).conversation(&created[0]))
            .await
            .unwrap();
        collect(&alice, &prompt.id, 0).await;
        prompt_ids.push(prompt.id);
    }
    let first = alice
        .list_prompts_page(Some(&created[0]), 2, "")
        .await
        .unwrap();
    let second = alice
        .list_prompts_page(Some(&created[0]), 2, &first.next_page_token)
        .await
        .unwrap();
    let third = alice
        .list_prompts_page(Some(&created[0]), 2, &second.next_page_token)
        .await
        .unwrap();
    let listed: Vec<String> = [first.prompts, second.prompts, third.prompts]
        .into_iter()
        .flatten()
        .map(|prompt| prompt.id)
        .collect();
    prompt_ids.reverse();
    assert_eq!(listed, prompt_ids);
    assert_eq!(third.next_page_token, "");

    let refused = alice
        .list_conversations_page(3, "not a token")
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some(Code::InvalidArgument));
}
