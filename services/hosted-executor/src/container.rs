//! The container a conversation's prompts run their code in, and the skills it loads.
//!
//! The container id is kept in the conversation's state (`hosted_container`) so the next
//! prompt reuses it. State is the user's to write, and a container id is a key to whatever
//! the container holds, so the id is sealed: the executor keeps it with an HMAC over the
//! user, the conversation and the id, and only reuses an id whose seal it made for that same
//! conversation. A user who writes another id (someone else's) gets a new container.
//!
//! Skills come from the state's `hosted_skills` (a prompt's own state sets them for that
//! prompt, the conversation's for all its prompts), else from the executor's default.

use ring::hmac;
use serde_json::{Map, Value as Json, json};

/// The state key of the sealed container id.
pub const CONTAINER_KEY: &str = "hosted_container";
/// The state key of the skills the container loads.
pub const SKILLS_KEY: &str = "hosted_skills";

/// What the seal's key is derived under.
const SEAL_LABEL: &[u8] = b"agentic hosted-executor container seal v1";

/// The most skills one container may load (the provider's own limit).
pub const MAX_SKILLS: usize = 8;
/// Container and file ids: the provider's are short and of these characters only.
const MAX_ID_CHARS: usize = 128;

pub struct Seal {
    key: hmac::Key,
}

impl Seal {
    /// Seals with `secret` (the internal token, shared by every replica of the executor),
    /// or with a random key of this process when there is none (development).
    pub fn new(secret: Option<&str>) -> Seal {
        let key = match secret {
            // A key of its own, derived from the token under this use's label, so a seal
            // is never a MAC anything else computes with the token.
            Some(secret) => {
                let token = hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes());
                let derived = hmac::sign(&token, SEAL_LABEL);
                hmac::Key::new(hmac::HMAC_SHA256, derived.as_ref())
            }
            None => {
                let random = ring::rand::SystemRandom::new();
                hmac::Key::generate(hmac::HMAC_SHA256, &random).unwrap_or_else(|_| {
                    hmac::Key::new(hmac::HMAC_SHA256, uuid::Uuid::new_v4().as_bytes())
                })
            }
        };
        Seal { key }
    }

    /// The state value that keeps `id` for `owner` (user and conversation).
    pub fn seal(&self, owner: &str, id: &str) -> Json {
        json!({"id": id, "seal": hex::encode(self.tag(owner, id))})
    }

    /// The container id of a state value this executor sealed for `owner`.
    pub fn open(&self, owner: &str, value: &Json) -> Option<String> {
        let id = value["id"].as_str()?;
        let tag = hex::decode(value["seal"].as_str()?).ok()?;
        hmac::verify(&self.key, sealed(owner, id).as_bytes(), &tag).ok()?;
        Some(id.to_owned())
    }

    fn tag(&self, owner: &str, id: &str) -> Vec<u8> {
        hmac::sign(&self.key, sealed(owner, id).as_bytes())
            .as_ref()
            .to_vec()
    }
}

/// What a seal covers: the owner (user and conversation) and the container id.
fn sealed(owner: &str, id: &str) -> String {
    format!("{owner}\n{id}")
}

/// An id the provider gave (a container's, a file's) that is safe to put in a URL path.
pub fn is_provider_id(id: &str) -> bool {
    (1..=MAX_ID_CHARS).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The skills the run's container loads: the state's, else `default`. Each is checked: at
/// most [`MAX_SKILLS`], each `{"type": "anthropic" | "custom", "skill_id", "version"?}`. A
/// custom skill lives in the operator's provider workspace, uploaded for whoever: the state
/// may name only those in `allowed_custom` (the operator's list) or in `default`.
pub fn skills(
    state: &Map<String, Json>,
    default: &[Json],
    allowed_custom: &[String],
) -> Result<Vec<Json>, String> {
    let skills = match state.get(SKILLS_KEY) {
        None | Some(Json::Null) => return Ok(default.to_vec()),
        Some(Json::Array(skills)) => skills,
        Some(_) => return Err(format!("{SKILLS_KEY} must be a list of skills")),
    };
    check_skills(skills)?;
    for (index, skill) in skills.iter().enumerate() {
        let id = skill["skill_id"].as_str().unwrap_or_default();
        let allowed = skill["type"] == "anthropic"
            || allowed_custom.iter().any(|allowed| allowed == id)
            || default
                .iter()
                .any(|offered| offered["type"] == "custom" && offered["skill_id"] == id);
        if !allowed {
            return Err(format!(
                "{SKILLS_KEY}[{index}]: custom skill {id} is not one this server offers (HOSTED_ALLOWED_CUSTOM_SKILLS)"
            ));
        }
    }
    Ok(skills.clone())
}

/// Checks a list of skills (the state's, or the executor's default at start).
pub fn check_skills(skills: &[Json]) -> Result<(), String> {
    if skills.len() > MAX_SKILLS {
        return Err(format!(
            "{SKILLS_KEY} names {} skills; a container loads at most {MAX_SKILLS}",
            skills.len()
        ));
    }
    for (index, skill) in skills.iter().enumerate() {
        let Json::Object(fields) = skill else {
            return Err(format!("{SKILLS_KEY}[{index}] must be an object"));
        };
        if let Some(unknown) = fields
            .keys()
            .find(|key| !["type", "skill_id", "version"].contains(&key.as_str()))
        {
            return Err(format!(
                "{SKILLS_KEY}[{index}] has an unknown field {unknown:?}"
            ));
        }
        if !matches!(skill["type"].as_str(), Some("anthropic" | "custom")) {
            return Err(format!(
                "{SKILLS_KEY}[{index}].type must be \"anthropic\" or \"custom\""
            ));
        }
        let id = skill["skill_id"].as_str().unwrap_or_default();
        if !(1..=64).contains(&id.len())
            || !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(format!(
                "{SKILLS_KEY}[{index}].skill_id must be 1 to 64 letters, digits, '_' or '-'"
            ));
        }
        match &skill["version"] {
            Json::Null => {}
            Json::String(version)
                if (1..=32).contains(&version.len())
                    && version
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-') => {
            }
            _ => {
                return Err(format!(
                    "{SKILLS_KEY}[{index}].version must be 1 to 32 letters, digits, '.', '_' or '-'"
                ));
            }
        }
    }
    Ok(())
}

