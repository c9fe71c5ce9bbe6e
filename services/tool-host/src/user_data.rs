//! Everything one user keeps here, for the gateway's `ExportData` and `DeleteAllData`
//! (`UserData`): their artifacts with their bytes, every version of their saved skills, and
//! their skill folders with every file.
//!
//! An export reads as fast as its client: a task fills a channel of `AHEAD` items, so it
//! holds at most that many chunks, one artifact page and one artifact's bytes in memory.

use agentic_ids::UserId;
use agentic_proto::v1 as pb;
use agentic_rpc::to_status;
use pb::user_data_item::Item;
use pb::user_data_server::{UserData, UserDataServer};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::error::Error;
use crate::folders::{Folders, Owner};
use crate::grpc::{artifact_proto, folder_proto, skill_proto, user_id};
use crate::store::Store;

/// Bytes of one artifact chunk.
pub const CHUNK_BYTES: usize = 256 * 1024;
/// Artifacts read at once (their metadata).
const PAGE: u32 = 50;
/// Items made ahead of the client.
const AHEAD: usize = 4;

pub fn user_data_server(store: Store, folders: Folders) -> UserDataServer<UserDataService> {
    UserDataServer::new(UserDataService { store, folders })
}

pub struct UserDataService {
    store: Store,
    folders: Folders,
}

type Items = mpsc::Sender<Result<pb::UserDataItem, Status>>;

#[tonic::async_trait]
impl UserData for UserDataService {
    type ExportUserDataStream = ReceiverStream<Result<pb::UserDataItem, Status>>;

    async fn export_user_data(
        &self,
        request: Request<pb::ExportUserDataRequest>,
    ) -> Result<Response<Self::ExportUserDataStream>, Status> {
        let user_id = user_id(request.into_inner().user_id).map_err(to_status)?;
        let (items, receiver) = mpsc::channel(AHEAD);
        let store = self.store.clone();
        let folders = self.folders.clone();
        tokio::spawn(async move {
            if let Err(error) = export(&store, &folders, &user_id, &items).await {
                // The client reads the error in place of the rest.
                let _ = items.send(Err(to_status(error))).await;
            }
        });
        Ok(Response::new(ReceiverStream::new(receiver)))
    }

    async fn delete_user_data(
        &self,
        request: Request<pb::DeleteUserDataRequest>,
    ) -> Result<Response<pb::DeleteUserDataResponse>, Status> {
        let user_id = user_id(request.into_inner().user_id).map_err(to_status)?;
        // Folders first: their bytes leave the usage row the artifacts' deletion then drops.
        let folders = self
            .folders
            .delete_user(&user_id)
            .await
            .map_err(to_status)?;
        let memory_items = self
            .store
            .memory()
            .delete_user(&user_id)
            .await
            .map_err(to_status)?;
        let artifacts = self.store.delete_user(&user_id).await.map_err(to_status)?;
        let skills = self
            .store
            .skills()
            .delete_user(&user_id)
            .await
            .map_err(to_status)?;
        tracing::info!(
            artifacts,
            skills,
            folders,
            memory_items,
            "deleted all of a user's data"
        );
        Ok(Response::new(pb::DeleteUserDataResponse {
            artifacts: u32::try_from(artifacts).unwrap_or(u32::MAX),
            skills: u32::try_from(skills + folders).unwrap_or(u32::MAX),
            memory_items: u32::try_from(memory_items).unwrap_or(u32::MAX),
        }))
    }

    async fn list_memory(
        &self,
        request: Request<pb::ListMemoryRequest>,
    ) -> Result<Response<pb::ListMemoryResponse>, Status> {
        let request = request.into_inner();
        let user_id = user_id(request.user_id).map_err(to_status)?;
        let namespace = namespace_path(&request.namespace, true)?;
        let limit = i64::from(if request.limit == 0 {
            20
        } else {
            request.limit
        });
        let memory = self.store.memory();
        let items = if request.query.trim().is_empty() {
            memory.list(&user_id, namespace.as_deref(), limit).await
        } else {
            memory
                .search(
                    &user_id,
                    (namespace.as_deref(), request.any_word),
                    &request.query,
                    limit,
                )
                .await
        }
        .map_err(to_status)?;
        Ok(Response::new(pb::ListMemoryResponse {
            items: items.into_iter().map(memory_proto).collect(),
        }))
    }

