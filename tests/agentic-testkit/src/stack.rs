//! The stack sandbox: the real four services wired together in one process, for tests,
//! demos and benchmarks.
//!
//! Every listener is bound on port 0 before any service starts, so nothing waits or retries
//! to connect. Each service runs on a runtime of its own, so a test can kill one outright
//! (sockets and in-flight calls die with it) the way a crashed process would.
//!
//! The gateway and the tool-host keep their data in fresh SQLite files, or in fresh
//! PostgreSQL databases when the options say so (by default when `AGENTIC_TEST_STACK_DATABASE`
//! is `postgres`: `make test` runs the end-to-end suite once per backend that way).

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use agentic_llm::LlmConfig;
use tokio::runtime::Runtime;

use crate::database::{TestDatabase, postgres_server};
use crate::model::{Rule, StandInModel};

/// Set to `postgres` to run stacks on PostgreSQL by default (with `AGENTIC_TEST_POSTGRES_URL`).
pub const STACK_DATABASE_VARIABLE: &str = "AGENTIC_TEST_STACK_DATABASE";

/// Where a stack's gateway and tool-host keep their data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StackDatabase {
    /// SQLite files in the stack's data folder.
    Sqlite,
    /// Fresh databases on the `AGENTIC_TEST_POSTGRES_URL` server, dropped with the stack.
    Postgres,
}

impl StackDatabase {
    /// `Postgres` when `AGENTIC_TEST_STACK_DATABASE=postgres`, else `Sqlite`.
    pub fn from_env() -> StackDatabase {
        match std::env::var(STACK_DATABASE_VARIABLE).as_deref() {
            Ok("postgres") => StackDatabase::Postgres,
            _ => StackDatabase::Sqlite,
        }
    }

    /// The gateway's and the tool-host's database URLs: SQLite files in `dir`, or two fresh
    /// PostgreSQL databases, returned with them so they live as long as the caller keeps them.
    /// `what` names the stack in the error when PostgreSQL is not configured.
    pub(crate) async fn prepare(
        self,
        dir: &Path,
        what: &str,
    ) -> anyhow::Result<(String, String, Vec<TestDatabase>)> {
        match self {
            StackDatabase::Sqlite => Ok((
                sqlite_url(dir, "gateway.db"),
                sqlite_url(dir, "tool-host.db"),
                Vec::new(),
            )),
            StackDatabase::Postgres => {
                let server = postgres_server(what).ok_or_else(|| {
                    anyhow::anyhow!("{what} needs {}", crate::database::POSTGRES_URL_VARIABLE)
                })?;
                let gateway =
                    TestDatabase::postgres(&server, "gateway", &prompt_gateway::MIGRATIONS).await?;
                let tool_host = TestDatabase::postgres(
                    &server,
                    "tool_host",
                    &tool_host::migrations::MIGRATIONS,
                )
                .await?;
                let (gateway_url, tool_host_url) =
                    (gateway.url().to_owned(), tool_host.url().to_owned());
                Ok((gateway_url, tool_host_url, vec![gateway, tool_host]))
            }
        }
    }
}

/// A clock the tests move by hand: the gateway's triggers fall due by it (no test sleeps
/// for minutes). Starts at the real time.
#[derive(Debug, Clone)]
pub struct TestClock(std::sync::Arc<std::sync::atomic::AtomicI64>);

impl Default for TestClock {
    fn default() -> Self {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| {
                i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
            });
        TestClock(std::sync::Arc::new(std::sync::atomic::AtomicI64::new(now)))
    }
}

