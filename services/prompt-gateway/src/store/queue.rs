//! Conversations' queues (`on_busy`): whether a new prompt of a conversation runs now or
//! waits, and which queued prompt runs next. Both are decided in a transaction that first
//! locks the conversation's row (PostgreSQL's row lock; SQLite's single writer), so across
//! replicas a conversation never starts two prompts where its policy allows one.

use super::*;
use agentic_proto::v1::{BusyPolicy, PromptStarted};

pub(super) const QUEUED: i32 = PromptState::Queued as i32;

/// Prompts one conversation may have queued at once; more are refused.
const MAX_QUEUED_PER_CONVERSATION: i64 = 32;

/// Locks the conversation's row for the rest of the transaction; false when it is gone.
const LOCK_CONVERSATION: &str = "UPDATE conversations SET on_busy = on_busy WHERE id = $1";

/// The prompt that keeps a conversation busy: a running (or waiting) one before a queued one.
const BUSY_PROMPT: &str = "SELECT id, state FROM prompts WHERE conversation_id = $1 \
     AND (state = $2 OR state = $3 OR state = $4) \
     ORDER BY CASE WHEN state = $4 THEN 1 ELSE 0 END, created_at, id LIMIT 1";

/// What [`Store::admit_to_conversation`] decided.
#[derive(Debug)]
pub enum Admitted {
    /// Stored RUNNING and leased to this replica, with its `created` event: start its run.
    Run(PromptEvent),
    /// Stored QUEUED, with its `created` event. An interrupt names the running (or waiting)
    /// prompts to cancel so that it can start.
    Queued {
        created: PromptEvent,
        interrupt: Vec<PromptId>,
    },
}

/// A queued prompt [`Store::claim_next`] took out of its queue: now RUNNING and leased to
/// this replica.
#[derive(Debug)]
pub struct Claimed {
    pub prompt: Prompt,
    /// Its `started` event.
    pub started: PromptEvent,
    /// The run time it asked for (`None`: the operator's maximum).
    pub timeout: Option<Duration>,
}

impl Store {
    /// Stores `prompt` (of a conversation) as `policy` decides, given what else of its
    /// conversation runs: RUNNING when nothing does, else QUEUED (ENQUEUE, INTERRUPT) or
    /// refused (REJECT, with the prompt that keeps it busy). `timeout_ms` (0: the operator's
    /// maximum) is kept for when a queued prompt starts.
    pub async fn admit_to_conversation(
        &self,
        prompt: &Prompt,
        policy: BusyPolicy,
        timeout_ms: i64,
    ) -> Result<Admitted, GatewayError> {
        let conversation = ConversationId::known(&prompt.conversation_id);
        let mut writer = self.writer().await?;
        let mut tx = writer.begin().await?;
        let mut conn = tx.conn();
        if conn
            .execute(LOCK_CONVERSATION, &[(&conversation).into()])
            .await?
            == 0
        {
            return Err(GatewayError::ConversationNotFound(conversation.to_string()));
        }
        let busy: Option<(String, i32)> = conn
            .optional(
                BUSY_PROMPT,
                &[
                    (&conversation).into(),
                    RUNNING.into(),
                    WAITING.into(),
                    QUEUED.into(),
                ],
            )
            .await?;
        let admitted = match (busy, policy) {
            (None, _) | (Some(_), BusyPolicy::Concurrent) => {
                Admitted::Run(self.insert_in(&mut conn, prompt, None, timeout_ms).await?)
            }
            (Some((busy, state)), BusyPolicy::Reject) => {
                let state = match PromptState::try_from(state) {
                    Ok(PromptState::Queued) => "queued",
                    Ok(PromptState::WaitingForApproval) => "waiting for approval",
                    _ => "running",
                };
                return Err(GatewayError::FailedPrecondition(format!(
                    "conversation {conversation} is busy: prompt {busy} is {state} \
                     (on_busy REJECT refuses a prompt while another one has not ended)"
                )));
            }
            (Some(_), policy) => {
                let queued: i64 = conn
                    .scalar(
                        "SELECT count(*) FROM prompts WHERE conversation_id = $1 AND state = $2",
                        &[(&conversation).into(), QUEUED.into()],
                    )
                    .await?
                    .unwrap_or_default();
                if queued >= MAX_QUEUED_PER_CONVERSATION {
                    return Err(GatewayError::ResourceExhausted(format!(
                        "conversation {conversation} has {queued} prompts queued, the most it \
                         may have; cancel one or wait for them to run"
                    )));
                }
                let interrupt = policy == BusyPolicy::Interrupt;
                let created = self
                    .insert_in(&mut conn, prompt, Some(i32::from(!interrupt)), timeout_ms)
                    .await?;
                let interrupt = if interrupt {
                    let running: Vec<String> = conn
                        .scalars(
                            "SELECT id FROM prompts WHERE conversation_id = $1 \
                             AND (state = $2 OR state = $3)",
                            &[(&conversation).into(), RUNNING.into(), WAITING.into()],
                        )
                        .await?;
                    prompt_ids(running)?
                } else {
                    Vec::new()
                };
                Admitted::Queued { created, interrupt }
            }
        };
        tx.commit().await?;
        Ok(admitted)
    }

