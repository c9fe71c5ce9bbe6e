//! Modes executors registered at run time.

use super::*;

/// A mode an executor registered at run time (see [`Store::register_mode`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModeRegistration {
    pub id: String,
    pub name: String,
    pub endpoint: String,
}

impl<'r, R: sqlx::Row> sqlx::FromRow<'r, R> for ModeRegistration
where
    Columns<'r>: From<&'r R>,
{
    fn from_row(row: &'r R) -> Result<Self, sqlx::Error> {
        let columns = Columns::from(row);
        Ok(ModeRegistration {
            id: columns.get("id")?,
            name: columns.get("name")?,
            endpoint: columns.get("endpoint")?,
        })
    }
}

impl Store {
    /// Adds or renews a registration until `expires_at` (ms since the epoch). Registrations
    /// that expired are dropped first; [`GatewayError::ResourceExhausted`] when `max` other
    /// modes are registered already.
    pub async fn register_mode(
        &self,
        registration: &ModeRegistration,
        expires_at: i64,
        max: u32,
    ) -> Result<(), GatewayError> {
        let now = now_millis();
        let mut writer = self.writer().await?;
        let mut tx = writer.begin().await?;
        let mut conn = tx.conn();
        conn.execute(
            "DELETE FROM mode_registrations WHERE expires_at <= $1",
            &[now.into()],
        )
        .await?;
        let others: i64 = conn
            .scalar(
                "SELECT COUNT(*) FROM mode_registrations WHERE id != $1",
                &[(&registration.id).into()],
            )
            .await?
            .unwrap_or_default();
        if others >= i64::from(max) {
            return Err(GatewayError::ResourceExhausted(format!(
                "{max} modes are registered already"
            )));
        }
        conn.execute(
            "INSERT INTO mode_registrations (id, name, endpoint, expires_at) \
             VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO UPDATE SET \
             name = excluded.name, endpoint = excluded.endpoint, expires_at = excluded.expires_at",
            &[
                (&registration.id).into(),
                (&registration.name).into(),
                (&registration.endpoint).into(),
                expires_at.into(),
            ],
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The registration of mode `id`, unless it expired.
    pub async fn registered_mode(
        &self,
        id: &str,
    ) -> Result<Option<ModeRegistration>, GatewayError> {
        let sql =
            "SELECT id, name, endpoint FROM mode_registrations WHERE id = $1 AND expires_at > $2";
        Ok(self
            .db
            .read_optional(sql, &[id.into(), now_millis().into()])
            .await?)
    }

    /// Every registration that has not expired, by id.
    pub async fn registered_modes(&self) -> Result<Vec<ModeRegistration>, GatewayError> {
        let sql =
            "SELECT id, name, endpoint FROM mode_registrations WHERE expires_at > $1 ORDER BY id";
        Ok(self.db.read_all(sql, &[now_millis().into()]).await?)
    }
}