impl TestClock {
    /// Its time, in ms since the epoch.
    pub fn now(&self) -> i64 {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Moves it on by `by`.
    pub fn advance(&self, by: std::time::Duration) {
        let by = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.0.fetch_add(by, std::sync::atomic::Ordering::SeqCst);
    }

    /// The clock as the gateway reads it.
    pub fn clock(&self) -> prompt_gateway::Clock {
        let time = std::sync::Arc::clone(&self.0);
        std::sync::Arc::new(move || time.load(std::sync::atomic::Ordering::SeqCst))
    }
}

/// What to start; `StackOptions::default()` is the usual test stack.
#[derive(Debug, Clone)]
pub struct StackOptions {
    /// Enable the tool-host's `demo` plugin (echo, sleep, fail, dangerous).
    pub demo_plugin: bool,
    /// Enable the tool-host's `human` plugin (`human.ask`, the agent's questions).
    pub human_plugin: bool,
    /// Enable the tool-host's `memory` plugin (long-term memory).
    pub memory_plugin: bool,
    /// Round limit of the classic executor (its own default when `None`).
    pub classic_max_rounds: Option<u32>,
    /// Wall-clock budget of one code sandbox run.
    pub code_run_timeout_ms: u64,
    /// How long code mode waits for a person to decide on a tool call.
    pub code_approval_timeout_secs: u64,
    /// Code runs in sandboxes at once.
    pub code_max_sandboxes: usize,
    /// Runs each executor works on at once (`EXECUTOR_MAX_RUNS`); more wait for a slot.
    pub executor_max_runs: usize,
    /// Code runs paused for approval at once.
    pub code_max_paused_runs: usize,
    /// `CODE_MAX_SANDBOXES_PER_USER` and `CODE_MAX_PAUSED_RUNS_PER_USER` (0: a quarter).
    pub code_shares_per_user: (usize, usize),
    /// Deadline of a tool call in both executors when the tool-host names none (s).
    pub tool_timeout_secs: u64,
    /// Tool calls of one classic reply running at once.
    pub classic_max_concurrent_tool_calls: u32,
    /// Tool calls one classic reply may make.
    pub classic_max_tool_calls_per_reply: u32,
    /// Longest tool result a classic run's model reads whole (bytes).
    pub classic_max_tool_result_bytes: u32,
    /// The tool-host's per-artifact size limit and per-user storage quota.
    pub tool_host_storage: tool_host::StorageLimits,
    /// Web origins the gateway's HTTP API allows (`--http-cors-origins`).
    pub gateway_http_cors_origins: Vec<String>,
    /// The tool-host's MCP servers file (`--mcp-config`).
    pub tool_host_mcp_config: Option<PathBuf>,
    /// The operator's skills directory (`--skills-dir`).
    pub tool_host_skills_dir: Option<PathBuf>,
    /// The token internal services require from each other.
    pub internal_token: Option<String>,
    /// Every service's `--dev` (on by default: the stack listens on loopback): without it
    /// the internal token and users' tokens must be secrets.
    pub dev: bool,
    /// Users' bearer tokens as TOKEN=USER; empty: the gateway's dev mode (`x-user-id`).
    pub auth_tokens: Vec<String>,
    /// Retries after a failed LLM call.
    pub llm_max_retries: u32,
    /// Time limit of one LLM call attempt, in seconds.
    pub llm_timeout_secs: u64,
    /// Where the executors send LLM requests instead of the stand-in model (e.g. a closed port).
    pub llm_base_url: Option<String>,
    /// Where the services keep their SQLite databases; a fresh temporary folder when `None`.
    pub data_dir: Option<PathBuf>,
    /// SQLite or PostgreSQL for the gateway and the tool-host.
    pub database: StackDatabase,
    /// How long a gateway's lease on the prompts it runs lasts (ms).
    pub gateway_lease_ms: u64,
    /// How long a mode an executor registered lasts unrenewed (ms).
    pub mode_lease_ms: u64,
    /// Prompts one user may have running at once.
    pub max_running_per_user: u32,
    /// Prompts the gateway runs at once (`GATEWAY_MAX_RUNNING`); more wait in `CreatePrompt`.
    pub gateway_max_running: usize,
    /// The longest a prompt waits for one of those (ms).
    pub admission_wait_ms: u64,
    /// How long a new connection to the gateway may stay silent (ms).
    pub first_bytes_timeout_ms: u64,
    /// The longest a prompt's run may take (s).
    pub max_run_secs: u64,
    /// Every prompt's budget, as the operator sets it (`GATEWAY_MAX_PROMPT_*`; 0: none).
    pub max_prompt_tokens: u64,
    pub max_prompt_llm_calls: u32,
    pub max_prompt_tool_calls: u32,
    /// Tokens one user may spend per day (`GATEWAY_DAILY_TOKENS_PER_USER`; 0: no limit).
    pub daily_tokens_per_user: u64,
    /// What one user's prompts may cost per UTC day, in millionths (0: no limit).
    pub daily_cost_micros_per_user: u64,
    /// How long a person may take to decide on a call (`GATEWAY_APPROVAL_TIMEOUT_SECS`).
    pub approval_timeout_secs: u64,
    /// `GATEWAY_MAX_CONVERSATIONS_PER_USER` and `GATEWAY_MAX_PROMPTS_PER_USER`.
    pub storage_quotas: (u64, u64),
    /// `GATEWAY_MAX_STORED_BYTES_PER_USER` and `GATEWAY_STORAGE_TICK_MS`.
    pub stored_bytes: (u64, u64),
    /// `GATEWAY_MAX_STREAMS_PER_USER`, `GATEWAY_HTTP_CONNECTIONS_PER_ADDRESS` and
    /// `GATEWAY_HTTP_STREAM_SECS`.
    pub stream_bounds: (usize, usize, u64),
    /// `GATEWAY_HTTP_IDLE_SECS`.
    pub http_idle_secs: u64,
    /// `GATEWAY_RETENTION_SECS` (0: keep everything) and `GATEWAY_RETENTION_TICK_MS`.
    pub retention: (u64, u64),
    /// When the gateway records prompts (dev mode by default, as in production).
    pub record_prompts: prompt_gateway::RecordPrompts,
    /// A guardrails file for the gateway and the tool-host (none by default).
    pub guardrails: Option<PathBuf>,
    /// The operator's agents file for the gateway (none by default).
    pub agents_file: Option<PathBuf>,
    /// Prompts one user may create per minute (0: no limit, the default).
    pub prompts_per_minute_per_user: u32,
    /// Tokens one user's prompts may spend per minute (0: no limit, the default).
    pub tokens_per_minute_per_user: u64,
    /// The executors' price table (`AGENTIC_PRICES`; empty: none).
    pub prices: String,
    /// The executors register their modes with the gateway (which then has none
    /// configured) instead of being named in its `--modes`. Needs `internal_token`.
    pub executors_register: bool,
    /// The gateway serves TLS with this PEM certificate chain and key (its `--tls-cert` and
    /// `--tls-key`); [`Stack::gateway_url`] is then `https://127.0.0.1:PORT`, so the
    /// certificate must name the IP address 127.0.0.1.
    pub gateway_tls_cert: Option<PathBuf>,
    pub gateway_tls_key: Option<PathBuf>,
    /// The clock the gateways' triggers fall due by (`None`: the system's).
    pub trigger_clock: Option<TestClock>,
    /// How often the gateways look for due triggers (ms).
    pub trigger_tick_ms: u64,
    /// Also start the hosted executor (mode `hosted`), talking to the stand-in model's
    /// Anthropic endpoint.
    pub hosted: bool,
    /// The hosted executor's default container skills (`HOSTED_SKILLS`, a JSON list).
    pub hosted_skills: String,
    /// Files of one hosted prompt downloaded from the container, at most.
    pub hosted_max_files: u32,
    /// Seconds between the hosted executor's sweeps of provider skill copies to delete (0:
    /// none, the default here: each hosted prompt deletes those it sees).
    pub hosted_skill_sweep_secs: u64,
}

impl Default for StackOptions {
    fn default() -> Self {
        StackOptions {
            demo_plugin: true,
            memory_plugin: false,
            human_plugin: false,
            classic_max_rounds: None,
            code_run_timeout_ms: 30_000,
            code_approval_timeout_secs: 600,
            code_max_sandboxes: 64,
            executor_max_runs: agentic_executor::DEFAULT_MAX_RUNS,
            code_max_paused_runs: 32,
            code_shares_per_user: (0, 0),
            tool_timeout_secs: 60,
            classic_max_concurrent_tool_calls: 8,
            classic_max_tool_calls_per_reply: 64,
            classic_max_tool_result_bytes: 32 * 1024,
            tool_host_storage: tool_host::StorageLimits::default(),
            tool_host_mcp_config: None,
            tool_host_skills_dir: None,
            gateway_http_cors_origins: Vec::new(),
            internal_token: None,
            dev: true,
            auth_tokens: Vec::new(),
            llm_max_retries: 2,
            llm_timeout_secs: 30,
            llm_base_url: None,
            data_dir: None,
            database: StackDatabase::from_env(),
            gateway_lease_ms: 6000,
            mode_lease_ms: 30_000,
            max_running_per_user: 64,
            gateway_max_running: 2048,
            admission_wait_ms: 30_000,
            first_bytes_timeout_ms: 10_000,
            max_run_secs: 3600,
            max_prompt_tokens: 0,
            max_prompt_llm_calls: 0,
            max_prompt_tool_calls: 0,
            daily_tokens_per_user: 0,
            daily_cost_micros_per_user: 0,
            approval_timeout_secs: 86_400,
            storage_quotas: (10_000, 100_000),
            stored_bytes: (1 << 30, 1000),
            stream_bounds: (64, 256, 600),
            http_idle_secs: 120,
            retention: (0, 60_000),
            record_prompts: prompt_gateway::RecordPrompts::Dev,
            guardrails: None,
            agents_file: None,
            prompts_per_minute_per_user: 0,
            tokens_per_minute_per_user: 0,
            prices: String::new(),
            executors_register: false,
            gateway_tls_cert: None,
            gateway_tls_key: None,
            trigger_clock: None,
            trigger_tick_ms: 1000,
            hosted: false,
            hosted_skills: "[]".into(),
            hosted_max_files: 20,
            hosted_skill_sweep_secs: 0,
        }
    }
}

/// Worker threads of each service's runtime: one, as the gateway, the classic-executor and
/// the tool-host get in the Kubernetes base (tokio starts one worker per core it may use,
/// and their CPU limit is one core; the code-executor's two go mostly to its sandbox
/// threads). On a small machine shared by four services it is also the cheaper choice: a
/// second worker per runtime mostly wakes up to find nothing to steal, and those wake-ups
/// cost CPU on every prompt (docs/performance.md has the measurement). Blocking work never
/// runs on these workers (SQLite and the sandboxes have threads of their own), and the tests
/// keep it that way: a call that blocked its runtime would stall a one-worker service.
pub const SERVICE_WORKER_THREADS: usize = 1;

/// A server on a runtime of its own ([`SERVICE_WORKER_THREADS`] workers); dropping it stops
/// the server at once, as if its process died. Also what the benchmarks run their own
/// servers on.
pub struct Background {
    runtime: Option<Runtime>,
}

impl Background {
    pub fn start<F, Fut>(
        name: &str,
        listener: std::net::TcpListener,
        run: F,
    ) -> anyhow::Result<Background>
    where
        F: FnOnce(tokio::net::TcpListener) -> Fut + Send + 'static,
        Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(SERVICE_WORKER_THREADS)
            .thread_name(format!("stack-{name}"))
            .enable_all()
            .build()?;
        listener.set_nonblocking(true)?;
        let name = name.to_owned();
        runtime.spawn(async move {
            let result = match tokio::net::TcpListener::from_std(listener) {
                Ok(listener) => run(listener).await,
                Err(error) => Err(error.into()),
            };
            if let Err(error) = result {
                eprintln!("stack: {name} stopped with an error: {error:#}");
            }
        });
        Ok(Background {
            runtime: Some(runtime),
        })
    }

