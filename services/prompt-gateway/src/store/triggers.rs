//! Triggers and their firings. A due time is claimed in one transaction that moves the
//! trigger to its next due time and writes a firing (with the id its prompt will get), so
//! across replicas each due time is claimed once: PostgreSQL's `SKIP LOCKED` lets replicas
//! claim different triggers at once, SQLite has one writer. The prompt is created after the
//! commit; a firing whose replica died before that is taken over once its claim expired
//! ([`Store::reclaim_firings`]) and creates the prompt under the same id, unless it exists.

use super::*;
use agentic_ids::TriggerId;
use agentic_proto::v1::{Schedule, Trigger, TriggeredPrompt};

const TRIGGER_COLUMNS: &str = "id, user_id, name, schedule, prompt, paused, catch_up, \
     next_fire_at, last_fired_at, last_prompt_id, last_error, fired_count, created_at, updated_at";

/// A trigger as stored.
pub struct TriggerRow {
    id: String,
    user_id: String,
    name: String,
    schedule: Vec<u8>,
    prompt: Vec<u8>,
    paused: i32,
    catch_up: i32,
    next_fire_at: Option<i64>,
    last_fired_at: Option<i64>,
    last_prompt_id: String,
    last_error: String,
    fired_count: i64,
    created_at: i64,
    updated_at: i64,
}

impl<'r, R: sqlx::Row> sqlx::FromRow<'r, R> for TriggerRow
where
    Columns<'r>: From<&'r R>,
{
    fn from_row(row: &'r R) -> Result<Self, sqlx::Error> {
        let columns = Columns::from(row);
        Ok(TriggerRow {
            id: columns.get("id")?,
            user_id: columns.get("user_id")?,
            name: columns.get("name")?,
            schedule: columns.get("schedule")?,
            prompt: columns.get("prompt")?,
            paused: columns.get("paused")?,
            catch_up: columns.get("catch_up")?,
            next_fire_at: columns.get("next_fire_at")?,
            last_fired_at: columns.get("last_fired_at")?,
            last_prompt_id: columns.get("last_prompt_id")?,
            last_error: columns.get("last_error")?,
            fired_count: columns.get("fired_count")?,
            created_at: columns.get("created_at")?,
            updated_at: columns.get("updated_at")?,
        })
    }
}

impl TriggerRow {
    fn into_trigger(self) -> Result<Trigger, GatewayError> {
        Ok(Trigger {
            id: self.id,
            user_id: self.user_id,
            name: self.name,
            schedule: Some(Schedule::decode(self.schedule.as_slice())?),
            prompt: Some(TriggeredPrompt::decode(self.prompt.as_slice())?),
            paused: self.paused != 0,
            catch_up: self.catch_up,
            next_fire_at: self.next_fire_at.map(timestamp_from_millis),
            last_fired_at: self.last_fired_at.map(timestamp_from_millis),
            last_prompt_id: self.last_prompt_id,
            last_error: self.last_error,
            fired_count: unsigned(self.fired_count),
            created_at: Some(timestamp_from_millis(self.created_at)),
            updated_at: Some(timestamp_from_millis(self.updated_at)),
        })
    }
}

/// A due time of a trigger, claimed by this replica: create its prompt under `prompt_id`.
#[derive(Debug)]
pub struct Firing {
    pub prompt_id: PromptId,
    pub due_at: i64,
    pub trigger: Trigger,
}

/// What to do with a due time (see [`Store::claim_due`]).
pub struct Advance {
    /// The trigger's next due time (`None`: it will not fire again).
    pub next: Option<i64>,
    /// Whether this due time creates a prompt (false: a missed time that is skipped).
    pub fire: bool,
}

fn millis(timestamp: Option<&prost_types::Timestamp>) -> Option<i64> {
    timestamp.map(timestamp_millis)
}

