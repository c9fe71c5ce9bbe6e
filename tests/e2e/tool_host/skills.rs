//! The `Skills` service and the `skill` plugin's calls on the tool-host, on both backends:
//! concurrent saves of one user number versions without gaps or repeats and never take the
//! user past their share, a call for another user finds nothing to run, and a call of a tool
//! that runs code answers with the code for its caller to run (the tool-host, started here
//! with no code runner to call, calls nothing above it).

use agentic_proto::v1::skills_client::SkillsClient;
use agentic_proto::v1::{CreateSkillRequest, GetSkillRequest, ListSkillsRequest};

use super::*;

on_both_backends!(
    skills_are_refused_when_the_skill_plugin_is_off,
    concurrent_saves_of_one_name_get_one_version_each,
    concurrent_saves_of_new_names_stop_at_the_users_share,
    a_skill_call_for_another_user_runs_nothing,
    tools_that_run_code_answer_with_the_checked_request_for_the_caller_to_run,
    a_skill_folder_counts_in_the_quota_and_its_provider_copy_is_deleted_with_it,
);

async fn skills(host: &TestToolHost) -> anyhow::Result<SkillsClient<Channel>> {
    Ok(SkillsClient::new(host.channel().await?))
}

fn save(user: &str, name: &str, code: &str) -> CreateSkillRequest {
    CreateSkillRequest {
        user_id: user.to_owned(),
        name: name.to_owned(),
        code: code.to_owned(),
        ..CreateSkillRequest::default()
    }
}

async fn concurrent_saves_of_one_name_get_one_version_each(
    database: &TestDatabase,
) -> anyhow::Result<()> {
    let host = TestToolHost::start(database, &["skill"]).await?;
    let client = skills(&host).await?;
    let saves = (0..12).map(|n| {
        let mut client = client.clone();
        async move {
            client
                .save_skill(save("alice", "busy", &n.to_string()))
                .await
        }
    });
    let mut versions: Vec<u32> = futures::future::try_join_all(saves)
        .await?
        .into_iter()
        .map(|saved| saved.into_inner().version)
        .collect();
    versions.sort_unstable();
    assert_eq!(versions, (1..=12).collect::<Vec<u32>>());
    Ok(())
}

async fn concurrent_saves_of_new_names_stop_at_the_users_share(
    database: &TestDatabase,
) -> anyhow::Result<()> {
    let host = TestToolHost::start(database, &["skill"]).await?;
    let client = skills(&host).await?;
    let saves = (0..60).map(|n| {
        let mut client = client.clone();
        async move {
            client
                .save_skill(save("alice", &format!("s{n}"), "1"))
                .await
        }
    });
    let answers = futures::future::join_all(saves).await;
    let saved = answers.iter().filter(|answer| answer.is_ok()).count();
    let refused: Vec<&tonic::Status> = answers.iter().filter_map(|a| a.as_ref().err()).collect();
    assert_eq!(saved, 50, "{refused:?}");
    assert!(
        refused
            .iter()
            .all(|status| status.code() == Code::ResourceExhausted),
        "{refused:?}"
    );
    let listed = client
        .clone()
        .list_skills(ListSkillsRequest {
            user_id: "alice".into(),
        })
        .await?
        .into_inner();
    assert_eq!(listed.skills.len(), 50);
    // Another user's share is untouched.
    client.clone().save_skill(save("bob", "mine", "1")).await?;
    Ok(())
}

async fn a_skill_call_for_another_user_runs_nothing(database: &TestDatabase) -> anyhow::Result<()> {
    let host = TestToolHost::start(database, &["skill"]).await?;
    skills(&host)
        .await?
        .save_skill(save("alice", "secret", "'alice only'"))
        .await?;
    let mut tools = host.tools().await?;
    let answer = tools
        .invoke_once(invoke("skill.secret", "bob", json!({})))
        .await?
        .into_inner();
    let error = tool_error(&answer)?;
    assert!(error.contains("there is no skill \"secret\""), "{error}");
    let prepared = tools
        .prepare(PrepareRequest {
            user_id: "bob".into(),
            ..PrepareRequest::default()
        })
        .await?
        .into_inner();
    let ids: Vec<&str> = prepared.tools.iter().map(|tool| tool.id.as_str()).collect();
    assert_eq!(ids, ["skill.read", "skill.save"]);
    let status = skills(&host)
        .await?
        .get_skill(GetSkillRequest {
            user_id: "bob".into(),
            name: "secret".into(),
            version: 0,
        })
        .await
        .err()
        .context("bob read alice's skill")?;
    assert_eq!(status.code(), Code::NotFound);
    Ok(())
}