    /// Stops the service at once, as if its process died.
    pub fn kill(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The running stack. Dropping it stops every service.
/// Starts a tool-host of one's own on the listener a [`Stack`] gives it.
pub type StartToolHost =
    Box<dyn FnOnce(std::net::TcpListener) -> anyhow::Result<Background> + Send>;

pub struct Stack {
    pub model: StandInModel,
    pub gateway_address: SocketAddr,
    /// The gateway's HTTP/JSON API.
    pub gateway_http_address: SocketAddr,
    pub classic_address: SocketAddr,
    pub code_address: SocketAddr,
    pub tool_host_address: SocketAddr,
    /// The hosted executor's address, when the options start it.
    pub hosted_address: Option<SocketAddr>,
    gateway: Background,
    classic: Background,
    code: Background,
    hosted: Option<Background>,
    tool_host: Background,
    options: StackOptions,
    modes: Vec<prompt_gateway::ModeSpec>,
    gateway_database_url: String,
    tool_host_database_url: String,
    /// Kept until the stack is dropped (after its services: fields drop in order).
    _databases: Vec<TestDatabase>,
    _temp_dir: Option<tempfile::TempDir>,
}

/// One more gateway on a stack's database (see [`Stack::start_gateway_replica`]).
pub struct GatewayReplica {
    pub address: SocketAddr,
    scheme: &'static str,
    service: Background,
}

impl GatewayReplica {
    /// `http://127.0.0.1:PORT` of this replica (`https://` when it serves TLS).
    pub fn url(&self) -> String {
        format!("{}://{}", self.scheme, self.address)
    }

    /// A client SDK connection to this replica on behalf of `user`.
    pub async fn client(&self, user: &str) -> anyhow::Result<agentic_client::Client> {
        Ok(agentic_client::Client::connect(&self.url(), user).await?)
    }

    /// Kills the replica outright, as a crashed process would die.
    pub fn kill(&mut self) {
        self.service.kill();
    }
}

/// Where an executor of the stack finds the services it calls.
struct Peers {
    tool_host: SocketAddr,
    gateway: SocketAddr,
    /// The code-executor, whose `CodeRunner` runs the code of tools that run code.
    code_runner: SocketAddr,
}

impl Peers {
    fn code_runner_args(&self) -> agentic_executor::CodeRunnerArgs {
        agentic_executor::CodeRunnerArgs {
            url: format!("http://{}", self.code_runner),
        }
    }
}

/// A listener on a free port of 127.0.0.1.
pub fn bind() -> anyhow::Result<(std::net::TcpListener, SocketAddr)> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let address = listener.local_addr()?;
    Ok((listener, address))
}

pub(crate) fn sqlite_url(dir: &Path, name: &str) -> String {
    format!("sqlite://{}?mode=rwc", dir.join(name).display())
}

impl Stack {
    /// The usual test stack, with the stand-in model answering by `rules`.
    pub async fn start(rules: Vec<Rule>) -> anyhow::Result<Stack> {
        Stack::start_with(rules, StackOptions::default()).await
    }

