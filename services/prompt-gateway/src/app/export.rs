//! A user's export (`ExportData`, `GET /v1/export`): everything they keep, one item at a
//! time, oldest first in each kind: conversations, prompts each followed by its events and
//! its recording, imported recordings, triggers, then the tool-host's part (artifacts with
//! their bytes in chunks, skills), and an `end` item counting what came before.
//!
//! It is streamed and bounded: a task reads a page at a time and fills a channel of `AHEAD`
//! items, so an export holds a page of ids, one prompt and a few items in memory however much
//! the user keeps, and goes as fast as its client reads. One export per user runs at a time
//! on each gateway replica.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

use agentic_ids::{ConversationId, PromptId, UserId};
use agentic_proto::v1::export_item::Item;
use agentic_proto::v1::user_data_client::UserDataClient;
use agentic_proto::v1::user_data_item::Item as ToolHostItem;
use agentic_proto::v1::{ExportEnd, ExportItem, ExportUserDataRequest, Recording};
use agentic_rpc::{InternalChannel, to_status};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;

use crate::app::prompts::{Prompts, without_records};
use crate::error::GatewayError;
use crate::store::{Owned, OwnedCursor};

/// Ids read at once.
const PAGE: u32 = 100;
/// Events read at once.
const EVENT_PAGE: u32 = 200;
/// Items made ahead of the client.
const AHEAD: usize = 4;

pub type ExportStream = ReceiverStream<Result<ExportItem, Status>>;

/// The users for whom one kind of work (an export, a deletion of everything) runs on this
/// replica: one each at a time.
#[derive(Clone)]
pub struct OneAtATime {
    running: Arc<Mutex<HashSet<String>>>,
    /// What runs, for the refusal: "an export of yours".
    what: &'static str,
}

pub type Exports = OneAtATime;

/// The work of one user; dropping it lets them start another.
pub struct Running {
    registry: OneAtATime,
    user: String,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(mut running) = self.registry.running.lock() {
            running.remove(&self.user);
        }
    }
}

impl OneAtATime {
    pub fn new(what: &'static str) -> OneAtATime {
        OneAtATime {
            running: Arc::default(),
            what,
        }
    }

    /// RESOURCE_EXHAUSTED while the same work of `user_id` runs.
    pub fn start(&self, user_id: &UserId) -> Result<Running, GatewayError> {
        let mut running = self
            .running
            .lock()
            .map_err(|_| GatewayError::Internal("a registry of running work is poisoned".into()))?;
        if !running.insert(user_id.to_string()) {
            return Err(GatewayError::ResourceExhausted(format!(
                "{} is running, and one user runs one at a time: wait for it to end (or cancel it) first",
                self.what
            )));
        }
        Ok(Running {
            registry: self.clone(),
            user: user_id.to_string(),
        })
    }
}

impl Prompts {
    /// Starts `user_id`'s export (RESOURCE_EXHAUSTED while another of theirs runs).
    pub fn export(
        &self,
        exports: &Exports,
        user_id: UserId,
        tool_host: InternalChannel,
    ) -> Result<ExportStream, GatewayError> {
        let running = exports.start(&user_id)?;
        let (items, receiver) = mpsc::channel(AHEAD);
        let prompts = self.clone();
        tokio::spawn(async move {
            let mut out = Out {
                items,
                counts: BTreeMap::new(),
            };
            match write_all(&prompts, &user_id, &tool_host, &mut out).await {
                Ok(()) | Err(Stop::Gone) => {}
                Err(Stop::Failed(error)) => {
                    tracing::warn!(%error, "an export failed");
                    let _ = out.items.send(Err(to_status(error))).await;
                }
            }
            drop(running);
        });
        Ok(ReceiverStream::new(receiver))
    }
}

/// Why an export stopped early.
enum Stop {
    /// Its client hung up.
    Gone,
    Failed(GatewayError),
}

impl From<GatewayError> for Stop {
    fn from(error: GatewayError) -> Stop {
        Stop::Failed(error)
    }
}

/// Where items go, counted by kind.
struct Out {
    items: mpsc::Sender<Result<ExportItem, Status>>,
    counts: BTreeMap<String, u64>,
}

impl Out {
    async fn send(&mut self, kind: &str, item: Item) -> Result<(), Stop> {
        *self.counts.entry(kind.to_owned()).or_default() += 1;
        let item = ExportItem { item: Some(item) };
        self.items.send(Ok(item)).await.map_err(|_| Stop::Gone)
    }
}