    /// Inserts `prompt` with its `created` event in the transaction `conn`: QUEUED at
    /// `queue_rank` (0 goes first), or RUNNING (started now, leased to this replica).
    pub(super) async fn insert_in(
        &self,
        conn: &mut Conn<'_>,
        prompt: &Prompt,
        queue_rank: Option<i32>,
        timeout_ms: i64,
    ) -> Result<PromptEvent, GatewayError> {
        let mut prompt = prompt.clone();
        let (created, state_data) = stored_fields(&prompt)?;
        let (state, started_at, lease_until, guard) = match queue_rank {
            Some(_) => (QUEUED, 0, 0, Guard::Queued),
            None => (RUNNING, created, self.lease_until(), Guard::Open),
        };
        prompt.state = state;
        let budget = encoded_budget(&prompt);
        let attachments = encoded_attachments(&prompt);
        let schema = stored_schema(&prompt);
        let agent = encoded_agent(&prompt);
        let insert = "INSERT INTO prompts (id, user_id, conversation_id, mode, model, visible, state, input, \
             max_rounds, state_data, created_at, updated_at, owner, lease_until, started_at, \
             queue_rank, timeout_ms, budget, approval_timeout_ms, attachments, output_schema, agent, agent_name) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23)";
        let args = [
            (&prompt.id).into(),
            (&prompt.user_id).into(),
            (&prompt.conversation_id).into(),
            (&prompt.mode).into(),
            prompt.model.into(),
            prompt.visible.into(),
            state.into(),
            (&prompt.input).into(),
            i64::from(prompt.max_rounds).into(),
            (&state_data).into(),
            created.into(),
            created.into(),
            (&self.owner.replica).into(),
            lease_until.into(),
            started_at.into(),
            queue_rank.unwrap_or(1).into(),
            timeout_ms.into(),
            (&budget).into(),
            i64::from(prompt.approval_timeout_ms).into(),
            (&attachments).into(),
            (&schema).into(),
            (&agent).into(),
            agent_name(&prompt).into(),
        ];
        conn.execute(insert, &args).await?;
        // Each attachment is a file of the conversation, before the timeline's files.
        let count = prompt.attachments.len() as i64;
        for (index, file) in prompt.attachments.iter().enumerate() {
            conn.execute(
                "INSERT INTO prompt_files (file_id, prompt_id, user_id, conversation_id, position, payload) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
                &[
                    (&file.id).into(),
                    (&prompt.id).into(),
                    (&prompt.user_id).into(),
                    (&prompt.conversation_id).into(),
                    (index as i64 - count).into(),
                    (&file.encode_to_vec()).into(),
                ],
            )
            .await?;
        }
        let kind = prompt_event::Kind::Created(agentic_proto::v1::PromptCreated {
            prompt: Some(prompt.clone()),
        });
        append(self, conn, &prompt.prompt_id(), guard, Change::None, |_| {
            kind
        })
        .await
    }

    /// Starts the next queued prompt of the conversation, unless one of its prompts runs or
    /// waits for approval: the first by queue rank, then by creation. `None` when there is
    /// nothing to start.
    pub async fn claim_next(
        &self,
        conversation: &ConversationId,
    ) -> Result<Option<Claimed>, GatewayError> {
        let mut writer = self.writer().await?;
        let mut tx = writer.begin().await?;
        let mut conn = tx.conn();
        let Some((prompt_id, timeout_ms)) = Self::next_queued(&mut conn, conversation).await?
        else {
            return Ok(None);
        };
        let prompt_id = PromptId::known(prompt_id);
        let now = now_millis();
        let started = conn
            .execute(
                "UPDATE prompts SET state = $1, started_at = $2, owner = $3, lease_until = $4 \
             WHERE id = $5 AND state = $6",
                &[
                    RUNNING.into(),
                    now.into(),
                    (&self.owner.replica).into(),
                    self.lease_until().into(),
                    (&prompt_id).into(),
                    QUEUED.into(),
                ],
            )
            .await?;
        if started != 1 {
            return Ok(None);
        }
        let Some(mut prompt) = load_prompt(&mut conn, &prompt_id).await? else {
            return Ok(None);
        };
        prompt.updated_at = Some(timestamp_from_millis(now));
        let started = prompt_event::Kind::Started(PromptStarted {
            prompt: Some(prompt.clone()),
        });
        let started = append(
            self,
            &mut conn,
            &prompt_id,
            Guard::Open,
            Change::None,
            |_| started,
        )
        .await?;
        tx.commit().await?;
        let timeout = u64::try_from(timeout_ms)
            .ok()
            .filter(|ms| *ms > 0)
            .map(Duration::from_millis);
        Ok(Some(Claimed {
            prompt,
            started,
            timeout,
        }))
    }

