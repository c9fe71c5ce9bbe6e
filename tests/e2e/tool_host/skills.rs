//! The `Skills` service and the `skill` plugin's calls on the tool-host, on both backends:
//! concurrent saves of one user number versions without gaps or repeats and never take the
//! user past their share, and a call for another user finds nothing to run.

use agentic_proto::v1::skills_client::SkillsClient;
use agentic_proto::v1::{CreateSkillRequest, GetSkillRequest, ListSkillsRequest};

use super::*;

on_both_backends!(
    skills_are_refused_when_the_skill_plugin_is_off,
    concurrent_saves_of_one_name_get_one_version_each,
    concurrent_saves_of_new_names_stop_at_the_users_share,
    a_skill_call_for_another_user_runs_nothing,
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
    assert_eq!(ids, ["skill.save"]);
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