async fn write_all(
    prompts: &Prompts,
    user_id: &UserId,
    tool_host: &InternalChannel,
    out: &mut Out,
) -> Result<(), Stop> {
    let store = &prompts.store;
    let mut pages = Pages::new(Owned::Conversations);
    while let Some(ids) = pages.next(prompts, user_id).await? {
        for id in ids {
            let id = ConversationId::known(id);
            // Deleted since its id was read: not part of the export.
            if let Some(conversation) = store.conversation(user_id, &id).await? {
                out.send("conversation", Item::Conversation(conversation))
                    .await?;
            }
        }
    }
    let mut pages = Pages::new(Owned::Prompts);
    while let Some(ids) = pages.next(prompts, user_id).await? {
        for id in ids {
            write_prompt(prompts, user_id, &PromptId::known(id), out).await?;
        }
    }
    let mut pages = Pages::new(Owned::ImportedRecordings);
    while let Some(ids) = pages.next(prompts, user_id).await? {
        for id in ids {
            if let Some(recording) = store.imported_recording(user_id, &id).await? {
                out.send("recording", Item::Recording(recording)).await?;
            }
        }
    }
    let most = u32::try_from(crate::app::triggers::MAX_TRIGGERS_PER_USER).unwrap_or(u32::MAX);
    for trigger in store.list_triggers(user_id, most).await? {
        out.send("trigger", Item::Trigger(trigger)).await?;
    }
    // One agent's versions at a time (at most 100 of 128 KiB), not every agent's at once.
    for latest in store.latest_agents(user_id).await? {
        for agent in store.agent_versions(user_id, Some(&latest.name)).await? {
            out.send("agent", Item::Agent(agent)).await?;
        }
    }
    write_tool_host(user_id, tool_host, out).await?;
    let end = ExportEnd {
        counts: out.counts.clone().into_iter().collect(),
    };
    out.send("end", Item::End(end)).await
}

/// The ids of a user's rows of one kind, a page at a time.
struct Pages {
    owned: Owned,
    after: Option<OwnedCursor>,
    done: bool,
}

impl Pages {
    fn new(owned: Owned) -> Pages {
        Pages {
            owned,
            after: None,
            done: false,
        }
    }

    /// The next page, or `None` after the last.
    async fn next(
        &mut self,
        prompts: &Prompts,
        user_id: &UserId,
    ) -> Result<Option<Vec<String>>, GatewayError> {
        if self.done {
            return Ok(None);
        }
        let (ids, next) = prompts
            .store
            .owned_after(self.owned, user_id, self.after.as_ref(), PAGE)
            .await?;
        self.done = next.is_none();
        self.after = next;
        Ok(Some(ids))
    }
}

/// The prompt, then its events in order, then its recording if it has one.
async fn write_prompt(
    prompts: &Prompts,
    user_id: &UserId,
    prompt_id: &PromptId,
    out: &mut Out,
) -> Result<(), Stop> {
    // Deleted since its id was read: not part of the export.
    let Some(prompt) = prompts.store.prompt(user_id, prompt_id).await? else {
        return Ok(());
    };
    let recorded = without_records(prompt.clone());
    out.send("prompt", Item::Prompt(prompt)).await?;
    let mut after = 0;
    loop {
        let Some(page) = prompts
            .store
            .event_page(prompt_id, user_id, after, EVENT_PAGE)
            .await?
        else {
            return Ok(());
        };
        let Some(last) = page.events.last() else {
            break;
        };
        after = last.sequence;
        for event in page.events {
            out.send("event", Item::Event(event)).await?;
        }
    }
    if let Some((exchanges, complete)) = prompts.store.exchanges(prompt_id).await? {
        let recording = Recording {
            prompt: Some(recorded),
            exchanges,
            complete,
        };
        out.send("recording", Item::Recording(recording)).await?;
    }
    Ok(())
}

/// The tool-host's part: artifacts with their bytes, and skills.
async fn write_tool_host(
    user_id: &UserId,
    tool_host: &InternalChannel,
    out: &mut Out,
) -> Result<(), Stop> {
    let unavailable = |status: Status| {
        Stop::Failed(GatewayError::FilesUnavailable(agentic_rpc::relayed(
            &status,
        )))
    };
    let request = ExportUserDataRequest {
        user_id: user_id.to_string(),
    };
    let mut items = UserDataClient::new(tool_host.clone())
        .max_decoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES)
        .export_user_data(request)
        .await
        .map_err(unavailable)?
        .into_inner();
    while let Some(item) = items.message().await.map_err(unavailable)? {
        match item.item {
            Some(ToolHostItem::Artifact(artifact)) => {
                out.send("artifact", Item::Artifact(artifact)).await?;
            }
            Some(ToolHostItem::Chunk(chunk)) => out.send("chunk", Item::Chunk(chunk)).await?,
            Some(ToolHostItem::Skill(skill)) => out.send("skill", Item::Skill(skill)).await?,
            Some(ToolHostItem::Memory(item)) => out.send("memory", Item::Memory(item)).await?,
            None => {}
        }
    }
    Ok(())
}
