//! An executor as a service: the settings every executor binary takes ([`ExecutorArgs`],
//! flattened into each executor's clap `Config`, which implements
//! `agentic_rpc::ServiceConfig` for the `main` every service shares), and [`serve`], which
//! mounts a mode's `Executor` service behind the internal token and announces the mode.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use agentic_proto::v1::executor_server::ExecutorServer;
use agentic_rpc::{RequireInternalToken, SendInternalToken, ServiceArgs};
use tokio::net::TcpListener;
use tonic::transport::server::Router;

use crate::edge::{ExecutorService, Mode};
use crate::register::{self, Registration, RegistrationError};
use crate::slots::Capacity;
use crate::tool_host::ToolHost;

/// Where an executor's tools run.
#[derive(clap::Args, Debug, Clone)]
pub struct ToolHostArgs {
    /// The tool-host, `http://host:port`.
    #[arg(
        id = "tool_host_url",
        long = "tool-host-url",
        value_name = "TOOL_HOST_URL",
        env = "TOOL_HOST_URL",
        default_value = "http://127.0.0.1:50054"
    )]
    pub url: String,
    /// Seconds a tool call may take when the tool-host names no limit for the tool; a call
    /// past it fails with an error the model (in code mode, the code) sees.
    #[arg(id = "tool_timeout_secs", long = "tool-timeout-secs", value_name = "TOOL_TIMEOUT_SECS", env = "AGENTIC_TOOL_TIMEOUT_SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout_secs: u64,
}

/// Where the code of tools that run code (`interpreter.run-code`, skills) runs, for a mode
/// that does not run code itself (classic, hosted).
#[derive(clap::Args, Debug, Clone)]
pub struct CodeRunnerArgs {
    /// The code-executor's `CodeRunner`, `http://host:port`.
    #[arg(
        id = "code_runner_url",
        long = "code-runner-url",
        value_name = "CODE_RUNNER_URL",
        env = "CODE_RUNNER_URL",
        default_value = "http://127.0.0.1:50053"
    )]
    pub url: String,
}

/// The settings every executor takes, beside its mode's own.
#[derive(clap::Args, Debug, Clone)]
pub struct ExecutorArgs {
    #[command(flatten)]
    pub service: ServiceArgs,
    #[command(flatten)]
    pub tool_host: ToolHostArgs,
    #[command(flatten)]
    pub registration: Registration,
    /// How many runs this executor works on at once.
    #[command(flatten)]
    pub capacity: Capacity,
}

impl ExecutorArgs {
    /// What `--check-config` checks of every executor beyond parsing: the internal token is a
    /// secret (unless `--dev`, which must listen on loopback) and can travel as metadata, and
    /// the registration settings are usable.
    pub fn check(&self) -> Result<(), CheckError> {
        self.exposure(self.service.listen)?;
        SendInternalToken::new(self.internal_token())?;
        self.registration
            .announce("check", "check", self.internal_token())?;
        Ok(())
    }

    /// [`ExecutorArgs::check`] for a mode that talks to the OpenAI-compatible endpoint `llm`
    /// describes: its client can be built too.
    pub fn check_with_llm(&self, llm: &agentic_llm::LlmConfig) -> Result<(), CheckError> {
        self.check()?;
        agentic_llm::OpenAiChatModel::new(llm.clone())?;
        Ok(())
    }

    /// A client of the configured tool-host that sends the internal token with every call.
    pub fn tool_host(&self) -> Result<ToolHost, SetupError> {
        let token =
            SendInternalToken::new(self.internal_token()).map_err(SetupError::InternalToken)?;
        let url = &self.tool_host.url;
        let channel =
            agentic_rpc::channel(url, &token).map_err(|source| SetupError::ToolHostUrl {
                url: url.clone(),
                source,
            })?;
        Ok(ToolHost::new(channel)
            .with_default_timeout(Duration::from_secs(self.tool_host.timeout_secs)))
    }

    /// [`ExecutorArgs::tool_host`] running the code of tools that run code on the
    /// `CodeRunner` `code` names.
    pub fn tool_host_running_code(&self, code: &CodeRunnerArgs) -> Result<ToolHost, SetupError> {
        let token =
            SendInternalToken::new(self.internal_token()).map_err(SetupError::InternalToken)?;
        let channel = agentic_rpc::channel(&code.url, &token).map_err(|source| {
            SetupError::CodeRunnerUrl {
                url: code.url.clone(),
                source,
            }
        })?;
        let runner = crate::tool_host::RemoteCodeRunner::new(channel);
        Ok(self
            .tool_host()?
            .with_code_runner(std::sync::Arc::new(runner)))
    }

    fn internal_token(&self) -> Option<&str> {
        self.service.internal_token.as_deref()
    }

