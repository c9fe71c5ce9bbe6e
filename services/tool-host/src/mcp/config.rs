//! The MCP servers file (`--mcp-config`): the `mcpServers` JSON shape MCP clients use, with
//! agentic's policy fields. Read once at start; every mistake names its server and field, and
//! a `${NAME}` that is not set in the tool-host's environment stops the start.
//!
//! ```json
//! {"mcpServers": {
//!   "time": {"command": "mcp-server-time", "args": ["--local-timezone", "UTC"]},
//!   "files": {"url": "https://mcp.example.com/mcp",
//!             "headers": {"Authorization": "Bearer ${FILES_TOKEN}"},
//!             "approval": "always", "tools": {"delete": {"hidden": true}}}
//! }}
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// Most servers one file may name.
pub const MAX_SERVERS: usize = 32;
/// Longest server name: it prefixes every tool id of the server.
pub const MAX_SERVER_NAME_CHARS: usize = 32;
/// Largest configuration file read.
const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// Default time a call may take (the executors' default deadline too).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest configurable call timeout: an hour.
const MAX_TIMEOUT_SECS: u64 = 3600;
/// Default and largest `maxCallsPerUser`.
const DEFAULT_CALLS_PER_USER: usize = 8;
const MAX_CALLS_PER_USER: usize = 256;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading the MCP config {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the MCP config {path} is {size} bytes, more than {MAX_FILE_BYTES}")]
    TooLarge { path: PathBuf, size: u64 },
    #[error("the MCP config {path} is not valid: {source}")]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("the MCP config names {0} servers; at most {MAX_SERVERS} are allowed")]
    TooManyServers(usize),
    #[error("MCP server {server:?}: {reason}")]
    Server { server: String, reason: String },
}

/// One configured server, checked and with `${NAME}`s substituted.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    pub name: String,
    pub transport: Transport,
    pub start: Start,
    /// How long one call may take; the executors get the same deadline.
    pub timeout: Duration,
    pub approval: Approval,
    pub tools: BTreeMap<String, ToolPolicy>,
    /// Calls one user may have running on this server at once (per tool-host replica);
    /// more fail at once, saying so, so one user cannot take a server from the others.
    pub max_calls_per_user: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Transport {
    /// A child process speaking newline-delimited JSON-RPC on stdin and stdout. Its environment
    /// is `PATH`, `HOME`, `LANG` and `TZ` from the tool-host's, plus `env`: nothing else of
    /// the tool-host's (its internal token above all) reaches it.
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP: POSTs to `url`, with `headers` on every request.
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

impl Transport {
    pub fn kind(&self) -> &'static str {
        match self {
            Transport::Stdio { .. } => "mcp-stdio",
            Transport::Http { .. } => "mcp-http",
        }
    }
}

/// When a server is connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Start {
    /// With the tool-host (the default): its tools are there from the first `Prepare`.
    #[default]
    Eager,
    /// On first use: the first `Prepare` (or tool list) after the start waits for it.
    Lazy,
}

/// Which calls wait for a person's approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Approval {
    /// Tools that may be destructive, as the MCP annotations say by their defaults: a tool
    /// needs approval unless it is marked `readOnlyHint: true` or `destructiveHint: false`.
    #[default]
    Destructive,
    Always,
    Never,
}

impl Approval {
    /// Whether a call to a tool with these hints waits for approval.
    pub fn requires(self, read_only: Option<bool>, destructive: Option<bool>) -> bool {
        match self {
            Approval::Always => true,
            Approval::Never => false,
            Approval::Destructive => read_only != Some(true) && destructive != Some(false),
        }
    }
}