async fn skills_are_refused_when_the_skill_plugin_is_off(
    database: &TestDatabase,
) -> anyhow::Result<()> {
    let host = TestToolHost::start(database, &["artifact"]).await?;
    let status = skills(&host)
        .await?
        .save_skill(save("alice", "kept", "1"))
        .await
        .err()
        .context("a skill was kept that no prompt would see")?;
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    assert!(status.message().contains("skill"), "{status:?}");
    Ok(())
}

async fn tools_that_run_code_answer_with_the_checked_request_for_the_caller_to_run(
    database: &TestDatabase,
) -> anyhow::Result<()> {
    use agentic_proto::v1::RunCodeRequest;
    let host = TestToolHost::start(database, &["interpreter", "skill"]).await?;
    let mut saved = save("alice", "double", "input.n * 2");
    saved.input_schema = Some(json::to_proto(&json!({
        "type": "object",
        "properties": {"n": {"type": "number"}},
        "required": ["n"],
    })));
    skills(&host).await?.save_skill(saved).await?;
    let mut tools = host.tools().await?;
    let run_code = |response: InvokeToolResponse| match response.result {
        Some(Answer::RunCode(request)) => Ok(request),
        other => bail!("expected code to run, got {other:?}"),
    };

    let answer = tools
        .invoke_once(invoke("skill.double", "alice", json!({"n": 2})))
        .await?
        .into_inner();
    let request: RunCodeRequest = run_code(answer)?;
    assert_eq!(request.code, "input.n * 2");
    assert_eq!(request.skill, "double@1");
    assert_eq!(request.user_id, "alice");
    assert_eq!(request.prompt_id, "prompt-1");
    assert_eq!(
        json::from_proto_opt(request.input.as_ref()),
        json!({"n": 2})
    );
    // The skill's schema is checked here, before anything would run.
    let refused = tools
        .invoke_once(invoke("skill.double", "alice", json!({"n": "two"})))
        .await?
        .into_inner();
    assert!(
        tool_error(&refused)?.contains("invalid input"),
        "{refused:?}"
    );

    let answer = tools
        .invoke_once(invoke(
            "interpreter.run-code",
            "alice",
            json!({"code": "1 + 1", "input": [1], "timeout": 500}),
        ))
        .await?
        .into_inner();
    let request = run_code(answer)?;
    assert_eq!(
        (
            request.code.as_str(),
            request.timeout_ms,
            request.skill.as_str()
        ),
        ("1 + 1", 500, "")
    );
    assert_eq!(json::from_proto_opt(request.input.as_ref()), json!([1]));
    let refused = tools
        .invoke_once(invoke(
            "interpreter.run-code",
            "alice",
            json!({"timeout": 5}),
        ))
        .await?
        .into_inner();
    assert!(tool_error(&refused)?.contains("code"), "{refused:?}");
    Ok(())
}

fn zipped(entries: &[(&str, &[u8])]) -> Vec<u8> {
    use std::io::Write as _;
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (path, content) in entries {
        writer
            .start_file(*path, zip::write::SimpleFileOptions::default())
            .unwrap();
        writer.write_all(content).unwrap();
    }
    writer.finish().unwrap().into_inner()
}

