use serde_json::json;

use super::*;

/// A fresh database file per test, removed when the guard drops.
struct TempDatabase {
    path: std::path::PathBuf,
}

impl TempDatabase {
    fn new() -> Self {
        let path = std::env::temp_dir().join(format!("tool-host-test-{}.db", uuid::Uuid::now_v7()));
        TempDatabase { path }
    }

    fn url(&self) -> String {
        format!("sqlite://{}?mode=rwc", self.path.display())
    }
}

impl Drop for TempDatabase {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm"] {
            let mut path = self.path.clone().into_os_string();
            path.push(suffix);
            let _ = std::fs::remove_file(path);
        }
    }
}

fn json_artifact(user_id: &str, data: Value) -> NewArtifact {
    NewArtifact {
        user_id: UserId::known(user_id),
        conversation_id: None,
        description: String::new(),
        kind: String::new(),
        filename: String::new(),
        mime_type: String::new(),
        body: ArtifactBody::Json(data),
    }
}

#[tokio::test]
async fn a_stored_artifact_comes_back_only_for_its_owner() -> anyhow::Result<()> {
    let database = TempDatabase::new();
    let store = Store::open(&database.url(), StorageLimits::default()).await?;
    let meta = store
        .insert(json_artifact("alice", json!({"rows": [1, 2]})))
        .await?;
    assert_eq!(meta.mime_type, "application/json");
    assert_eq!(meta.size, r#"{"rows":[1,2]}"#.len() as u64);

    let artifact = store.get(&UserId::known("alice"), &meta.id).await?;
    assert_eq!(artifact.body, ArtifactBody::Json(json!({"rows": [1, 2]})));
    assert_eq!(artifact.meta, meta);
    assert!(
        matches!(store.get(&UserId::known("bob"), &meta.id).await, Err(Error::ArtifactNotFound(id)) if id == meta.id)
    );
    Ok(())
}

#[tokio::test]
async fn bytes_keep_their_size_and_mime_type() -> anyhow::Result<()> {
    let database = TempDatabase::new();
    let store = Store::open(&database.url(), StorageLimits::default()).await?;
    let new = NewArtifact {
        mime_type: "text/csv".into(),
        body: ArtifactBody::Bytes(b"a,b\n1,2\n".to_vec()),
        ..json_artifact("alice", Value::Null)
    };
    let meta = store.insert(new).await?;
    assert_eq!((meta.size, meta.mime_type.as_str()), (8, "text/csv"));
    assert_eq!(
        store.get(&UserId::known("alice"), &meta.id).await?.body,
        ArtifactBody::Bytes(b"a,b\n1,2\n".to_vec())
    );
    Ok(())
}

#[tokio::test]
async fn listing_is_newest_first_per_user_and_per_conversation() -> anyhow::Result<()> {
    let database = TempDatabase::new();
    let store = Store::open(&database.url(), StorageLimits::default()).await?;
    let first = store.insert(json_artifact("alice", json!(1))).await?;
    let second = store
        .insert(NewArtifact {
            conversation_id: Some(ConversationId::known("c1")),
            ..json_artifact("alice", json!(2))
        })
        .await?;
    store.insert(json_artifact("bob", json!(3))).await?;

    let ids = |list: Vec<ArtifactMeta>| list.into_iter().map(|meta| meta.id).collect::<Vec<_>>();
    let (first, second) = (first.id.as_str(), second.id.as_str());
    assert_eq!(
        ids(store.list(&UserId::known("alice"), None, 10).await?),
        [second, first]
    );
    assert_eq!(
        ids(store.list(&UserId::known("alice"), None, 1).await?),
        [second]
    );
    assert_eq!(
        ids(store
            .list(
                &UserId::known("alice"),
                Some(&ConversationId::known("c1")),
                10
            )
            .await?),
        [second]
    );
    assert_eq!(store.count(&UserId::known("alice")).await?, 2);
    Ok(())
}

fn limits(max_artifact_bytes: u64, user_quota_bytes: u64) -> StorageLimits {
    StorageLimits {
        max_artifact_bytes,
        user_quota_bytes,
    }
}

fn bytes(user_id: &str, length: usize) -> NewArtifact {
    NewArtifact {
        body: ArtifactBody::Bytes(vec![b'x'; length]),
        ..json_artifact(user_id, Value::Null)
    }
}

#[tokio::test]
async fn an_artifact_over_the_size_limit_is_refused_and_nothing_is_stored() -> anyhow::Result<()> {
    let database = TempDatabase::new();
    let store = Store::open(&database.url(), limits(100, 10_000)).await?;
    let refused = store.insert(bytes("alice", 101)).await;
    assert!(
        matches!(
            refused,
            Err(Error::ArtifactTooLarge {
                size: 101,
                limit: 100
            })
        ),
        "{refused:?}"
    );
    assert_eq!(store.count(&UserId::known("alice")).await?, 0);
    store.insert(bytes("alice", 100)).await?;
    assert_eq!(store.count(&UserId::known("alice")).await?, 1);
    Ok(())
}

#[tokio::test]
async fn a_user_past_their_quota_is_refused_and_other_users_still_store() -> anyhow::Result<()> {
    let database = TempDatabase::new();
    let store = Store::open(&database.url(), limits(1_000, 250)).await?;
    store.insert(bytes("alice", 200)).await?;
    let refused = store.insert(bytes("alice", 51)).await;
    assert!(
        matches!(
            refused,
            Err(Error::QuotaExceeded {
                size: 51,
                used: 200,
                quota: 250
            })
        ),
        "{refused:?}"
    );
    // A first artifact larger than the whole quota is refused too.
    let refused = store.insert(bytes("carol", 251)).await;
    assert!(
        matches!(refused, Err(Error::QuotaExceeded { used: 0, .. })),
        "{refused:?}"
    );
    // What is left of the quota can still be used, and others have their own.
    store.insert(bytes("alice", 50)).await?;
    store.insert(bytes("bob", 250)).await?;
    assert_eq!(
        (
            store.count(&UserId::known("alice")).await?,
            store.count(&UserId::known("bob")).await?
        ),
        (2, 1)
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_never_take_a_user_past_their_quota() -> anyhow::Result<()> {
    let database = TempDatabase::new();
    let store = Store::open(&database.url(), limits(1_000, 1_000)).await?;
    let writers: Vec<_> = (0..24)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move { store.insert(bytes("alice", 100)).await })
        })
        .collect();
    let mut stored = 0;
    for writer in writers {
        match writer.await? {
            Ok(_) => stored += 1,
            Err(Error::QuotaExceeded { .. }) => {}
            Err(other) => return Err(other.into()),
        }
    }
    assert_eq!(stored, 10, "exactly the quota's worth was stored");
    assert_eq!(store.count(&UserId::known("alice")).await?, 10);
    Ok(())
}