/// What the configuration says about one tool of a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolPolicy {
    /// Overrides the server's `approval` for this tool.
    pub approval: Option<Approval>,
    /// Not offered to the model and not callable.
    #[serde(default)]
    pub hidden: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(rename = "mcpServers")]
    mcp_servers: BTreeMap<String, RawServer>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawServer {
    /// `stdio` or `http` (`streamable-http` and `streamableHttp` are read as `http`); without
    /// it, `command` means stdio and `url` means HTTP.
    #[serde(rename = "type")]
    kind: Option<String>,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<String>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    start: Start,
    timeout_seconds: Option<u64>,
    max_calls_per_user: Option<usize>,
    #[serde(default)]
    approval: Approval,
    #[serde(default)]
    tools: BTreeMap<String, ToolPolicy>,
    /// Listed but not started.
    #[serde(default)]
    disabled: bool,
}

/// Reads and checks the file at `path`; `reserved` are names servers may not take (the
/// built-in plugins' namespaces). `${NAME}`s are read from the process environment.
pub fn load(path: &Path, reserved: &[&str]) -> Result<Vec<ServerConfig>, ConfigError> {
    let read_error = |source| ConfigError::Read {
        path: path.to_owned(),
        source,
    };
    let size = std::fs::metadata(path).map_err(read_error)?.len();
    if size > MAX_FILE_BYTES {
        return Err(ConfigError::TooLarge {
            path: path.to_owned(),
            size,
        });
    }
    let text = std::fs::read_to_string(path).map_err(read_error)?;
    parse(&text, reserved, &|name| std::env::var(name).ok()).map_err(|error| match error {
        ParseError::Json(source) => ConfigError::Parse {
            path: path.to_owned(),
            source,
        },
        ParseError::Config(error) => error,
    })
}

enum ParseError {
    Json(serde_json::Error),
    Config(ConfigError),
}

impl From<ConfigError> for ParseError {
    fn from(error: ConfigError) -> Self {
        ParseError::Config(error)
    }
}