impl Store {
    /// Stores a new trigger, unless its user has `max_per_user` already.
    pub async fn insert_trigger(
        &self,
        trigger: &Trigger,
        max_per_user: i64,
    ) -> Result<(), GatewayError> {
        let mut writer = self.writer().await?;
        let mut tx = writer.begin().await?;
        let mut conn = tx.conn();
        // SQLite's one writer counts and inserts alone; on PostgreSQL a lock on the user
        // (for the transaction) keeps two creations from both passing the count.
        if self.is_shared() {
            conn.execute(
                "SELECT pg_advisory_xact_lock(hashtext('agentic.triggers'), hashtext($1))",
                &[(&trigger.user_id).into()],
            )
            .await?;
        }
        let count: i64 = conn
            .scalar(
                "SELECT count(*) FROM triggers WHERE user_id = $1",
                &[(&trigger.user_id).into()],
            )
            .await?
            .unwrap_or_default();
        if count >= max_per_user {
            return Err(GatewayError::ResourceExhausted(format!(
                "you have {count} triggers, the most a user may have; delete one first"
            )));
        }
        let schedule = trigger.schedule.clone().unwrap_or_default().encode_to_vec();
        let prompt = trigger.prompt.clone().unwrap_or_default().encode_to_vec();
        let created = millis(trigger.created_at.as_ref()).unwrap_or_default();
        conn.execute(
            "INSERT INTO triggers (id, user_id, name, schedule, prompt, paused, catch_up, \
             next_fire_at, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            &[
                (&trigger.id).into(),
                (&trigger.user_id).into(),
                (&trigger.name).into(),
                (&schedule).into(),
                (&prompt).into(),
                i32::from(trigger.paused).into(),
                trigger.catch_up.into(),
                millis(trigger.next_fire_at.as_ref()).into(),
                created.into(),
                created.into(),
            ],
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The trigger if it exists and belongs to `user_id`.
    pub async fn trigger(
        &self,
        user_id: &UserId,
        trigger_id: &TriggerId,
    ) -> Result<Option<Trigger>, GatewayError> {
        let sql = format!("SELECT {TRIGGER_COLUMNS} FROM triggers WHERE id = $1 AND user_id = $2");
        let row: Option<TriggerRow> = self
            .db
            .read_optional(&sql, &[trigger_id.into(), user_id.into()])
            .await?;
        row.map(TriggerRow::into_trigger).transpose()
    }

    /// The user's triggers, oldest first.
    pub async fn list_triggers(
        &self,
        user_id: &UserId,
        limit: u32,
    ) -> Result<Vec<Trigger>, GatewayError> {
        let sql = format!(
            "SELECT {TRIGGER_COLUMNS} FROM triggers WHERE user_id = $1 \
             ORDER BY created_at, id LIMIT $2"
        );
        let rows: Vec<TriggerRow> = self
            .db
            .read_all(&sql, &[user_id.into(), i64::from(limit).into()])
            .await?;
        rows.into_iter().map(TriggerRow::into_trigger).collect()
    }

    /// Writes a trigger's schedule, pause and next due time, unless its next due time is no
    /// longer `read_next` (a replica claimed a due time since it was read: the caller reads
    /// it again) or its user has no such trigger (any more): false then.
    pub async fn update_trigger(
        &self,
        trigger: &Trigger,
        read_next: Option<i64>,
    ) -> Result<bool, GatewayError> {
        let schedule = trigger.schedule.clone().unwrap_or_default().encode_to_vec();
        let sql = "UPDATE triggers SET schedule = $1, paused = $2, next_fire_at = $3, \
                   updated_at = $4, failed_firings = CASE WHEN $2 = 0 THEN 0 ELSE failed_firings END \
                   WHERE id = $5 AND user_id = $6 AND next_fire_at IS NOT DISTINCT FROM $7";
        let args = [
            (&schedule).into(),
            i32::from(trigger.paused).into(),
            millis(trigger.next_fire_at.as_ref()).into(),
            millis(trigger.updated_at.as_ref())
                .unwrap_or_default()
                .into(),
            (&trigger.id).into(),
            (&trigger.user_id).into(),
            read_next.into(),
        ];
        Ok(self.db.write(sql, &args).await? > 0)
    }

    /// Deletes the user's trigger; false when there is no such trigger. A due time claimed
    /// before still creates its prompt.
    pub async fn delete_trigger(
        &self,
        user_id: &UserId,
        trigger_id: &TriggerId,
    ) -> Result<bool, GatewayError> {
        let sql = "DELETE FROM triggers WHERE id = $1 AND user_id = $2";
        Ok(self
            .db
            .write(sql, &[trigger_id.into(), user_id.into()])
            .await?
            > 0)
    }

    /// Claims up to `limit` due times of triggers not paused whose next due time is at or
    /// before `now`: each trigger moves to the next due time `advance` gives, and the due
    /// times it fires for become firings claimed until `claimed_until`.
    pub async fn claim_due(
        &self,
        now: i64,
        limit: u32,
        claimed_until: i64,
        advance: impl Fn(&Trigger, i64) -> Advance,
    ) -> Result<Vec<Firing>, GatewayError> {
        let mut writer = self.writer().await?;
        let mut tx = writer.begin().await?;
        let mut conn = tx.conn();
        // PostgreSQL: rows another replica is claiming are skipped, not waited for.
        let lock = if self.is_shared() {
            " FOR UPDATE SKIP LOCKED"
        } else {
            ""
        };
        let sql = format!(
            "SELECT {TRIGGER_COLUMNS} FROM triggers WHERE paused = 0 \
             AND next_fire_at IS NOT NULL AND next_fire_at <= $1 \
             ORDER BY next_fire_at, id LIMIT $2{lock}"
        );
        let rows: Vec<TriggerRow> = conn
            .all(&sql, &[now.into(), i64::from(limit).into()])
            .await?;
        let mut firings = Vec::new();
        for row in rows {
            let Some(due_at) = row.next_fire_at else {
                continue;
            };
            let trigger = row.into_trigger()?;
            let Advance { next, fire } = advance(&trigger, due_at);
            if !fire {
                conn.execute(
                    "UPDATE triggers SET next_fire_at = $1 WHERE id = $2",
                    &[next.into(), (&trigger.id).into()],
                )
                .await?;
                crate::metrics::trigger_due("skipped");
                continue;
            }
            let claimed = Self::claim_firing(&mut conn, &trigger.id, (due_at, next, claimed_until));
            let Some(prompt_id) = claimed.await? else {
                continue;
            };
            firings.push(Firing {
                prompt_id,
                due_at,
                trigger,
            });
        }
        tx.commit().await?;
        Ok(firings)
    }

    /// Claims the firing of `trigger` at `due_at` until `claimed_until` and moves the trigger
    /// on to `next`; `None` when that due time was claimed already (an update raced its claim
    /// and set the due time back): a due time has one firing.
    async fn claim_firing(
        conn: &mut Conn<'_>,
        trigger: &str,
        (due_at, next, claimed_until): (i64, Option<i64>, i64),
    ) -> Result<Option<PromptId>, GatewayError> {
        let prompt_id = PromptId::generate();
        let inserted = conn
            .execute(
                "INSERT INTO trigger_firings (prompt_id, trigger_id, due_at, claimed_until) \
                 VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                &[
                    (&prompt_id).into(),
                    trigger.into(),
                    due_at.into(),
                    claimed_until.into(),
                ],
            )
            .await?;
        if inserted == 0 {
            conn.execute(
                "UPDATE triggers SET next_fire_at = $1 WHERE id = $2",
                &[next.into(), trigger.into()],
            )
            .await?;
            return Ok(None);
        }
        conn.execute(
            "UPDATE triggers SET next_fire_at = $1, last_fired_at = $2, last_prompt_id = $3, \
             last_error = '', fired_count = fired_count + 1 WHERE id = $4",
            &[
                next.into(),
                due_at.into(),
                (&prompt_id).into(),
                trigger.into(),
            ],
        )
        .await?;
        Ok(Some(prompt_id))
    }

