//! The stack as real processes: the four service binaries run as child processes, so a test
//! can SIGKILL one mid-prompt and restart it on the same port and database, and a benchmark
//! can read each service's peak memory.
//!
//! The stand-in model stays in this process (the rules drive it). Ports are picked by binding
//! 127.0.0.1:0 and releasing, and each service keeps its port across restarts, so the others
//! (whose channels reconnect by themselves) find it again. Each child's stdout and stderr go
//! to `<binary>.log` in the stack's temporary folder; a service that does not come up is
//! reported with the tail of that log.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;

use crate::database::TestDatabase;
use crate::model::{Rule, StandInModel};
use crate::stack::StackDatabase;

/// How long a (re)started service may take to answer health checks.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How much of a service's log an error quotes.
const LOG_TAIL_BYTES: usize = 4000;

/// One of the four services.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Service {
    Gateway,
    Classic,
    Code,
    ToolHost,
}

impl Service {
    pub const ALL: [Service; 4] = [
        Service::Gateway,
        Service::Classic,
        Service::Code,
        Service::ToolHost,
    ];

    /// The name of the service's binary.
    pub fn binary(self) -> &'static str {
        match self {
            Service::Gateway => "prompt-gateway",
            Service::Classic => "classic-executor",
            Service::Code => "code-executor",
            Service::ToolHost => "tool-host",
        }
    }
}

/// What to start; `ProcessStackOptions::default()` is the usual stack.
#[derive(Debug, Clone)]
pub struct ProcessStackOptions {
    /// SQLite files in the stack's folder, or fresh PostgreSQL databases.
    pub database: StackDatabase,
    /// `GATEWAY_LEASE_MS`: how long the gateway's claim on its running prompts lasts.
    pub gateway_lease_ms: u64,
    /// `LLM_TIMEOUT_SECS` of both executors.
    pub llm_timeout_secs: u64,
    /// `LLM_MAX_RETRIES` of both executors.
    pub llm_max_retries: u32,
    /// Set in every service's environment after (so over) the stack's own settings.
    pub extra_env: Vec<(String, String)>,
}

impl Default for ProcessStackOptions {
    fn default() -> Self {
        ProcessStackOptions {
            database: StackDatabase::from_env(),
            gateway_lease_ms: 1000,
            llm_timeout_secs: 30,
            llm_max_retries: 2,
            extra_env: Vec::new(),
        }
    }
}

/// The running stack of processes. Dropping it kills every child.
pub struct ProcessStack {
    pub model: StandInModel,
    children: HashMap<Service, Child>,
    addresses: HashMap<Service, SocketAddr>,
    environments: HashMap<Service, Vec<(String, String)>>,
    binaries: HashMap<Service, PathBuf>,
    log_dir: PathBuf,
    /// Kept until the stack is dropped (after its children are killed).
    _databases: Vec<TestDatabase>,
    _temp_dir: tempfile::TempDir,
}

