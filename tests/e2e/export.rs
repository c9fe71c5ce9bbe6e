//! All of a user's data at once: `ExportData` gives back everything they keep (over gRPC,
//! as JSON Lines over HTTP, and to a file with `agentic export`), `DeleteAllData` deletes it
//! in both services so that no row of either database names the user or anything of theirs,
//! and another user's data is untouched throughout. One export per user runs at a time.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use agentic_client::{Client, NewPrompt};
use agentic_proto::v1::export_item::Item;
use agentic_proto::v1::{
    CreateSkillRequest, CreateTriggerRequest, ExportItem, Schedule, TriggeredPrompt, schedule,
};
use agentic_testkit::Stack;
use agentic_testkit::model::{Match, Reply, Rule};
use serde_json::Value;
use tonic::Code;

use crate::deletion::conversation_of;
use crate::support::*;

/// Deletion's rules (a report, a deploy that waits for approval), and a code prompt that
/// keeps 3 MB of JSON in one artifact: an export of it is 12 chunks.
fn rules() -> Vec<Rule> {
    let mut rules = vec![Rule::new(
        Match::LastUserContains("keep a big one".into()),
        Reply::text(
            r#"storeArtifact({blob: "x".repeat(3000000)}, "big"); complete({response: "kept"});"#,
        ),
    )];
    rules.extend(crate::deletion::rules());
    rules
}

pub(crate) async fn export_of(client: &Client) -> Vec<ExportItem> {
    let mut items = client.export_data().await.unwrap();
    let mut all = Vec::new();
    while let Some(item) = items.message().await.unwrap() {
        all.push(item);
    }
    all
}

/// What an export holds, read back: ids by kind, each artifact's bytes put together again,
/// and the counts its `end` gave.
#[derive(Default)]
struct Exported {
    ids: BTreeMap<&'static str, BTreeSet<String>>,
    bytes: BTreeMap<String, Vec<u8>>,
    sizes: BTreeMap<String, u64>,
    events: BTreeMap<String, Vec<u64>>,
    counted: BTreeMap<String, u64>,
    end: Option<BTreeMap<String, u64>>,
}

impl Exported {
    fn of(items: Vec<ExportItem>) -> Exported {
        let mut exported = Exported::default();
        for item in items {
            assert!(exported.end.is_none(), "nothing comes after `end`");
            let (kind, id) = match item.item.unwrap() {
                Item::Conversation(conversation) => ("conversation", conversation.id),
                Item::Prompt(prompt) => ("prompt", prompt.id),
                Item::Event(event) => {
                    exported
                        .events
                        .entry(event.prompt_id.clone())
                        .or_default()
                        .push(event.sequence);
                    ("event", format!("{}/{}", event.prompt_id, event.sequence))
                }
                Item::Recording(recording) => ("recording", recording.prompt.unwrap().id),
                Item::Trigger(trigger) => ("trigger", trigger.id),
                Item::Artifact(artifact) => {
                    exported.sizes.insert(artifact.id.clone(), artifact.size);
                    exported.bytes.insert(artifact.id.clone(), Vec::new());
                    ("artifact", artifact.id)
                }
                Item::Chunk(chunk) => {
                    let bytes = exported
                        .bytes
                        .get_mut(&chunk.artifact_id)
                        .expect("a chunk follows its artifact");
                    assert_eq!(chunk.offset, bytes.len() as u64, "chunks come in order");
                    assert!(chunk.data.len() <= 256 * 1024);
                    bytes.extend_from_slice(&chunk.data);
                    ("chunk", format!("{}@{}", chunk.artifact_id, chunk.offset))
                }
                Item::Skill(skill) => ("skill", format!("{}@{}", skill.name, skill.version)),
                Item::Agent(agent) => ("agent", format!("{}@{}", agent.name, agent.version)),
                Item::Memory(item) => (
                    "memory",
                    format!("{}/{}", item.namespace.join("/"), item.key),
                ),
                Item::End(end) => {
                    exported.end = Some(end.counts.into_iter().collect());
                    continue;
                }
            };
            *exported.counted.entry(kind.to_owned()).or_default() += 1;
            exported.ids.entry(kind).or_default().insert(id);
        }
        exported
    }