    pub async fn start_with(rules: Vec<Rule>, options: StackOptions) -> anyhow::Result<Stack> {
        Stack::start_serving(rules, options, None).await
    }

    /// A stack whose tool-host is `tool_host`, started on the stack's tool-host listener,
    /// instead of the real one (the bench's tool-host of many tools).
    pub async fn start_with_tool_host(
        rules: Vec<Rule>,
        options: StackOptions,
        tool_host: StartToolHost,
    ) -> anyhow::Result<Stack> {
        Stack::start_serving(rules, options, Some(tool_host)).await
    }

    async fn start_serving(
        rules: Vec<Rule>,
        options: StackOptions,
        custom_tool_host: Option<StartToolHost>,
    ) -> anyhow::Result<Stack> {
        let model = StandInModel::start(rules).await?;
        let (temp_dir, data_dir) = match &options.data_dir {
            Some(dir) => (None, dir.clone()),
            None => {
                let temp = tempfile::tempdir()?;
                let path = temp.path().to_owned();
                (Some(temp), path)
            }
        };
        let (gateway_database_url, tool_host_database_url, databases) = options
            .database
            .prepare(&data_dir, "a PostgreSQL stack")
            .await?;
        let (tool_host_listener, tool_host_address) = bind()?;
        let (classic_listener, classic_address) = bind()?;
        let (code_listener, code_address) = bind()?;
        let (gateway_listener, gateway_address) = bind()?;
        let hosted_listener = if options.hosted { Some(bind()?) } else { None };
        let hosted_address = hosted_listener.as_ref().map(|(_, address)| *address);
        let modes = if options.executors_register {
            Vec::new()
        } else {
            let mut modes = vec![
                prompt_gateway::ModeSpec {
                    id: "classic".into(),
                    endpoint: format!("http://{classic_address}"),
                },
                prompt_gateway::ModeSpec {
                    id: "code".into(),
                    endpoint: format!("http://{code_address}"),
                },
            ];
            if let Some(address) = hosted_address {
                modes.push(prompt_gateway::ModeSpec {
                    id: "hosted".into(),
                    endpoint: format!("http://{address}"),
                });
            }
            modes
        };

        let tool_host = match custom_tool_host {
            Some(start) => start(tool_host_listener)?,
            None => Stack::start_tool_host(
                &options,
                &tool_host_database_url,
                gateway_address,
                tool_host_listener,
            )?,
        };
        let peers = Peers {
            tool_host: tool_host_address,
            gateway: gateway_address,
            code_runner: code_address,
        };
        let classic = Stack::start_classic(&options, &model, &peers, classic_listener)?;
        let code = Stack::start_code(&options, &model, &peers, code_listener)?;
        let hosted = match hosted_listener {
            Some((listener, _)) => Some(Stack::start_hosted(&options, &model, &peers, listener)?),
            None => None,
        };
        let (gateway, gateway_http_address) = Stack::start_gateway(
            &options,
            &gateway_database_url,
            &modes,
            tool_host_address,
            gateway_listener,
        )?;
        Ok(Stack {
            model,
            gateway_address,
            gateway_http_address,
            classic_address,
            code_address,
            tool_host_address,
            hosted_address,
            gateway,
            classic,
            code,
            hosted,
            tool_host,
            modes,
            options,
            gateway_database_url,
            tool_host_database_url,
            _databases: databases,
            _temp_dir: temp_dir,
        })
    }

