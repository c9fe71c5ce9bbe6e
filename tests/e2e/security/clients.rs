//! Clients log in: the CLI (`--token`, `AGENTIC_TOKEN`) and the SDK (`Client::builder(…)
//! .token(…)`) send `authorization: Bearer`, against a gateway with auth tokens, in plain
//! HTTP/2 and over TLS terminated by the gateway itself (a private CA made at test time).

use std::path::{Path, PathBuf};
use std::process::Command;

use agentic_client::{Client, ClientError, NewPrompt};
use agentic_proto::v1::PromptState;
use agentic_testkit::model::Match;
use agentic_testkit::{Stack, StackOptions};
use clap::Parser as _;
use tonic::Code;

use crate::cli::terminal::{agentic_binary, output_of};
use crate::cli::{Ran, agentic_with};
use crate::support::*;

const ALICE_TOKEN: &str = "alice-secret";
const BOB_TOKEN: &str = "bob-secret";

/// Runs `agentic <args>` in process with no input.
pub(super) async fn agentic(args: &[&str]) -> Ran {
    agentic_with(args, "").await
}

fn with_tokens() -> StackOptions {
    StackOptions {
        auth_tokens: vec![format!("{ALICE_TOKEN}=alice"), format!("{BOB_TOKEN}=bob")],
        ..Default::default()
    }
}

async fn stack_with_tokens(answer: &str) -> Stack {
    Stack::start_with(vec![text(Match::Any, answer)], with_tokens())
        .await
        .unwrap()
}

#[tokio::test]
async fn the_cli_with_a_token_runs_a_prompt_as_the_tokens_user_and_without_one_is_refused() {
    let stack = stack_with_tokens("Logged in.").await;
    let url = stack.gateway_url();

    let ran = agentic(&["--server", &url, "--token", ALICE_TOKEN, "prompt", "hi"]).await;
    assert_eq!(ran.code, 0, "stderr: {}", ran.stderr);
    assert_eq!(ran.stdout, "Logged in.\n");
    assert!(!ran.stderr.contains(ALICE_TOKEN), "{}", ran.stderr);
    let alice = stack.client_with_token(ALICE_TOKEN).await.unwrap();
    assert_eq!(alice.list_prompts(None).await.unwrap().len(), 1, "alice's");
    let bob = stack.client_with_token(BOB_TOKEN).await.unwrap();
    assert!(
        bob.list_prompts(None).await.unwrap().is_empty(),
        "not bob's"
    );

    let anonymous = agentic(&["--server", &url, "--user", "alice", "prompt", "hi"]).await;
    assert_eq!(anonymous.code, 1, "stdout: {}", anonymous.stdout);
    assert!(
        anonymous.stderr.starts_with("error: ") && anonymous.stderr.contains("token"),
        "{}",
        anonymous.stderr
    );
}

#[tokio::test]
async fn the_binary_takes_its_token_from_agentic_token_and_never_shows_it() {
    let stack = stack_with_tokens("From the environment.").await;
    let mut prompt = Command::new(agentic_binary());
    prompt
        .args(["prompt", "hi"])
        .env("AGENTIC_SERVER", stack.gateway_url())
        .env("AGENTIC_TOKEN", ALICE_TOKEN)
        .env_remove("AGENTIC_USER");
    let output = output_of(prompt).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "stderr: {stderr}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "From the environment.\n"
    );
    assert!(!stderr.contains(ALICE_TOKEN), "{stderr}");

    let mut help = Command::new(agentic_binary());
    help.arg("--help").env("AGENTIC_TOKEN", ALICE_TOKEN);
    let help = output_of(help).await;
    let shown = String::from_utf8_lossy(&help.stdout);
    assert!(shown.contains("--token"), "{shown}");
    assert!(
        !shown.contains(ALICE_TOKEN),
        "the token is not shown: {shown}"
    );
}

