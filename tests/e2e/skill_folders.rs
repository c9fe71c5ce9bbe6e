//! Skill folders (the Agent Skills format) end to end: a folder added over gRPC, HTTP or the
//! CLI is private to its user and counted in their quota; every mode's system prompt lists
//! its name and description only, and `skill.read` (in code, `skillRead`) reads the rest on
//! demand; its JavaScript imports in the code sandbox; scripts in other languages are said
//! to run only in hosted mode, which uploads the folder through the provider's Skills API on
//! first use, again only when it changes, and deletes it there when it is deleted. The
//! operator's skills directory is every user's. Archives that break the rules are refused
//! with nothing stored.

use std::io::Write as _;
use std::path::Path;

use agentic_client::NewPrompt;
use agentic_proto::v1::Skill;
use agentic_testkit::model::{HostedBlock, HostedMatch, HostedRule, Match, Rule};
use agentic_testkit::{Stack, StackOptions};
use serde_json::{Value, json};
use tonic::Code;

use crate::support::*;

/// A marker in the instructions: what the model must not see before it reads the skill.
const MARKER: &str = "STEP-ONE-FILL-EVERY-FIELD";

fn skill_md(name: &str, description: &str) -> String {
    format!(
        "---\nname: {name}\ndescription: {description}\nlicense: Apache-2.0\nmetadata:\n  owner: forms team\n---\n# {name}\n\n{MARKER}: read reference/forms.md, then fill the form.\n"
    )
}

/// Writes the `pdf-forms` skill folder under `dir`: instructions, a reference file, a
/// JavaScript module importing a second one, and a Python script.
pub(crate) fn write_skill(dir: &Path, description: &str) -> std::path::PathBuf {
    let root = dir.join("pdf-forms");
    std::fs::create_dir_all(root.join("scripts")).unwrap();
    std::fs::create_dir_all(root.join("reference")).unwrap();
    std::fs::write(root.join("SKILL.md"), skill_md("pdf-forms", description)).unwrap();
    std::fs::write(root.join("reference/forms.md"), "Fields: name, date.\n").unwrap();
    std::fs::write(
        root.join("scripts/fields.js"),
        "import { two } from \"./two.js\";\nexport function double(x) { return x * two; }\n",
    )
    .unwrap();
    std::fs::write(root.join("scripts/two.js"), "export const two = 2;\n").unwrap();
    std::fs::write(root.join("scripts/fill.py"), "print('filled')\n").unwrap();
    root
}

pub(crate) fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (path, content) in entries {
        writer.start_file(*path, options).unwrap();
        writer.write_all(content).unwrap();
    }
    writer.finish().unwrap().into_inner()
}

/// Classic: the prompt containing `input` reads `pdf-forms`, then answers with what it read.
fn reading_rules(input: &str) -> Vec<Rule> {
    vec![
        calls(
            Match::All(vec![
                Match::NoToolResults,
                Match::LastUserContains(input.to_owned()),
            ]),
            vec![call("skill__read", json!({"skill": "pdf-forms"}))],
        ),
        text(
            Match::All(vec![
                Match::HasToolResults,
                Match::AnyMessageContains(input.to_owned()),
            ]),
            "Read: {last_tool_result}",
        ),
    ]
}

