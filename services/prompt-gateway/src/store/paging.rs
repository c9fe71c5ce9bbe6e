//! Listings page by count and by bytes: a page holds at most its `limit` of summaries and at
//! most [`MAX_PAGE_BYTES`] of them encoded, and a cursor (the last summary's creation time
//! and id) says where the next page starts. Summaries are small by construction (the store
//! reads no state, outputs or whole inputs for them), so the byte bound only ever cuts a
//! page short; it never makes one fail.

use prost::Message;

use crate::error::GatewayError;

/// The most a page of summaries holds, encoded.
pub const MAX_PAGE_BYTES: usize = 1024 * 1024;

/// Where a page starts: after the summary created at `created_at` (ms) with id `id`, in
/// newest-first order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cursor {
    pub created_at: i64,
    pub id: String,
}

impl Cursor {
    /// Reads a `page_token` (empty: the first page).
    pub fn parse(token: &str) -> Result<Option<Cursor>, GatewayError> {
        if token.is_empty() {
            return Ok(None);
        }
        let invalid = || {
            GatewayError::InvalidArgument(
                "page_token is not one a listing gave: pass a next_page_token back unchanged"
                    .into(),
            )
        };
        let (created_at, id) = token.split_once('.').ok_or_else(invalid)?;
        let created_at: i64 = created_at.parse().map_err(|_| invalid())?;
        if id.is_empty() || id.len() > 256 || created_at < 0 {
            return Err(invalid());
        }
        Ok(Some(Cursor {
            created_at,
            id: id.to_owned(),
        }))
    }

    /// The token of a page that starts after this cursor.
    pub fn token(&self) -> String {
        format!("{}.{}", self.created_at, self.id)
    }
}

/// One page: the summaries and the token of the next page (empty when there is none).
#[derive(Debug)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next: String,
}

/// Cuts `items` (read with `limit`, newest first) to what fits [`MAX_PAGE_BYTES`] and names
/// the next page after the last one kept; `cursor` gives an item's place.
pub fn page<T: Message>(items: Vec<T>, limit: u32, cursor: impl Fn(&T) -> Cursor) -> Page<T> {
    let read = items.len();
    let mut bytes = 0;
    let mut kept = Vec::with_capacity(read);
    for item in items {
        let size = item.encoded_len() + 8;
        if bytes + size > MAX_PAGE_BYTES && !kept.is_empty() {
            break;
        }
        bytes += size;
        kept.push(item);
    }
    let more = kept.len() < read || read >= usize::try_from(limit).unwrap_or(usize::MAX);
    let next = match kept.last() {
        Some(last) if more => cursor(last).token(),
        _ => String::new(),
    };
    Page { items: kept, next }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentic_proto::v1::Conversation;

    fn conversation(n: i64, title_bytes: usize) -> Conversation {
        Conversation {
            id: format!("c{n}"),
            title: "x".repeat(title_bytes),
            created_at: Some(agentic_proto::json::timestamp_from_millis(1000 - n)),
            ..Conversation::default()
        }
    }

    fn cursor_of(conversation: &Conversation) -> Cursor {
        Cursor {
            created_at: conversation
                .created_at
                .as_ref()
                .map_or(0, agentic_proto::json::timestamp_millis),
            id: conversation.id.clone(),
        }
    }

    #[test]
    fn a_token_reads_back_as_the_cursor_it_came_from() {
        let cursor = Cursor {
            created_at: 1_700_000_000_000,
            id: "0190.a.b".into(),
        };
        assert_eq!(Cursor::parse(&cursor.token()).unwrap(), Some(cursor));
        assert_eq!(Cursor::parse("").unwrap(), None);
        for bad in ["x", "12", ".id", "-1.id", "1.", "abc.id"] {
            assert!(Cursor::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_full_page_names_the_next_and_a_short_one_does_not() {
        let full = page((0..3).map(|n| conversation(n, 10)).collect(), 3, cursor_of);
        assert_eq!(full.items.len(), 3);
        assert_eq!(full.next, "998.c2");
        let short = page((0..2).map(|n| conversation(n, 10)).collect(), 3, cursor_of);
        assert_eq!(short.next, "");
    }

    #[test]
    fn a_page_stops_before_it_passes_the_byte_bound() {
        let items: Vec<_> = (0..10).map(|n| conversation(n, 300_000)).collect();
        let cut = page(items, 10, cursor_of);
        assert_eq!(cut.items.len(), 3);
        let bytes: usize = cut.items.iter().map(Message::encoded_len).sum();
        assert!(bytes <= MAX_PAGE_BYTES, "{bytes}");
        assert_eq!(cut.next, "998.c2");
    }
}
