//! Identifiers as types. A prompt's id, a conversation's, a user's and a tool's are all text
//! on the wire, and a function that takes two of them as `&str` lets a caller swap them
//! without a complaint. Here each is its own type: an [`Id`] of a [`Kind`], made by
//! [`Id::parse`] where text from outside enters a service (a request, a message of another
//! service), by [`Id::generate`] where the system issues one, or by [`Id::known`] for text
//! the service itself stored and now reads back.
//!
//! Parsing refuses only what no id can hold: nothing at all, NUL characters (PostgreSQL
//! cannot store them in text, and both backends must behave alike) and more than
//! [`MAX_ID_BYTES`]. Any other text is a well-formed id that may name nothing, so a lookup
//! of it answers "not found", as it would for an id that was deleted.

use std::borrow::Borrow;
use std::fmt;
use std::marker::PhantomData;

/// The longest id accepted, in bytes. Ids the system issues are UUIDs (36 bytes); user ids
/// and tool ids are names an operator chose.
pub const MAX_ID_BYTES: usize = 256;

/// What an [`Id`] identifies: its field name, used in error messages.
pub trait Kind {
    /// The field that carries this id in requests (`prompt_id`, …).
    const FIELD: &'static str;
}

/// The kind of a prompt's id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Prompt {}
/// The kind of a conversation's id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Conversation {}
/// The kind of a user's id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum User {}
/// The kind of a tool's id (`artifact.save`, `interpreter.run-code`, …).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tool {}
/// The kind of a trigger's id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Trigger {}

impl Kind for Prompt {
    const FIELD: &'static str = "prompt_id";
}
impl Kind for Conversation {
    const FIELD: &'static str = "conversation_id";
}
impl Kind for User {
    const FIELD: &'static str = "user_id";
}
impl Kind for Tool {
    const FIELD: &'static str = "tool_id";
}
impl Kind for Trigger {
    const FIELD: &'static str = "trigger_id";
}

pub type PromptId = Id<Prompt>;
pub type ConversationId = Id<Conversation>;
pub type UserId = Id<User>;
pub type ToolId = Id<Tool>;
pub type TriggerId = Id<Trigger>;

/// An identifier of kind `K`: text that passed [`Id::parse`] (or that the system issued).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Id<K> {
    value: String,
    kind: PhantomData<fn() -> K>,
}

/// Why text is not an id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdError {
    /// The field the text came in (`prompt_id`, …).
    pub field: &'static str,
    pub problem: IdProblem,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdProblem {
    Empty,
    Nul,
    TooLong,
}

impl fmt::Display for IdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let field = self.field;
        match self.problem {
            IdProblem::Empty => write!(f, "{field} must not be empty"),
            IdProblem::Nul => write!(f, "{field} must not contain NUL characters"),
            IdProblem::TooLong => write!(f, "{field} is longer than {MAX_ID_BYTES} bytes"),
        }
    }
}

impl std::error::Error for IdError {}

impl<K: Kind> Id<K> {
    /// `value` as an id of this kind, or why it cannot be one.
    pub fn parse(value: impl Into<String>) -> Result<Self, IdError> {
        let value = value.into();
        let problem = if value.is_empty() {
            Some(IdProblem::Empty)
        } else if value.contains('\0') {
            Some(IdProblem::Nul)
        } else if value.len() > MAX_ID_BYTES {
            Some(IdProblem::TooLong)
        } else {
            None
        };
        match problem {
            Some(problem) => Err(IdError {
                field: K::FIELD,
                problem,
            }),
            None => Ok(Self::known(value)),
        }
    }

    /// An optional id: `None` for text that is empty once trimmed (how proto3 says "no id"),
    /// else the trimmed text parsed.
    pub fn parse_optional(value: &str) -> Result<Option<Self>, IdError> {
        let trimmed = value.trim();
        if trimmed.is_empty() {
            Ok(None)
        } else {
            Self::parse(trimmed).map(Some)
        }
    }

    /// A new id, unique and ordered by time of issue (a UUIDv7).
    pub fn generate() -> Self {
        Self::known(uuid::Uuid::now_v7().to_string())
    }
}

impl<K> Id<K> {
    /// An id the service issued or parsed before and now reads back (from its own store, or
    /// from a message it built). Text from outside goes through [`Id::parse`].
    pub fn known(value: impl Into<String>) -> Self {
        Id {
            value: value.into(),
            kind: PhantomData,
        }
    }

    pub fn as_str(&self) -> &str {
        &self.value
    }

    pub fn into_string(self) -> String {
        self.value
    }
}

/// An optional id as proto3 text carries it: the id, or empty for none.
pub fn wire<K>(id: Option<&Id<K>>) -> String {
    id.map(|id| id.value.clone()).unwrap_or_default()
}

impl<K> fmt::Display for Id<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.value)
    }
}

impl<K> fmt::Debug for Id<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.value, f)
    }
}

impl<K> AsRef<str> for Id<K> {
    fn as_ref(&self) -> &str {
        &self.value
    }
}

/// Lets maps keyed by ids be looked up by text (the hash of an id is its text's).
impl<K> Borrow<str> for Id<K> {
    fn borrow(&self) -> &str {
        &self.value
    }
}

impl<K> From<Id<K>> for String {
    fn from(id: Id<K>) -> String {
        id.value
    }
}

impl<K> PartialEq<str> for Id<K> {
    fn eq(&self, other: &str) -> bool {
        self.value == other
    }
}

impl<K> PartialEq<&str> for Id<K> {
    fn eq(&self, other: &&str) -> bool {
        self.value == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_keeps_any_text_an_id_can_hold() {
        for text in [
            "0193e5a4-7b1e-7c3a-9c1e-5f0a6b2d4e11",
            "not-a-uuid",
            "' OR 1=1 --",
            "alice",
        ] {
            assert_eq!(PromptId::parse(text).unwrap().as_str(), text);
        }
    }

    #[test]
    fn parse_refuses_empty_nul_and_overlong_text_naming_the_field() {
        assert_eq!(
            PromptId::parse("").unwrap_err().to_string(),
            "prompt_id must not be empty"
        );
        assert_eq!(
            ConversationId::parse("a\0b").unwrap_err().to_string(),
            "conversation_id must not contain NUL characters"
        );
        let long = "x".repeat(MAX_ID_BYTES + 1);
        assert_eq!(UserId::parse(long).unwrap_err().problem, IdProblem::TooLong);
        assert!(ToolId::parse("x".repeat(MAX_ID_BYTES)).is_ok());
    }

    #[test]
    fn parse_optional_reads_blank_as_none_and_trims() {
        assert_eq!(ConversationId::parse_optional("  ").unwrap(), None);
        assert_eq!(
            ConversationId::parse_optional(" c1 ")
                .unwrap()
                .unwrap()
                .as_str(),
            "c1"
        );
        assert!(ConversationId::parse_optional("c\0").is_err());
    }

    #[test]
    fn generated_ids_are_distinct_and_ordered() {
        let first = PromptId::generate();
        let second = PromptId::generate();
        assert_ne!(first, second);
        assert!(first.as_str() < second.as_str() || first.as_str()[..8] == second.as_str()[..8]);
    }

    #[test]
    fn a_map_keyed_by_ids_is_looked_up_by_text() {
        let mut map = std::collections::HashMap::new();
        map.insert(PromptId::known("p1"), 1);
        assert_eq!(map.get("p1"), Some(&1));
    }
}