    /// The queued prompt of `conversation` that runs next (its id and time limit), with the
    /// conversation's row locked; `None` when the conversation is gone, something of it runs or
    /// waits, or nothing is queued.
    async fn next_queued(
        conn: &mut Conn<'_>,
        conversation: &ConversationId,
    ) -> Result<Option<(String, i64)>, GatewayError> {
        if conn
            .execute(LOCK_CONVERSATION, &[conversation.into()])
            .await?
            == 0
        {
            return Ok(None);
        }
        let busy: Option<(String, i32)> = conn
            .optional(
                BUSY_PROMPT,
                &[
                    conversation.into(),
                    RUNNING.into(),
                    WAITING.into(),
                    QUEUED.into(),
                ],
            )
            .await?;
        match busy {
            Some((_, QUEUED)) => {}
            _ => return Ok(None),
        }
        Ok(conn
            .optional(
                "SELECT id, timeout_ms FROM prompts WHERE conversation_id = $1 AND state = $2 \
             ORDER BY queue_rank, created_at, id LIMIT 1",
                &[conversation.into(), QUEUED.into()],
            )
            .await?)
    }

    /// The owner of the conversation's queued prompts; `None` when none is queued.
    pub async fn queue_owner(
        &self,
        conversation: &ConversationId,
    ) -> Result<Option<UserId>, GatewayError> {
        let owner: Option<String> = self
            .db
            .read_scalar(
                "SELECT user_id FROM prompts WHERE conversation_id = $1 AND state = $2 LIMIT 1",
                &[conversation.into(), QUEUED.into()],
            )
            .await?;
        Ok(owner.map(UserId::known))
    }

    /// Conversations with a queued prompt and none running or waiting (at most `limit`):
    /// the queues some end should have moved on (it ended on another replica, or this one
    /// stopped before it started the next).
    pub async fn stalled_queues(&self, limit: u32) -> Result<Vec<ConversationId>, GatewayError> {
        // Oldest queue first, so that queues which cannot start now do not hide the others
        // for ever behind an arbitrary order.
        let sql = "SELECT q.conversation_id FROM prompts q WHERE q.state = $1 \
                   AND NOT EXISTS (SELECT 1 FROM prompts r WHERE r.conversation_id = q.conversation_id \
                   AND (r.state = $2 OR r.state = $3)) \
                   GROUP BY q.conversation_id ORDER BY min(q.created_at), q.conversation_id LIMIT $4";
        let args = [
            QUEUED.into(),
            RUNNING.into(),
            WAITING.into(),
            i64::from(limit).into(),
        ];
        let ids: Vec<String> = self.db.read_scalars(sql, &args).await?;
        Ok(ids.into_iter().map(ConversationId::known).collect())
    }

    /// Ends a queued prompt CANCELLED (it never ran). [`GatewayError::PromptEnded`] when it
    /// is no longer queued (it started or ended meanwhile).
    pub async fn cancel_queued(
        &self,
        prompt_id: &PromptId,
        reason: String,
    ) -> Result<Vec<PromptEvent>, GatewayError> {
        let change = Change::Finish {
            state: PromptState::Cancelled,
            error: reason.clone(),
        };
        self.record_guarded(prompt_id, Guard::Queued, change, |prompt| {
            prompt_event::Kind::Cancelled(agentic_proto::v1::PromptCancelled { reason, prompt })
        })
        .await
    }

    /// Removes a prompt stored RUNNING whose run could not be started, while nothing but its
    /// `created` event was stored: true when it is gone.
    pub async fn discard(&self, prompt_id: &PromptId) -> Result<bool, GatewayError> {
        let mut writer = self.writer().await?;
        let mut tx = writer.begin().await?;
        let mut conn = tx.conn();
        // Events first: they reference the prompt.
        conn.execute(
            "DELETE FROM prompt_events WHERE prompt_id = $1 AND EXISTS (SELECT 1 FROM prompts \
             WHERE id = $1 AND state = $2 AND last_sequence = 1)",
            &[prompt_id.into(), RUNNING.into()],
        )
        .await?;
        let removed = conn
            .execute(
                "DELETE FROM prompts WHERE id = $1 AND state = $2 AND last_sequence = 1",
                &[prompt_id.into(), RUNNING.into()],
            )
            .await?;
        tx.commit().await?;
        Ok(removed == 1)
    }
}
