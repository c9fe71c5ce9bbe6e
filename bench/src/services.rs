//! Servers the benchmarks start next to the stack: each on a runtime of its own (the
//! testkit's `Background`, like every service of `agentic_testkit::Stack`), so the measuring
//! client never shares a scheduler with what it measures.

use std::net::SocketAddr;

pub use agentic_testkit::stack::{Background, bind};

/// A tool-host with the `demo` plugin on a fresh SQLite file in `dir`.
pub fn tool_host(dir: &std::path::Path) -> anyhow::Result<(Background, SocketAddr)> {
    start_tool_host(dir, None)
}

/// The same with the MCP servers of `mcp_config`.
pub fn tool_host_with_mcp(
    dir: &std::path::Path,
    mcp_config: &std::path::Path,
) -> anyhow::Result<(Background, SocketAddr)> {
    start_tool_host(dir, Some(mcp_config.to_owned()))
}

fn start_tool_host(
    dir: &std::path::Path,
    mcp_config: Option<std::path::PathBuf>,
) -> anyhow::Result<(Background, SocketAddr)> {
    let (listener, address) = bind()?;
    let config = tool_host::Config {
        service: agentic_rpc::ServiceArgs::dev(address),
        database_url: format!("sqlite://{}?mode=rwc", dir.join("tool-host.db").display()),
        plugins: vec!["artifact".to_owned(), "demo".to_owned()],
        // Nothing here calls the interpreter; the URL is never dialled.
        gateway_url: "http://127.0.0.1:9".to_owned(),
        storage: tool_host::StorageLimits::default(),
        mcp_config,
        guardrails: None,
        skills_dir: None,
        allow_root: false,
        memory_put_approval: false,
    };
    let server = Background::start("tool-host", listener, move |listener| {
        tool_host::run(config, listener, std::future::pending())
    })?;
    Ok((server, address))
}
