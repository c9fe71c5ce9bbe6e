//! The real `agentic` binary for the CLI tests (built by `make test` before any test runs):
//! run to its end, or run in a pseudo-terminal and typed at.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};

use crate::support::PATIENCE;

/// Runs a command to its end off the test's runtime, which also serves the stand-in model.
pub async fn output_of(mut command: Command) -> std::process::Output {
    command.stdin(Stdio::null());
    let run = tokio::task::spawn_blocking(move || command.output().expect("the command starts"));
    tokio::time::timeout(PATIENCE, run)
        .await
        .expect("the command ends in time")
        .unwrap()
}

/// The `agentic` binary of this build, beside the service binaries. `make test` builds every
/// target before it runs a test; no test builds anything itself.
pub fn agentic_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| agentic_testkit::processes::find_binary("agentic").unwrap())
}

/// A program running in a pseudo-terminal: what it shows accumulates in `screen`, and
/// typed lines reach it through the terminal's line discipline as keystrokes would.
pub struct Terminal {
    keyboard: File,
    screen: Arc<Mutex<String>>,
    child: Child,
}

impl Terminal {
    pub fn spawn(program: &Path, args: &[&str]) -> Terminal {
        use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
        use std::os::unix::ffi::OsStrExt;

        let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)
            .expect("a pseudo-terminal");
        grantpt(&master).unwrap();
        unlockpt(&master).unwrap();
        let name = ptsname(&master, Vec::new()).unwrap();
        let side = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(std::ffi::OsStr::from_bytes(name.as_bytes()))
            .unwrap();
        let child = Command::new(program)
            .args(args)
            .stdin(side.try_clone().unwrap())
            .stdout(side.try_clone().unwrap())
            .stderr(side)
            .spawn()
            .unwrap();
        let master = File::from(master);
        let mut reader = master.try_clone().unwrap();
        let screen = Arc::new(Mutex::new(String::new()));
        let shown = Arc::clone(&screen);
        std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            // Ends with EIO once the program exits and the terminal has no other user.
            while let Ok(read @ 1..) = reader.read(&mut buffer) {
                let text = String::from_utf8_lossy(&buffer[..read]).replace('\r', "");
                shown.lock().unwrap().push_str(&text);
            }
        });
        Terminal {
            keyboard: master,
            screen,
            child,
        }
    }

    pub fn screen(&self) -> String {
        self.screen.lock().unwrap().clone()
    }

    /// Ctrl-C: SIGINT to the program (it has no controlling terminal to get it from).
    pub fn interrupt(&self) {
        use rustix::process::{Pid, Signal, kill_process};
        kill_process(Pid::from_child(&self.child), Signal::INT).unwrap();
    }

    pub fn type_line(&mut self, line: &str) {
        self.keyboard
            .write_all(format!("{line}\r").as_bytes())
            .unwrap();
    }

    pub async fn expect(&self, text: &str) {
        self.expect_after("", text).await;
    }

    /// Waits until `text` shows after the last `anchor` on the screen.
    pub async fn expect_after(&self, anchor: &str, text: &str) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let screen = self.screen();
            let from = match anchor {
                "" => 0,
                anchor => screen.rfind(anchor).unwrap_or(0),
            };
            if screen[from..].contains(text) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{text:?} never showed; the screen:\n{screen}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    pub async fn wait(&mut self) -> std::process::ExitStatus {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the program did not exit; the screen:\n{}",
                self.screen()
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