fn parse(
    text: &str,
    reserved: &[&str],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<ServerConfig>, ParseError> {
    let file: File = serde_json::from_str(text).map_err(ParseError::Json)?;
    if file.mcp_servers.len() > MAX_SERVERS {
        return Err(ConfigError::TooManyServers(file.mcp_servers.len()).into());
    }
    let mut servers = Vec::new();
    for (name, raw) in file.mcp_servers {
        if raw.disabled {
            continue;
        }
        let server = server(&name, raw, reserved, env).map_err(|reason| ConfigError::Server {
            server: name.clone(),
            reason,
        })?;
        servers.push(server);
    }
    Ok(servers)
}

fn server(
    name: &str,
    raw: RawServer,
    reserved: &[&str],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ServerConfig, String> {
    check_name(name, reserved)?;
    let substitute = |text: &str| substitute(text, env);
    let kind = type_is_http(raw.kind.as_deref())?;
    let transport = match (raw.command, raw.url, kind) {
        (Some(command), None, None | Some(false)) => {
            if !raw.headers.is_empty() {
                return Err("headers apply to HTTP servers only".into());
            }
            Transport::Stdio {
                command: substitute(&command)?,
                args: raw
                    .args
                    .iter()
                    .map(|arg| substitute(arg))
                    .collect::<Result<_, _>>()?,
                env: raw
                    .env
                    .iter()
                    .map(|(key, value)| Ok((key.clone(), substitute(value)?)))
                    .collect::<Result<_, String>>()?,
                cwd: raw
                    .cwd
                    .as_deref()
                    .map(substitute)
                    .transpose()?
                    .map(PathBuf::from),
            }
        }
        (None, Some(url), None | Some(true)) => {
            if !raw.args.is_empty() || !raw.env.is_empty() || raw.cwd.is_some() {
                return Err("args, env and cwd apply to stdio servers only".into());
            }
            let url = substitute(&url)?;
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(format!("url must be http:// or https://, not {url:?}"));
            }
            Transport::Http {
                url,
                headers: raw
                    .headers
                    .iter()
                    .map(|(key, value)| Ok((key.clone(), substitute(value)?)))
                    .collect::<Result<_, String>>()?,
            }
        }
        (Some(_), Some(_), _) => {
            return Err("give either command (stdio) or url (HTTP), not both".into());
        }
        (None, None, _) | (Some(_), None, Some(true)) | (None, Some(_), Some(false)) => {
            return Err("a stdio server needs command, an HTTP server url".into());
        }
    };
    let timeout = call_timeout(raw.timeout_seconds)?;
    let max_calls_per_user = calls_per_user(raw.max_calls_per_user)?;
    Ok(ServerConfig {
        name: name.to_owned(),
        transport,
        start: raw.start,
        timeout,
        approval: raw.approval,
        tools: raw.tools,
        max_calls_per_user,
    })
}

/// What the `type` field says: `Some(true)` for HTTP, `Some(false)` for stdio, `None` when it
/// is not given (then `command` or `url` decides).
fn type_is_http(kind: Option<&str>) -> Result<Option<bool>, String> {
    match kind {
        None => Ok(None),
        Some("stdio") => Ok(Some(false)),
        Some("http" | "streamable-http" | "streamableHttp") => Ok(Some(true)),
        Some(other) => Err(format!(
            "unknown type {other:?} (known: stdio, http; SSE-only servers are not supported)"
        )),
    }
}

/// The time one call may take, from `timeoutSeconds` (1 to an hour; default a minute).
fn call_timeout(seconds: Option<u64>) -> Result<Duration, String> {
    match seconds {
        None => Ok(DEFAULT_TIMEOUT),
        Some(seconds @ 1..=MAX_TIMEOUT_SECS) => Ok(Duration::from_secs(seconds)),
        Some(seconds) => Err(format!(
            "timeoutSeconds must be 1 to {MAX_TIMEOUT_SECS}, not {seconds}"
        )),
    }
}

/// The calls one user may have running on the server at once, from `maxCallsPerUser` (1 to
/// `MAX_CALLS_PER_USER`; default `DEFAULT_CALLS_PER_USER`).
fn calls_per_user(calls: Option<usize>) -> Result<usize, String> {
    match calls {
        None => Ok(DEFAULT_CALLS_PER_USER),
        Some(calls @ 1..=MAX_CALLS_PER_USER) => Ok(calls),
        Some(calls) => Err(format!(
            "maxCallsPerUser must be 1 to {MAX_CALLS_PER_USER}, not {calls}"
        )),
    }
}

/// Server names become the namespace of tool ids and a code-mode identifier: a lowercase
/// letter, then lowercase letters, digits, `_` and `-`.
fn check_name(name: &str, reserved: &[&str]) -> Result<(), String> {
    let mut characters = name.chars();
    let valid = characters
        .next()
        .is_some_and(|first| first.is_ascii_lowercase())
        && characters.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        && name.len() <= MAX_SERVER_NAME_CHARS;
    if !valid {
        return Err(format!(
            "a server name is a lowercase letter, then up to {} lowercase letters, digits, _ or -",
            MAX_SERVER_NAME_CHARS - 1
        ));
    }
    if reserved.contains(&name) {
        return Err(format!(
            "the name is a built-in plugin's (reserved: {})",
            reserved.join(", ")
        ));
    }
    Ok(())
}

/// Replaces each `${NAME}` with the variable's value; an unset variable is an error naming it.
fn substitute(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(format!("an unclosed ${{ in {text:?}"));
        };
        let name = &after[..end];
        let valid = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(format!("${{{name}}} is not a variable name"));
        }
        let value = env(name).ok_or_else(|| format!("${{{name}}} is not set"))?;
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        (name == "TOKEN").then(|| "s3cret".to_owned())
    }

    fn parsed(text: &str) -> Result<Vec<ServerConfig>, String> {
        parse(text, &["artifact", "demo"], &env).map_err(|error| match error {
            ParseError::Json(error) => error.to_string(),
            ParseError::Config(error) => error.to_string(),
        })
    }

    #[test]
    fn the_mcp_servers_shape_reads_stdio_and_http_servers() -> Result<(), String> {
        let servers = parsed(
            r#"{"mcpServers": {
                "time": {"command": "mcp-server-time", "args": ["--tz", "${TOKEN}"], "start": "lazy"},
                "remote": {"type": "http", "url": "https://example.com/mcp",
                           "headers": {"Authorization": "Bearer ${TOKEN}"},
                           "approval": "never", "timeoutSeconds": 5,
                           "tools": {"drop": {"hidden": true}, "write": {"approval": "always"}}},
                "off": {"command": "nothing", "disabled": true}
            }}"#,
        )?;
        assert_eq!(servers.len(), 2);
        let remote = &servers[0];
        assert_eq!(remote.name, "remote");
        assert_eq!(
            remote.transport,
            Transport::Http {
                url: "https://example.com/mcp".into(),
                headers: BTreeMap::from([("Authorization".into(), "Bearer s3cret".into())]),
            }
        );
        assert_eq!(remote.timeout, Duration::from_secs(5));
        assert_eq!(remote.approval, Approval::Never);
        assert!(remote.tools["drop"].hidden);
        assert_eq!(remote.tools["write"].approval, Some(Approval::Always));
        let time = &servers[1];
        assert_eq!(time.start, Start::Lazy);
        assert_eq!(time.timeout, DEFAULT_TIMEOUT);
        assert!(matches!(&time.transport, Transport::Stdio { args, .. } if args[1] == "s3cret"));
        Ok(())
    }

    #[test]
    fn mistakes_name_the_server_and_what_is_wrong() {
        let cases = [
            (
                r#"{"mcpServers": {"x": {"command": "a", "url": "http://b"}}}"#,
                "not both",
            ),
            (r#"{"mcpServers": {"x": {}}}"#, "needs command"),
            (
                r#"{"mcpServers": {"x": {"command": "a", "headers": {"a": "b"}}}}"#,
                "HTTP servers only",
            ),
            (
                r#"{"mcpServers": {"x": {"url": "ftp://b"}}}"#,
                "http:// or https://",
            ),
            (
                r#"{"mcpServers": {"x": {"url": "http://b/${NOPE}"}}}"#,
                "${NOPE} is not set",
            ),
            (
                r#"{"mcpServers": {"x": {"command": "${1A}"}}}"#,
                "not a variable name",
            ),
            (
                r#"{"mcpServers": {"x": {"command": "a", "timeoutSeconds": 0}}}"#,
                "1 to 3600",
            ),
            (
                r#"{"mcpServers": {"x": {"type": "sse", "url": "http://b"}}}"#,
                "unknown type",
            ),
            (
                r#"{"mcpServers": {"Bad.Name": {"command": "a"}}}"#,
                "lowercase letter",
            ),
            (
                r#"{"mcpServers": {"demo": {"command": "a"}}}"#,
                "built-in plugin",
            ),
            (
                r#"{"mcpServers": {"x": {"command": "a", "aprooval": "never"}}}"#,
                "unknown field",
            ),
            (
                r#"{"mcpServers": {"x": {"command": "a", "approval": "sometimes"}}}"#,
                "unknown variant",
            ),
        ];
        for (text, expected) in cases {
            let message = parsed(text).err().unwrap_or_default();
            assert!(message.contains(expected), "{text}: {message}");
        }
    }

    #[test]
    fn too_many_servers_are_refused() {
        let servers: Vec<String> = (0..=MAX_SERVERS)
            .map(|n| format!("\"s{n}\": {{\"command\": \"a\"}}"))
            .collect();
        let text = format!("{{\"mcpServers\": {{{}}}}}", servers.join(","));
        assert!(parsed(&text).is_err_and(|message| message.contains("at most 32")));
    }

    #[test]
    fn approval_follows_the_annotations_defaults() {
        let policy = Approval::Destructive;
        assert!(
            policy.requires(None, None),
            "unannotated tools may be destructive"
        );
        assert!(policy.requires(Some(false), Some(true)));
        assert!(!policy.requires(Some(true), None));
        assert!(!policy.requires(None, Some(false)));
        assert!(Approval::Always.requires(Some(true), Some(false)));
        assert!(!Approval::Never.requires(None, Some(true)));
    }
}
