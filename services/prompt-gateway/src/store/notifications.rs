//! Wake-ups between replicas sharing a PostgreSQL database (`NOTIFY` on every stored event).

use super::*;

/// What another replica's write means for this one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wake {
    /// Something about this prompt changed: event `sequence` was stored (0: not an event).
    Prompt { prompt_id: PromptId, sequence: u64 },
    /// Wake-ups may have been missed (the connection dropped): look at everything again.
    Everything,
}

/// The stream of other replicas' writes (PostgreSQL `LISTEN`).
pub struct Wakeups {
    pub(super) listener: PgListener,
    pub(super) replica: String,
}

impl Wakeups {
    /// The next write of another replica. After a lost connection this says
    /// [`Wake::Everything`] and the next call reconnects (an error if that fails).
    pub async fn next(&mut self) -> Result<Wake, GatewayError> {
        loop {
            let Some(notification) = self.listener.try_recv().await? else {
                return Ok(Wake::Everything);
            };
            let mut parts = notification.payload().splitn(3, ' ');
            let (Some(replica), Some(prompt_id), Some(sequence)) =
                (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            if replica == self.replica {
                continue;
            }
            return Ok(Wake::Prompt {
                prompt_id: PromptId::known(prompt_id),
                sequence: sequence.parse().unwrap_or_default(),
            });
        }
    }
}

impl Store {
    pub(super) fn wakeup_payload(&self, prompt_id: &PromptId, sequence: i64) -> String {
        format!("{} {prompt_id} {sequence}", self.owner.replica)
    }

    /// Tells the other replicas that something about a prompt changed that is not an event
    /// (an approval decision): the replica running it reads it back. A no-op on SQLite.
    pub async fn poke(&self, prompt_id: &PromptId) -> Result<(), GatewayError> {
        if let Backend::Postgres(pool) = self.db.backend() {
            sqlx::query("SELECT pg_notify($1, $2)")
                .bind(EVENTS_CHANNEL)
                .bind(self.wakeup_payload(prompt_id, 0))
                .execute(pool)
                .await?;
        }
        Ok(())
    }

    /// Wake-ups for events other replicas store; `None` on SQLite (one replica only).
    pub async fn wakeups(&self) -> Result<Option<Wakeups>, GatewayError> {
        let Backend::Postgres(pool) = self.db.backend() else {
            return Ok(None);
        };
        let mut listener = PgListener::connect_with(pool).await?;
        listener.listen(EVENTS_CHANNEL).await?;
        Ok(Some(Wakeups {
            listener,
            replica: self.owner.replica.clone(),
        }))
    }
}
