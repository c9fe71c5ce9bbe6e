//! The event log: appending events (one, a batch, the end after a batch) and reading them back.

use super::*;

/// `Internal` unless every change is one [`Append::batches`] takes.
pub(super) fn check_batchable(appends: &[Append]) -> Result<(), GatewayError> {
    match appends
        .iter()
        .find(|append| !Append::batches(&append.change))
    {
        Some(append) => Err(GatewayError::Internal(format!(
            "{:?} cannot be appended in a batch",
            append.change
        ))),
        None => Ok(()),
    }
}

/// [`ADD_USAGE`]'s arguments.
pub(super) fn usage_args<'a>(prompt_id: &'a PromptId, usage: &Usage) -> [Arg<'a>; 9] {
    [
        saturating_i64(usage.input_tokens).into(),
        saturating_i64(usage.output_tokens).into(),
        saturating_i64(usage.total_tokens).into(),
        i64::from(usage.rounds).into(),
        i64::from(usage.llm_calls).into(),
        i64::from(usage.tool_calls).into(),
        saturating_i64(usage.cached_input_tokens).into(),
        saturating_i64(usage.cost_micros).into(),
        prompt_id.into(),
    ]
}

impl Store {
    /// Applies `change` and appends the event built by `kind` in one transaction, so the
    /// event is durable (and numbered gap-free) before anyone can see it. A prompt that has
    /// ended takes no more events: that is [`GatewayError::PromptEnded`]. Answers the events
    /// stored, in order: the one event, or for an end the updates that close what the
    /// timeline left open ([`closing`]) and then the terminal event.
    pub async fn record(
        &self,
        prompt_id: &PromptId,
        change: Change,
        kind: impl FnOnce(Option<Prompt>) -> prompt_event::Kind,
    ) -> Result<Vec<PromptEvent>, GatewayError> {
        self.record_guarded(prompt_id, Guard::Open, change, kind)
            .await
    }