impl ProcessStack {
    /// Starts the stand-in model answering by `rules`, then the four services, and returns
    /// once every service answers health checks.
    pub async fn start(rules: Vec<Rule>, options: ProcessStackOptions) -> anyhow::Result<Self> {
        let binaries = Service::ALL
            .into_iter()
            .map(|service| Ok((service, find_binary(service.binary())?)))
            .collect::<anyhow::Result<HashMap<_, _>>>()?;
        let model = StandInModel::start(rules).await?;
        let temp_dir = tempfile::tempdir()?;
        let log_dir = temp_dir.path().to_owned();
        let (gateway_database_url, tool_host_database_url, databases) = options
            .database
            .prepare(&log_dir, "a PostgreSQL process stack")
            .await?;
        let addresses = Service::ALL
            .into_iter()
            .map(|service| Ok((service, free_port()?)))
            .collect::<anyhow::Result<HashMap<_, _>>>()?;
        let url = |service: Service| format!("http://{}", addresses[&service]);
        let set = |pairs: &[(&str, String)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(name, value)| ((*name).to_owned(), value.clone()))
                .collect()
        };
        let llm = [
            ("OPENAI_API_KEY", "stand-in".to_owned()),
            ("OPENAI_BASE_URL", model.base_url()),
            ("AGENTIC_MODEL_NORMAL", "stand-in-normal".to_owned()),
            ("AGENTIC_MODEL_HIGH", "stand-in-high".to_owned()),
            ("LLM_MAX_RETRIES", options.llm_max_retries.to_string()),
            ("LLM_RETRY_BASE_MS", "10".to_owned()),
            ("LLM_TIMEOUT_SECS", options.llm_timeout_secs.to_string()),
        ];
        let mut environments = HashMap::new();
        environments.insert(
            Service::ToolHost,
            set(&[
                (
                    "TOOL_HOST_LISTEN",
                    addresses[&Service::ToolHost].to_string(),
                ),
                ("TOOL_HOST_DATABASE_URL", tool_host_database_url),
                (
                    "TOOL_HOST_PLUGINS",
                    "artifact,interpreter,skill,trigger,demo".to_owned(),
                ),
                ("GATEWAY_URL", url(Service::Gateway)),
            ]),
        );
        let mut classic = set(&[
            (
                "CLASSIC_EXECUTOR_LISTEN",
                addresses[&Service::Classic].to_string(),
            ),
            ("TOOL_HOST_URL", url(Service::ToolHost)),
            ("CODE_RUNNER_URL", url(Service::Code)),
        ]);
        classic.extend(set(&llm));
        environments.insert(Service::Classic, classic);
        let mut code = set(&[
            (
                "CODE_EXECUTOR_LISTEN",
                addresses[&Service::Code].to_string(),
            ),
            ("TOOL_HOST_URL", url(Service::ToolHost)),
        ]);
        code.extend(set(&llm));
        environments.insert(Service::Code, code);
        environments.insert(
            Service::Gateway,
            set(&[
                ("GATEWAY_LISTEN", addresses[&Service::Gateway].to_string()),
                ("GATEWAY_DATABASE_URL", gateway_database_url),
                ("GATEWAY_LEASE_MS", options.gateway_lease_ms.to_string()),
                (
                    "GATEWAY_MODES",
                    format!(
                        "classic={},code={}",
                        url(Service::Classic),
                        url(Service::Code)
                    ),
                ),
                ("TOOL_HOST_URL", url(Service::ToolHost)),
            ]),
        );
        for environment in environments.values_mut() {
            environment.extend(options.extra_env.iter().cloned());
        }

