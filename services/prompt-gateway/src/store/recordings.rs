//! Prompts' recordings and imported recordings. A prompt's exchanges are appended
//! as its runs send them, each in one transaction that bumps the recording's counters only
//! while the recording stays within [`MAX_RECORDED_EXCHANGES`] and [`MAX_RECORDING_BYTES`]
//! (one statement checks and bumps, so concurrent appends never pass them); past either,
//! or for an exchange an executor could not keep, the recording is marked incomplete and
//! takes nothing more.

use super::*;
use agentic_proto::v1::{Exchange, Recording};

/// Exchanges one prompt's recording keeps, at most.
pub const MAX_RECORDED_EXCHANGES: i64 = 5_000;
/// Encoded bytes of one prompt's exchanges, at most: a replay sends them all in one
/// `Execute` start, beside the prompt and its history, and an exported recording should fit
/// one request to import it (2 MiB, with its prompt).
pub const MAX_RECORDING_BYTES: i64 = 1024 * 1024;
/// Recordings one user may import and keep.
pub const MAX_IMPORTED_PER_USER: i64 = 100;

/// Marks the recording of `$1` incomplete: it takes nothing more.
const MARK_INCOMPLETE: &str = "INSERT INTO prompt_recordings (prompt_id, exchanges, bytes, complete) \
     VALUES ($1, 0, 0, 0) ON CONFLICT (prompt_id) DO UPDATE SET complete = 0";

/// Bumps the recording's counters for one more exchange of `$2` bytes if it is complete and
/// stays within `$3` exchanges and `$4` bytes; returns the exchange's sequence (no row when
/// it does not fit).
const RESERVE_EXCHANGE: &str = "INSERT INTO prompt_recordings (prompt_id, exchanges, bytes, complete) \
     SELECT $1, 1, $2, 1 WHERE $2 <= $4 \
     ON CONFLICT (prompt_id) DO UPDATE SET exchanges = prompt_recordings.exchanges + 1, \
     bytes = prompt_recordings.bytes + excluded.bytes \
     WHERE prompt_recordings.complete = 1 AND prompt_recordings.exchanges < $3 \
     AND prompt_recordings.bytes + excluded.bytes <= $4 \
     RETURNING exchanges";

impl Store {
    /// Appends `exchange` to `prompt_id`'s recording, or marks the recording incomplete when
    /// it does not fit (or is a `lost` marker). Whether it was kept.
    pub async fn record_exchange(
        &self,
        prompt_id: &PromptId,
        exchange: &Exchange,
    ) -> Result<bool, GatewayError> {
        let lost = matches!(
            exchange.kind,
            Some(agentic_proto::v1::exchange::Kind::Lost(_)) | None
        );
        let payload = exchange.encode_to_vec();
        let bytes = i64::try_from(payload.len()).unwrap_or(i64::MAX);
        let mut writer = self.writer().await?;
        let mut tx = writer.begin().await?;
        let mut conn = tx.conn();
        let sequence: Option<i64> = if lost {
            None
        } else {
            conn.scalar(
                RESERVE_EXCHANGE,
                &[
                    prompt_id.into(),
                    bytes.into(),
                    MAX_RECORDED_EXCHANGES.into(),
                    MAX_RECORDING_BYTES.into(),
                ],
            )
            .await?
        };
        match sequence {
            Some(sequence) => {
                conn.execute(
                    "INSERT INTO prompt_exchanges (prompt_id, sequence, payload) VALUES ($1, $2, $3)",
                    &[prompt_id.into(), sequence.into(), payload.as_slice().into()],
                )
                .await?;
            }
            None => {
                conn.execute(MARK_INCOMPLETE, &[prompt_id.into()]).await?;
            }
        }
        tx.commit().await?;
        Ok(sequence.is_some())
    }

    /// Marks `prompt_id`'s recording incomplete (an exchange could not be kept).
    pub async fn recording_incomplete(&self, prompt_id: &PromptId) -> Result<(), GatewayError> {
        self.db.write(MARK_INCOMPLETE, &[prompt_id.into()]).await?;
        Ok(())
    }

    /// `prompt_id`'s exchanges in order, and whether its recording is complete; `None` when
    /// nothing was recorded.
    pub async fn exchanges(
        &self,
        prompt_id: &PromptId,
    ) -> Result<Option<(Vec<Exchange>, bool)>, GatewayError> {
        let complete: Option<i32> = self
            .db
            .read_scalar(
                "SELECT complete FROM prompt_recordings WHERE prompt_id = $1",
                &[prompt_id.into()],
            )
            .await?;
        let Some(complete) = complete else {
            return Ok(None);
        };
        let payloads: Vec<Vec<u8>> = self
            .db
            .read_scalars(
                "SELECT payload FROM prompt_exchanges WHERE prompt_id = $1 ORDER BY sequence",
                &[prompt_id.into()],
            )
            .await?;
        let exchanges = payloads
            .iter()
            .map(|payload| Exchange::decode(payload.as_slice()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some((exchanges, complete == 1)))
    }

    /// Keeps `recording` as `id`, of `user_id`; refused past [`MAX_IMPORTED_PER_USER`].
    pub async fn import_recording(
        &self,
        user_id: &UserId,
        id: &PromptId,
        recording: &Recording,
    ) -> Result<(), GatewayError> {
        let mut writer = self.writer().await?;
        let mut tx = writer.begin().await?;
        let mut conn = tx.conn();
        // SQLite's one writer counts and inserts alone; on PostgreSQL a lock on the user
        // (for the transaction) keeps two imports from both passing the count.
        if self.is_shared() {
            conn.execute(
                "SELECT pg_advisory_xact_lock(hashtext('agentic.recordings'), hashtext($1))",
                &[user_id.into()],
            )
            .await?;
        }
        let kept: i64 = conn
            .scalar(
                "SELECT COUNT(*) FROM imported_recordings WHERE user_id = $1",
                &[user_id.into()],
            )
            .await?
            .unwrap_or_default();
        if kept >= MAX_IMPORTED_PER_USER {
            return Err(GatewayError::ResourceExhausted(format!(
                "this user keeps {kept} imported recordings, as many as one may: delete one (DeleteRecording) first"
            )));
        }
        conn.execute(
            "INSERT INTO imported_recordings (id, user_id, payload, created_at) VALUES ($1, $2, $3, $4)",
            &[
                id.into(),
                user_id.into(),
                recording.encode_to_vec().as_slice().into(),
                now_millis().into(),
            ],
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The imported recording `id` if `user_id` owns it.
    pub async fn imported_recording(
        &self,
        user_id: &UserId,
        id: &str,
    ) -> Result<Option<Recording>, GatewayError> {
        let payload: Option<Vec<u8>> = self
            .db
            .read_scalar(
                "SELECT payload FROM imported_recordings WHERE id = $1 AND user_id = $2",
                &[id.into(), user_id.into()],
            )
            .await?;
        Ok(payload
            .map(|payload| Recording::decode(payload.as_slice()))
            .transpose()?)
    }
}