#[tokio::test]
async fn the_sdk_builder_logs_in_with_a_token_and_without_one_is_unauthenticated() {
    let stack = stack_with_tokens("Hello, alice.").await;
    let alice = Client::builder(stack.gateway_url())
        .token(ALICE_TOKEN)
        .connect()
        .await
        .unwrap();
    let session = alice.session(None).await.unwrap();
    let reply = session.chat("hi").await.unwrap();
    assert_eq!(reply.state, PromptState::Completed);
    assert_eq!(reply.final_response, "Hello, alice.");
    assert_eq!(
        alice.get_prompt(&reply.prompt_id).await.unwrap().user_id,
        "alice"
    );

    let nobody = Client::builder(stack.gateway_url())
        .connect()
        .await
        .unwrap();
    let refused = nobody
        .create_prompt(NewPrompt::new("hi"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some(Code::Unauthenticated), "{refused}");
    let pretender = Client::connect(&stack.gateway_url(), "alice")
        .await
        .unwrap();
    let refused = pretender.list_prompts(None).await.unwrap_err();
    assert_eq!(
        refused.code(),
        Some(Code::Unauthenticated),
        "x-user-id is not a login"
    );
    let wrong = Client::builder(stack.gateway_url())
        .token("alice-secreT")
        .connect()
        .await
        .unwrap();
    let refused = wrong.list_prompts(None).await.unwrap_err();
    assert_eq!(refused.code(), Some(Code::Unauthenticated), "{refused}");
}

#[tokio::test]
async fn a_token_is_never_sent_in_clear_to_another_machine_nor_shown_in_errors() {
    // Refused before connecting, so no server is needed at the other address.
    let error = Client::builder("http://192.0.2.1:50051")
        .token(ALICE_TOKEN)
        .connect()
        .await
        .err()
        .expect("refused");
    assert!(
        matches!(error, ClientError::TokenOverHttp { .. }),
        "{error}"
    );
    let message = error.to_string();
    assert!(
        message.contains("https://") && !message.contains(ALICE_TOKEN),
        "{message}"
    );

    let ran = agentic(&[
        "--server",
        "http://192.0.2.1:50051",
        "--token",
        ALICE_TOKEN,
        "modes",
    ])
    .await;
    assert_eq!(ran.code, 1);
    assert!(
        ran.stderr.contains("--allow-http-token") && !ran.stderr.contains(ALICE_TOKEN),
        "{}",
        ran.stderr
    );

    for token in ["two words", "line\nbreak", "tökén", ""] {
        let error = Client::builder("http://127.0.0.1:1")
            .token(token)
            .connect()
            .await
            .err()
            .expect("refused");
        assert!(matches!(error, ClientError::InvalidToken(_)), "{error}");
        if !token.is_empty() {
            assert!(!error.to_string().contains(token), "{error}");
        }
    }
    let builder = Client::builder("https://gateway.example").token(ALICE_TOKEN);
    assert!(!format!("{builder:?}").contains(ALICE_TOKEN));
}

/// A CA of the test's own and a gateway certificate it signed for 127.0.0.1 and localhost,
/// as PEM files in a temporary folder.
struct Pki {
    dir: tempfile::TempDir,
    ca_pem: String,
}

impl Pki {
    fn new() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let (ca_pem, issuer) = certificate_authority();
        let server_key = rcgen::KeyPair::generate().unwrap();
        let mut params =
            rcgen::CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "localhost");
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let server = params.signed_by(&server_key, &issuer).unwrap();
        std::fs::write(dir.path().join("ca.pem"), &ca_pem).unwrap();
        std::fs::write(dir.path().join("gateway.pem"), server.pem()).unwrap();
        std::fs::write(dir.path().join("gateway.key"), server_key.serialize_pem()).unwrap();
        Pki { dir, ca_pem }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn options(&self) -> StackOptions {
        StackOptions {
            gateway_tls_cert: Some(self.path("gateway.pem")),
            gateway_tls_key: Some(self.path("gateway.key")),
            ..with_tokens()
        }
    }
}

/// A new CA: its certificate (PEM) and what signs with it.
fn certificate_authority() -> (String, rcgen::Issuer<'static, rcgen::KeyPair>) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::new()).unwrap();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "agentic test CA");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let certificate = params.self_signed(&key).unwrap();
    (certificate.pem(), rcgen::Issuer::new(params, key))
}

async fn tls_stack(pki: &Pki, answer: &str) -> Stack {
    Stack::start_with(vec![text(Match::Any, answer)], pki.options())
        .await
        .unwrap()
}

#[tokio::test]
async fn over_tls_the_sdk_and_the_cli_with_the_private_ca_complete_a_prompt() {
    let pki = Pki::new();
    let stack = tls_stack(&pki, "Over TLS.").await;
    let url = stack.gateway_url();
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");

    let alice = Client::builder(url.clone())
        .token(ALICE_TOKEN)
        .ca_cert(pki.ca_pem.clone())
        .connect()
        .await
        .unwrap();
    let reply = alice.session(None).await.unwrap().chat("hi").await.unwrap();
    assert_eq!(reply.state, PromptState::Completed);
    assert_eq!(reply.final_response, "Over TLS.");

    let ca = pki.path("ca.pem");
    let ran = agentic(&[
        "--server",
        &url,
        "--token",
        ALICE_TOKEN,
        "--ca-cert",
        ca.to_str().unwrap(),
        "prompt",
        "hi",
    ])
    .await;
    assert_eq!(ran.code, 0, "stderr: {}", ran.stderr);
    assert_eq!(ran.stdout, "Over TLS.\n");

    // The name in the certificate is checked: `localhost` is in it too.
    let by_name = url.replace("127.0.0.1", "localhost");
    let ran = agentic(&[
        "--server",
        &by_name,
        "--token",
        ALICE_TOKEN,
        "--ca-cert",
        ca.to_str().unwrap(),
        "modes",
    ])
    .await;
    assert_eq!(ran.code, 0, "stderr: {}", ran.stderr);
    assert!(ran.stdout.contains("classic"), "{}", ran.stdout);
}

