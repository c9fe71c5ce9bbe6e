//! PostgreSQL's batch path: a run's events appended one by one inside one transaction.

use super::*;

impl Store {
    /// [`Store::append_batch`]'s work on PostgreSQL, inside the caller's transaction `conn`.
    pub(super) async fn append_all_postgres(
        &self,
        conn: &mut sqlx::PgConnection,
        prompt_id: &PromptId,
        appends: Vec<Append>,
        usage: &Usage,
    ) -> Result<Vec<PromptEvent>, GatewayError> {
        let mut conn = Conn::Postgres(conn);
        let mut events = Vec::with_capacity(appends.len() + 1);
        for Append { change, kind } in appends {
            events.push(append(self, &mut conn, prompt_id, Guard::Open, change, |_| kind).await?);
        }
        if *usage != Usage::default() {
            conn.execute(ADD_USAGE, &events::usage_args(prompt_id, usage))
                .await?;
        }
        Ok(events)
    }
}
