//! Triggers: prompts a user scheduled, by a cron expression in a time zone, an interval or
//! one time. The gateway looks for due triggers on a clock (see [`Clock`]; the tests' one
//! is moved by hand), claims each due time once across replicas (see `store/triggers.rs`)
//! and creates the trigger's prompt for its owner, as `CreatePrompt` would: in its
//! conversation (following the conversation's busy policy), a new one, or none.

use agentic_ids::{ConversationId, PromptId, TriggerId, UserId};
use std::str::FromStr as _;
use std::sync::Arc;
use std::time::Duration;

use agentic_proto::json::{timestamp_from_millis, timestamp_millis};
use agentic_proto::v1::{
    BusyPolicy, CatchUp, ModelTier, Schedule, Trigger, TriggeredPrompt, schedule,
};
use chrono::TimeZone as _;

use crate::app::conversations::NewConversation;
use crate::app::prompts::{NewPrompt, Prompts};
use crate::error::GatewayError;
use crate::store::{Advance, Firing};

/// Triggers one user may have.
pub const MAX_TRIGGERS_PER_USER: i64 = 100;
/// Longest trigger name, in characters.
pub const MAX_NAME_CHARS: usize = 200;
/// Longest cron expression or time zone name, in bytes.
const MAX_SCHEDULE_TEXT_BYTES: usize = 200;
/// Shortest interval.
pub const MIN_EVERY_MS: u64 = 60_000;
/// Longest interval (a year).
const MAX_EVERY_MS: u64 = 366 * 24 * 60 * 60 * 1000;
/// A due time met later than this was missed (the gateway was down): CATCH_UP_SKIP skips
/// it. (Due times that pass while a trigger is paused are dropped when it resumes.)
pub const LATE_AFTER_MS: i64 = 60_000;
/// The last second of the year 9999.
const MAX_AT_SECONDS: i64 = 253_402_300_799;
/// Due times one claim takes at most; a look claims again while claims come back full, up
/// to `CLAIMS_PER_LOOK` times, and the next look takes the rest.
const CLAIM_BATCH: u32 = 32;
const CLAIMS_PER_LOOK: usize = 16;
/// Longest input of a trigger's prompt, in bytes: a user's triggers are listed in one
/// answer, so each stays small.
pub const MAX_TRIGGER_INPUT_BYTES: usize = 64 * 1024;
/// Largest state of a trigger's prompt, encoded.
pub const MAX_TRIGGER_STATE_BYTES: usize = 64 * 1024;
/// Longest mode name.
const MAX_MODE_BYTES: usize = 64;

/// Milliseconds since the epoch, as the trigger scheduler sees them.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The system's clock.
pub fn system_clock() -> Clock {
    Arc::new(agentic_db::now_millis)
}

/// A parsed schedule.
enum When {
    Cron(Box<croner::Cron>, chrono_tz::Tz),
    Every(i64),
    Once(i64),
}

fn invalid(message: impl Into<String>) -> GatewayError {
    GatewayError::InvalidArgument(message.into())
}

impl When {
    fn parse(schedule: &Schedule) -> Result<When, GatewayError> {
        if schedule.time_zone.len() > MAX_SCHEDULE_TEXT_BYTES {
            return Err(invalid("schedule.time_zone is too long"));
        }
        let zone = schedule.time_zone.trim();
        let tz = if zone.is_empty() {
            chrono_tz::UTC
        } else {
            chrono_tz::Tz::from_str(zone).map_err(|_| {
                invalid(format!(
                    "schedule.time_zone {zone:?} is not an IANA time zone (like \"Europe/Paris\")"
                ))
            })?
        };
        match &schedule.kind {
            Some(schedule::Kind::Cron(text)) => {
                if text.len() > MAX_SCHEDULE_TEXT_BYTES {
                    return Err(invalid("schedule.cron is too long"));
                }
                let cron = croner::parser::CronParser::builder()
                    .seconds(croner::parser::Seconds::Disallowed)
                    .year(croner::parser::Year::Disallowed)
                    .build()
                    .parse(text)
                    .map_err(|error| {
                        invalid(format!(
                            "schedule.cron {text:?} is not a cron expression of five fields \
                             (minute hour day-of-month month day-of-week): {error}"
                        ))
                    })?;
                Ok(When::Cron(Box::new(cron), tz))
            }
            Some(schedule::Kind::EveryMs(every)) => {
                if !(MIN_EVERY_MS..=MAX_EVERY_MS).contains(every) {
                    return Err(invalid(format!(
                        "schedule.every_ms must be between {MIN_EVERY_MS} (a minute) and \
                         {MAX_EVERY_MS} (a year)"
                    )));
                }
                Ok(When::Every(i64::try_from(*every).unwrap_or(i64::MAX)))
            }
            Some(schedule::Kind::At(at)) => {
                // Years 1970 to 9999: what a timestamp of milliseconds holds, and no later.
                if !(0..=MAX_AT_SECONDS).contains(&at.seconds)
                    || !(0..1_000_000_000).contains(&at.nanos)
                {
                    return Err(invalid("schedule.at is not a time between 1970 and 9999"));
                }
                Ok(When::Once(timestamp_millis(at)))
            }
            None => Err(invalid(
                "schedule needs one of cron, every_ms or at".to_owned(),
            )),
        }
    }

