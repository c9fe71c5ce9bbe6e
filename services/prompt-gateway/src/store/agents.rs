//! Agent definitions: every version of each of a user's agents, as an encoded
//! `agentic.v1.Agent`. A save takes the next version of its name in one transaction that
//! also counts the user's agents and the name's versions (PostgreSQL: under a lock on the
//! user, so two saves at once cannot both pass the count nor take one version).

use super::*;
use agentic_proto::v1::Agent;

/// The newest version of each of `$1`'s agents.
const LATEST: &str = "SELECT definition FROM agents a WHERE user_id = $1 AND version = \
     (SELECT MAX(version) FROM agents b WHERE b.user_id = a.user_id AND b.name = a.name) \
     ORDER BY name";

/// How many agents, and versions of one agent, a user may keep.
#[derive(Debug, Clone, Copy)]
pub struct AgentLimits {
    pub agents: i64,
    pub versions: i64,
}

fn decoded(definitions: Vec<Vec<u8>>) -> Result<Vec<Agent>, GatewayError> {
    definitions
        .iter()
        .map(|definition| Ok(Agent::decode(definition.as_slice())?))
        .collect()
}

impl Store {
    /// Stores `agent` (checked) as the next version of its name for `user_id`, within
    /// `limits`: the agent as stored, its version and creation time set.
    pub async fn insert_agent(
        &self,
        user_id: &UserId,
        agent: &Agent,
        limits: AgentLimits,
    ) -> Result<Agent, GatewayError> {
        let mut writer = self.writer().await?;
        let mut tx = writer.begin().await?;
        let mut conn = tx.conn();
        if self.is_shared() {
            conn.execute(
                "SELECT pg_advisory_xact_lock(hashtext('agentic.agents'), hashtext($1))",
                &[user_id.into()],
            )
            .await?;
        }
        let newest: Option<i64> = conn
            .scalar(
                "SELECT MAX(version) FROM agents WHERE user_id = $1 AND name = $2",
                &[user_id.into(), agent.name.as_str().into()],
            )
            .await?
            .flatten();
        match newest {
            None => {
                let names: i64 = conn
                    .scalar(
                        "SELECT COUNT(DISTINCT name) FROM agents WHERE user_id = $1",
                        &[user_id.into()],
                    )
                    .await?
                    .unwrap_or_default();
                if names >= limits.agents {
                    return Err(GatewayError::ResourceExhausted(format!(
                        "you have {names} agents, the most a user may have; delete one first"
                    )));
                }
            }
            Some(newest) if newest >= limits.versions => {
                return Err(GatewayError::ResourceExhausted(format!(
                    "agent {} has {newest} versions, the most one agent may have; delete it \
                     (prompts that ran as it keep what they took) or save under a new name",
                    agent.name
                )));
            }
            Some(_) => {}
        }
        let mut stored = agent.clone();
        stored.version = u32::try_from(newest.unwrap_or_default() + 1).unwrap_or(u32::MAX);
        let created = now();
        stored.created_at = Some(created);
        let definition = stored.encode_to_vec();
        conn.execute(
            "INSERT INTO agents (user_id, name, version, definition, bytes, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
            &[
                user_id.into(),
                stored.name.as_str().into(),
                i64::from(stored.version).into(),
                (&definition).into(),
                i64::try_from(definition.len()).unwrap_or(i64::MAX).into(),
                timestamp_millis(&created).into(),
            ],
        )
        .await?;
        tx.commit().await?;
        Ok(stored)
    }

