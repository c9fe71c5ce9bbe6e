//! A stdio server's process: its stderr logged (bounded), and its process group killed
//! whole when the connection ends.

use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::time::Instant;

/// Lines of a stdio server's stderr logged per minute; the rest are counted, not logged.
const MAX_STDERR_LINES_PER_MINUTE: u32 = 120;

/// Kills what is left of a stdio server's process group.
pub(super) fn kill_group(group: u32) {
    let Some(group) = i32::try_from(group)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return;
    };
    // ESRCH (nothing left) is the usual answer.
    let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
}

/// Logs what a stdio server writes on stderr, in pieces of at most 4 KiB and at most
/// `MAX_STDERR_LINES_PER_MINUTE` lines a minute (how many more there were is logged).
pub(super) async fn forward_stderr(server: String, mut stderr: tokio::process::ChildStderr) {
    let mut buffer = vec![0; 4096];
    let (mut minute, mut logged, mut dropped) = (Instant::now(), 0, 0_u64);
    while let Ok(read @ 1..) = stderr.read(&mut buffer).await {
        if minute.elapsed() >= Duration::from_secs(60) {
            if dropped > 0 {
                tracing::warn!(server = %server, dropped, "mcp stderr: lines over the limit were not logged");
            }
            (minute, logged, dropped) = (Instant::now(), 0, 0);
        }
        let text = String::from_utf8_lossy(&buffer[..read]);
        for line in text.lines().filter(|line| !line.trim().is_empty()) {
            if logged < MAX_STDERR_LINES_PER_MINUTE {
                logged += 1;
                tracing::info!(server = %server, "mcp stderr: {line}");
            } else {
                dropped += 1;
            }
        }
    }
}
