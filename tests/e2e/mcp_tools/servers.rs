//! The MCP servers the tests run against, none written here: installed on first use by
//! `scripts/mcp-servers.sh` (npm's `@modelcontextprotocol/server-everything`, PyPI's
//! `mcp-server-time`), and the tool-host configurations that name them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Value, json};

pub(crate) struct Installed {
    /// server-everything's `dist/index.js`, run with node.
    pub(crate) everything: PathBuf,
    /// mcp-server-time's console script.
    pub(crate) time: PathBuf,
}

/// The installed servers; installs them once per test process (the script does nothing
/// when they are there). Fails the test, saying why, when they cannot be installed.
pub(crate) fn installed() -> &'static Installed {
    static INSTALLED: OnceLock<Installed> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let mut paths = crate::support::installed("mcp-servers.sh");
        let mut path = |name: &str| -> PathBuf {
            paths
                .remove(name)
                .unwrap_or_else(|| panic!("scripts/mcp-servers.sh printed no {name}"))
                .into()
        };
        Installed {
            everything: path("AGENTIC_TEST_MCP_EVERYTHING"),
            time: path("AGENTIC_TEST_MCP_TIME"),
        }
    })
}

/// server-everything over stdio, as the `mcpServers` entry runs it.
pub(crate) fn everything_stdio() -> Value {
    json!({"command": "node", "args": [installed().everything, "stdio"]})
}

/// server-everything over stdio behind `sh`, which first runs `prefix` (e.g. writes its pid,
/// or copies stdin to a file), so a test can see and do what a person at the machine could.
pub(crate) fn everything_behind_sh(prefix: &str) -> Value {
    let everything = installed().everything.display().to_string();
    json!({"command": "sh", "args": ["-c", format!("{prefix} node '{everything}' stdio")]})
}

/// mcp-server-time over stdio (its tools are marked read-only: no approval by default).
pub(crate) fn time_stdio() -> Value {
    json!({"command": installed().time, "args": ["--local-timezone", "UTC"]})
}

/// Writes `{"mcpServers": servers}` into `dir` and returns its path.
pub(crate) fn config_file(dir: &Path, servers: Value) -> PathBuf {
    let path = dir.join("mcp.json");
    std::fs::write(&path, json!({"mcpServers": servers}).to_string()).unwrap();
    path
}

/// server-everything serving Streamable HTTP on a free port, stopped on drop.
pub(crate) struct HttpEverything {
    child: Option<Child>,
    port: u16,
    pub(crate) url: String,
}

impl HttpEverything {
    pub(crate) async fn start() -> HttpEverything {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut server = HttpEverything {
            child: None,
            port,
            url: format!("http://127.0.0.1:{port}/mcp"),
        };
        server.start_again().await;
        server
    }

    /// Kills the server (as a crash would: its sessions are gone with it).
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts a new server on the same port (killing the one that runs, if any) and waits
    /// until it listens. It knows none of the old one's sessions.
    pub(crate) async fn start_again(&mut self) {
        self.kill();
        let port = self.port;
        self.child = Some(
            Command::new("node")
                .arg(&installed().everything)
                .arg("streamableHttp")
                .env("PORT", port.to_string())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("starting server-everything over HTTP"),
        );
        for _ in 0..300 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("server-everything did not listen on port {port} within 15 s");
    }
}

impl Drop for HttpEverything {
    fn drop(&mut self) {
        self.kill();
    }
}