    async fn put_memory(
        &self,
        request: Request<pb::PutMemoryRequest>,
    ) -> Result<Response<pb::MemoryItem>, Status> {
        let request = request.into_inner();
        let user_id = user_id(request.user_id).map_err(to_status)?;
        let namespace = namespace_path(&request.namespace, false)?.unwrap_or_default();
        let value = agentic_proto::json::from_proto_opt(request.value.as_ref());
        let ttl = (request.ttl_seconds > 0).then_some(request.ttl_seconds);
        let item = self
            .store
            .memory()
            .put(&user_id, &namespace, &request.key, &value, ttl)
            .await
            .map_err(to_status)?;
        Ok(Response::new(memory_proto(item)))
    }

    async fn delete_memory(
        &self,
        request: Request<pb::DeleteMemoryRequest>,
    ) -> Result<Response<pb::DeleteMemoryResponse>, Status> {
        let request = request.into_inner();
        let user_id = user_id(request.user_id).map_err(to_status)?;
        let namespace = namespace_path(&request.namespace, false)?.unwrap_or_default();
        let deleted = self
            .store
            .memory()
            .delete(&user_id, &namespace, &request.key)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::DeleteMemoryResponse { deleted }))
    }
}

/// Sends every item of `user_id`; stops early (Ok) when the client has gone.
async fn export(
    store: &Store,
    folders: &Folders,
    user_id: &UserId,
    items: &Items,
) -> Result<(), Error> {
    let mut after = None;
    loop {
        let page = store.list_after(user_id, after.as_ref(), PAGE).await?;
        let Some(last) = page.last() else { break };
        after = Some((last.created_at_millis, last.id.clone()));
        for meta in page {
            // Deleted since the page was read: not part of the export.
            let Some(bytes) = store.stored_bytes(user_id, &meta.id).await? else {
                continue;
            };
            let artifact_id = meta.id.clone();
            if !send(items, Item::Artifact(artifact_proto(meta, None))).await {
                return Ok(());
            }
            for (offset, data) in (0..).step_by(CHUNK_BYTES).zip(bytes.chunks(CHUNK_BYTES)) {
                let chunk = pb::ArtifactChunk {
                    artifact_id: artifact_id.clone(),
                    offset,
                    data: data.to_vec(),
                };
                if !send(items, Item::Chunk(chunk)).await {
                    return Ok(());
                }
            }
        }
    }
    for skill in store.skills().all_versions(user_id).await? {
        if !send(items, Item::Skill(skill_proto(skill))).await {
            return Ok(());
        }
    }
    // The user's own folder skills (not the operator's), each with every file's bytes.
    for listed in folders.list(user_id).await? {
        if listed.owner == Owner::Operator {
            continue;
        }
        let Ok((skill, files)) = folders.files(user_id, &listed.name).await else {
            continue; // Deleted since it was listed.
        };
        if !send(items, Item::Skill(folder_proto(skill, files))).await {
            return Ok(());
        }
    }
    // A page at a time: up to 1,000 items of 64 KiB are never read at once.
    let memory = store.memory();
    let mut after: Option<(String, String)> = None;
    loop {
        let position = after
            .as_ref()
            .map(|(namespace, key)| (namespace.as_str(), key.as_str()));
        let page = memory.page_of(user_id, position, 50).await?;
        let Some(last) = page.last() else { break };
        after = Some((last.namespace.join("/"), last.key.clone()));
        for item in page {
            if !send(items, Item::Memory(memory_proto(item))).await {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// A namespace given as a path (`a/b`), checked; empty is `None` where `empty_is_all`.
fn namespace_path(path: &str, empty_is_all: bool) -> Result<Option<String>, Status> {
    if path.is_empty() && empty_is_all {
        return Ok(None);
    }
    let parts: Vec<String> = path.split('/').map(str::to_owned).collect();
    crate::memory::namespace_text(&parts)
        .map(Some)
        .map_err(|reason| {
            to_status(Error::InvalidField {
                field: "namespace",
                reason,
            })
        })
}

fn memory_proto(item: crate::memory::Item) -> pb::MemoryItem {
    use agentic_proto::json::timestamp_from_millis;
    pb::MemoryItem {
        namespace: item.namespace,
        key: item.key,
        value: Some(agentic_proto::json::to_proto(&item.value)),
        created_at: Some(timestamp_from_millis(item.created_at)),
        updated_at: Some(timestamp_from_millis(item.updated_at)),
        expires_at: item.expires_at.map(timestamp_from_millis),
    }
}

/// False when the client has gone.
async fn send(items: &Items, item: Item) -> bool {
    let item = pb::UserDataItem { item: Some(item) };
    items.send(Ok(item)).await.is_ok()
}