/// The system prompt of a recorded chat request.
fn system_of(body: &Value) -> String {
    body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn a_skill_folder_is_listed_by_name_and_description_and_read_only_on_demand() {
    let stack = Stack::start(reading_rules("fill the form")).await.unwrap();
    let alice = stack.client("alice").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = write_skill(dir.path(), "Fills PDF forms.");
    let added = alice.add_skill_folder_from(&root).await.unwrap();
    assert_eq!(
        (added.name.as_str(), added.source.as_str()),
        ("pdf-forms", "folder")
    );
    let paths: Vec<&str> = added.files.iter().map(|file| file.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "SKILL.md",
            "reference/forms.md",
            "scripts/fields.js",
            "scripts/fill.py",
            "scripts/two.js"
        ]
    );
    assert_eq!(added.content_hash.len(), 64);

    let prompt = completed(&alice, NewPrompt::new("fill the form")).await;
    let read = crate::tidy::tool_outputs(&prompt)
        .first()
        .map(|tool| tool.function.clone())
        .unwrap();
    assert_eq!(read, "skill.read");
    let requests = stack.model.requests();
    let (before, after) = (&requests[0].body, &requests[1].body);
    let system = system_of(before);
    assert!(system.contains("pdf-forms: Fills PDF forms."), "{system}");
    let (before_bytes, after_bytes) = (before.to_string().len(), after.to_string().len());
    assert!(
        !before.to_string().contains(MARKER),
        "the instructions went out unread"
    );
    assert!(
        after.to_string().contains(MARKER),
        "the read instructions reach the model"
    );
    let instructions = skill_md("pdf-forms", "Fills PDF forms.").len();
    assert!(
        before_bytes + instructions <= after_bytes,
        "before the read {before_bytes} bytes, after {after_bytes}: the instructions ({instructions}) came with the read only"
    );
    // The read says how each script runs here: JavaScript imports, Python only hosted.
    let output = result_of(&prompt, "skill.read");
    let files = output["files"].as_array().unwrap();
    let runs = |path: &str| {
        files.iter().find(|file| file["path"] == path).unwrap()["runs"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert!(
        runs("scripts/fill.py").contains("only hosted mode"),
        "{output}"
    );
    assert!(
        runs("scripts/fields.js").contains("skills/pdf-forms/scripts/fields.js"),
        "{output}"
    );

    // Another user sees nothing of it.
    let bob = stack.client("bob").await.unwrap();
    assert!(bob.list_skills().await.unwrap().is_empty());
    let error = bob.get_skill("pdf-forms", 0).await.unwrap_err();
    assert_eq!(error.code(), Some(Code::NotFound));
    stack.model.add_rule(text(
        Match::LastUserContains("hello from bob".into()),
        "Hi.",
    ));
    completed(&bob, NewPrompt::new("hello from bob")).await;
    let last = stack.model.requests().last().unwrap().body.to_string();
    assert!(
        !last.contains("pdf-forms"),
        "bob's prompt lists alice's skill"
    );
}

fn result_of(prompt: &agentic_proto::v1::Prompt, function: &str) -> Value {
    prompt
        .output
        .iter()
        .filter_map(tool_of)
        .find(|(called, _)| *called == function)
        .map(|(_, result)| result.unwrap())
        .unwrap()
}

#[tokio::test]
async fn code_mode_imports_a_skills_javascript_and_reads_the_skill_with_skill_read() {
    let code = r#"import { double } from "skills/pdf-forms/scripts/fields.js";
const read = skillRead({skill: 'pdf-forms', path: 'reference/forms.md'});
output(double(21) + ' ' + read.content.trim());
done();"#;
    let stack = Stack::start(vec![code_for("use the form skill", 1, code)])
        .await
        .unwrap();
    let alice = stack.client("alice").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    alice
        .add_skill_folder_from(&write_skill(dir.path(), "Fills PDF forms."))
        .await
        .unwrap();
    let prompt = completed(&alice, NewPrompt::new("use the form skill").mode("code")).await;
    let texts: Vec<&str> = prompt.output.iter().filter_map(text_of).collect();
    assert_eq!(texts, ["42 Fields: name, date."]);
    let system = system_of(&stack.model.requests()[0].body);
    assert!(system.contains("pdf-forms: Fills PDF forms."), "{system}");
    assert!(
        !system.contains("scripts/fields.js"),
        "modules are named on reading: {system}"
    );
}

/// `POST /v1/skill-folders` as `user`: the status and the JSON answer.
async fn add_over_http(stack: &Stack, user: &str, archive: &[u8]) -> (reqwest::StatusCode, Value) {
    use base64::Engine as _;
    let response = reqwest::Client::new()
        .post(format!("{}/v1/skill-folders", stack.gateway_http_url()))
        .header("x-user-id", user)
        .json(&json!({"archive": base64::engine::general_purpose::STANDARD.encode(archive)}))
        .send()
        .await
        .unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn archives_that_break_the_rules_are_refused_over_http_and_the_quota_holds_per_user() {
    let options = StackOptions {
        tool_host_storage: tool_host::StorageLimits {
            max_artifact_bytes: 64 * 1024,
            user_quota_bytes: 64 * 1024,
        },
        ..StackOptions::default()
    };
    let stack = Stack::start_with(Vec::new(), options).await.unwrap();
    let good = skill_md("notes", "Keeps notes.");
    let zeros = vec![0u8; 3 * 1024 * 1024];
    let many: Vec<(String, Vec<u8>)> = (0..201)
        .map(|n| (format!("f{n}.txt"), b"x".to_vec()))
        .collect();
    let many: Vec<(&str, &[u8])> = many
        .iter()
        .map(|(path, bytes)| (path.as_str(), bytes.as_slice()))
        .collect();
    let mut many_files = vec![("SKILL.md", good.as_bytes())];
    many_files.extend(many);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "escaping path",
            zip_of(&[("SKILL.md", good.as_bytes()), ("../../evil.js", b"x")]),
            "leaves the folder",
        ),
        (
            "no front matter",
            zip_of(&[("SKILL.md", b"# just text")]),
            "front matter",
        ),
        (
            "bad name",
            zip_of(&[("SKILL.md", skill_md("Bad_Name", "x").as_bytes())]),
            "lowercase",
        ),
        (
            "zip bomb",
            zip_of(&[("SKILL.md", good.as_bytes()), ("big.bin", &zeros)]),
            "big.bin",
        ),
        ("too many files", zip_of(&many_files), "files"),
        (
            "not an archive",
            b"hello there".to_vec(),
            "neither a zip nor a tar",
        ),
    ];
    for (case, archive, says) in &cases {
        let (status, answer) = add_over_http(&stack, "alice", archive).await;
        assert_eq!(status, reqwest::StatusCode::BAD_REQUEST, "{case}: {answer}");
        let message = answer.to_string();
        assert!(message.contains(says), "{case}: {message}");
    }
    let alice = stack.client("alice").await.unwrap();
    assert!(
        alice.list_skills().await.unwrap().is_empty(),
        "nothing was stored"
    );

    // Within the quota it is kept; past it, refused, and another user is unaffected.
    let (status, answer) = add_over_http(
        &stack,
        "alice",
        &zip_of(&[("notes/SKILL.md", good.as_bytes())]),
    )
    .await;
    assert_eq!(status, reqwest::StatusCode::OK, "{answer}");
    assert_eq!(answer["name"], "notes");
    // Alone within the quota; beside alice's first folder, past it.
    let filler: Vec<u8> = (0..64 * 1024 - 250)
        .map(|n| b'a' + (n % 26) as u8)
        .collect();
    let heavy = zip_of(&[
        ("SKILL.md", skill_md("heavy", "Big.").as_bytes()),
        ("data.txt", &filler),
    ]);
    let error = alice.add_skill_folder(heavy.clone()).await.unwrap_err();
    assert_eq!(error.code(), Some(Code::ResourceExhausted), "{error}");
    let bob = stack.client("bob").await.unwrap();
    let kept: Skill = bob.add_skill_folder(heavy).await.unwrap();
    assert_eq!(kept.name, "heavy");

    // Deleting frees the bytes; a name can be added again.
    assert_eq!(alice.delete_skill("notes").await.unwrap(), 1);
    assert!(alice.list_skills().await.unwrap().is_empty());
    let usage = alice.storage_usage().await.unwrap();
    let folders = usage
        .kinds
        .iter()
        .find(|kind| kind.kind == "skill_folders")
        .unwrap();
    assert_eq!((folders.count, folders.bytes), (0, 0));
    let usage = bob.storage_usage().await.unwrap();
    let folders = usage
        .kinds
        .iter()
        .find(|kind| kind.kind == "skill_folders")
        .unwrap();
    assert_eq!(folders.count, 1);
    assert!(folders.bytes > 60 * 1024, "{folders:?}");
}

#[tokio::test]
async fn the_operators_skills_are_every_users_and_only_the_operator_removes_them() {
    let dir = tempfile::tempdir().unwrap();
    let skill = dir.path().join("house-style");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        skill_md("house-style", "How we write."),
    )
    .unwrap();
    let options = StackOptions {
        tool_host_skills_dir: Some(dir.path().to_owned()),
        ..StackOptions::default()
    };
    let stack = Stack::start_with(reading_rules("style check"), options)
        .await
        .unwrap();
    for user in ["alice", "bob"] {
        let client = stack.client(user).await.unwrap();
        let listed = client.list_skills().await.unwrap();
        let sources: Vec<(&str, &str)> = listed
            .iter()
            .map(|skill| (skill.name.as_str(), skill.source.as_str()))
            .collect();
        assert_eq!(sources, [("house-style", "operator")], "{user}");
    }
    let alice = stack.client("alice").await.unwrap();
    let error = alice.delete_skill("house-style").await.unwrap_err();
    assert_eq!(error.code(), Some(Code::PermissionDenied), "{error}");
    let taken = zip_of(&[("SKILL.md", skill_md("house-style", "Mine.").as_bytes())]);
    let error = alice.add_skill_folder(taken).await.unwrap_err();
    assert_eq!(error.code(), Some(Code::AlreadyExists), "{error}");
    completed(&alice, NewPrompt::new("style check")).await;
    let system = system_of(&stack.model.requests()[0].body);
    assert!(system.contains("house-style: How we write."), "{system}");
}