    fn start_tool_host(
        options: &StackOptions,
        database_url: &str,
        gateway: SocketAddr,
        listener: std::net::TcpListener,
    ) -> anyhow::Result<Background> {
        let mut plugins = vec![
            "artifact".to_owned(),
            "interpreter".to_owned(),
            "skill".to_owned(),
            "trigger".to_owned(),
        ];
        if options.demo_plugin {
            plugins.push("demo".to_owned());
        }
        if options.human_plugin {
            plugins.push("human".to_owned());
        }
        if options.memory_plugin {
            plugins.push("memory".to_owned());
        }
        let config = tool_host::Config {
            service: service_args(options, &listener)?,
            database_url: database_url.to_owned(),
            plugins,
            gateway_url: format!("{}://{gateway}", gateway_scheme(options)),
            storage: options.tool_host_storage,
            mcp_config: options.tool_host_mcp_config.clone(),
            guardrails: options.guardrails.clone(),
            skills_dir: options.tool_host_skills_dir.clone(),
            allow_root: false,
            memory_put_approval: false,
        };
        Background::start("tool-host", listener, move |listener| {
            tool_host::run(config, listener, std::future::pending())
        })
    }

    /// What every executor is given: where it listens, the tool-host, how it registers and
    /// how many runs it works on.
    fn executor_args(
        options: &StackOptions,
        peers: &Peers,
        listener: &std::net::TcpListener,
    ) -> anyhow::Result<agentic_executor::ExecutorArgs> {
        Ok(agentic_executor::ExecutorArgs {
            service: service_args(options, listener)?,
            tool_host: agentic_executor::ToolHostArgs {
                url: format!("http://{}", peers.tool_host),
                timeout_secs: options.tool_timeout_secs,
            },
            registration: registration(options, peers.gateway, listener.local_addr()?),
            capacity: agentic_executor::Capacity {
                max_runs: options.executor_max_runs,
                ..Default::default()
            },
        })
    }