    fn ids(&self, kind: &str) -> BTreeSet<String> {
        self.ids.get(kind).cloned().unwrap_or_default()
    }
}

/// Alice keeps one of every kind: conversations (one with a prompt waiting for approval),
/// a prompt outside any conversation, files, a big artifact, a recording of her own and an
/// imported one, a trigger and a skill. The ids of all of it.
async fn keep_one_of_everything(alice: &Client) -> Vec<String> {
    let mut ids = Vec::new();
    let conversation = conversation_of(alice, "kept").await;
    let reported = alice
        .create_prompt(NewPrompt::new("make a report").conversation(&conversation))
        .await
        .unwrap();
    collect(alice, &reported.id, 0).await;
    let pending = conversation_of(alice, "pending").await;
    let waiting = alice
        .create_prompt(NewPrompt::new("deploy").conversation(&pending))
        .await
        .unwrap();
    until_waiting(alice, &waiting.id).await;
    let alone = completed(alice, NewPrompt::new("another report")).await;
    let big = completed(alice, NewPrompt::new("keep a big one").mode("code")).await;
    let imported = alice
        .import_recording(alice.get_recording(&reported.id).await.unwrap())
        .await
        .unwrap();
    let trigger = alice
        .create_trigger(CreateTriggerRequest {
            name: "weekly".into(),
            schedule: Some(Schedule {
                kind: Some(schedule::Kind::EveryMs(7 * 24 * 3_600_000)),
                time_zone: String::new(),
            }),
            prompt: Some(TriggeredPrompt {
                input: "a weekly report".into(),
                ..TriggeredPrompt::default()
            }),
            ..CreateTriggerRequest::default()
        })
        .await
        .unwrap();
    alice
        .create_skill(CreateSkillRequest {
            name: "shout".into(),
            description: "Shouts `text`".into(),
            code: "input.text.toUpperCase()".into(),
            ..CreateSkillRequest::default()
        })
        .await
        .unwrap();
    for instructions in ["Be brief.", "Be briefer."] {
        alice
            .create_agent(agentic_proto::v1::Agent {
                name: "reporter".into(),
                instructions: instructions.into(),
                ..agentic_proto::v1::Agent::default()
            })
            .await
            .unwrap();
    }
    ids.extend([conversation, pending, trigger.id, imported.id]);
    ids.extend([reported.id, waiting.id, alone.id, big.id]);
    ids
}