    /// Takes over up to `limit` firings whose claim expired before `now` (their replica
    /// died before it created their prompt), claiming them until `claimed_until`. Firings of
    /// triggers deleted since are dropped.
    pub async fn reclaim_firings(
        &self,
        now: i64,
        claimed_until: i64,
        limit: u32,
    ) -> Result<Vec<Firing>, GatewayError> {
        // The outer `claimed_until < $2` is checked again on PostgreSQL against a row
        // another replica took over meanwhile, so only one of them gets it.
        let sql = "UPDATE trigger_firings SET claimed_until = $1 WHERE claimed_until < $2 \
                   AND prompt_id IN (SELECT prompt_id FROM trigger_firings \
                   WHERE claimed_until < $2 ORDER BY due_at LIMIT $3) \
                   RETURNING prompt_id, trigger_id, due_at";
        let mut writer = self.writer().await?;
        let mut conn = writer.conn();
        let claimed: Vec<(String, String, i64)> = conn
            .all(
                sql,
                &[claimed_until.into(), now.into(), i64::from(limit).into()],
            )
            .await?;
        drop(writer);
        let mut firings = Vec::new();
        for (prompt_id, trigger_id, due_at) in claimed {
            let sql = format!("SELECT {TRIGGER_COLUMNS} FROM triggers WHERE id = $1");
            let row: Option<TriggerRow> =
                self.db.read_optional(&sql, &[(&trigger_id).into()]).await?;
            let prompt_id = PromptId::known(prompt_id);
            match row {
                Some(row) => firings.push(Firing {
                    prompt_id,
                    due_at,
                    trigger: row.into_trigger()?,
                }),
                None => self.firing_done(&prompt_id, &trigger_id, None).await?,
            }
        }
        Ok(firings)
    }