    fn start_classic(
        options: &StackOptions,
        model: &StandInModel,
        peers: &Peers,
        listener: std::net::TcpListener,
    ) -> anyhow::Result<Background> {
        let config = classic_executor::Config {
            executor: Self::executor_args(options, peers, &listener)?,
            llm: llm_config(model, options),
            max_rounds: options.classic_max_rounds.unwrap_or(25),
            calls: call_limits(options),
            code_runner: peers.code_runner_args(),
        };
        Background::start("classic-executor", listener, move |listener| {
            classic_executor::run(config, listener, std::future::pending())
        })
    }

    fn start_code(
        options: &StackOptions,
        model: &StandInModel,
        peers: &Peers,
        listener: std::net::TcpListener,
    ) -> anyhow::Result<Background> {
        let config = code_executor::Config {
            executor: Self::executor_args(options, peers, &listener)?,
            llm: llm_config(model, options),
            max_rounds: 10,
            max_tokens: 4096,
            run_timeout_ms: options.code_run_timeout_ms,
            memory_limit_mb: 64,
            max_tool_calls: 200,
            prompt_limits: Default::default(),
            approval_timeout_secs: options.code_approval_timeout_secs,
            max_sandboxes: options.code_max_sandboxes,
            max_paused_runs: options.code_max_paused_runs,
            max_sandboxes_per_user: options.code_shares_per_user.0,
            max_paused_runs_per_user: options.code_shares_per_user.1,
        };
        Background::start("code-executor", listener, move |listener| {
            code_executor::run(config, listener, std::future::pending())
        })
    }

    fn start_hosted(
        options: &StackOptions,
        model: &StandInModel,
        peers: &Peers,
        listener: std::net::TcpListener,
    ) -> anyhow::Result<Background> {
        let config = hosted_executor::Config {
            executor: Self::executor_args(options, peers, &listener)?,
            anthropic_api_key: Some("stand-in".into()),
            anthropic_base_url: options
                .llm_base_url
                .clone()
                .unwrap_or_else(|| model.anthropic_base_url()),
            hosted_model_normal: "stand-in-hosted".into(),
            hosted_model_high: "stand-in-hosted-high".into(),
            prices: options.prices.clone(),
            max_tokens: 4096,
            max_rounds: options.classic_max_rounds.unwrap_or(25),
            skills: options.hosted_skills.clone(),
            allowed_custom_skills: vec!["skill_01abc".to_owned()],
            hosted_timeout_secs: options.llm_timeout_secs,
            hosted_max_retries: options.llm_max_retries,
            hosted_retry_base_ms: 10,
            max_files: options.hosted_max_files,
            max_file_bytes: 1024 * 1024,
            calls: call_limits(options),
            code_runner: peers.code_runner_args(),
            skill_sweep_secs: options.hosted_skill_sweep_secs,
        };
        Background::start("hosted-executor", listener, move |listener| {
            hosted_executor::run(config, listener, std::future::pending())
        })
    }

