//! A filter that vanishes while bfctl adds to it (another client's DEL, a restart without
//! persistence) stops `load` and `dedup` with exit code 1 and a message naming the key and
//! the count acknowledged before; nothing recreates it and dedup prints no line twice. On a
//! single server and on a cluster. "Mid-run" is made exact: bfctl reads a pipe the test
//! writes, the test waits until the first part is in the filter (load) or printed (dedup),
//! removes the filter, then writes the rest.

use std::io::{Read, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::thread::JoinHandle;
use std::time::Duration;

use rustbloom_testkit::cluster::Cluster;
use rustbloom_testkit::*;

const BFCTL: &str = env!("CARGO_BIN_EXE_bfctl");
/// Longest wait for bfctl to get through the first part of its input.
const PATIENCE: Duration = Duration::from_secs(60);

/// A bfctl run fed through a pipe the test writes at its own pace; stdout is read as it comes.
struct Piped {
    child: Child,
    stdin: Option<ChildStdin>,
    /// Every chunk bfctl printed, as it printed it.
    printed: Receiver<Vec<u8>>,
    out: Vec<u8>,
    reader: Option<JoinHandle<()>>,
}

impl Piped {
    fn start(url: &str, args: &[&str]) -> Piped {
        let mut child = Command::new(BFCTL)
            .args(args)
            .env("BFCTL_URL", url)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run bfctl");
        let stdin = child.stdin.take();
        let mut stdout = child.stdout.take().expect("stdout");
        let (tx, printed) = channel();
        let reader = std::thread::spawn(move || {
            let mut buf = vec![0u8; 1 << 16];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                    return;
                }
            }
        });
        Piped {
            child,
            stdin,
            printed,
            out: Vec::new(),
            reader: Some(reader),
        }
    }

    /// Writes `lines` to bfctl's input. A bfctl that stopped reading (it stopped with an
    /// error) closes the pipe: its exit status and output tell what happened, not the write.
    fn feed(&mut self, lines: &[String]) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        let _ = stdin.write_all(joined(lines).as_bytes());
        let _ = stdin.flush();
    }

    /// Waits until bfctl has printed `n` lines in all.
    fn wait_printed(&mut self, n: usize) {
        while self.out.iter().filter(|&&b| b == b'\n').count() < n {
            match self.printed.recv_timeout(PATIENCE) {
                Ok(chunk) => self.out.extend_from_slice(&chunk),
                Err(e) => panic!(
                    "bfctl printed {} lines of {n} ({e})",
                    String::from_utf8_lossy(&self.out).lines().count()
                ),
            }
        }
    }

    /// Closes the input and waits for bfctl: its exit status, everything it printed, stderr.
    fn finish(mut self) -> (ExitStatus, String, String) {
        drop(self.stdin.take());
        let status = self.child.wait().expect("wait for bfctl");
        if let Some(r) = self.reader.take() {
            r.join().expect("stdout reader");
        }
        while let Ok(chunk) = self.printed.try_recv() {
            self.out.extend_from_slice(&chunk);
        }
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            e.read_to_string(&mut err).expect("read stderr");
        }
        (status, String::from_utf8_lossy(&self.out).into_owned(), err)
    }
}

