//! Sub-agents' prompts: which call of which prompt started each, the tree's root, and whether
//! the call has its answer yet (migration 0019). A row goes with its child prompt.

use super::*;

impl Store {
    /// Takes `call` of `parent` for the new child prompt `child` (whose tree's root is
    /// `root`): false when the call has a child already, whoever asked first.
    pub async fn claim_sub_prompt(
        &self,
        child: &PromptId,
        (parent, call): (&PromptId, &str),
        root: &PromptId,
    ) -> Result<bool, GatewayError> {
        let inserted = self
            .db
            .write(
                "INSERT INTO sub_prompts (prompt_id, parent_id, root_id, tool_call_id, created_at) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
                &[
                    child.into(),
                    parent.into(),
                    root.into(),
                    call.into(),
                    now_millis().into(),
                ],
            )
            .await?;
        Ok(inserted == 1)
    }

    /// How many sub-agents' prompts the tree under `root` started, and how many of them have
    /// not answered yet.
    pub async fn sub_prompt_counts(&self, root: &PromptId) -> Result<(i64, i64), GatewayError> {
        let row: Option<(i64, i64)> = self
            .db
            .read_optional(
                "SELECT COUNT(*), CAST(COALESCE(SUM(CASE WHEN answered = 0 THEN 1 ELSE 0 END), 0) \
                 AS BIGINT) FROM sub_prompts WHERE root_id = $1",
                &[root.into()],
            )
            .await?;
        Ok(row.unwrap_or_default())
    }

    /// Marks `child`'s call answered: true for the one caller that did it first.
    pub async fn answer_sub_prompt(&self, child: &PromptId) -> Result<bool, GatewayError> {
        let changed = self
            .db
            .write(
                "UPDATE sub_prompts SET answered = 1 WHERE prompt_id = $1 AND answered = 0",
                &[child.into()],
            )
            .await?;
        Ok(changed == 1)
    }

    /// What the sub-agents `parent` called spent (their own sub-agents included: each
    /// child's budget was what the tree had left, and its usage is its own run's).
    pub async fn children_spent(&self, parent: &PromptId) -> Result<Usage, GatewayError> {
        let row: Option<(i64, i64, i64, i64, i64, i64)> = self
            .db
            .read_optional(
                "SELECT CAST(COALESCE(SUM(p.input_tokens), 0) AS BIGINT), \
                 CAST(COALESCE(SUM(p.output_tokens), 0) AS BIGINT), \
                 CAST(COALESCE(SUM(p.total_tokens), 0) AS BIGINT), \
                 CAST(COALESCE(SUM(p.llm_calls), 0) AS BIGINT), \
                 CAST(COALESCE(SUM(p.tool_calls), 0) AS BIGINT), \
                 CAST(COALESCE(SUM(p.cost_micros), 0) AS BIGINT) \
                 FROM sub_prompts s JOIN prompts p ON p.id = s.prompt_id WHERE s.parent_id = $1",
                &[parent.into()],
            )
            .await?;
        let (input, output, total, llm_calls, tool_calls, cost) = row.unwrap_or_default();
        let count = |value: i64| u64::try_from(value).unwrap_or_default();
        Ok(Usage {
            input_tokens: count(input),
            output_tokens: count(output),
            total_tokens: count(total),
            llm_calls: u32::try_from(llm_calls).unwrap_or(u32::MAX),
            tool_calls: u32::try_from(tool_calls).unwrap_or(u32::MAX),
            cost_micros: count(cost),
            ..Usage::default()
        })
    }

    /// Sub-agents' prompts that ended while their call still has no answer (the replica
    /// that followed them stopped first), at most `limit`.
    pub async fn ended_unanswered_sub_prompts(
        &self,
        limit: i64,
    ) -> Result<Vec<PromptId>, GatewayError> {
        let ids: Vec<String> = self
            .db
            .read_scalars(
                "SELECT s.prompt_id FROM sub_prompts s JOIN prompts p ON p.id = s.prompt_id \
                 WHERE s.answered = 0 AND p.state IN ($1, $2, $3) LIMIT $4",
                &[
                    ENDED[0].into(),
                    ENDED[1].into(),
                    ENDED[2].into(),
                    limit.into(),
                ],
            )
            .await?;
        Ok(ids.into_iter().map(PromptId::known).collect())
    }
}

/// Events read at a time looking back for a prompt's last pause.
const LOOK_BACK_PAGE: i64 = 200;

impl Store {
    /// Whether the last pause among `prompt_id`'s events up to sequence `through` is a
    /// `delegating` one (it waits for its sub-agents only): a stream that resumes after
    /// `through` while the prompt waits goes on then. Reads back page by page to that pause.
    pub async fn delegating_at(
        &self,
        prompt_id: &PromptId,
        through: u64,
    ) -> Result<bool, GatewayError> {
        let mut before = i64::try_from(through).unwrap_or(i64::MAX).saturating_add(1);
        loop {
            let rows: Vec<(i64, Vec<u8>)> = self
                .db
                .read_all(
                    "SELECT sequence, payload FROM prompt_events WHERE prompt_id = $1 \
                     AND sequence < $2 ORDER BY sequence DESC LIMIT $3",
                    &[prompt_id.into(), before.into(), LOOK_BACK_PAGE.into()],
                )
                .await?;
            let Some(last) = rows.last() else {
                return Ok(false);
            };
            before = last.0;
            for (sequence, payload) in &rows {
                let event = stored_event(*sequence, payload)?;
                match event.kind {
                    Some(prompt_event::Kind::Delegating(_)) => return Ok(true),
                    Some(prompt_event::Kind::Waiting(_)) => return Ok(false),
                    _ if event.is_terminal() => return Ok(false),
                    _ => {}
                }
            }
        }
    }
}