    /// The due time after `due` (the one being fired, `None` when the schedule starts at
    /// `now`), later than `now`; `None` when there is none.
    fn next(&self, due: Option<i64>, now: i64) -> Option<i64> {
        match self {
            When::Cron(cron, tz) => {
                // Cron times are whole seconds (minutes, in fact): none carries the
                // milliseconds of `now`.
                let now = tz.timestamp_opt(now.div_euclid(1000), 0).single()?;
                cron.find_next_occurrence(&now, false)
                    .ok()
                    .and_then(|next| next.timestamp().checked_mul(1000))
            }
            When::Every(every) => match due {
                None => now.checked_add(*every),
                Some(due) => {
                    let behind = now.saturating_sub(due).max(0) / every;
                    due.checked_add(every.checked_mul(behind + 1)?)
                }
            },
            When::Once(at) => due.is_none().then_some(*at),
        }
    }
}

/// What a trigger does with a due time it meets at `now`.
fn advance(trigger: &Trigger, due: i64, now: i64) -> Advance {
    let Some(when) = trigger
        .schedule
        .as_ref()
        .and_then(|schedule| When::parse(schedule).ok())
    else {
        // Validated when stored: cannot happen, and must not fire forever if it did.
        return Advance {
            next: None,
            fire: false,
        };
    };
    let late = now.saturating_sub(due) > LATE_AFTER_MS;
    let skip = trigger.catch_up == CatchUp::Skip as i32 && late;
    Advance {
        next: when.next(Some(due), now),
        fire: !skip,
    }
}

/// A validated request to create a trigger.
pub struct NewTrigger {
    pub user_id: UserId,
    pub name: String,
    pub schedule: Option<Schedule>,
    pub prompt: Option<TriggeredPrompt>,
    pub paused: bool,
    pub catch_up: i32,
}

/// A change to a trigger.
pub struct TriggerChange {
    pub paused: Option<bool>,
    pub schedule: Option<Schedule>,
}

/// The trigger use cases, and the scheduler that fires them.
#[derive(Clone)]
pub struct Triggers {
    pub prompts: Prompts,
    pub clock: Clock,
    /// How long a replica's claim on a due time lasts before another may take it over: longer
    /// than creating a prompt may take (its wait for a run slot included).
    pub claim: Duration,
}

