//! Every row a user owns, page by page: what an export reads and what deleting all of a
//! user's data walks.

use super::*;

/// A table whose rows carry their owner (`user_id`) and an index by owner and creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owned {
    Conversations,
    Prompts,
    ImportedRecordings,
}

impl Owned {
    fn table(self) -> &'static str {
        match self {
            Owned::Conversations => "conversations",
            Owned::Prompts => "prompts",
            Owned::ImportedRecordings => "imported_recordings",
        }
    }
}

/// Where a walk of owned rows goes on: just after this row (its creation time and id).
#[derive(Debug, Clone, Default)]
pub struct OwnedCursor {
    created_at: i64,
    id: String,
}

impl Store {
    /// Ids of `user_id`'s rows of `owned`, oldest first, from just after `after` (`None`: the
    /// oldest), at most `limit`; and where the next page starts (`None`: this was the last).
    pub async fn owned_after(
        &self,
        owned: Owned,
        user_id: &UserId,
        after: Option<&OwnedCursor>,
        limit: u32,
    ) -> Result<(Vec<String>, Option<OwnedCursor>), GatewayError> {
        // `created_at >= $2` lets the walk start at the cursor on the (user_id, created_at)
        // index instead of reading the user's rows from the first each page.
        let sql = format!(
            "SELECT id, created_at FROM {} WHERE user_id = $1 AND created_at >= $2 \
             AND (created_at > $2 OR id > $3) ORDER BY created_at, id LIMIT $4",
            owned.table()
        );
        let start = after.cloned().unwrap_or(OwnedCursor {
            created_at: i64::MIN,
            id: String::new(),
        });
        let args = [
            user_id.into(),
            start.created_at.into(),
            start.id.as_str().into(),
            i64::from(limit).into(),
        ];
        let rows: Vec<(String, i64)> = self.db.read_all(&sql, &args).await?;
        let next = match rows.last() {
            Some((id, created_at)) if rows.len() >= limit as usize => Some(OwnedCursor {
                created_at: *created_at,
                id: id.clone(),
            }),
            _ => None,
        };
        Ok((rows.into_iter().map(|(id, _)| id).collect(), next))
    }
}