    /// Version `version` of `user_id`'s agent `name` (`None`: the newest), if there is one.
    pub async fn agent(
        &self,
        user_id: &UserId,
        name: &str,
        version: Option<u32>,
    ) -> Result<Option<Agent>, GatewayError> {
        let definition: Option<Vec<u8>> = match version {
            Some(version) => {
                self.db
                    .read_scalar(
                        "SELECT definition FROM agents WHERE user_id = $1 AND name = $2 AND version = $3",
                        &[user_id.into(), name.into(), i64::from(version).into()],
                    )
                    .await?
            }
            None => {
                self.db
                    .read_scalar(
                        "SELECT definition FROM agents WHERE user_id = $1 AND name = $2 \
                         ORDER BY version DESC LIMIT 1",
                        &[user_id.into(), name.into()],
                    )
                    .await?
            }
        };
        Ok(decoded(definition.into_iter().collect())?.pop())
    }

    /// The newest version of each of `user_id`'s agents, by name.
    pub async fn latest_agents(&self, user_id: &UserId) -> Result<Vec<Agent>, GatewayError> {
        decoded(self.db.read_scalars(LATEST, &[user_id.into()]).await?)
    }

    /// Every version of `user_id`'s agent `name` (every agent's with `None`), oldest first.
    pub async fn agent_versions(
        &self,
        user_id: &UserId,
        name: Option<&str>,
    ) -> Result<Vec<Agent>, GatewayError> {
        let definitions = match name {
            Some(name) => {
                self.db
                    .read_scalars(
                        "SELECT definition FROM agents WHERE user_id = $1 AND name = $2 ORDER BY version",
                        &[user_id.into(), name.into()],
                    )
                    .await?
            }
            None => {
                self.db
                    .read_scalars(
                        "SELECT definition FROM agents WHERE user_id = $1 ORDER BY name, version",
                        &[user_id.into()],
                    )
                    .await?
            }
        };
        decoded(definitions)
    }

    /// Deletes every version of `user_id`'s agent `name` (every agent of theirs with
    /// `None`): how many versions there were.
    pub async fn delete_agents(
        &self,
        user_id: &UserId,
        name: Option<&str>,
    ) -> Result<u64, GatewayError> {
        Ok(match name {
            Some(name) => {
                self.db
                    .write(
                        "DELETE FROM agents WHERE user_id = $1 AND name = $2",
                        &[user_id.into(), name.into()],
                    )
                    .await?
            }
            None => {
                self.db
                    .write("DELETE FROM agents WHERE user_id = $1", &[user_id.into()])
                    .await?
            }
        })
    }
}

impl Store {
    /// How many prompts `user_id` created after `since` (ms), through agent `agent` when
    /// named, and when the oldest of them was created (ms; 0 with none).
    pub async fn prompts_since(
        &self,
        user_id: &UserId,
        agent: Option<&str>,
        since: i64,
    ) -> Result<(u64, i64), GatewayError> {
        let row: Option<(i64, Option<i64>)> = self
            .db
            .read_optional(
                "SELECT COUNT(*), MIN(created_at) FROM prompts \
                 WHERE user_id = $1 AND created_at > $2 AND ($3 = '' OR agent_name = $3)",
                &[
                    user_id.into(),
                    since.into(),
                    agent.unwrap_or_default().into(),
                ],
            )
            .await?;
        let (count, oldest) = row.unwrap_or_default();
        Ok((unsigned(count), oldest.unwrap_or_default()))
    }
}

impl Store {
    /// The tokens of `user_id`'s prompts written to after `since` (ms), through agent `agent`
    /// when named, and the earliest of those writes (ms; 0 with none).
    pub async fn tokens_in_window(
        &self,
        user_id: &UserId,
        agent: Option<&str>,
        since: i64,
    ) -> Result<(u64, i64), GatewayError> {
        let row: Option<(i64, Option<i64>)> = self
            .db
            .read_optional(
                "SELECT CAST(COALESCE(SUM(total_tokens), 0) AS BIGINT), MIN(updated_at) FROM prompts \
                 WHERE user_id = $1 AND updated_at > $2 AND ($3 = '' OR agent_name = $3)",
                &[user_id.into(), since.into(), agent.unwrap_or_default().into()],
            )
            .await?;
        let (spent, oldest) = row.unwrap_or_default();
        Ok((unsigned(spent), oldest.unwrap_or_default()))
    }
}