impl Triggers {
    pub async fn create(&self, request: NewTrigger) -> Result<Trigger, GatewayError> {
        let name = request.name.trim().to_owned();
        if name.is_empty() {
            return Err(invalid("name must not be empty"));
        }
        if name.chars().count() > MAX_NAME_CHARS {
            return Err(invalid(format!(
                "name is longer than {MAX_NAME_CHARS} characters"
            )));
        }
        let catch_up = match CatchUp::try_from(request.catch_up) {
            Ok(CatchUp::Unspecified) => CatchUp::FireOnce,
            Ok(catch_up) => catch_up,
            Err(_) => {
                return Err(invalid(format!(
                    "unknown catch_up policy {}",
                    request.catch_up
                )));
            }
        };
        let schedule = request
            .schedule
            .ok_or_else(|| invalid("a trigger needs a schedule"))?;
        let mut prompt = request
            .prompt
            .ok_or_else(|| invalid("a trigger needs a prompt"))?;
        prompt.mode = prompt.mode.trim().to_owned();
        prompt.conversation_id = prompt.conversation_id.trim().to_owned();
        self.check_prompt(&request.user_id, &prompt).await?;
        let now = (self.clock)();
        let next_fire_at = next_due(&schedule, now)?;
        let created = agentic_db::now_millis();
        let trigger = Trigger {
            id: TriggerId::generate().into_string(),
            user_id: request.user_id.into_string(),
            name,
            schedule: Some(schedule),
            prompt: Some(prompt),
            paused: request.paused,
            catch_up: catch_up as i32,
            next_fire_at: next_fire_at.map(timestamp_from_millis),
            last_fired_at: None,
            last_prompt_id: String::new(),
            last_error: String::new(),
            fired_count: 0,
            created_at: Some(timestamp_from_millis(created)),
            updated_at: Some(timestamp_from_millis(created)),
        };
        self.prompts
            .store
            .insert_trigger(&trigger, MAX_TRIGGERS_PER_USER)
            .await?;
        Ok(trigger)
    }

    /// What a trigger's prompt may be: what `CreatePrompt` would take from its owner.
    async fn check_prompt(
        &self,
        user_id: &UserId,
        prompt: &TriggeredPrompt,
    ) -> Result<(), GatewayError> {
        if prompt.input.trim().is_empty() {
            return Err(invalid("prompt.input must not be empty"));
        }
        if prompt.input.len() > MAX_TRIGGER_INPUT_BYTES {
            return Err(invalid(format!(
                "prompt.input is longer than {MAX_TRIGGER_INPUT_BYTES} bytes"
            )));
        }
        if prompt.mode.len() > MAX_MODE_BYTES {
            return Err(invalid(format!(
                "prompt.mode is longer than {MAX_MODE_BYTES} bytes"
            )));
        }
        // An agent that is not there now would fail every firing: said at once instead.
        if !prompt.agent.trim().is_empty() {
            self.prompts.named_agent(user_id, &prompt.agent).await?;
        }
        if let Some(state) = &prompt.state {
            let bytes = prost::Message::encoded_len(state);
            if bytes > MAX_TRIGGER_STATE_BYTES {
                return Err(invalid(format!(
                    "prompt.state is larger than {MAX_TRIGGER_STATE_BYTES} bytes ({bytes} bytes encoded)"
                )));
            }
        }
        for (field, text) in [
            ("prompt.input", &prompt.input),
            ("prompt.mode", &prompt.mode),
        ] {
            if text.contains('\0') {
                return Err(invalid(format!("{field} must not contain NUL characters")));
            }
        }
        crate::engine::state::check_state(prompt.state.as_ref())?;
        if ModelTier::try_from(prompt.model).is_err() {
            return Err(invalid(format!("unknown model tier {}", prompt.model)));
        }
        if BusyPolicy::try_from(prompt.on_busy).is_err() {
            return Err(invalid(format!(
                "unknown on_busy policy {}",
                prompt.on_busy
            )));
        }
        let mode = prompt.mode.trim();
        if !mode.is_empty() && self.prompts.modes.get(mode).await?.is_none() {
            return Err(GatewayError::UnknownMode(mode.to_owned()));
        }
        if let Some(conversation) = conversation_of(prompt)? {
            if prompt.new_conversation {
                return Err(invalid(
                    "prompt.conversation_id and prompt.new_conversation exclude each other",
                ));
            }
            self.prompts.conversation(user_id, &conversation).await?;
        }
        Ok(())
    }

    pub async fn list(&self, user_id: &UserId, limit: u32) -> Result<Vec<Trigger>, GatewayError> {
        self.prompts
            .store
            .list_triggers(user_id, crate::app::prompts::list_limit(limit))
            .await
    }