async fn a_skill_folder_counts_in_the_quota_and_its_provider_copy_is_deleted_with_it(
    database: &TestDatabase,
) -> anyhow::Result<()> {
    use agentic_proto::v1::artifact_store_client::ArtifactStoreClient;
    use agentic_proto::v1::{
        AddSkillFolderRequest, ConfirmProviderSkillDeletedRequest, DeleteSkillRequest,
        GetArtifactUsageRequest, ListHostedSkillsRequest, ProviderSkill,
        RecordProviderSkillRequest,
    };
    let host = TestToolHost::start(database, &["skill"]).await?;
    let mut client = skills(&host).await?;
    let instructions = b"---\nname: notes\ndescription: Keeps notes.\n---\nWrite them down.\n";
    let added = client
        .add_skill_folder(AddSkillFolderRequest {
            user_id: "alice".into(),
            archive: zipped(&[("SKILL.md", instructions), ("a.js", b"export const a = 1;")]),
        })
        .await?
        .into_inner();
    let usage = ArtifactStoreClient::new(host.channel().await?)
        .get_artifact_usage(GetArtifactUsageRequest {
            user_id: "alice".into(),
        })
        .await?
        .into_inner();
    let size = (instructions.len() + 19) as u64;
    assert_eq!(
        (usage.skill_folders, usage.skill_folder_bytes, usage.bytes),
        (1, size, 0)
    );

    let got = client
        .get_skill(GetSkillRequest {
            user_id: "alice".into(),
            name: "notes".into(),
            version: 0,
        })
        .await?
        .into_inner();
    assert_eq!((got.source.as_str(), got.files.len()), ("folder", 2));

    // skill.read, with hostile inputs: another user's skill, a path out of the folder, an
    // offset past the end, an input the schema refuses.
    let mut tools = host.tools().await?;
    let mut refused = async |user: &str, input: serde_json::Value| -> anyhow::Result<String> {
        let answer = tools
            .invoke_once(invoke("skill.read", user, input))
            .await?
            .into_inner();
        Ok(tool_error(&answer)?.to_owned())
    };
    let error = refused("bob", json!({"skill": "notes"})).await?;
    assert!(
        error.contains("there is no skill folder \"notes\""),
        "{error}"
    );
    let error = refused(
        "alice",
        json!({"skill": "notes", "path": "../../etc/passwd"}),
    )
    .await?;
    assert!(error.contains("has no file"), "{error}");
    let error = refused("alice", json!({"skill": "notes", "offset": 1_000_000})).await?;
    assert!(error.contains("past the file's end"), "{error}");
    let error = refused(
        "alice",
        json!({"skill": "notes", "path": "x".repeat(10_000)}),
    )
    .await?;
    assert!(!error.is_empty());
    let answer = tools
        .invoke_once(invoke("skill.read", "alice", json!({"skill": "notes"})))
        .await?
        .into_inner();
    let Some(agentic_proto::v1::invoke_tool_response::Result::Output(output)) = answer.result
    else {
        anyhow::bail!("skill.read answered {answer:?}");
    };
    let output = agentic_proto::json::from_proto(&output);
    assert_eq!(output["content"], std::str::from_utf8(instructions)?);

    let hosted = |user: &str| ListHostedSkillsRequest {
        user_id: user.to_owned(),
    };
    let copy = ProviderSkill {
        skill_id: "skill_1".into(),
        version: "7".into(),
        content_hash: added.content_hash.clone(),
    };
    let record = |skill_id: &str| RecordProviderSkillRequest {
        owner_user_id: "alice".into(),
        name: "notes".into(),
        provider: Some(ProviderSkill {
            skill_id: skill_id.to_owned(),
            ..copy.clone()
        }),
    };
    assert_eq!(
        client
            .record_provider_skill(record("skill_1"))
            .await?
            .into_inner(),
        copy
    );
    // A second replica's upload of the same content loses to the first.
    assert_eq!(
        client
            .record_provider_skill(record("skill_2"))
            .await?
            .into_inner(),
        copy
    );
    let listed = client
        .list_hosted_skills(hosted("alice"))
        .await?
        .into_inner();
    assert_eq!(listed.skills[0].provider.as_ref(), Some(&copy));
    assert!(
        client
            .list_hosted_skills(hosted("bob"))
            .await?
            .into_inner()
            .skills
            .is_empty()
    );

    client
        .delete_skill(DeleteSkillRequest {
            user_id: "alice".into(),
            name: "notes".into(),
        })
        .await?;
    let listed = client.list_hosted_skills(hosted("bob")).await?.into_inner();
    assert_eq!(listed.pending_deletions, ["skill_1"]);
    client
        .confirm_provider_skill_deleted(ConfirmProviderSkillDeletedRequest {
            skill_id: "skill_1".into(),
        })
        .await?;
    let listed = client
        .list_hosted_skills(hosted("alice"))
        .await?
        .into_inner();
    assert!(listed.skills.is_empty() && listed.pending_deletions.is_empty());
    // A copy recorded for a skill that is gone is queued for deletion at once.
    let status = client
        .record_provider_skill(record("skill_3"))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    let listed = client
        .list_hosted_skills(hosted("alice"))
        .await?
        .into_inner();
    assert_eq!(listed.pending_deletions, ["skill_3"]);
    Ok(())
}
