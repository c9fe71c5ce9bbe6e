//! Sub-agents' prompts: which call of which prompt started each, the tree's root, and whether
//! the call has its answer yet (migration 0019). A row goes with its child prompt.

use super::*;

impl Store {
    /// Takes `call` of `parent` for the new child prompt `child` (whose tree's root is
    /// `root`), if the tree has fewer than `most.0` children unanswered and `most.1` in all:
    /// count and claim are one statement.
    pub async fn claim_sub_prompt(
        &self,
        child: &PromptId,
        (parent, call): (&PromptId, &str),
        (root, budget): (&PromptId, Option<&agentic_proto::v1::Budget>),
        most: (i64, i64),
    ) -> Result<Claim, GatewayError> {
        let budget = budget.map(Message::encode_to_vec).unwrap_or_default();
        let inserted = self
            .db
            .write(
                "INSERT INTO sub_prompts (prompt_id, parent_id, root_id, tool_call_id, created_at, \
                 budget) SELECT $1, $2, $3, $4, $5, $8 \
                 WHERE (SELECT COUNT(*) FROM sub_prompts WHERE root_id = $3 AND answered = 0) < $6 \
                 AND (SELECT COUNT(*) FROM sub_prompts WHERE root_id = $3) < $7 \
                 ON CONFLICT DO NOTHING",
                &[
                    child.into(),
                    parent.into(),
                    root.into(),
                    call.into(),
                    now_millis().into(),
                    most.0.into(),
                    most.1.into(),
                    (&budget).into(),
                ],
            )
            .await?;
        if inserted == 1 {
            return Ok(Claim::Claimed);
        }
        let taken: Option<String> = self
            .db
            .read_scalar(
                "SELECT prompt_id FROM sub_prompts WHERE parent_id = $1 AND tool_call_id = $2",
                &[parent.into(), call.into()],
            )
            .await?;
        Ok(if taken.is_some() {
            Claim::Taken
        } else {
            Claim::Full
        })
    }

    /// The budgets given to `parent`'s children that have not answered yet: what they may
    /// still spend is held back from a new child's.
    pub async fn budgets_held(
        &self,
        parent: &PromptId,
    ) -> Result<Vec<agentic_proto::v1::Budget>, GatewayError> {
        let budgets: Vec<Vec<u8>> = self
            .db
            .read_scalars(
                "SELECT budget FROM sub_prompts WHERE parent_id = $1 AND answered = 0",
                &[parent.into()],
            )
            .await?;
        Ok(budgets
            .iter()
            .filter(|budget| !budget.is_empty())
            .filter_map(|budget| agentic_proto::v1::Budget::decode(budget.as_slice()).ok())
            .collect())
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

    /// What the sub-agents under `parent` spent, at every depth (each prompt's usage is its
    /// own run's, so a grandchild's is not in its parent's).
    pub async fn children_spent(&self, parent: &PromptId) -> Result<Usage, GatewayError> {
        let row: Option<(i64, i64, i64, i64, i64, i64)> = self
            .db
            .read_optional(
                "WITH RECURSIVE tree(id) AS (SELECT prompt_id FROM sub_prompts WHERE parent_id = $1 \
                 UNION ALL SELECT s.prompt_id FROM sub_prompts s JOIN tree t ON s.parent_id = t.id) \
                 SELECT CAST(COALESCE(SUM(p.input_tokens), 0) AS BIGINT), \
                 CAST(COALESCE(SUM(p.output_tokens), 0) AS BIGINT), \
                 CAST(COALESCE(SUM(p.total_tokens), 0) AS BIGINT), \
                 CAST(COALESCE(SUM(p.llm_calls), 0) AS BIGINT), \
                 CAST(COALESCE(SUM(p.tool_calls), 0) AS BIGINT), \
                 CAST(COALESCE(SUM(p.cost_micros), 0) AS BIGINT) \
                 FROM tree t JOIN prompts p ON p.id = t.id",
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

    /// Sub-agents' prompts that ended at least `grace` ms ago while their call still has no
    /// answer (whoever followed them stopped, or could not deliver it yet), at most `limit`.
    pub async fn ended_unanswered_sub_prompts(
        &self,
        grace: i64,
        limit: i64,
    ) -> Result<Vec<PromptId>, GatewayError> {
        let ids: Vec<String> = self
            .db
            .read_scalars(
                "SELECT s.prompt_id FROM sub_prompts s JOIN prompts p ON p.id = s.prompt_id \
                 WHERE s.answered = 0 AND p.state IN ($1, $2, $3) AND p.updated_at < $4 LIMIT $5",
                &[
                    ENDED[0].into(),
                    ENDED[1].into(),
                    ENDED[2].into(),
                    (now_millis() - grace).into(),
                    limit.into(),
                ],
            )
            .await?;
        Ok(ids.into_iter().map(PromptId::known).collect())
    }

    /// Sub-agents' prompts still unfinished whose parent ended, with their owner, at most
    /// `limit`: they are to be cancelled.
    pub async fn orphaned_sub_prompts(
        &self,
        limit: i64,
    ) -> Result<Vec<(PromptId, UserId)>, GatewayError> {
        let rows: Vec<(String, String)> = self
            .db
            .read_all(
                "SELECT s.prompt_id, c.user_id FROM sub_prompts s \
                 JOIN prompts c ON c.id = s.prompt_id JOIN prompts p ON p.id = s.parent_id \
                 WHERE s.answered = 0 AND p.state IN ($1, $2, $3) \
                 AND c.state NOT IN ($1, $2, $3) LIMIT $4",
                &[
                    ENDED[0].into(),
                    ENDED[1].into(),
                    ENDED[2].into(),
                    limit.into(),
                ],
            )
            .await?;
        Ok(rows
            .into_iter()
            .map(|(child, user)| (PromptId::known(child), UserId::known(user)))
            .collect())
    }
}

/// What claiming a call for a new child found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    Claimed,
    /// The call has a child already.
    Taken,
    /// The tree has as many children as it may.
    Full,
}

/// Events read at a time looking back for a prompt's last pause.
const LOOK_BACK_PAGE: i64 = 32;

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