    /// The settings that would leave the executor open (see `agentic_rpc::exposure`), for a
    /// listener on `address`.
    fn exposure(&self, address: SocketAddr) -> Result<(), agentic_rpc::exposure::Exposure> {
        use agentic_rpc::exposure::{check_internal_token, check_listen};
        check_internal_token(self.internal_token(), self.service.dev)?;
        check_listen("--listen", address, self.service.dev)
    }
}

/// Serves `mode`'s `Executor` service (with health and reflection, plus `extra_services`
/// such as code mode's `CodeRunner`, which `add_extra` mounts) on `listener` until
/// `shutdown` resolves, working on at most `args.capacity` runs at once. Every service
/// requires the internal token when one is configured: `add_extra` gets the check to wrap
/// its services in. With a gateway URL, the mode is registered with the gateway while the
/// executor serves.
pub async fn serve<M: Mode>(
    mode: M,
    args: &ExecutorArgs,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
    extra_services: &[&str],
    add_extra: impl FnOnce(Router, &RequireInternalToken) -> Router,
) -> Result<(), ServeError> {
    args.exposure(listener.local_addr()?)?;
    let internal_token = args.internal_token();
    let announce = args
        .registration
        .announce(mode.id(), mode.name(), internal_token)?;
    let require = RequireInternalToken::new(internal_token);
    let executor = ExecutorService::new(mode, &args.capacity);
    let mode_id = executor.mode_id();
    let service = ExecutorServer::new(executor)
        .max_decoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES)
        .max_encoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES);
    let mut names = vec![agentic_proto::v1::executor_server::SERVICE_NAME];
    names.extend_from_slice(extra_services);
    let (router, health) = agentic_rpc::router(&names)?;
    health
        .set_serving::<ExecutorServer<ExecutorService<M>>>()
        .await;
    for name in extra_services {
        health
            .set_service_status(*name, tonic_health::ServingStatus::Serving)
            .await;
    }
    let service = tonic::service::interceptor::InterceptedService::new(service, require.clone());
    let router = add_extra(router.add_service(service), &require);
    tracing::info!(mode = mode_id, address = %listener.local_addr()?, "executor serving");
    let announcing = announce.map(|announce| tokio::spawn(register::keep_registered(announce)));
    let served = agentic_rpc::serve(router, listener, shutdown).await;
    if let Some(announcing) = announcing {
        announcing.abort();
    }
    served?;
    Ok(())
}

#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("setting up the LLM client: {0}")]
    Llm(#[from] agentic_llm::LlmError),
    #[error(transparent)]
    InternalToken(#[from] agentic_rpc::InvalidToken),
    #[error(transparent)]
    Exposure(#[from] agentic_rpc::exposure::Exposure),
    #[error(transparent)]
    Registration(#[from] RegistrationError),
}

/// The executor's clients cannot be set up from its settings.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("internal token")]
    InternalToken(#[source] agentic_rpc::InvalidToken),
    #[error("invalid tool-host url {url:?}")]
    ToolHostUrl {
        url: String,
        #[source]
        source: tonic::transport::Error,
    },
    #[error("invalid code runner url {url:?}")]
    CodeRunnerUrl {
        url: String,
        #[source]
        source: tonic::transport::Error,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Exposure(#[from] agentic_rpc::exposure::Exposure),
    #[error(transparent)]
    Registration(#[from] RegistrationError),
    #[error("building the reflection service failed")]
    Reflection(#[from] tonic_reflection::server::Error),
    #[error("reading the listener address failed")]
    Listener(#[from] std::io::Error),
    #[error("serving gRPC failed")]
    Transport(#[from] tonic::transport::Error),
}

#[cfg(test)]
mod tests {
    use agentic_rpc::listen_setting;
    use clap::{CommandFactory as _, Parser as _};

    use super::*;

    #[derive(clap::Parser, Debug)]
    #[command(
        name = "test-executor",
        mut_arg("listen", listen_setting("TEST_EXECUTOR_LISTEN", "0.0.0.0:50099"))
    )]
    struct Config {
        #[command(flatten)]
        executor: ExecutorArgs,
    }

    #[test]
    fn each_executor_names_where_its_listen_address_comes_from() {
        Config::command().debug_assert();
        let command = Config::command();
        let listen = command
            .get_arguments()
            .find(|argument| argument.get_id() == "listen")
            .expect("--listen is an argument");
        assert_eq!(
            listen.get_env(),
            Some(std::ffi::OsStr::new("TEST_EXECUTOR_LISTEN"))
        );
        let config = Config::try_parse_from(["test-executor"]).unwrap();
        assert_eq!(
            config.executor.service.listen,
            "0.0.0.0:50099".parse().unwrap()
        );
        let config =
            Config::try_parse_from(["test-executor", "--listen", "127.0.0.1:1", "--probe"])
                .unwrap();
        assert_eq!(
            config.executor.service.listen,
            "127.0.0.1:1".parse().unwrap()
        );
        assert!(config.executor.service.probe);
    }
}