#[tokio::test]
async fn agentic_skills_add_sends_a_folder_and_lists_it_beside_saved_skills() {
    let stack = Stack::start(Vec::new()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = write_skill(dir.path(), "Fills PDF forms.");
    let ran = crate::cli::agentic(&stack, &["skills", "add", root.to_str().unwrap()], "").await;
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert!(
        ran.stderr.contains("added skill folder pdf-forms (5 files"),
        "{}",
        ran.stderr
    );
    let code = dir.path().join("add.js");
    std::fs::write(&code, "input.a + input.b").unwrap();
    let ran = crate::cli::agentic(
        &stack,
        &["skills", "save", "add", "--file", code.to_str().unwrap()],
        "",
    )
    .await;
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let ran = crate::cli::agentic(&stack, &["skills", "list"], "").await;
    assert_eq!(
        ran.stdout.lines().collect::<Vec<_>>(),
        [
            "NAME\tSOURCE\tVERSION\tDESCRIPTION",
            "add\tsaved\t1\t",
            "pdf-forms\tfolder\t1\tFills PDF forms."
        ]
    );
    // A link in the folder is refused before anything is sent.
    std::os::unix::fs::symlink("/etc/passwd", root.join("passwd")).unwrap();
    let ran = crate::cli::agentic(&stack, &["skills", "add", root.to_str().unwrap()], "").await;
    assert_eq!(ran.code, 1);
    assert!(ran.stderr.contains("is a link"), "{}", ran.stderr);
}

fn hosted_answer() -> HostedRule {
    HostedRule::turn(
        HostedMatch::Any,
        vec![HostedBlock::text("Done.")],
        "end_turn",
    )
}

#[tokio::test]
async fn hosted_mode_uploads_a_folder_once_again_only_when_it_changes_and_deletes_it_with_the_skill()
 {
    let stack = crate::hosted::hosted_stack().await;
    stack.model.add_hosted_rule(hosted_answer());
    let alice = stack.client("alice").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = write_skill(dir.path(), "Fills PDF forms.");
    alice.add_skill_folder_from(&root).await.unwrap();

    completed(&alice, crate::hosted::hosted("first")).await;
    completed(&alice, crate::hosted::hosted("second")).await;
    let uploaded = stack.model.provider_skills();
    assert_eq!(uploaded.len(), 1, "uploaded once: {uploaded:?}");
    let first = &uploaded[0].versions;
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].name, "pdf-forms");
    assert!(first[0].files.contains_key("scripts/fill.py"));
    assert_eq!(
        first[0].files["SKILL.md"],
        skill_md("pdf-forms", "Fills PDF forms.").as_bytes()
    );
    let named =
        json!([{"type": "custom", "skill_id": uploaded[0].id, "version": first[0].version}]);
    for request in stack.model.hosted_requests() {
        assert_eq!(request.body["container"]["skills"], named);
    }

    // A change of content is a new version of the same skill there.
    std::fs::write(
        root.join("SKILL.md"),
        skill_md("pdf-forms", "Fills PDF forms, faster."),
    )
    .unwrap();
    alice.add_skill_folder_from(&root).await.unwrap();
    completed(&alice, crate::hosted::hosted("third")).await;
    let uploaded = stack.model.provider_skills();
    assert_eq!(uploaded.len(), 1);
    assert_eq!(uploaded[0].versions.len(), 2);
    let last = stack.model.hosted_requests().last().unwrap().body["container"]["skills"].clone();
    assert_eq!(last[0]["version"], json!(uploaded[0].versions[1].version));

    // Deleted here, deleted there (by the next hosted prompt, whoever's it is).
    alice.delete_skill("pdf-forms").await.unwrap();
    let bob = stack.client("bob").await.unwrap();
    completed(&bob, crate::hosted::hosted("anything")).await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !stack.model.provider_skills().is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the provider's copy was never deleted"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_hosted_prompt_runs_a_skill_script_in_the_container_and_another_user_has_no_such_skill() {
    let stack = crate::hosted::hosted_stack().await;
    stack.model.add_hosted_rule(HostedRule::turn(
        HostedMatch::Any,
        vec![
            HostedBlock::run("cat /skills/pdf-forms/reference/forms.md"),
            HostedBlock::run("python3 /skills/pdf-forms/scripts/fill.py"),
            HostedBlock::text("Filled."),
        ],
        "end_turn",
    ));
    let alice = stack.client("alice").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    alice
        .add_skill_folder_from(&write_skill(dir.path(), "Fills PDF forms."))
        .await
        .unwrap();
    let done = completed(&alice, crate::hosted::hosted("fill my form")).await;
    // The container computed both from the skill as uploaded: the reference file's text,
    // and what the Python script printed when it ran.
    let ran = crate::hosted::executions(&done);
    assert_eq!(
        ran,
        [
            (
                "cat /skills/pdf-forms/reference/forms.md".to_owned(),
                "Fields: name, date.\n".to_owned(),
                0
            ),
            (
                "python3 /skills/pdf-forms/scripts/fill.py".to_owned(),
                "filled\n".to_owned(),
                0
            ),
        ]
    );
    // bob never added it: his container holds no such skill, and nothing of alice's.
    let bob = stack.client("bob").await.unwrap();
    let his = completed(&bob, crate::hosted::hosted("fill my form")).await;
    let codes: Vec<i64> = crate::hosted::executions(&his)
        .into_iter()
        .map(|(_, _, code)| code)
        .collect();
    assert_eq!(codes, [1, 1], "{his:?}");
    let last = stack.model.hosted_requests().last().unwrap().body.clone();
    assert!(
        last["container"]["skills"].is_null() || last["container"]["skills"] == json!([]),
        "{last}"
    );
}

