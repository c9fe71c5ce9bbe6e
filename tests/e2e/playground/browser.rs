//! Headless Chromium (Debian's `chromium` and `chromium-driver`, installed by
//! `scripts/browser.sh`) driven over WebDriver: one chromedriver and one browser per test, on
//! a free port, killed when the test ends.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use tokio::process::{Child, Command};

use crate::support::{PATIENCE, eventually};

pub struct Browser {
    pub client: Client,
    /// Where the browser saves downloads.
    pub downloads: tempfile::TempDir,
    _profile: tempfile::TempDir,
    _driver: Child,
}

/// The chromedriver to use: `AGENTIC_CHROMEDRIVER`, else Debian's.
fn chromedriver() -> PathBuf {
    let path = std::env::var_os("AGENTIC_CHROMEDRIVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromedriver"));
    assert!(
        path.exists(),
        "{} is missing: the browser tests need Debian's chromium and chromium-driver \
         (scripts/browser.sh installs them; `make test` runs it)",
        path.display()
    );
    path
}

fn chromium() -> String {
    std::env::var("AGENTIC_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned())
}

impl Browser {
    pub async fn start() -> Browser {
        // A port nobody holds now, for chromedriver to listen on.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let driver = Command::new(chromedriver())
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("chromedriver starts");
        let downloads = tempfile::tempdir().unwrap();
        let profile = tempfile::tempdir().unwrap();
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": chromium(),
                "args": [
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--no-first-run",
                    "--window-size=1280,900",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
                "prefs": {
                    "download.default_directory": downloads.path().display().to_string(),
                    "download.prompt_for_download": false,
                },
            }),
        );
        let url = format!("http://127.0.0.1:{port}");
        let deadline = tokio::time::Instant::now() + PATIENCE;
        let client = loop {
            let connector = hyper_util::client::legacy::connect::HttpConnector::new();
            match ClientBuilder::new(connector)
                .capabilities(capabilities.clone())
                .connect(&url)
                .await
            {
                Ok(client) => break client,
                Err(error) => {
                    assert!(
                        tokio::time::Instant::now() < deadline,
                        "no browser session from chromedriver: {error}"
                    );
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        };
        Browser {
            client,
            downloads,
            _profile: profile,
            _driver: driver,
        }
    }

    pub async fn goto(&self, url: &str) {
        self.client.goto(url).await.unwrap();
    }

    /// Runs `script` (a function body; `arguments` holds `args`) in the page and returns what it
    /// returns.
    pub async fn run(&self, script: &str, args: Vec<Value>) -> Value {
        self.client.execute(script, args).await.unwrap()
    }

    /// Polls `script` until it returns something other than null/false, for at most
    /// [`PATIENCE`], and returns that.
    pub async fn until(&self, what: &str, script: &str) -> Value {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let value = self.run(script, vec![]).await;
            if !matches!(value, Value::Null | Value::Bool(false)) {
                return value;
            }
            if tokio::time::Instant::now() >= deadline {
                self.screenshot(&format!("timeout-{}", what.replace(' ', "-")))
                    .await;
                let page = self.run("return document.body.innerText", vec![]).await;
                panic!("timed out waiting until {what}; the page shows:\n{page}");
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    pub async fn click(&self, selector: &str) {
        self.client
            .wait()
            .at_most(PATIENCE)
            .for_element(Locator::Css(selector))
            .await
            .unwrap_or_else(|error| panic!("no {selector}: {error}"))
            .click()
            .await
            .unwrap();
    }

    pub async fn type_into(&self, selector: &str, text: &str) {
        let field = self
            .client
            .wait()
            .at_most(PATIENCE)
            .for_element(Locator::Css(selector))
            .await
            .unwrap();
        field.clear().await.unwrap();
        field.send_keys(text).await.unwrap();
    }

    /// Chooses the file at `path` (absolute) in the file input `selector`, as a person picking
    /// it in the dialog would (chromedriver fills a file input from keys naming the path, even
    /// a hidden one).
    pub async fn choose_file(&self, selector: &str, path: &Path) {
        assert!(path.is_absolute(), "{} is not absolute", path.display());
        self.client
            .wait()
            .at_most(PATIENCE)
            .for_element(Locator::Css(selector))
            .await
            .unwrap_or_else(|error| panic!("no {selector}: {error}"))
            .send_keys(path.to_str().unwrap())
            .await
            .unwrap();
    }

    /// The text of the file `name` the browser downloaded, once it is whole. Chrome reserves
    /// the name with an empty file and writes into `*.crdownload` before renaming it over
    /// that file: the download is done when no partial file is left and the named one has
    /// bytes.
    pub async fn downloaded(&self, name: &str) -> String {
        let path = self.downloads.path().join(name);
        eventually(&format!("{name} is downloaded"), || {
            let partial = std::fs::read_dir(self.downloads.path())
                .unwrap()
                .any(|entry| entry.unwrap().path().extension() == Some("crdownload".as_ref()));
            !partial && std::fs::metadata(&path).is_ok_and(|file| file.len() > 0)
        })
        .await;
        std::fs::read_to_string(&path).unwrap()
    }

    /// Sends `input` from the prompt box in `mode`.
    pub async fn send_prompt(&self, input: &str, mode: &str) {
        self.until(
            "the modes are listed",
            &format!("return !!document.querySelector('#mode option[value=\"{mode}\"]')"),
        )
        .await;
        self.run(
            "document.getElementById('mode').value = arguments[0]",
            vec![json!(mode)],
        )
        .await;
        self.type_into("#input", input).await;
        self.click("#send").await;
    }

    /// Saves what the page shows as `target/playground/<name>.png`.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/playground");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{name}.png"));
        if let Ok(png) = self.client.screenshot().await {
            std::fs::write(&path, png).unwrap();
        }
        path
    }

    pub async fn close(self) {
        let _ = self.client.close().await;
    }
}