#[tokio::test]
async fn an_export_holds_everything_a_user_keeps_and_deleting_it_all_leaves_no_row_naming_them() {
    let stack = Stack::start(rules()).await.unwrap();
    let alice = stack.client("alice").await.unwrap();
    let bob = stack.client("bob").await.unwrap();
    let mut ids = keep_one_of_everything(&alice).await;
    let his = completed(&bob, NewPrompt::new("bob's report")).await;
    let bob_before = stack.rows_of("bob").await.unwrap();

    let exported = Exported::of(export_of(&alice).await);
    let end = exported.end.clone().expect("an export ends with `end`");
    assert_eq!(end, exported.counted, "`end` counts what came before it");
    assert_eq!(exported.ids("conversation").len(), 2);
    assert_eq!(exported.ids("prompt").len(), 4, "{:?}", exported.ids);
    assert_eq!(exported.ids("trigger").len(), 1);
    assert_eq!(
        exported.ids("skill"),
        BTreeSet::from(["shout@1".to_owned()])
    );
    assert_eq!(
        exported.ids("agent"),
        BTreeSet::from(["reporter@1".to_owned(), "reporter@2".to_owned()])
    );
    assert!(
        exported.ids("recording").len() >= 2,
        "her own and the imported one"
    );
    assert!(
        exported.ids("recording").contains(&ids[3]),
        "the imported recording, by the id it got"
    );
    for prompt in exported.ids("prompt") {
        let sequences = &exported.events[&prompt];
        let whole: Vec<u64> = (1..=sequences.len() as u64).collect();
        assert_eq!(sequences, &whole, "every event of {prompt}, in order");
    }
    // Every artifact whole: the files her prompts made (the same bytes GetFile gives) and the
    // big one, 3 MB in 12 chunks.
    for (id, bytes) in &exported.bytes {
        assert_eq!(bytes.len() as u64, exported.sizes[id], "artifact {id}");
    }
    assert!(end["chunk"] >= 12, "{end:?}");
    let big: Value = exported
        .bytes
        .values()
        .find(|bytes| bytes.len() > 3_000_000)
        .map(|bytes| serde_json::from_slice(bytes).unwrap())
        .expect("the big artifact");
    assert_eq!(big["blob"].as_str().unwrap().len(), 3_000_000);
    let files = alice.list_conversation_files(&ids[0]).await.unwrap();
    let file = files[0].file.as_ref().unwrap();
    let content = alice.get_file(&file.id).await.unwrap().content;
    assert_eq!(exported.bytes[&file.artifact_id], content);
    ids.extend(exported.ids("artifact"));
    ids.push(file.id.clone());
    // Bob's export holds only his.
    let his_export = Exported::of(export_of(&bob).await);
    assert_eq!(his_export.ids("prompt"), BTreeSet::from([his.id.clone()]));

    // The search sees her rows in every kind of table of both databases before they go.
    let named = stack.rows_naming("alice", &ids).await.unwrap();
    for table in [
        "gateway.conversations",
        "gateway.prompts",
        "gateway.prompt_events",
        "gateway.prompt_files",
        "gateway.prompt_recordings",
        "gateway.imported_recordings",
        "gateway.triggers",
        "gateway.agents",
        "tool_host.artifacts",
        "tool_host.artifact_usage",
        "tool_host.skills",
        "tool_host.skill_users",
    ] {
        assert!(
            named.get(table).copied().unwrap_or_default() > 0,
            "{table}: {named:?}"
        );
    }

    // Deleting everything needs `confirm`; then nothing names her in either database.
    let refused = reqwest::Client::new()
        .delete(format!("{}/v1/data", stack.gateway_http_url()))
        .header("x-user-id", "alice")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), reqwest::StatusCode::BAD_REQUEST);
    let deleted = alice.delete_all_data().await.unwrap();
    assert_eq!(
        (
            deleted.conversations,
            deleted.prompts,
            deleted.triggers,
            deleted.skills,
            deleted.agents
        ),
        (2, 4, 1, 1, 2),
        "{deleted:?}"
    );
    assert_eq!(
        deleted.recordings, 1,
        "the imported one (hers went with her prompt)"
    );
    assert!(deleted.artifacts as usize >= exported.bytes.len());
    let left = stack.rows_naming("alice", &ids).await.unwrap();
    assert!(left.is_empty(), "rows still name alice or hers: {left:?}");
    assert_eq!(stack.rows_of("bob").await.unwrap(), bob_before);
    let after = Exported::of(export_of(&alice).await);
    assert_eq!(after.end, Some(BTreeMap::from([])), "{:?}", after.ids);

    // Both go on as before.
    let again = completed(&alice, NewPrompt::new("a fresh report")).await;
    assert_eq!(again.user_id, "alice");
    assert_eq!(bob.get_prompt(&his.id).await.unwrap().id, his.id);
}