#[tokio::test]
async fn the_hosted_executor_sweeps_a_deleted_skills_provider_copy_with_no_prompt_to_notice_it() {
    let options = StackOptions {
        hosted_skill_sweep_secs: 1,
        ..crate::hosted::hosted_stack_options()
    };
    let stack = Stack::start_with(Vec::new(), options).await.unwrap();
    stack.model.add_hosted_rule(hosted_answer());
    let alice = stack.client("alice").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    alice
        .add_skill_folder_from(&write_skill(dir.path(), "Fills PDF forms."))
        .await
        .unwrap();
    completed(&alice, crate::hosted::hosted("first")).await;
    assert_eq!(stack.model.provider_skills().len(), 1);
    // The sweep finds nothing to delete while the skill is there.
    tokio::time::sleep(std::time::Duration::from_millis(1_500)).await;
    assert_eq!(stack.model.provider_skills().len(), 1);
    let requests = stack.model.hosted_requests().len();
    alice.delete_skill("pdf-forms").await.unwrap();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !stack.model.provider_skills().is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the sweep never deleted the provider's copy"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(
        stack.model.hosted_requests().len(),
        requests,
        "no prompt ran"
    );
}

#[tokio::test]
async fn an_agent_that_names_its_skills_sees_and_reads_no_other_skill_folder() {
    let stack = Stack::start(reading_rules("fill the form")).await.unwrap();
    let alice = stack.client("alice").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    alice
        .add_skill_folder_from(&write_skill(dir.path(), "Fills PDF forms."))
        .await
        .unwrap();
    let letters = dir.path().join("letters");
    std::fs::create_dir_all(&letters).unwrap();
    std::fs::write(
        letters.join("SKILL.md"),
        skill_md("letters", "Writes letters."),
    )
    .unwrap();
    alice.add_skill_folder_from(&letters).await.unwrap();
    alice
        .create_agent(agentic_proto::v1::Agent {
            name: "letter-writer".into(),
            skills: vec!["letters".into()],
            ..agentic_proto::v1::Agent::default()
        })
        .await
        .unwrap();
    let prompt = completed(
        &alice,
        NewPrompt::new("fill the form").agent("letter-writer"),
    )
    .await;
    let system = system_of(&stack.model.requests()[0].body);
    assert!(system.contains("letters: Writes letters."), "{system}");
    assert!(!system.contains("pdf-forms"), "{system}");
    let refused = prompt
        .output
        .iter()
        .find_map(|output| tool_of(output).filter(|(function, _)| *function == "skill.read"))
        .map(|(_, result)| result)
        .unwrap();
    let error = refused.unwrap_err();
    assert!(error.contains("for this agent"), "{error}");
    assert!(
        !stack.model.requests()[1].body.to_string().contains(MARKER),
        "the hidden skill's instructions never reach the model"
    );
}