    pub async fn update(
        &self,
        user_id: &UserId,
        trigger_id: &TriggerId,
        change: TriggerChange,
    ) -> Result<Trigger, GatewayError> {
        // A replica may claim a due time between the read and the write: the write then
        // changes nothing, and the trigger is read again.
        for _ in 0..UPDATE_TRIES {
            let trigger = self
                .prompts
                .store
                .trigger(user_id, trigger_id)
                .await?
                .ok_or_else(|| GatewayError::TriggerNotFound(trigger_id.to_string()))?;
            let read_next = trigger.next_fire_at.as_ref().map(timestamp_millis);
            let changed = changed(trigger, &change, (self.clock)())?;
            if self
                .prompts
                .store
                .update_trigger(&changed, read_next)
                .await?
            {
                return Ok(changed);
            }
        }
        Err(GatewayError::FailedPrecondition(format!(
            "trigger {trigger_id} kept firing while it was being changed; try again"
        )))
    }

    pub async fn delete(
        &self,
        user_id: &UserId,
        trigger_id: &TriggerId,
    ) -> Result<(), GatewayError> {
        if !self
            .prompts
            .store
            .delete_trigger(user_id, trigger_id)
            .await?
        {
            return Err(GatewayError::TriggerNotFound(trigger_id.to_string()));
        }
        Ok(())
    }

    /// Claims the due times that came (and firings other replicas left), and creates their
    /// prompts, each in its own task (a prompt may wait for a run slot). Returns how many
    /// firings it started.
    pub async fn fire_due(&self) -> Result<usize, GatewayError> {
        let store = &self.prompts.store;
        let claimed_until = agentic_db::now_millis()
            .saturating_add(i64::try_from(self.claim.as_millis()).unwrap_or(i64::MAX));
        let now = (self.clock)();
        let mut firings = Vec::new();
        for _ in 0..CLAIMS_PER_LOOK {
            let claimed = store
                .claim_due(now, CLAIM_BATCH, claimed_until, |trigger, due| {
                    advance(trigger, due, now)
                })
                .await?;
            let full = claimed.len() == CLAIM_BATCH as usize;
            firings.extend(claimed);
            if !full {
                break;
            }
        }
        firings.extend(
            store
                .reclaim_firings(agentic_db::now_millis(), claimed_until, CLAIM_BATCH)
                .await?,
        );
        let started = firings.len();
        for firing in firings {
            let triggers = self.clone();
            tokio::spawn(async move { triggers.fire(firing).await });
        }
        Ok(started)
    }

    /// Creates a firing's prompt (unless a replica that died after creating it left the
    /// firing behind), then marks the firing done.
    async fn fire(&self, firing: Firing) {
        let Firing {
            prompt_id,
            due_at,
            trigger,
        } = firing;
        let exists = |prompt_id| async move {
            self.prompts
                .store
                .state(prompt_id)
                .await
                .map(|state| state.is_some())
        };
        let created = match exists(&prompt_id).await {
            Ok(true) => Ok(()),
            Ok(false) => match self.create_prompt(&trigger, &prompt_id, due_at).await {
                // Created meanwhile by a replica that took the firing over.
                Err(_) if matches!(exists(&prompt_id).await, Ok(true)) => Ok(()),
                created => created,
            },
            Err(error) => {
                // The claim expires and a later look tries again.
                tracing::warn!(trigger_id = %trigger.id, %error, "could not fire a trigger");
                return;
            }
        };
        let error = match &created {
            Ok(()) => {
                crate::metrics::trigger_due("fired");
                tracing::info!(trigger_id = %trigger.id, %prompt_id, "a trigger fired");
                None
            }
            Err(error) => {
                crate::metrics::trigger_due("failed");
                tracing::warn!(trigger_id = %trigger.id, %error, "a trigger's prompt could not be created");
                Some(format!(
                    "the prompt could not be created: {}",
                    agentic_rpc::caller_message(error)
                ))
            }
        };
        if let Err(error) = self
            .prompts
            .store
            .firing_done(&prompt_id, &trigger.id, error.as_deref())
            .await
        {
            tracing::warn!(trigger_id = %trigger.id, %error, "could not record a trigger's firing");
        }
    }