        let mut stack = ProcessStack {
            model,
            children: HashMap::new(),
            addresses,
            environments,
            binaries,
            log_dir,
            _databases: databases,
            _temp_dir: temp_dir,
        };
        // Start all four at once (their channels connect lazily), then wait for each.
        for service in Service::ALL {
            stack.spawn(service)?;
        }
        for service in Service::ALL {
            stack.until_ready(service).await?;
        }
        Ok(stack)
    }

    /// `http://127.0.0.1:PORT` of the gateway.
    pub fn gateway_url(&self) -> String {
        format!("http://{}", self.address(Service::Gateway))
    }

    /// Where `service` listens (the same address across restarts).
    pub fn address(&self, service: Service) -> SocketAddr {
        self.addresses[&service]
    }

    /// A client SDK connection to the gateway on behalf of `user`.
    pub async fn client(&self, user: &str) -> anyhow::Result<agentic_client::Client> {
        Ok(agentic_client::Client::connect(&self.gateway_url(), user).await?)
    }

    /// Kills `service` with SIGKILL and waits until the process is reaped. Nothing happens
    /// when it is not running.
    pub fn kill(&mut self, service: Service) {
        if let Some(mut child) = self.children.remove(&service) {
            // `Child::kill` is SIGKILL on Unix.
            if let Err(error) = child.kill() {
                tracing::warn!(%error, service = service.binary(), "could not kill a service");
            }
            if let Err(error) = child.wait() {
                tracing::warn!(%error, service = service.binary(), "could not reap a service");
            }
        }
    }

    /// Starts `service` again (killing it first if it still runs) on the same port and
    /// database, and returns once it answers health checks.
    pub async fn restart(&mut self, service: Service) -> anyhow::Result<()> {
        self.kill(service);
        self.spawn(service)?;
        self.until_ready(service).await
    }

    /// The process id of `service`, while it runs.
    pub fn pid(&self, service: Service) -> Option<u32> {
        self.children.get(&service).map(Child::id)
    }

    /// The peak resident set size of `service` so far (`VmHWM` of `/proc/<pid>/status`).
    pub fn peak_rss_bytes(&self, service: Service) -> Option<u64> {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid(service)?)).ok()?;
        let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
        let kilobytes: u64 = line
            .trim_start_matches("VmHWM:")
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some(kilobytes * 1024)
    }

    /// Where `service`'s stdout and stderr go (appended across restarts).
    pub fn log_path(&self, service: Service) -> PathBuf {
        self.log_dir.join(format!("{}.log", service.binary()))
    }

    fn spawn(&mut self, service: Service) -> anyhow::Result<()> {
        let log_path = self.log_path(service);
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .with_context(|| format!("opening {}", log_path.display()))?;
        let mut command = Command::new(&self.binaries[&service]);
        // A clean environment: the developer's OPENAI_API_KEY, OTEL_* or agentic settings
        // must not leak into the services under test.
        command.env_clear();
        if let Some(path) = std::env::var_os("PATH") {
            command.env("PATH", path);
        }
        // A development stack on loopback (`--dev`): no internal token or users' tokens.
        command
            .env("RUST_LOG", "warn")
            .env("AGENTIC_DEV", "true")
            .envs(self.environments[&service].iter().cloned())
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        let child = command
            .spawn()
            .with_context(|| format!("starting {}", self.binaries[&service].display()))?;
        self.children.insert(service, child);
        Ok(())
    }

    /// Waits until `service` answers health checks; fails, quoting its log, if it exits or
    /// takes longer than [`READY_TIMEOUT`].
    async fn until_ready(&mut self, service: Service) -> anyhow::Result<()> {
        let address = self.addresses[&service];
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let probed = agentic_rpc::probe(address).await;
            if probed.is_ok() {
                return Ok(());
            }
            let exited = match self.children.get_mut(&service) {
                Some(child) => child.try_wait()?,
                None => anyhow::bail!("{} is not running", service.binary()),
            };
            if let Some(status) = exited {
                self.children.remove(&service);
                anyhow::bail!(
                    "{} exited ({status}) before it answered health checks; its log ends:\n{}",
                    service.binary(),
                    log_tail(&self.log_path(service))
                );
            }
            if Instant::now() > deadline {
                anyhow::bail!(
                    "{} did not answer health checks on {address} within {READY_TIMEOUT:?} \
                     (last: {probed:?}); its log ends:\n{}",
                    service.binary(),
                    log_tail(&self.log_path(service))
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for ProcessStack {
    fn drop(&mut self) {
        for service in Service::ALL {
            self.kill(service);
        }
    }
}

/// The workspace binary `name` next to the running executable or in its parent folder (tests
/// run from `target/debug/deps`, benchmarks from `target/release/deps`).
pub fn find_binary(name: &str) -> anyhow::Result<PathBuf> {
    let executable = std::env::current_exe().context("finding the running executable")?;
    let candidates: Vec<PathBuf> = executable
        .ancestors()
        .skip(1)
        .take(2)
        .map(|folder| folder.join(format!("{name}{}", std::env::consts::EXE_SUFFIX)))
        .collect();
    candidates
        .iter()
        .find(|candidate| candidate.is_file())
        .cloned()
        .ok_or_else(|| {
            anyhow::anyhow!(
                "the {name} binary is not built (looked for {candidates:?}): run \
                 `cargo build --workspace --bins` (with `--release` for a release build) first"
            )
        })
}

/// A port that was free a moment ago: bound on 127.0.0.1:0, then released.
fn free_port() -> anyhow::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?)
}

/// The last [`LOG_TAIL_BYTES`] of a log file, for error messages.
fn log_tail(path: &Path) -> String {
    let Ok(mut file) = File::open(path) else {
        return format!("(no log at {})", path.display());
    };
    let mut text = Vec::new();
    if let Err(error) = std::io::Read::read_to_end(&mut file, &mut text) {
        return format!("(could not read {}: {error})", path.display());
    }
    let start = text.len().saturating_sub(LOG_TAIL_BYTES);
    String::from_utf8_lossy(&text[start..]).into_owned()
}