#[tokio::test]
async fn over_tls_a_client_that_does_not_trust_the_ca_or_speaks_plain_http_is_refused_clearly() {
    let pki = Pki::new();
    let stack = tls_stack(&pki, "unreachable").await;
    let url = stack.gateway_url();

    let untrusting = Client::builder(url.clone())
        .token(ALICE_TOKEN)
        .connect()
        .await
        .err()
        .expect("the platform's roots do not know the test CA");
    assert!(
        matches!(untrusting, ClientError::Tls { .. }),
        "{untrusting}"
    );
    assert!(untrusting.to_string().contains("--ca-cert"), "{untrusting}");

    let (other_ca, _) = certificate_authority();
    let wrong_ca = Client::builder(url.clone())
        .token(ALICE_TOKEN)
        .ca_cert(other_ca)
        .connect()
        .await
        .err()
        .expect("another CA's certificate is not trusted");
    assert!(matches!(wrong_ca, ClientError::Tls { .. }), "{wrong_ca}");
    assert!(
        wrong_ca.to_string().to_lowercase().contains("certificate"),
        "{wrong_ca}"
    );

    let ran = agentic(&["--server", &url, "--token", ALICE_TOKEN, "modes"]).await;
    assert_eq!(ran.code, 1);
    assert!(
        ran.stderr.starts_with("error: cannot connect securely"),
        "{}",
        ran.stderr
    );

    // Plain HTTP/2 to the TLS port gets no answer, only an error.
    let plain_url = url.replace("https://", "http://");
    let plain = Client::builder(plain_url)
        .token(ALICE_TOKEN)
        .connect()
        .await;
    let failed = match plain {
        Err(error) => error,
        Ok(client) => client.list_modes().await.expect_err("no plain answer"),
    };
    assert!(
        matches!(failed, ClientError::Unreachable { .. }),
        "{failed:?}"
    );
    assert!(failed.to_string().contains("https://"), "{failed}");

    let not_pem = Client::builder(url)
        .ca_cert("not a certificate")
        .connect()
        .await
        .err()
        .expect("refused");
    assert!(
        matches!(not_pem, ClientError::InvalidCaCert(_)),
        "{not_pem}"
    );
}

/// The gateway's configuration from `args`, as a development stack's (`--dev`: no tokens).
fn gateway_config(args: &[&str]) -> Result<prompt_gateway::Config, clap::Error> {
    let mut argv = vec!["prompt-gateway", "--dev"];
    argv.extend_from_slice(args);
    prompt_gateway::Config::try_parse_from(argv)
}

fn check(args: &[&str]) -> Result<(), String> {
    let config = gateway_config(args).map_err(|error| error.to_string())?;
    prompt_gateway::check(&config).map_err(|error| format!("{error:#}"))
}

fn text_path(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[tokio::test]
async fn the_gateway_checks_its_tls_files_and_its_probe_speaks_tls() {
    let pki = Pki::new();
    let (cert, key) = (pki.path("gateway.pem"), pki.path("gateway.key"));
    let other_key = pki.path("other.key");
    std::fs::write(
        &other_key,
        rcgen::KeyPair::generate().unwrap().serialize_pem(),
    )
    .unwrap();

    check(&["--tls-cert", text_path(&cert), "--tls-key", text_path(&key)]).unwrap();
    let only_cert = check(&["--tls-cert", text_path(&cert)]).unwrap_err();
    assert!(only_cert.contains("--tls-key"), "{only_cert}");
    let missing = check(&[
        "--tls-cert",
        "/nonexistent.pem",
        "--tls-key",
        text_path(&key),
    ])
    .unwrap_err();
    assert!(
        missing.contains("cannot read /nonexistent.pem"),
        "{missing}"
    );
    let swapped =
        check(&["--tls-cert", text_path(&key), "--tls-key", text_path(&cert)]).unwrap_err();
    assert!(swapped.contains("holds no PEM certificate"), "{swapped}");
    let mismatched = check(&[
        "--tls-cert",
        text_path(&cert),
        "--tls-key",
        text_path(&other_key),
    ])
    .unwrap_err();
    assert!(mismatched.contains("cannot be served"), "{mismatched}");

    let stack = tls_stack(&pki, "probed").await;
    let tls = agentic_rpc::ServerTls::from_files(Some(&cert), Some(&key))
        .unwrap()
        .expect("configured");
    agentic_rpc::probe_with_tls(stack.gateway_address, Some(&tls))
        .await
        .unwrap();
    assert!(
        agentic_rpc::probe(stack.gateway_address).await.is_err(),
        "a plain probe gets no answer from a TLS port"
    );
    // A probe that expects another certificate does not accept this one.
    let other = Pki::new();
    let other_tls = agentic_rpc::ServerTls::from_files(
        Some(&other.path("gateway.pem")),
        Some(&other.path("gateway.key")),
    )
    .unwrap()
    .expect("configured");
    assert!(
        agentic_rpc::probe_with_tls(stack.gateway_address, Some(&other_tls))
            .await
            .is_err()
    );
}