    async fn create_prompt(
        &self,
        trigger: &Trigger,
        prompt_id: &PromptId,
        due_at: i64,
    ) -> Result<(), GatewayError> {
        let user_id = UserId::known(trigger.user_id.clone());
        let prompt = trigger.prompt.clone().unwrap_or_default();
        let conversation_id = if prompt.new_conversation {
            // What would refuse the prompt anyway refuses it before a conversation is made.
            self.prompts
                .limits
                .check_daily(&self.prompts.store, &user_id)
                .await?;
            self.prompts.check_rates(&user_id, None).await?;
            let due = chrono::DateTime::from_timestamp_millis(due_at)
                .map(|at| at.format("%Y-%m-%d %H:%M UTC").to_string())
                .unwrap_or_default();
            let title: String = format!("{} · {due}", trigger.name)
                .chars()
                .take(crate::app::conversations::MAX_TITLE_CHARS)
                .collect();
            let conversation = self
                .prompts
                .create_conversation(NewConversation {
                    user_id: user_id.clone(),
                    title,
                    default_mode: None,
                    state: None,
                    on_busy: BusyPolicy::Unspecified,
                })
                .await?;
            Some(ConversationId::known(conversation.id))
        } else {
            conversation_of(&prompt)?
        };
        // Unspecified: the agent's, else normal (see `Prompts::create`).
        let model = ModelTier::try_from(prompt.model).unwrap_or_default();
        self.prompts
            .create(NewPrompt {
                id: Some(prompt_id.clone()),
                user_id,
                input: prompt.input,
                mode: Some(prompt.mode.trim().to_owned()).filter(|mode| !mode.is_empty()),
                model,
                conversation_id,
                state: prompt.state,
                max_rounds: 0,
                timeout: None,
                on_busy: BusyPolicy::try_from(prompt.on_busy).unwrap_or_default(),
                budget: prompt.budget,
                approval_timeout: None,
                replay: None,
                attachments: Vec::new(),
                output_schema: None,
                agent: Some(prompt.agent).filter(|agent| !agent.trim().is_empty()),
                agent_run: None,
                agent_rates: (0, 0),
                lineage: None,
            })
            .await?;
        Ok(())
    }
}

/// Reads of a trigger an update tries before it gives up.
const UPDATE_TRIES: usize = 5;

/// `trigger` as `change` leaves it at `now`.
fn changed(
    mut trigger: Trigger,
    change: &TriggerChange,
    now: i64,
) -> Result<Trigger, GatewayError> {
    let resumed = change.paused == Some(false) && trigger.paused;
    if let Some(paused) = change.paused {
        trigger.paused = paused;
    }
    if let Some(schedule) = &change.schedule {
        trigger.next_fire_at = next_due(schedule, now)?.map(timestamp_from_millis);
        trigger.schedule = Some(schedule.clone());
    } else if resumed && let Some(from) = trigger.next_fire_at.as_ref().map(timestamp_millis) {
        // Due times that passed while it was paused are not owed. (A trigger with no next
        // due time, a single time that fired, stays so.)
        let schedule = trigger.schedule.clone().unwrap_or_default();
        let next = if from > now {
            Some(from)
        } else {
            When::parse(&schedule)?.next(Some(from), now)
        };
        trigger.next_fire_at = next.map(timestamp_from_millis);
    }
    trigger.updated_at = Some(timestamp_from_millis(agentic_db::now_millis()));
    Ok(trigger)
}

/// The conversation a trigger's prompt names, if any.
fn conversation_of(prompt: &TriggeredPrompt) -> Result<Option<ConversationId>, GatewayError> {
    ConversationId::parse_optional(&prompt.conversation_id)
        .map_err(|error| invalid(format!("prompt.{error}")))
}

/// A schedule's first due time counted from `now`; an error when it never fires.
fn next_due(schedule: &Schedule, now: i64) -> Result<Option<i64>, GatewayError> {
    let when = When::parse(schedule)?;
    if let When::Once(at) = when
        && at < now.saturating_sub(LATE_AFTER_MS)
    {
        return Err(invalid("schedule.at is in the past"));
    }
    match when.next(None, now) {
        Some(next) => Ok(Some(next)),
        None => Err(invalid("the schedule never fires")),
    }
}

/// Looks for due triggers every `tick` until the task is dropped.
pub async fn fire_triggers(triggers: Triggers, tick: Duration) {
    let mut ticks = tokio::time::interval(tick);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        if let Err(error) = triggers.fire_due().await {
            tracing::warn!(%error, "could not look for due triggers");
        }
    }
}

#[cfg(test)]
mod tests;