#[tokio::test]
async fn artifacts_stored_before_the_quota_existed_count_against_it() -> anyhow::Result<()> {
    let database = TempDatabase::new();
    let store = Store::open(&database.url(), StorageLimits::default()).await?;
    store.insert(bytes("alice", 300)).await?;
    // Take the database back to before the quota's migration, which reopening applies.
    for statement in [
        "DROP TABLE artifact_usage",
        "DELETE FROM _sqlx_migrations WHERE version = 2",
    ] {
        store.db.write(statement, &[]).await?;
    }
    store.close().await;

    let reopened = Store::open(&database.url(), limits(1_000, 400)).await?;
    let refused = reopened.insert(bytes("alice", 101)).await;
    assert!(
        matches!(refused, Err(Error::QuotaExceeded { used: 300, .. })),
        "{refused:?}"
    );
    Ok(())
}

#[tokio::test]
async fn reopening_a_database_keeps_its_artifacts() -> anyhow::Result<()> {
    let database = TempDatabase::new();
    let store = Store::open(&database.url(), StorageLimits::default()).await?;
    let meta = store.insert(json_artifact("alice", json!("kept"))).await?;
    store.close().await;

    let reopened = Store::open(&database.url(), StorageLimits::default()).await?;
    assert_eq!(
        reopened.get(&UserId::known("alice"), &meta.id).await?.body,
        ArtifactBody::Json(json!("kept"))
    );
    Ok(())
}
