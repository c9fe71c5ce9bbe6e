//! The `ArtifactStore` service and the `artifact` plugin's tools, on both backends.

use super::*;

on_both_backends!(
    a_stored_artifact_is_returned_to_its_owner_and_not_found_for_anyone_else,
    listing_artifacts_gives_only_the_callers_metadata_newest_first,
    artifact_requests_without_a_user_are_invalid,
    artifact_tools_store_and_read_back_data_for_the_calling_user_only,
    a_named_text_artifact_is_kept_as_the_files_text,
    nul_characters_in_artifact_metadata_are_refused_and_in_data_kept,
    a_corrupt_artifact_is_an_internal_error_naming_a_trace_not_the_decode_error,
);

async fn a_stored_artifact_is_returned_to_its_owner_and_not_found_for_anyone_else(
    database: &TestDatabase,
) -> anyhow::Result<()> {
    let host = started(database).await?;
    let mut artifacts = host.artifacts().await?;
    let stored = artifacts
        .store_artifact(store_request("alice", json!({"rows": [1, 2, 3]})))
        .await?
        .into_inner();
    assert!(!stored.id.is_empty());
    assert_eq!(stored.mime_type, "application/json");
    assert_eq!(stored.size, r#"{"rows":[1,2,3]}"#.len() as u64);

    let fetched = artifacts
        .get_artifact(GetArtifactRequest {
            user_id: "alice".into(),
            artifact_id: stored.id.clone(),
            metadata_only: false,
        })
        .await?
        .into_inner();
    assert_eq!(
        json::from_proto_opt(fetched.data.as_ref()),
        json!({"rows": [1, 2, 3]})
    );
    assert_eq!(
        (fetched.description.as_str(), fetched.user_id.as_str()),
        ("numbers", "alice")
    );
    // Its metadata alone: no data read, its size and type as stored.
    let described = artifacts
        .get_artifact(GetArtifactRequest {
            user_id: "alice".into(),
            artifact_id: stored.id.clone(),
            metadata_only: true,
        })
        .await?
        .into_inner();
    assert_eq!((described.data, described.content.len()), (None, 0));
    assert_eq!(described.size, stored.size);
    assert_eq!(described.mime_type, "application/json");

    for metadata_only in [false, true] {
        let status = artifacts
            .get_artifact(GetArtifactRequest {
                user_id: "bob".into(),
                artifact_id: stored.id.clone(),
                metadata_only,
            })
            .await
            .err()
            .context("bob read alice's artifact")?;
        assert_eq!(status.code(), Code::NotFound);
        assert_eq!(
            status.message(),
            format!("artifact not found: {}", stored.id)
        );
    }
    Ok(())
}

async fn listing_artifacts_gives_only_the_callers_metadata_newest_first(
    database: &TestDatabase,
) -> anyhow::Result<()> {
    let host = started(database).await?;
    let mut artifacts = host.artifacts().await?;
    let first = artifacts
        .store_artifact(store_request("alice", json!("first")))
        .await?
        .into_inner();
    let file = StoreArtifactRequest {
        user_id: "alice".into(),
        filename: "table.csv".into(),
        mime_type: "text/csv".into(),
        content: b"a,b\n1,2\n".to_vec(),
        ..Default::default()
    };
    let second = artifacts.store_artifact(file).await?.into_inner();
    artifacts
        .store_artifact(store_request("bob", json!("bob's")))
        .await?;

    let listed = artifacts
        .list_artifacts(ListArtifactsRequest {
            user_id: "alice".into(),
            ..Default::default()
        })
        .await?
        .into_inner()
        .artifacts;
    let ids: Vec<&str> = listed.iter().map(|artifact| artifact.id.as_str()).collect();
    assert_eq!(ids, [second.id.as_str(), first.id.as_str()]);
    assert!(
        listed
            .iter()
            .all(|artifact| artifact.data.is_none() && artifact.content.is_empty())
    );
    assert_eq!(
        (listed[0].filename.as_str(), listed[0].size),
        ("table.csv", 8)
    );
    Ok(())
}

async fn artifact_requests_without_a_user_are_invalid(
    database: &TestDatabase,
) -> anyhow::Result<()> {
    let host = started(database).await?;
    let mut artifacts = host.artifacts().await?;
    let status = artifacts
        .store_artifact(store_request("", json!(1)))
        .await
        .err()
        .context("stored without a user")?;
    assert_eq!(
        (status.code(), status.message()),
        (Code::InvalidArgument, "user_id is required")
    );
    Ok(())
}

async fn artifact_tools_store_and_read_back_data_for_the_calling_user_only(
    database: &TestDatabase,
) -> anyhow::Result<()> {
    let host = started(database).await?;
    let mut tools = host.tools().await?;
    let input =
        json!({"data": {"total": 42}, "description": "the answer", "filename": "answer.json"});
    let stored = tools
        .invoke_once(invoke("artifact.store", "alice", input))
        .await?
        .into_inner();
    let id = output(&stored)?["id"]
        .as_str()
        .context("artifact.store returned no id")?
        .to_owned();
    assert_eq!(stored.files.len(), 1, "a named artifact is a file output");
    assert_eq!(
        (
            stored.files[0].artifact_id.as_str(),
            stored.files[0].filename.as_str()
        ),
        (id.as_str(), "answer.json")
    );

    let fetched = tools
        .invoke_once(invoke("artifact.get", "alice", json!({"id": id})))
        .await?
        .into_inner();
    let fetched = output(&fetched)?;
    assert_eq!(fetched["data"], json!({"total": 42}));
    assert_eq!(fetched["description"], "the answer");

    let listed = tools
        .invoke_once(invoke("artifact.list", "alice", json!({})))
        .await?
        .into_inner();
    assert_eq!(output(&listed)?["artifacts"][0]["id"], id.as_str());

    let foreign = tools
        .invoke_once(invoke("artifact.get", "bob", json!({"id": id})))
        .await?
        .into_inner();
    assert_eq!(tool_error(&foreign)?, format!("artifact not found: {id}"));
    Ok(())
}

async fn a_named_text_artifact_is_kept_as_the_files_text(
    database: &TestDatabase,
) -> anyhow::Result<()> {
    let host = started(database).await?;
    let mut tools = host.tools().await?;
    let input = json!({"data": "a,b\n1,2\n", "filename": "table.csv", "mime_type": "text/csv"});
    let stored = tools
        .invoke_once(invoke("artifact.store", "alice", input))
        .await?
        .into_inner();
    let id = output(&stored)?["id"]
        .as_str()
        .context("artifact.store returned no id")?
        .to_owned();
    assert_eq!(
        (stored.files[0].size, stored.files[0].mime_type.as_str()),
        (8, "text/csv")
    );

    let mut artifacts = host.artifacts().await?;
    let file = artifacts
        .get_artifact(GetArtifactRequest {
            user_id: "alice".into(),
            artifact_id: id.clone(),
            metadata_only: false,
        })
        .await?
        .into_inner();
    assert_eq!(
        (file.content.as_slice(), file.data),
        (b"a,b\n1,2\n".as_slice(), None)
    );

    let fetched = tools
        .invoke_once(invoke("artifact.get", "alice", json!({"id": id})))
        .await?
        .into_inner();
    assert_eq!(output(&fetched)?["data"], "a,b\n1,2\n");
    Ok(())
}

async fn nul_characters_in_artifact_metadata_are_refused_and_in_data_kept(
    database: &TestDatabase,
) -> anyhow::Result<()> {
    let host = started(database).await?;
    let mut tools = host.tools().await?;
    for field in ["description", "filename", "mime_type"] {
        let input = json!({"data": 1, field: "a\u{0}b"});
        let refused = tools
            .invoke_once(invoke("artifact.store", "alice", input))
            .await?
            .into_inner();
        let error = tool_error(&refused)?;
        assert!(error.contains(field), "{field}: {error}");
    }
    let refused = tools
        .invoke_once(invoke("artifact.get", "alice", json!({"id": "\u{0}"})))
        .await?
        .into_inner();
    assert!(tool_error(&refused)?.contains("id"));

    let stored = tools
        .invoke_once(invoke(
            "artifact.store",
            "alice",
            json!({"data": "a\u{0}b"}),
        ))
        .await?
        .into_inner();
    let id = output(&stored)?["id"].as_str().context("no id")?.to_owned();
    let fetched = tools
        .invoke_once(invoke("artifact.get", "alice", json!({"id": id})))
        .await?
        .into_inner();
    assert_eq!(output(&fetched)?["data"], "a\u{0}b");
    Ok(())
}

async fn a_corrupt_artifact_is_an_internal_error_naming_a_trace_not_the_decode_error(
    database: &TestDatabase,
) -> anyhow::Result<()> {
    let host = started(database).await?;
    let mut artifacts = host.artifacts().await?;
    let stored = artifacts
        .store_artifact(store_request("alice", json!({"rows": [1]})))
        .await?
        .into_inner();
    // Data no JSON parser reads, as a damaged database would hold.
    let corrupt = "{\"rows\": [1, <stored at /var/lib/tool-host>";
    let sql = "UPDATE artifacts SET data = $1 WHERE id = $2";
    if database.url().starts_with("postgres") {
        let pool = sqlx::PgPool::connect(database.url()).await?;
        sqlx::query(sql)
            .bind(corrupt)
            .bind(&stored.id)
            .execute(&pool)
            .await?;
    } else {
        let pool = sqlx::SqlitePool::connect(database.url()).await?;
        sqlx::query(sql)
            .bind(corrupt)
            .bind(&stored.id)
            .execute(&pool)
            .await?;
    }

    let status = artifacts
        .get_artifact(GetArtifactRequest {
            user_id: "alice".into(),
            artifact_id: stored.id.clone(),
            metadata_only: false,
        })
        .await
        .err()
        .context("a corrupt artifact was read")?;
    assert_eq!(status.code(), Code::Internal);
    let (told, reference) = status
        .message()
        .split_once("; trace ")
        .context(format!("no trace reference: {:?}", status.message()))?;
    assert_eq!(told, "internal error");
    assert_eq!(reference.len(), 32, "{reference}");

    let mut tools = host.tools().await?;
    let answer = tools
        .invoke_once(invoke("artifact.get", "alice", json!({"id": stored.id})))
        .await?
        .into_inner();
    let error = tool_error(&answer)?;
    assert!(
        error.starts_with("the artifact store failed; try again later; trace "),
        "{error}"
    );
    for detail in ["/var/lib", "line 1", "column", "corrupt", "rows"] {
        assert!(!error.contains(detail), "{detail:?} leaked: {error}");
    }
    Ok(())
}