#[tokio::test]
async fn an_export_over_http_is_json_lines_and_the_cli_writes_it_whole_to_a_file() {
    let stack = Stack::start(rules()).await.unwrap();
    let alice = stack.client("alice").await.unwrap();
    let conversation = conversation_of(&alice, "kept").await;
    let prompt = alice
        .create_prompt(NewPrompt::new("make a report").conversation(&conversation))
        .await
        .unwrap();
    collect(&alice, &prompt.id, 0).await;

    let response = reqwest::Client::new()
        .get(format!("{}/v1/export", stack.gateway_http_url()))
        .header("x-user-id", "alice")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), reqwest::StatusCode::OK);
    assert_eq!(
        response.headers()[reqwest::header::CONTENT_TYPE],
        "application/jsonl"
    );
    let body = response.text().await.unwrap();
    let lines: Vec<Value> = body
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let end = &lines.last().unwrap()["end"]["counts"];
    let counted: u64 = end
        .as_object()
        .unwrap()
        .values()
        .map(|count| count.as_str().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(counted as usize, lines.len() - 1, "{end}");
    assert_eq!(lines[0]["conversation"]["id"], conversation);
    assert_eq!(lines[1]["prompt"]["id"], prompt.id);
    assert!(
        lines.iter().any(|line| line["chunk"]["data"].is_string()),
        "bytes are base64 strings"
    );

    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("alice.jsonl");
    let url = stack.gateway_url();
    let path_arg = path.to_str().unwrap();
    let ran = crate::cli::agentic_with(
        &[
            "--server", &url, "--user", "alice", "export", "--output", path_arg,
        ],
        "",
    )
    .await;
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert!(ran.stderr.starts_with("exported "), "{}", ran.stderr);
    assert!(ran.stderr.contains("1 conversation,"), "{}", ran.stderr);
    let written = std::fs::read_to_string(&path).unwrap();
    assert_eq!(written.lines().count(), lines.len());
    assert!(!folder.path().join("alice.jsonl.part").exists());

    // `delete everything` wants --yes.
    let ran = crate::cli::agentic_with(
        &["--server", &url, "--user", "alice", "delete", "everything"],
        "",
    )
    .await;
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert_eq!(alice.get_prompt(&prompt.id).await.unwrap().id, prompt.id);
    let ran = crate::cli::agentic_with(
        &[
            "--server",
            &url,
            "--user",
            "alice",
            "delete",
            "everything",
            "--yes",
        ],
        "",
    )
    .await;
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert!(
        ran.stderr.contains("1 conversations, 1 prompts"),
        "{}",
        ran.stderr
    );
    assert_eq!(
        alice.get_prompt(&prompt.id).await.unwrap_err().code(),
        Some(Code::NotFound)
    );
}

#[tokio::test]
async fn one_export_per_user_runs_at_a_time_and_another_users_export_is_not_held_up() {
    let stack = Stack::start(rules()).await.unwrap();
    let alice = stack.client("alice").await.unwrap();
    let bob = stack.client("bob").await.unwrap();
    completed(&alice, NewPrompt::new("keep a big one").mode("code")).await;
    completed(&bob, NewPrompt::new("bob's report")).await;

    // Alice's first export, not read past its first item: it waits for her, holding her
    // one export.
    let mut held = alice.export_data().await.unwrap();
    assert!(held.message().await.unwrap().is_some());
    let refused = match alice.export_data().await {
        Ok(mut second) => second.message().await.map(|_| ()).unwrap_err(),
        Err(error) => error,
    };
    assert_eq!(refused.code(), Some(Code::ResourceExhausted), "{refused}");
    assert!(refused.to_string().contains("one at a time"), "{refused}");

    // Bob's export runs whole meanwhile.
    let his = tokio::time::timeout(Duration::from_secs(10), export_of(&bob))
        .await
        .expect("bob's export is not held up");
    assert!(Exported::of(his).end.is_some());

    // Once she hangs up, her next export runs, whole.
    drop(held);
    let mut whole = None;
    for _ in 0..50 {
        match alice.export_data().await {
            Ok(mut items) => {
                let mut all = Vec::new();
                match items.message().await {
                    Ok(Some(first)) => all.push(first),
                    Ok(None) => {}
                    Err(error) if error.code() == Some(Code::ResourceExhausted) => {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                    Err(error) => panic!("{error}"),
                }
                while let Some(item) = items.message().await.unwrap() {
                    all.push(item);
                }
                whole = Some(all);
                break;
            }
            Err(error) if error.code() == Some(Code::ResourceExhausted) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(error) => panic!("{error}"),
        }
    }
    let exported = Exported::of(whole.expect("her export runs again once the first ended"));
    let big = exported.bytes.values().map(Vec::len).max().unwrap();
    assert!(big > 3_000_000, "{big}");
}
