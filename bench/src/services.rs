//! Servers the benchmarks start next to the stack: each on a runtime of its own (two worker
//! threads, like every service of `agentic_testkit::Stack`), so the measuring client never
//! shares a scheduler with what it measures.

use std::future::Future;
use std::net::SocketAddr;

use tokio::runtime::Runtime;

/// A server on its own runtime; dropping it stops the server at once.
pub struct Background {
    runtime: Option<Runtime>,
}

impl Background {
    pub fn start<F, Fut>(
        name: &str,
        listener: std::net::TcpListener,
        serve: F,
    ) -> anyhow::Result<Background>
    where
        F: FnOnce(tokio::net::TcpListener) -> Fut + Send + 'static,
        Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(format!("bench-{name}"))
            .enable_all()
            .build()?;
        listener.set_nonblocking(true)?;
        let name = name.to_owned();
        runtime.spawn(async move {
            let result = match tokio::net::TcpListener::from_std(listener) {
                Ok(listener) => serve(listener).await,
                Err(error) => Err(error.into()),
            };
            if let Err(error) = result {
                eprintln!("bench: {name} stopped with an error: {error:#}");
            }
        });
        Ok(Background {
            runtime: Some(runtime),
        })
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// A listener on a free port of 127.0.0.1.
pub fn bind() -> anyhow::Result<(std::net::TcpListener, SocketAddr)> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let address = listener.local_addr()?;
    Ok((listener, address))
}

/// A tool-host with the `demo` plugin on a fresh SQLite file in `dir`.
pub fn tool_host(dir: &std::path::Path) -> anyhow::Result<(Background, SocketAddr)> {
    let (listener, address) = bind()?;
    let config = tool_host::Config {
        listen: address,
        database_url: format!("sqlite://{}?mode=rwc", dir.join("tool-host.db").display()),
        plugins: vec!["artifact".to_owned(), "demo".to_owned()],
        // Nothing here calls the interpreter; the URL is never dialled.
        code_runner_url: "http://127.0.0.1:9".to_owned(),
        internal_token: None,
        check_config: false,
        probe: false,
    };
    let server = Background::start("tool-host", listener, move |listener| {
        tool_host::run(config, listener, std::future::pending())
    })?;
    Ok((server, address))
}