fn items(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

fn joined(lines: &[String]) -> String {
    let mut s = lines.join("\n");
    s.push('\n');
    s
}

/// How the filter vanishes.
#[derive(Clone, Copy, Debug)]
enum Vanish {
    /// Another client deletes it.
    Del,
    /// Its server restarts without persistence.
    Restart,
}

/// The server under test: one server, or a cluster with the master holding the filter.
trait Target {
    fn url(&self) -> String;
    fn conn_for(&mut self, key: &str) -> redis::Connection;
    fn restart_holder_of(&mut self, key: &str);
}

impl Target for Server {
    fn url(&self) -> String {
        format!("redis+unix://{}", self.socket().display())
    }
    fn conn_for(&mut self, _key: &str) -> redis::Connection {
        self.conn()
    }
    fn restart_holder_of(&mut self, _key: &str) {
        self.restart();
    }
}

impl Target for Cluster {
    fn url(&self) -> String {
        Cluster::url(self, 0)
    }
    fn conn_for(&mut self, key: &str) -> redis::Connection {
        let owners = self.slot_owners(0);
        let slot = rustbloom_client::routing::key_slot(key.as_bytes());
        self.nodes[owners[usize::from(slot)]].conn()
    }
    fn restart_holder_of(&mut self, key: &str) {
        let owners = self.slot_owners(0);
        let slot = rustbloom_client::routing::key_slot(key.as_bytes());
        self.nodes[owners[usize::from(slot)]].restart();
        self.wait_healthy(&[]);
    }
}

fn card(t: &mut impl Target, key: &str) -> i64 {
    redis::cmd("BF.CARD")
        .arg(key)
        .query(&mut t.conn_for(key))
        .unwrap_or(-1)
}

fn exists(t: &mut impl Target, key: &str) -> bool {
    redis::cmd("EXISTS")
        .arg(key)
        .query::<i64>(&mut t.conn_for(key))
        .expect("EXISTS")
        == 1
}

fn vanish(t: &mut impl Target, key: &str, how: Vanish) {
    match how {
        Vanish::Del => {
            let n: i64 = redis::cmd("DEL")
                .arg(key)
                .query(&mut t.conn_for(key))
                .expect("DEL");
            assert_eq!(n, 1, "{key} was not there to delete");
        }
        Vanish::Restart => t.restart_holder_of(key),
    }
}

/// `bfctl load` of 1000 items, the filter removed, 1000 more: exit 1, the key and the 1000
/// acknowledged items named, and no filter recreated.
fn load_stops_when_the_filter_vanishes(t: &mut impl Target, how: Vanish) {
    let key = "loaded";
    let url = t.url();
    let mut run = Piped::start(
        &url,
        &[
            "load",
            key,
            "--capacity",
            "100000",
            "--error",
            "1e-9",
            "--batch",
            "100",
            "--pipeline",
            "1",
        ],
    );
    run.feed(&items("first", 1000));
    assert!(
        wait_until(PATIENCE, || card(t, key) == 1000),
        "the first 1000 items never reached {key} ({how:?})"
    );
    vanish(t, key, how);
    run.feed(&items("second", 1000));
    let (status, out, err) = run.finish();
    assert_eq!(status.code(), Some(1), "{how:?}: {out}\n{err}");
    assert!(
        err.contains("\"loaded\" is missing: restore it or recreate the filter")
            && err.contains("stopped after 1000 items acknowledged"),
        "{how:?}: {err}"
    );
    assert!(
        !out.contains("items,"),
        "{how:?}: a summary of items loaded: {out}"
    );
    assert!(!exists(t, key), "{how:?}: the load recreated {key}");
}

/// `bfctl dedup` of 1000 lines, the filter removed, then the same lines and new ones: exit 1,
/// the key named, every line printed once at most, and no filter recreated.
fn dedup_stops_when_the_filter_vanishes(t: &mut impl Target, how: Vanish) {
    let key = "seen";
    let url = t.url();
    let mut run = Piped::start(
        &url,
        &[
            "dedup",
            key,
            "--capacity",
            "100000",
            "--error",
            "1e-9",
            "--batch",
            "100",
        ],
    );
    let first = items("first", 1000);
    run.feed(&first);
    run.wait_printed(1000);
    vanish(t, key, how);
    run.feed(&first);
    run.feed(&items("second", 1000));
    let (status, out, err) = run.finish();
    assert_eq!(status.code(), Some(1), "{how:?}: {err}");
    assert_eq!(
        out,
        joined(&first),
        "{how:?}: printed more than the first lines once"
    );
    assert!(
        err.contains(key) && err.contains("1000 lines answered"),
        "{how:?}: {err}"
    );
    assert!(!exists(t, key), "{how:?}: dedup recreated {key}");
}

#[test]
fn load_and_dedup_stop_when_the_filter_is_deleted() {
    let mut s = Server::start();
    load_stops_when_the_filter_vanishes(&mut s, Vanish::Del);
    dedup_stops_when_the_filter_vanishes(&mut s, Vanish::Del);
}

#[test]
fn load_and_dedup_stop_when_the_server_restarts_empty() {
    let mut s = Server::start();
    load_stops_when_the_filter_vanishes(&mut s, Vanish::Restart);
    dedup_stops_when_the_filter_vanishes(&mut s, Vanish::Restart);
}

#[test]
fn load_and_dedup_stop_when_the_filter_vanishes_on_a_cluster() {
    let mut cl = Cluster::start(3, 0);
    for how in [Vanish::Del, Vanish::Restart] {
        load_stops_when_the_filter_vanishes(&mut cl, how);
        dedup_stops_when_the_filter_vanishes(&mut cl, how);
    }
    partition_gone_mid_run(&mut cl);
}

/// The library's adds: a filter found or reserved, then gone, is an error naming the key with
/// the items of the call that were added, never a new filter.
#[test]
fn client_adds_never_create_a_filter() {
    use rustbloom_client::{Client, Error, Filter, WriteOptions};
    let mut s = Server::start();
    let mut conn = Client::open(&Target::url(&s))
        .expect("client")
        .connect()
        .expect("connect");
    let opts = WriteOptions::default();
    let first = items("first", 10);
    let first: Vec<&[u8]> = first.iter().map(|i| i.as_bytes()).collect();

    // A plain filter, found, then deleted.
    let mut c = s.conn();
    raw_ok(&mut c, &["BF.RESERVE", "plain", "0.01", "1000"]);
    let plain = Filter::discover(&mut conn, b"plain").unwrap().unwrap();
    assert_eq!(plain.add(&mut conn, &first, &opts).unwrap(), vec![true; 10]);
    raw_ok(&mut c, &["DEL", "plain"]);
    match plain.add(&mut conn, &first, &opts) {
        Err(Error::Vanished {
            name,
            index,
            key,
            acknowledged,
        }) => assert_eq!(
            (name.as_str(), index, key.as_str(), acknowledged),
            ("plain", None, "plain", 0)
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(as_int(&raw_ok(&mut c, &["EXISTS", "plain"])), 0);

    partition_gone_mid_run(&mut s);
}

/// A partitioned filter reserved through the library, then one partition deleted: an add names
/// that partition and counts the other partitions' items of the call as acknowledged.
fn partition_gone_mid_run(t: &mut impl Target) {
    use rustbloom_client::{Client, Error, Filter, Growth, ReserveOptions, WriteOptions};
    let mut conn = Client::open(&t.url())
        .expect("client")
        .connect()
        .expect("connect");
    let opts = WriteOptions::default();
    let reserve = ReserveOptions {
        error_rate: 0.01,
        capacity: 1000,
        growth: Growth::Scaling { expansion: None },
        partitions: Some(4),
    };
    let parts = Filter::reserve(&mut conn, b"parts", &reserve).unwrap();
    let routing = parts.partitioning().unwrap().clone();
    let gone = routing.keys[1].clone();
    let gone_text = String::from_utf8(gone.clone()).expect("partition keys are text");
    let mut c = t.conn_for(&gone_text);
    rawb(&mut c, &[b"DEL", gone.as_slice()]).unwrap();
    // Enough items that some go to every partition (a quarter of 200 each, give or take).
    let many = items("many", 200);
    let first: Vec<&[u8]> = many.iter().map(|i| i.as_bytes()).collect();
    let elsewhere = first
        .iter()
        .filter(|i| rustbloom_client::routing::partition_of(i, routing.routing_seed, 4) != 1)
        .count() as u64;
    match parts.add(&mut conn, &first, &opts) {
        Err(Error::Vanished {
            key, acknowledged, ..
        }) => {
            assert_eq!(key.as_bytes(), gone.as_slice());
            assert_eq!(acknowledged, elsewhere);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        as_int(&rawb(&mut c, &[b"EXISTS", gone.as_slice()]).unwrap()),
        0
    );
}
