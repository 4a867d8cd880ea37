//! A very long input line costs bfctl a small multiple of its length, not one copy per stage:
//! the reader holds it once, the packed command once (and `load` its command's arguments once).

use std::fs::File;
use std::io::Write;
use std::process::{Command, Stdio};

use rustbloom_testkit::*;

const BFCTL: &str = env!("CARGO_BIN_EXE_bfctl");
const LINE: usize = 64 << 20;

/// Runs bfctl on `input` and answers its exit code and its peak resident set in bytes.
// The child is reaped by wait4, which reports its rusage (std's wait does not).
#[allow(clippy::zombie_processes)]
fn peak_rss(url: &str, args: &[&str], input: &std::path::Path) -> (i32, u64) {
    let child = Command::new(BFCTL)
        .args(args)
        .env("BFCTL_URL", url)
        .stdin(Stdio::from(File::open(input).expect("open input")))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run bfctl");
    let pid = libc::pid_t::try_from(child.id()).expect("pid");
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own child, not reaped yet (the Child is never waited on); `status`
    // and `usage` are valid for writes for the duration of the call.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid, "wait4");
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    // ru_maxrss is in KiB on Linux.
    (code, u64::try_from(usage.ru_maxrss).expect("maxrss") * 1024)
}

#[test]
fn a_long_line_costs_a_small_multiple_of_its_length() {
    let s = Server::start();
    let url = format!("redis+unix://{}", s.socket().display());
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("input.txt");
    let mut f = File::create(&path).expect("create input");
    f.write_all(&vec![b'a'; LINE]).expect("write");
    f.write_all(b"\nshort\nlines\n").expect("write");
    drop(f);
    let line = LINE as u64;
    let mut c = s.conn();
    raw_ok(&mut c, &["BF.RESERVE", "long", "0.01", "1000"]);
    let (code, load) = peak_rss(&url, &["load", "long"], &path);
    assert_eq!(code, 0);
    // Held by the reader, as the command's argument, and packed: three copies, plus the rest.
    assert!(
        load < line * 7 / 2,
        "load peaked at {load} bytes for a {line}-byte line"
    );
    raw_ok(&mut c, &["DEL", "long"]);
    raw_ok(&mut c, &["BF.RESERVE", "long", "0.01", "1000"]);
    let (code, dedup) = peak_rss(&url, &["dedup", "long"], &path);
    assert_eq!(code, 0);
    // Held by the reader and packed.
    assert!(
        dedup < line * 5 / 2,
        "dedup peaked at {dedup} bytes for a {line}-byte line"
    );
}