    #[tracing::instrument(name = "db", skip_all, fields(
        otel.name = "INSERT prompt_events",
        db.system.name = self.system(),
        db.operation.name = "INSERT",
        db.collection.name = "prompt_events",
    ))]
    pub(super) async fn record_guarded(
        &self,
        prompt_id: &PromptId,
        guard: Guard,
        change: Change,
        kind: impl FnOnce(Option<Prompt>) -> prompt_event::Kind,
    ) -> Result<Vec<PromptEvent>, GatewayError> {
        if let (Backend::Sqlite(write), Guard::Open) = (self.db.backend(), guard) {
            if let Change::Finish { state, error } = change {
                return finish_sqlite(
                    write,
                    &self.commands,
                    prompt_id,
                    Vec::new(),
                    &Usage::default(),
                    (state, error),
                    kind,
                )
                .await;
            }
            if Append::batches(&change) {
                let append = Append {
                    change,
                    kind: kind(None),
                };
                return append_batch_sqlite(
                    write,
                    &self.commands,
                    prompt_id,
                    vec![append],
                    &Usage::default(),
                )
                .await;
            }
        }
        let mut writer = self.writer().await?;
        let mut tx = writer.begin().await?;
        let events = match change {
            Change::Finish { state, error } => {
                append_end(self, &mut tx.conn(), prompt_id, guard, (state, error), kind).await?
            }
            change => vec![append(self, &mut tx.conn(), prompt_id, guard, change, kind).await?],
        };
        tx.commit().await?;
        Ok(events)
    }

    /// Appends `appends` in order, and adds `usage` to the prompt's tokens, in one
    /// transaction (one command on SQLite): a run's events that arrived together cost one
    /// write. All or nothing: a prompt that has ended takes none of them
    /// ([`GatewayError::PromptEnded`]). Each change must be one [`Append::batches`] takes.
    #[tracing::instrument(name = "db", skip_all, fields(
        otel.name = "INSERT prompt_events",
        db.system.name = self.system(),
        db.operation.name = "INSERT",
        db.collection.name = "prompt_events",
        events = appends.len(),
    ))]
    pub async fn append_batch(
        &self,
        prompt_id: &PromptId,
        appends: Vec<Append>,
        usage: &Usage,
    ) -> Result<Vec<PromptEvent>, GatewayError> {
        if appends.is_empty() {
            self.add_usage(prompt_id, usage).await?;
            return Ok(Vec::new());
        }
        check_batchable(&appends)?;
        match self.db.backend() {
            Backend::Sqlite(write) => {
                append_batch_sqlite(write, &self.commands, prompt_id, appends, usage).await
            }
            Backend::Postgres(pool) => {
                let mut tx = pool.begin().await?;
                let events = self
                    .append_all_postgres(&mut tx, prompt_id, appends, usage)
                    .await?;
                tx.commit().await?;
                Ok(events)
            }
        }
    }

    /// [`Store::append_batch`] of the events that came just before the end, and the end
    /// ([`Change::Finish`]) in the same transaction: the terminal event carries the prompt as
    /// they leave it. Returns the events in order, the terminal one last.
    #[tracing::instrument(name = "db", skip_all, fields(
        otel.name = "INSERT prompt_events",
        db.system.name = self.system(),
        db.operation.name = "INSERT",
        db.collection.name = "prompt_events",
        events = before.len() + 1,
    ))]
    pub async fn finish_after(
        &self,
        prompt_id: &PromptId,
        before: Vec<Append>,
        usage: &Usage,
        state: PromptState,
        error: String,
        kind: impl FnOnce(Option<Prompt>) -> prompt_event::Kind,
    ) -> Result<Vec<PromptEvent>, GatewayError> {
        check_batchable(&before)?;
        match self.db.backend() {
            Backend::Sqlite(write) => {
                finish_sqlite(
                    write,
                    &self.commands,
                    prompt_id,
                    before,
                    usage,
                    (state, error),
                    kind,
                )
                .await
            }
            Backend::Postgres(pool) => {
                let mut tx = pool.begin().await?;
                let mut events = self
                    .append_all_postgres(&mut tx, prompt_id, before, usage)
                    .await?;
                let mut conn = Conn::Postgres(&mut tx);
                let end = (state, error);
                events
                    .extend(append_end(self, &mut conn, prompt_id, Guard::Open, end, kind).await?);
                tx.commit().await?;
                Ok(events)
            }
        }
    }

    pub async fn add_usage(&self, prompt_id: &PromptId, usage: &Usage) -> Result<(), GatewayError> {
        self.db
            .write(ADD_USAGE, &usage_args(prompt_id, usage))
            .await?;
        Ok(())
    }

    /// Stored events of a prompt with a sequence above `after`, in order, at most `limit`.
    #[cfg(test)]
    pub async fn events_after(
        &self,
        prompt_id: &PromptId,
        after: u64,
        limit: u32,
    ) -> Result<Vec<PromptEvent>, GatewayError> {
        let sql = "SELECT sequence, payload FROM prompt_events WHERE prompt_id = $1 \
                   AND sequence > $2 ORDER BY sequence LIMIT $3";
        let args = [
            prompt_id.into(),
            saturating_i64(after).into(),
            i64::from(limit).into(),
        ];
        let rows: Vec<(i64, Vec<u8>)> = self.db.read_all(sql, &args).await?;
        rows.into_iter()
            .map(|(sequence, payload)| stored_event(sequence, &payload))
            .collect()
    }

    /// Stored events of `user_id`'s prompt with a sequence above `after`, in order, at most
    /// `limit`, with the prompt's state read in the same statement, so from the same
    /// snapshot: a page whose state is not RUNNING holds every event up to that state.
    /// `None` when the prompt does not exist or is another user's: the owner is part of the
    /// statement's condition, so no event of a foreign prompt is ever read.
    #[tracing::instrument(name = "db", skip_all, fields(
        otel.name = "SELECT prompt_events",
        db.system.name = self.system(),
        db.operation.name = "SELECT",
        db.collection.name = "prompt_events",
    ))]
    pub async fn event_page(
        &self,
        prompt_id: &PromptId,
        user_id: &UserId,
        after: u64,
        limit: u32,
    ) -> Result<Option<EventPage>, GatewayError> {
        let sql = "SELECT p.state, e.sequence, e.payload FROM prompts p \
                   LEFT JOIN prompt_events e ON e.prompt_id = p.id AND e.sequence > $2 \
                   WHERE p.id = $1 AND p.user_id = $4 ORDER BY e.sequence LIMIT $3";
        type Row = (i32, Option<i64>, Option<Vec<u8>>);
        let args = [
            prompt_id.into(),
            saturating_i64(after).into(),
            i64::from(limit).into(),
            user_id.into(),
        ];
        let rows: Vec<Row> = self.db.read_all(sql, &args).await?;
        let Some((state, _, _)) = rows.first() else {
            return Ok(None);
        };
        let state = PromptState::try_from(*state).unwrap_or(PromptState::Unspecified);
        let events = rows
            .into_iter()
            .filter_map(|(_, sequence, payload)| Some((sequence?, payload?)))
            .map(|(sequence, payload)| stored_event(sequence, &payload))
            .collect::<Result<_, GatewayError>>()?;
        Ok(Some(EventPage { state, events }))
    }
}