/// The request's `container`: the id alone, or with the skills to load; `None` for a new
/// container without skills.
pub fn request_field(id: Option<&str>, skills: &[Json]) -> Option<Json> {
    match (id, skills.is_empty()) {
        (None, true) => None,
        (Some(id), true) => Some(json!(id)),
        (id, false) => {
            let mut container = json!({ "skills": skills });
            if let Some(id) = id {
                container["id"] = json!(id);
            }
            Some(container)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_id_opens_only_for_its_owner_and_only_untouched() {
        let seal = Seal::new(Some("secret"));
        let kept = seal.seal("alice/c1", "container_1");
        assert_eq!(seal.open("alice/c1", &kept).as_deref(), Some("container_1"));
        assert_eq!(seal.open("bob/c1", &kept), None);
        assert_eq!(seal.open("alice/c2", &kept), None);
        let mut forged = kept.clone();
        forged["id"] = json!("container_2");
        assert_eq!(seal.open("alice/c1", &forged), None);
        assert_eq!(seal.open("alice/c1", &json!("container_1")), None);
        assert_eq!(Seal::new(Some("other")).open("alice/c1", &kept), None);
    }

    #[test]
    fn skills_are_checked_and_default_when_the_state_names_none() {
        let default = vec![json!({"type": "anthropic", "skill_id": "xlsx", "version": "latest"})];
        let allowed = vec!["skill_01ab".to_owned()];
        assert_eq!(skills(&Map::new(), &default, &allowed).unwrap(), default);
        let mut state = Map::new();
        state.insert(
            SKILLS_KEY.into(),
            json!([{"type": "custom", "skill_id": "skill_01ab"}]),
        );
        assert_eq!(skills(&state, &default, &allowed).unwrap().len(), 1);
        state.insert(
            SKILLS_KEY.into(),
            json!([{"type": "custom", "skill_id": "skill_other"}]),
        );
        assert!(
            skills(&state, &default, &allowed)
                .unwrap_err()
                .contains("not one this server offers")
        );
        state.insert(
            SKILLS_KEY.into(),
            json!([{"type": "anthropic", "skill_id": "pdf"}]),
        );
        assert!(skills(&state, &default, &[]).is_ok());
        for bad in [
            json!("xlsx"),
            json!([{"type": "other", "skill_id": "x"}]),
            json!([{"type": "custom", "skill_id": "../x"}]),
            json!([{"type": "custom", "skill_id": "x", "version": "1 2"}]),
            json!([{"type": "custom", "skill_id": "x", "extra": 1}]),
            Json::Array(vec![json!({"type": "custom", "skill_id": "x"}); 9]),
        ] {
            state.insert(SKILLS_KEY.into(), bad.clone());
            assert!(
                skills(&state, &default, &allowed).is_err(),
                "{bad} was accepted"
            );
        }
    }

    #[test]
    fn provider_ids_are_plain() {
        assert!(is_provider_id("file_011CNha8iCJcU1wXNR6q4V8w"));
        assert!(!is_provider_id("../admin"));
        assert!(!is_provider_id(""));
        assert!(!is_provider_id(&"a".repeat(129)));
    }
}