    /// A firing is over: its prompt was created, or (`error`) could not be, which its
    /// trigger then shows; after `MAX_FAILED_FIRINGS` such firings in a row it pauses.
    pub async fn firing_done(
        &self,
        prompt_id: &PromptId,
        trigger_id: &str,
        error: Option<&str>,
    ) -> Result<(), GatewayError> {
        const MAX_FAILED_FIRINGS: i32 = 5;
        let mut writer = self.writer().await?;
        let mut tx = writer.begin().await?;
        let mut conn = tx.conn();
        conn.execute(
            "DELETE FROM trigger_firings WHERE prompt_id = $1",
            &[prompt_id.into()],
        )
        .await?;
        match error {
            Some(error) => {
                let paused = format!(
                    "{error} (paused after {MAX_FAILED_FIRINGS} firings in a row created no prompt)"
                );
                conn.execute(
                    "UPDATE triggers SET last_prompt_id = '', failed_firings = failed_firings + 1, \
                     paused = CASE WHEN failed_firings + 1 >= $4 THEN 1 ELSE paused END, \
                     last_error = CASE WHEN failed_firings + 1 >= $4 THEN $5 ELSE $1 END \
                     WHERE id = $2 AND last_prompt_id = $3",
                    &[
                        error.into(),
                        trigger_id.into(),
                        prompt_id.into(),
                        MAX_FAILED_FIRINGS.into(),
                        (&paused).into(),
                    ],
                )
                .await?;
            }
            None => {
                conn.execute(
                    "UPDATE triggers SET failed_firings = 0 WHERE id = $1",
                    &[trigger_id.into()],
                )
                .await?;
            }
        }
        tx.commit().await?;
        Ok(())
    }

    /// Whether `user_id`'s prompt `prompt_id` is running or waiting for approval.
    pub async fn is_running_prompt_of(
        &self,
        user_id: &UserId,
        prompt_id: &PromptId,
    ) -> Result<bool, GatewayError> {
        let found: Option<i64> = self
            .db
            .read_scalar(
                "SELECT count(*) FROM prompts WHERE id = $1 AND user_id = $2 \
                 AND (state = $3 OR state = $4)",
                &[
                    prompt_id.into(),
                    user_id.into(),
                    RUNNING.into(),
                    WAITING.into(),
                ],
            )
            .await?;
        Ok(found.unwrap_or_default() > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A firing whose replica died after claiming it (its prompt never created) is taken
    /// over once its claim expired, under the same prompt id, by one taker only; a due time
    /// is claimed once.
    #[tokio::test]
    async fn a_firing_left_behind_is_taken_over_once_under_its_prompt_id() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("g.db").display());
        let owner = Owner {
            replica: "test".into(),
            lease: Duration::from_secs(60),
        };
        let store = Store::connect(&url, owner).await.unwrap();
        let trigger = Trigger {
            id: "trigger-1".into(),
            user_id: "alice".into(),
            name: "t".into(),
            schedule: Some(Schedule::default()),
            prompt: Some(TriggeredPrompt {
                input: "hello".into(),
                ..TriggeredPrompt::default()
            }),
            next_fire_at: Some(timestamp_from_millis(1_000)),
            created_at: Some(timestamp_from_millis(0)),
            ..Trigger::default()
        };
        store.insert_trigger(&trigger, 10).await.unwrap();
        let advance = |_: &Trigger, due: i64| Advance {
            next: Some(due + 1_000),
            fire: true,
        };
        let claimed = store.claim_due(1_500, 10, 5_000, advance).await.unwrap();
        assert_eq!(claimed.len(), 1);
        let prompt_id = claimed[0].prompt_id.clone();
        assert_eq!(claimed[0].due_at, 1_000);
        // The due time moved on: claimed once.
        assert!(
            store
                .claim_due(1_500, 10, 5_000, advance)
                .await
                .unwrap()
                .is_empty()
        );
        // Its claim holds until 5000.
        assert!(
            store
                .reclaim_firings(4_000, 9_000, 10)
                .await
                .unwrap()
                .is_empty()
        );
        let taken = store.reclaim_firings(6_000, 9_000, 10).await.unwrap();
        assert_eq!(taken.len(), 1);
        assert_eq!(taken[0].prompt_id, prompt_id);
        assert_eq!(taken[0].trigger.id, "trigger-1");
        assert!(
            store
                .reclaim_firings(6_000, 9_000, 10)
                .await
                .unwrap()
                .is_empty()
        );
        store
            .firing_done(&prompt_id, "trigger-1", Some("no such mode"))
            .await
            .unwrap();
        assert!(
            store
                .reclaim_firings(20_000, 30_000, 10)
                .await
                .unwrap()
                .is_empty()
        );
        let shown = store
            .trigger(&UserId::known("alice"), &TriggerId::known("trigger-1"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(shown.last_error, "no such mode");
        assert_eq!(shown.fired_count, 1);
    }
}
