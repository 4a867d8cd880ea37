//! What every bfctl test file runs bfctl with: the binary under test, its input written from a
//! thread, and the checks of how it ended.

use std::io::Write;
use std::process::{Command, Output, Stdio};

pub const BFCTL: &str = env!("CARGO_BIN_EXE_bfctl");

/// Runs bfctl against `url` with `args`, `stdin` as its input.
pub fn bfctl_at(url: &str, args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(BFCTL)
        .arg("--url")
        .arg(url)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run bfctl");
    // Written from a thread: bfctl answers as it reads, so a big input written before reading
    // its output would fill both pipes and stop both processes.
    let mut input = child.stdin.take().expect("stdin");
    let data = stdin.to_vec();
    // A command that stops reading early (or reads nothing) closes the pipe: its exit status
    // and output tell what happened, not the write.
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let out = child.wait_with_output().expect("bfctl output");
    writer.join().expect("stdin writer");
    out
}

/// bfctl's stdout, once it exited with success.
#[track_caller]
pub fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "bfctl failed: {}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
