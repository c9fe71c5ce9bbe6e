//! PostgreSQL's batch path: a run's events appended one by one inside one transaction.

use super::*;

impl Store {
    /// [`Store::append_batch`]'s work on PostgreSQL, inside the caller's transaction `conn`.
    pub(super) async fn append_all_postgres(
        &self,
        conn: &mut sqlx::PgConnection,
        prompt_id: &str,
        appends: Vec<Append>,
        usage: &Usage,
    ) -> Result<Vec<PromptEvent>, GatewayError> {
        let mut events = Vec::with_capacity(appends.len() + 1);
        for Append { change, kind } in appends {
            events.push(append!(self, conn, prompt_id, Guard::Open, change, |_| {
                kind
            })?);
        }
        if *usage != Usage::default() {
            sqlx::query(ADD_USAGE)
                .bind(saturating_i64(usage.input_tokens))
                .bind(saturating_i64(usage.output_tokens))
                .bind(saturating_i64(usage.total_tokens))
                .bind(prompt_id)
                .execute(&mut *conn)
                .await?;
        }
        Ok(events)
    }
}