    fn start_gateway(
        options: &StackOptions,
        database_url: &str,
        modes: &[prompt_gateway::ModeSpec],
        tool_host: SocketAddr,
        listener: std::net::TcpListener,
    ) -> anyhow::Result<(Background, SocketAddr)> {
        let config = prompt_gateway::Config {
            service: service_args(options, &listener)?,
            http_listen: None,
            http_cors_origins: options.gateway_http_cors_origins.clone(),
            database_url: database_url.to_owned(),
            lease_ms: options.gateway_lease_ms,
            mode_lease_ms: options.mode_lease_ms,
            max_running_per_user: options.max_running_per_user,
            max_running: options.gateway_max_running,
            admission_wait_ms: options.admission_wait_ms,
            first_bytes_timeout_ms: options.first_bytes_timeout_ms,
            max_run_secs: options.max_run_secs,
            max_prompt_tokens: options.max_prompt_tokens,
            max_prompt_llm_calls: options.max_prompt_llm_calls,
            max_prompt_tool_calls: options.max_prompt_tool_calls,
            daily_tokens_per_user: options.daily_tokens_per_user,
            daily_cost_micros_per_user: options.daily_cost_micros_per_user,
            approval_timeout_secs: options.approval_timeout_secs,
            max_conversations_per_user: options.storage_quotas.0,
            max_prompts_per_user: options.storage_quotas.1,
            max_stored_bytes_per_user: options.stored_bytes.0,
            max_upload_bytes: 8 << 20,
            storage_tick_ms: options.stored_bytes.1,
            max_streams_per_user: options.stream_bounds.0,
            http_connections_per_address: options.stream_bounds.1,
            http_stream_secs: options.stream_bounds.2,
            http_idle_secs: options.http_idle_secs,
            retention_secs: options.retention.0,
            retention_tick_ms: options.retention.1,
            trigger_tick_ms: options.trigger_tick_ms,
            record_prompts: options.record_prompts,
            prompts_per_minute_per_user: options.prompts_per_minute_per_user,
            tokens_per_minute_per_user: options.tokens_per_minute_per_user,
            agents_file: options.agents_file.clone(),
            max_agent_depth: 3,
            guardrails: options.guardrails.clone(),
            modes: modes.to_vec(),
            tool_host_url: format!("http://{tool_host}"),
            auth_tokens: options.auth_tokens.clone(),
            auth_tokens_file: None,
            tls_cert: options.gateway_tls_cert.clone(),
            tls_key: options.gateway_tls_key.clone(),
        };
        // The HTTP API on a port of its own (`Stack::gateway_http_url`).
        let (http_listener, http_address) = bind()?;
        http_listener.set_nonblocking(true)?;
        let clock = options
            .trigger_clock
            .as_ref()
            .map_or_else(prompt_gateway::system_clock, TestClock::clock);
        let service = Background::start("prompt-gateway", listener, move |listener| async move {
            let http = tokio::net::TcpListener::from_std(http_listener)?;
            prompt_gateway::run_with_clock(
                config,
                listener,
                Some(http),
                clock,
                std::future::pending(),
            )
            .await
        })?;
        Ok((service, http_address))
    }

    /// `http://127.0.0.1:PORT` of the gateway (`https://` when it serves TLS).
    pub fn gateway_url(&self) -> String {
        let scheme = gateway_scheme(&self.options);
        format!("{scheme}://{}", self.gateway_address)
    }

    /// `http://127.0.0.1:PORT` of the gateway's HTTP/JSON API.
    pub fn gateway_http_url(&self) -> String {
        format!("http://{}", self.gateway_http_address)
    }

    /// A client SDK connection on behalf of `user` (dev mode: `x-user-id`).
    pub async fn client(&self, user: &str) -> anyhow::Result<agentic_client::Client> {
        Ok(agentic_client::Client::connect(&self.gateway_url(), user).await?)
    }

    /// A client SDK connection that logs in with a bearer `token` (one of
    /// [`StackOptions::auth_tokens`]). A stack serving TLS needs its CA: use
    /// `agentic_client::Client::builder` with `ca_cert` there.
    pub async fn client_with_token(&self, token: &str) -> anyhow::Result<agentic_client::Client> {
        Ok(agentic_client::Client::builder(self.gateway_url())
            .token(token)
            .connect()
            .await?)
    }

    /// Kills the classic executor outright, mid-call, as a crashed process would die.
    pub fn kill_classic_executor(&mut self) {
        self.classic.kill();
    }

    /// Kills the code executor (also the runner of `interpreter.run-code`'s code) outright,
    /// mid-call.
    pub fn kill_code_executor(&mut self) {
        self.code.kill();
    }

    /// Kills the classic executor and starts a new one on a new port. Gateways started from
    /// now on (see [`Stack::restart_gateway`]) know the new address.
    pub fn restart_classic_executor(&mut self) -> anyhow::Result<()> {
        self.classic.kill();
        let (listener, address) = bind()?;
        let peers = Peers {
            tool_host: self.tool_host_address,
            gateway: self.gateway_address,
            code_runner: self.code_address,
        };
        self.classic = Stack::start_classic(&self.options, &self.model, &peers, listener)?;
        self.classic_address = address;
        for mode in &mut self.modes {
            if mode.id == "classic" {
                mode.endpoint = format!("http://{address}");
            }
        }
        Ok(())
    }

