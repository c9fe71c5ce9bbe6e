//! Modes executors registered at run time.

use super::*;

/// A mode an executor registered at run time (see [`Store::register_mode`]).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ModeRegistration {
    pub id: String,
    pub name: String,
    pub endpoint: String,
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
        with_writer!(self, |pool| {
            let mut tx = pool.begin().await?;
            sqlx::query("DELETE FROM mode_registrations WHERE expires_at <= $1")
                .bind(now)
                .execute(&mut *tx)
                .await?;
            let others: i64 =
                sqlx::query_scalar("SELECT COUNT(*) FROM mode_registrations WHERE id != $1")
                    .bind(&registration.id)
                    .fetch_one(&mut *tx)
                    .await?;
            if others >= i64::from(max) {
                return Err(GatewayError::ResourceExhausted(format!(
                    "{max} modes are registered already"
                )));
            }
            sqlx::query(
                "INSERT INTO mode_registrations (id, name, endpoint, expires_at) \
                 VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO UPDATE SET \
                 name = excluded.name, endpoint = excluded.endpoint, expires_at = excluded.expires_at",
            )
            .bind(&registration.id)
            .bind(&registration.name)
            .bind(&registration.endpoint)
            .bind(expires_at)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok::<_, GatewayError>(())
        })
    }

    /// The registration of mode `id`, unless it expired.
    pub async fn registered_mode(
        &self,
        id: &str,
    ) -> Result<Option<ModeRegistration>, GatewayError> {
        let sql =
            "SELECT id, name, endpoint FROM mode_registrations WHERE id = $1 AND expires_at > $2";
        Ok(with_pool!(self, |pool| {
            sqlx::query_as(sql)
                .bind(id)
                .bind(now_millis())
                .fetch_optional(pool)
                .await
        })?)
    }

    /// Every registration that has not expired, by id.
    pub async fn registered_modes(&self) -> Result<Vec<ModeRegistration>, GatewayError> {
        let sql =
            "SELECT id, name, endpoint FROM mode_registrations WHERE expires_at > $1 ORDER BY id";
        Ok(with_pool!(self, |pool| {
            sqlx::query_as(sql).bind(now_millis()).fetch_all(pool).await
        })?)
    }
}
