//! The guardrails file (JSON) as written, and how it becomes [`Guardrails`]: every pattern
//! compiled and every guard URL parsed before anything runs.

use regex::Regex;
use serde::Deserialize;

use agentic_proto::v1::guard_client::GuardClient;

use super::{
    Action, ArgumentGuard, ConfigError, EXTERNAL_TIMEOUT, External, Group, Guardrails, Stage,
    TextGuard,
};

/// Compiled size of one pattern, at most (the `regex` crate's own limit, made explicit).
const MAX_PATTERN_BYTES: usize = 1 << 20;

// The file, as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    groups: Vec<GroupConfig>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GroupConfig {
    name: String,
    users: Vec<String>,
    #[serde(default)]
    max_input_bytes: Option<usize>,
    #[serde(default)]
    input: Vec<TextGuardConfig>,
    #[serde(default)]
    output: Vec<TextGuardConfig>,
    #[serde(default)]
    tools: ToolsConfig,
    #[serde(default)]
    external: Vec<ExternalConfig>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TextGuardConfig {
    name: String,
    #[serde(default)]
    pattern: Option<String>,
    /// Built-in PII kinds: `email`, `phone`, `card`.
    #[serde(default)]
    pii: Vec<String>,
    action: Action,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolsConfig {
    #[serde(default)]
    allow: Option<Vec<String>>,
    #[serde(default)]
    deny: Vec<String>,
    #[serde(default)]
    arguments: Vec<ArgumentConfig>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ArgumentConfig {
    name: String,
    tool: String,
    pattern: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExternalConfig {
    name: String,
    url: String,
    stages: Vec<Stage>,
}

/// The order PII kinds are looked for in, whatever order a guard lists them in.
const PII_ORDER: [&str; 3] = ["email", "card", "phone"];

/// The built-in PII patterns, what each finds, and which of its matches count.
/// A PII kind: its pattern, what it finds, and which matches count.
type Pii = (&'static str, &'static str, fn(&str) -> bool);

fn pii(kind: &str) -> Option<Pii> {
    Some(match kind {
        "email" => (
            r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}",
            "an email address",
            any_match,
        ),
        // Spaces, dashes and brackets between digits; not dots (addresses, versions).
        "phone" => (r"\+?\(?\d[\d ()-]{7,20}\d", "a phone number", phone_number),
        "card" => (r"\b(?:\d[ -]?){12,18}\d\b", "a card number", card_number),
        _ => return None,
    })
}

fn compile(pattern: &str, what: &str) -> Result<Regex, ConfigError> {
    regex::RegexBuilder::new(pattern)
        .size_limit(MAX_PATTERN_BYTES)
        .build()
        .map_err(|error| ConfigError::Invalid(format!("{what}: {error}")))
}

impl Guardrails {
    /// The guardrails in the JSON file at `path`, checked whole (patterns compiled, guard
    /// URLs parsed) before anything runs.
    pub fn load(path: &std::path::Path) -> Result<Guardrails, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Guardrails::parse(&text)
    }

    pub fn parse(text: &str) -> Result<Guardrails, ConfigError> {
        let file: FileConfig =
            serde_json::from_str(text).map_err(|error| ConfigError::Invalid(error.to_string()))?;
        let groups = file
            .groups
            .into_iter()
            .map(Group::from_config)
            .collect::<Result<_, _>>()?;
        Ok(Guardrails { groups })
    }
}

impl Group {
    fn from_config(config: GroupConfig) -> Result<Group, ConfigError> {
        let group = config.name.clone();
        let arguments = config
            .tools
            .arguments
            .into_iter()
            .map(|guard| {
                let what = format!("group {group:?}, argument guard {:?}", guard.name);
                Ok(ArgumentGuard {
                    pattern: compile(&guard.pattern, &what)?,
                    name: guard.name,
                    tool: guard.tool,
                })
            })
            .collect::<Result<_, ConfigError>>()?;
        let external = config
            .external
            .into_iter()
            .map(|guard| external_guard(&group, guard))
            .collect::<Result<_, ConfigError>>()?;
        Ok(Group {
            input: text_guards(&group, config.input)?,
            output: text_guards(&group, config.output)?,
            name: config.name,
            users: config.users,
            max_input_bytes: config.max_input_bytes,
            allow_tools: config.tools.allow,
            deny_tools: config.tools.deny,
            arguments,
            external,
        })
    }
}

/// A stage's text guards of `group`, compiled: each one's pattern, then its PII kinds (cards
/// before phones: a card number is also a long run of digits).
fn text_guards(group: &str, guards: Vec<TextGuardConfig>) -> Result<Vec<TextGuard>, ConfigError> {
    let mut compiled = Vec::new();
    for guard in guards {
        let what = format!("group {group:?}, guard {:?}", guard.name);
        if let Some(pattern) = &guard.pattern {
            compiled.push(TextGuard {
                name: guard.name.clone(),
                pattern: compile(pattern, &what)?,
                action: guard.action,
                finds: "text its pattern matches".into(),
                counts: any_match,
            });
        }
        if let Some(kind) = guard.pii.iter().find(|kind| pii(kind).is_none()) {
            return Err(ConfigError::Invalid(format!(
                "{what}: unknown pii kind {kind:?} (known: email, phone, card)"
            )));
        }
        for kind in PII_ORDER
            .iter()
            .filter(|kind| guard.pii.iter().any(|k| k == *kind))
        {
            let Some((pattern, finds, counts)) = pii(kind) else {
                continue;
            };
            compiled.push(TextGuard {
                name: guard.name.clone(),
                pattern: compile(pattern, &what)?,
                action: guard.action,
                finds: finds.into(),
                counts,
            });
        }
        if guard.pattern.is_none() && guard.pii.is_empty() {
            return Err(ConfigError::Invalid(format!(
                "{what}: give a pattern or pii kinds"
            )));
        }
    }
    Ok(compiled)
}

/// An external guard of `group`: a `Guard` client of its URL, within [`EXTERNAL_TIMEOUT`].
/// No internal token: an external guard is not an agentic service.
fn external_guard(group: &str, guard: ExternalConfig) -> Result<External, ConfigError> {
    let endpoint = tonic::transport::Endpoint::from_shared(guard.url.clone())
        .map_err(|error| {
            ConfigError::Invalid(format!(
                "group {group:?}, external guard {:?}: url {:?}: {error}",
                guard.name, guard.url
            ))
        })?
        .connect_timeout(EXTERNAL_TIMEOUT)
        .timeout(EXTERNAL_TIMEOUT);
    Ok(External {
        name: guard.name,
        stages: guard.stages,
        client: GuardClient::new(endpoint.connect_lazy())
            .max_decoding_message_size(agentic_proto::MAX_MESSAGE_BYTES),
    })
}

fn any_match(_: &str) -> bool {
    true
}

fn digits(text: &str) -> impl Iterator<Item = u32> + '_ {
    text.chars().filter_map(|c| c.to_digit(10))
}

fn phone_number(text: &str) -> bool {
    (9..=15).contains(&digits(text).count())
}

/// The Luhn check every card number passes.
fn card_number(text: &str) -> bool {
    let numbers: Vec<u32> = digits(text).collect();
    let sum: u32 = numbers
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            if i % 2 == 1 {
                if d * 2 > 9 { d * 2 - 9 } else { d * 2 }
            } else {
                d
            }
        })
        .sum();
    (13..=19).contains(&numbers.len()) && sum.is_multiple_of(10)
}