    /// Rows of either database that name `user` or any of `ids` (see
    /// [`crate::stored::rows_naming`]).
    pub async fn rows_naming(
        &self,
        user: &str,
        ids: &[String],
    ) -> anyhow::Result<std::collections::BTreeMap<String, i64>> {
        crate::stored::rows_naming(
            &self.gateway_database_url,
            &self.tool_host_database_url,
            user,
            ids,
        )
        .await
    }

    /// Rows `user` has in every table of both databases (see [`crate::stored`]).
    pub async fn rows_of(
        &self,
        user: &str,
    ) -> anyhow::Result<std::collections::BTreeMap<String, i64>> {
        crate::stored::rows_of(
            &self.gateway_database_url,
            &self.tool_host_database_url,
            user,
        )
        .await
    }

    /// Kills the gateway and starts a new one on the same database (a new port).
    pub fn restart_gateway(&mut self) -> anyhow::Result<()> {
        self.gateway.kill();
        let (listener, address) = bind()?;
        (self.gateway, self.gateway_http_address) = Stack::start_gateway(
            &self.options,
            &self.gateway_database_url,
            &self.modes,
            self.tool_host_address,
            listener,
        )?;
        self.gateway_address = address;
        Ok(())
    }

    /// Starts one more gateway on this stack's database, as another replica would run
    /// (several replicas need the PostgreSQL backend).
    pub fn start_gateway_replica(&self) -> anyhow::Result<GatewayReplica> {
        let (listener, address) = bind()?;
        let (service, _http) = Stack::start_gateway(
            &self.options,
            &self.gateway_database_url,
            &self.modes,
            self.tool_host_address,
            listener,
        )?;
        Ok(GatewayReplica {
            address,
            scheme: gateway_scheme(&self.options),
            service,
        })
    }

    pub fn options(&self) -> &StackOptions {
        &self.options
    }

    /// Stops everything now (also done on drop).
    pub fn stop(&mut self) {
        self.gateway.kill();
        self.classic.kill();
        self.code.kill();
        if let Some(hosted) = &mut self.hosted {
            hosted.kill();
        }
        self.tool_host.kill();
    }
}

/// How an executor of the stack announces its mode: to `gateway`, when the options say
/// executors register.
fn registration(
    options: &StackOptions,
    gateway: SocketAddr,
    executor: SocketAddr,
) -> agentic_executor::Registration {
    if !options.executors_register {
        return agentic_executor::Registration::default();
    }
    agentic_executor::Registration {
        gateway_url: Some(format!("http://{gateway}")),
        advertise_url: Some(format!("http://{executor}")),
        mode_id: None,
    }
}

/// `https` when the options make the gateway serve TLS, else `http`.
fn gateway_scheme(options: &StackOptions) -> &'static str {
    if options.gateway_tls_cert.is_some() {
        "https"
    } else {
        "http"
    }
}

/// The call limits of the classic and hosted executors.
fn call_limits(options: &StackOptions) -> agentic_executor::calls::CallLimitArgs {
    agentic_executor::calls::CallLimitArgs {
        max_concurrent_tool_calls: options.classic_max_concurrent_tool_calls,
        max_tool_calls_per_reply: options.classic_max_tool_calls_per_reply,
        max_tool_result_bytes: options.classic_max_tool_result_bytes,
    }
}

/// What every service is given: where it listens, the internal token and `--dev`.
fn service_args(
    options: &StackOptions,
    listener: &std::net::TcpListener,
) -> anyhow::Result<agentic_rpc::ServiceArgs> {
    Ok(agentic_rpc::ServiceArgs {
        listen: listener.local_addr()?,
        internal_token: options.internal_token.clone(),
        dev: agentic_rpc::exposure::DevFlag { dev: options.dev },
        check_config: false,
        probe: false,
    })
}

/// LLM settings that point the executors at the stand-in model with fast retries.
pub fn llm_config(model: &StandInModel, options: &StackOptions) -> LlmConfig {
    LlmConfig {
        openai_api_key: Some("stand-in".into()),
        openai_base_url: options
            .llm_base_url
            .clone()
            .unwrap_or_else(|| model.base_url()),
        model_normal: "stand-in-normal".into(),
        model_high: "stand-in-high".into(),
        llm_max_retries: options.llm_max_retries,
        llm_retry_base_ms: 10,
        llm_timeout_secs: options.llm_timeout_secs,
        prices: options.prices.clone(),
    }
}
