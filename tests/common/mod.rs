//! Shared harness for the rustbloom integration tests.
//!
//! Every test starts its own `redis-server` (own temp dir, own unix socket, own TCP port) with the
//! module loaded, so tests are independent and can run in parallel threads.
#![allow(dead_code)]

use std::io::{Read, Seek, SeekFrom};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis::{Connection, RedisError, Value};

pub const REDIS_SERVER: &str = "/usr/bin/redis-server";

/// How long to wait for a server to answer PING after start (also covers RDB/AOF loading).
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Generous socket timeout so that a hung server fails a test instead of hanging it forever.
const IO_TIMEOUT: Duration = Duration::from_secs(120);

/// Path of the module under test: `$RUSTBLOOM_MODULE`, else `target/release/librustbloom.so`.
pub fn module_path() -> PathBuf {
    let p = match std::env::var_os("RUSTBLOOM_MODULE") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/librustbloom.so"),
    };
    if !p.exists() {
        panic!(
            "module not found at {}: run `make build` (or `cargo build --release`) first, \
             or set RUSTBLOOM_MODULE to the .so to test",
            p.display()
        );
    }
    p.canonicalize().unwrap_or(p)
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().unwrap().port()
}

/// A free port `p` whose cluster bus port `p + 10000` is free too.
fn free_cluster_port() -> u16 {
    for _ in 0..1000 {
        let p = free_port();
        if p > 55535 {
            continue;
        }
        if TcpListener::bind(("127.0.0.1", p + 10000)).is_ok() {
            return p;
        }
    }
    panic!("no free port pair (p, p+10000) found");
}

/// Name of a `--option` argument, lower-cased, without the dashes.
fn opt_name(a: &str) -> Option<String> {
    a.strip_prefix("--").map(|s| s.to_ascii_lowercase())
}

pub struct Server {
    dir: tempfile::TempDir,
    socket: PathBuf,
    port: u16,
    child: Option<Child>,
    extra: Vec<String>,
    module: Option<PathBuf>,
    /// Cluster node: the port must leave `port + 10000` free for the cluster bus.
    cluster_bus: bool,
}

impl Server {
    /// Start a server with the module loaded and the default settings.
    pub fn start() -> Server {
        Server::start_with(&[])
    }

    /// Start a server with extra command-line options (`["--appendonly", "yes"]`); an option named
    /// here replaces the harness default of the same name.
    pub fn start_with(extra_args: &[&str]) -> Server {
        Server::start_inner(extra_args, Some(module_path()))
    }

    /// Start a server without the module (harness self-checks only).
    pub fn start_without_module(extra_args: &[&str]) -> Server {
        Server::start_inner(extra_args, None)
    }

    /// Start a server after writing `files` (name, contents) into its fresh data directory, e.g.
    /// a `dump.rdb` to load at start-up.
    pub fn start_with_files(extra_args: &[&str], files: &[(&str, &[u8])]) -> Server {
        Server::start_full(extra_args, Some(module_path()), files, false)
    }

    /// Start a Redis Cluster node (`cluster-enabled yes`) on a port whose bus port (+10000) is
    /// free; `extra_args` are added (e.g. `--cluster-node-timeout`).
    pub fn start_cluster_node(extra_args: &[&str]) -> Server {
        let mut args = vec!["--cluster-enabled", "yes"];
        args.extend_from_slice(extra_args);
        Server::start_full(&args, Some(module_path()), &[], true)
    }

    fn start_inner(extra_args: &[&str], module: Option<PathBuf>) -> Server {
        Server::start_full(extra_args, module, &[], false)
    }

    fn start_full(
        extra_args: &[&str],
        module: Option<PathBuf>,
        files: &[(&str, &[u8])],
        cluster_bus: bool,
    ) -> Server {
        let dir = tempfile::Builder::new()
            .prefix("rb")
            .tempdir()
            .expect("create temp dir");
        let socket = dir.path().join("redis.sock");
        let mut s = Server {
            dir,
            socket,
            port: 0,
            child: None,
            extra: extra_args.iter().map(|s| s.to_string()).collect(),
            module,
            cluster_bus,
        };
        for (name, contents) in files {
            std::fs::write(s.dir.path().join(name), contents).expect("write file into server dir");
        }
        s.spawn_and_wait(None);
        s
    }

    fn args(&self) -> Vec<String> {
        let d = self.dir.path().to_str().unwrap().to_string();
        let mut defaults: Vec<(String, Vec<String>)> = vec![
            ("port".into(), vec![self.port.to_string()]),
            ("bind".into(), vec!["127.0.0.1".into()]),
            (
                "unixsocket".into(),
                vec![self.socket.to_str().unwrap().into()],
            ),
            ("unixsocketperm".into(), vec!["700".into()]),
            ("dir".into(), vec![d]),
            ("logfile".into(), vec!["redis.log".into()]),
            ("daemonize".into(), vec!["no".into()]),
            ("save".into(), vec!["".into()]),
            ("appendonly".into(), vec!["no".into()]),
            ("enable-debug-command".into(), vec!["yes".into()]),
            ("protected-mode".into(), vec!["no".into()]),
        ];
        let extra_names: Vec<String> = self.extra.iter().filter_map(|a| opt_name(a)).collect();
        defaults.retain(|(n, _)| !extra_names.contains(n));
        let mut args = Vec::new();
        for (n, vals) in defaults {
            args.push(format!("--{n}"));
            args.extend(vals);
        }
        if let Some(m) = &self.module {
            args.push("--loadmodule".into());
            args.push(m.to_str().unwrap().into());
        }
        args.extend(self.extra.iter().cloned());
        args
    }

    /// Spawn redis-server and wait until it answers PING. Retries with another port when the TCP
    /// port turned out to be taken.
    fn spawn_and_wait(&mut self, keep_port: Option<u16>) {
        let pick = || {
            if self.cluster_bus {
                free_cluster_port()
            } else {
                free_port()
            }
        };
        let mut port = keep_port.unwrap_or_else(pick);
        for attempt in 0..8 {
            self.port = port;
            let _ = std::fs::remove_file(&self.socket);
            let log_len = std::fs::metadata(self.log_path())
                .map(|m| m.len())
                .unwrap_or(0);
            let child = Command::new(REDIS_SERVER)
                .args(self.args())
                .current_dir(self.dir.path())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn redis-server");
            self.child = Some(child);
            match self.wait_ready() {
                Ok(()) => return,
                Err(exited) => {
                    let log = self.log_since(log_len);
                    if exited && log.contains("Address already in use") && attempt < 7 {
                        self.reap();
                        port = if self.cluster_bus {
                            free_cluster_port()
                        } else {
                            free_port()
                        };
                        continue;
                    }
                    self.kill();
                    panic!(
                        "redis-server did not come up ({}); log tail:\n{}",
                        if exited { "process exited" } else { "timeout" },
                        tail(&log, 40)
                    );
                }
            }
        }
    }

    /// Ok when PING answers PONG; Err(true) when the process exited, Err(false) on timeout.
    fn wait_ready(&mut self) -> Result<(), bool> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(_)) = c.try_wait() {
                    return Err(true);
                }
            }
            if self.socket.exists() {
                if let Ok(mut c) = self.try_conn() {
                    let pong: redis::RedisResult<String> = redis::cmd("PING").query(&mut c);
                    if let Ok(p) = pong {
                        if p == "PONG" {
                            return Ok(());
                        }
                    }
                }
            }
            if Instant::now() > deadline {
                return Err(false);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn try_conn(&self) -> redis::RedisResult<Connection> {
        let url = format!("redis+unix://{}", self.socket.display());
        let client = redis::Client::open(url)?;
        let c = client.get_connection()?;
        c.set_read_timeout(Some(IO_TIMEOUT))?;
        c.set_write_timeout(Some(IO_TIMEOUT))?;
        Ok(c)
    }

    /// A RESP2 connection over the unix socket.
    pub fn conn(&self) -> Connection {
        self.try_conn()
            .unwrap_or_else(|e| panic!("connect: {e}; log tail:\n{}", self.log_tail()))
    }

    /// A RESP3 connection over the unix socket (`HELLO 3`).
    pub fn conn_resp3(&self) -> Connection {
        let url = format!("redis+unix://{}?protocol=resp3", self.socket.display());
        let client = redis::Client::open(url).expect("client");
        let c = client
            .get_connection()
            .unwrap_or_else(|e| panic!("connect resp3: {e}; log tail:\n{}", self.log_tail()));
        c.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        c.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        c
    }

    /// A RESP2 connection over TCP.
    pub fn conn_tcp(&self) -> Connection {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port)).unwrap();
        let c = client.get_connection().expect("tcp connect");
        c.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        c
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("redis.log")
    }

    fn log_since(&self, from: u64) -> String {
        let mut s = String::new();
        if let Ok(mut f) = std::fs::File::open(self.log_path()) {
            let _ = f.seek(SeekFrom::Start(from));
            let mut b = Vec::new();
            let _ = f.read_to_end(&mut b);
            s = String::from_utf8_lossy(&b).into_owned();
        }
        s
    }

    /// The last 40 lines of the server log.
    pub fn log_tail(&self) -> String {
        tail(&self.log_since(0), 40)
    }

    /// Whole server log.
    pub fn log(&self) -> String {
        self.log_since(0)
    }

    /// Process id of the running server.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// SIGKILL the server (no shutdown, no save, no AOF flush) and reap it; `restart()` then
    /// starts it again on the same dir and port.
    pub fn kill9(&mut self) {
        self.kill();
    }

    /// Start a stopped (or killed) server again on the same dir, port and arguments.
    pub fn start_again(&mut self) {
        if self.child.is_some() {
            panic!("start_again: server still running");
        }
        let port = self.port;
        self.spawn_and_wait(Some(port));
    }

    /// True while the server process is running.
    pub fn is_alive(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Stop the server (SHUTDOWN NOSAVE, then kill if it does not exit) without removing the dir.
    pub fn stop(&mut self) {
        self.shutdown_cmd("NOSAVE");
    }

    fn shutdown_cmd(&mut self, mode: &str) {
        if self.child.is_none() {
            return;
        }
        if let Ok(mut c) = self.try_conn() {
            c.set_read_timeout(Some(Duration::from_secs(30))).ok();
            let _: redis::RedisResult<Value> = redis::cmd("SHUTDOWN").arg(mode).query(&mut c);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            match self.child.as_mut().unwrap().try_wait() {
                Ok(Some(_)) => {
                    self.child = None;
                    return;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(_) => break,
            }
        }
        self.kill();
    }

    fn reap(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.wait();
        }
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Restart with the same dir and arguments (SHUTDOWN NOSAVE first: persist explicitly with SAVE
    /// or rely on AOF).
    pub fn restart(&mut self) {
        self.stop();
        let port = self.port;
        self.spawn_and_wait(Some(port));
    }

    /// Restart letting the server save on shutdown (SHUTDOWN SAVE).
    pub fn restart_saving(&mut self) {
        self.shutdown_cmd("SAVE");
        let port = self.port;
        self.spawn_and_wait(Some(port));
    }

    /// Restart with different extra arguments, same dir.
    pub fn restart_with(&mut self, extra_args: &[&str]) {
        self.stop();
        self.extra = extra_args.iter().map(|s| s.to_string()).collect();
        let port = self.port;
        self.spawn_and_wait(Some(port));
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.child.is_some() {
            // Never hang in drop: short timeout for the shutdown connection.
            if let Ok(mut c) = self.try_conn() {
                c.set_read_timeout(Some(Duration::from_secs(10))).ok();
                let _: redis::RedisResult<Value> =
                    redis::cmd("SHUTDOWN").arg("NOSAVE").query(&mut c);
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                match self.child.as_mut().map(|c| c.try_wait()) {
                    Some(Ok(Some(_))) => {
                        self.child = None;
                        break;
                    }
                    Some(Ok(None)) => std::thread::sleep(Duration::from_millis(20)),
                    _ => break,
                }
            }
            self.kill();
        }
        if std::thread::panicking() {
            eprintln!(
                "--- server log tail ({}) ---\n{}",
                self.dir.path().display(),
                self.log_tail()
            );
        }
    }
}

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    let start = lines.len().saturating_sub(n);
    lines[start..].join("\n")
}

// ---------------------------------------------------------------------------------------------
// Reply helpers
// ---------------------------------------------------------------------------------------------

/// Full server error text, e.g. `ERR bad capacity` or `WRONGTYPE Operation against ...`.
pub fn err_text(e: &RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(c), Some(d)) => format!("{c} {d}"),
        (Some(c), None) => c.to_string(),
        _ => format!("<non-server error: {e}>"),
    }
}

/// Full text of a server error nested in a reply.
pub fn server_err_text(e: &redis::ServerError) -> String {
    match e.details() {
        Some(d) => format!("{} {}", e.code(), d),
        None => e.code().to_string(),
    }
}

/// Run a raw command; returns the reply (nested errors kept as `Value::ServerError`) or the
/// full error text of a top-level error.
pub fn raw<T: redis::ToRedisArgs>(c: &mut Connection, args: &[T]) -> Result<Value, String> {
    use redis::ConnectionLike;
    let mut cmd = redis::Cmd::new();
    for a in args {
        cmd.arg(a);
    }
    match c.req_command(&cmd) {
        Ok(Value::ServerError(e)) => Err(server_err_text(&e)),
        Ok(v) => Ok(v),
        Err(e) => Err(err_text(&e)),
    }
}

/// Run a raw command built from byte-string args.
pub fn rawb(c: &mut Connection, args: &[&[u8]]) -> Result<Value, String> {
    raw(c, args)
}

/// Run a raw command that must fail; returns the full error text.
#[track_caller]
pub fn raw_err<T: redis::ToRedisArgs + std::fmt::Debug>(c: &mut Connection, args: &[T]) -> String {
    match raw(c, args) {
        Err(e) => e,
        Ok(v) => panic!("expected an error from {args:?}, got {v:?}"),
    }
}

/// Assert that a command fails with exactly `expected`.
#[track_caller]
pub fn assert_err<T: redis::ToRedisArgs + std::fmt::Debug>(
    c: &mut Connection,
    args: &[T],
    expected: &str,
) {
    match raw(c, args) {
        Err(e) => assert_eq!(e, expected, "wrong error for {args:?}"),
        Ok(v) => panic!("expected error {expected:?} from {args:?}, got reply {v:?}"),
    }
}

/// Run a raw command that must succeed.
#[track_caller]
pub fn raw_ok<T: redis::ToRedisArgs + std::fmt::Debug>(c: &mut Connection, args: &[T]) -> Value {
    match raw(c, args) {
        Ok(v) => v,
        Err(e) => panic!("{args:?} failed: {e}"),
    }
}

pub fn exists(c: &mut Connection, key: &str) -> bool {
    let n: i64 = redis::cmd("EXISTS").arg(key).query(c).unwrap();
    n == 1
}

#[track_caller]
pub fn assert_no_key(c: &mut Connection, key: &str) {
    assert!(
        !exists(c, key),
        "key {key:?} should not exist after a failed command"
    );
}

pub fn key_type(c: &mut Connection, key: &str) -> String {
    redis::cmd("TYPE").arg(key).query(c).unwrap()
}

/// `DEBUG DIGEST-VALUE key` as a hex string.
pub fn digest(c: &mut Connection, key: &str) -> String {
    let v: Value = redis::cmd("DEBUG")
        .arg("DIGEST-VALUE")
        .arg(key)
        .query(c)
        .unwrap_or_else(|e| panic!("DEBUG DIGEST-VALUE {key}: {e}"));
    match v {
        Value::Array(items) if items.len() == 1 => value_to_string(&items[0]),
        other => value_to_string(&other),
    }
}

/// `DEBUG DIGEST` of the whole dataset.
pub fn dataset_digest(c: &mut Connection) -> String {
    let v: Value = redis::cmd("DEBUG").arg("DIGEST").query(c).unwrap();
    value_to_string(&v)
}

#[track_caller]
pub fn assert_same_digest(a: &mut Connection, ka: &str, b: &mut Connection, kb: &str) {
    let da = digest(a, ka);
    let db = digest(b, kb);
    assert_ne!(
        da, "0000000000000000000000000000000000000000",
        "digest of {ka} is zero (missing key?)"
    );
    assert_eq!(da, db, "DEBUG DIGEST-VALUE differs: {ka} vs {kb}");
}

pub fn value_to_string(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Okay => "OK".into(),
        Value::Int(i) => i.to_string(),
        Value::VerbatimString { text, .. } => text.clone(),
        Value::Nil => "(nil)".into(),
        other => format!("{other:?}"),
    }
}

/// Integer value of a reply that is an integer (or a RESP3 boolean).
#[track_caller]
pub fn as_int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        Value::Boolean(b) => *b as i64,
        other => panic!("expected integer, got {other:?}"),
    }
}

/// Elements of an array reply.
#[track_caller]
pub fn as_array(v: Value) -> Vec<Value> {
    match v {
        Value::Array(a) => a,
        Value::Set(a) => a,
        other => panic!("expected array, got {other:?}"),
    }
}

/// A MADD/MEXISTS/INSERT reply as integers.
#[track_caller]
pub fn as_ints(v: Value) -> Vec<i64> {
    as_array(v).iter().map(as_int).collect()
}

/// BF.INFO as (name, value) pairs, from either RESP2 (flat array) or RESP3 (map).
#[track_caller]
pub fn info_pairs(v: Value) -> Vec<(String, Value)> {
    match v {
        Value::Array(a) => {
            assert!(a.len() % 2 == 0, "flat BF.INFO array has odd length: {a:?}");
            a.chunks(2)
                .map(|p| (value_to_string(&p[0]), p[1].clone()))
                .collect()
        }
        Value::Map(m) => m
            .into_iter()
            .map(|(k, v)| (value_to_string(&k), v))
            .collect(),
        other => panic!("unexpected BF.INFO reply {other:?}"),
    }
}

/// Parsed BF.INFO.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Info {
    pub capacity: i64,
    pub size: i64,
    pub filters: i64,
    pub items: i64,
    /// None for non-scaling filters (nil).
    pub expansion: Option<i64>,
}

#[track_caller]
pub fn info(c: &mut Connection, key: impl AsRef<[u8]>) -> Info {
    let key = key.as_ref();
    let v = rawb(c, &[b"BF.INFO", key])
        .unwrap_or_else(|e| panic!("BF.INFO {}: {e}", String::from_utf8_lossy(key)));
    let pairs = info_pairs(v);
    let names: Vec<&str> = pairs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "Capacity",
            "Size",
            "Number of filters",
            "Number of items inserted",
            "Expansion rate"
        ]
    );
    let get = |i: usize| -> Option<i64> {
        match &pairs[i].1 {
            Value::Nil => None,
            v => Some(as_int(v)),
        }
    };
    Info {
        capacity: get(0).unwrap(),
        size: get(1).unwrap(),
        filters: get(2).unwrap(),
        items: get(3).unwrap(),
        expansion: get(4),
    }
}

/// Full SCANDUMP of a key: the list of (iterator, data) chunks, header first, excluding the
/// terminating `[0, ""]`.
#[track_caller]
pub fn scandump(c: &mut Connection, key: &str) -> Vec<(i64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut it: i64 = 0;
    for _ in 0..100_000 {
        let v = raw(
            c,
            &["BF.SCANDUMP".to_string(), key.to_string(), it.to_string()],
        )
        .unwrap_or_else(|e| panic!("BF.SCANDUMP {key} {it}: {e}"));
        let a = as_array(v);
        assert_eq!(a.len(), 2, "SCANDUMP reply must have 2 elements");
        let next = as_int(&a[0]);
        let data = match &a[1] {
            Value::BulkString(b) => b.clone(),
            other => panic!("SCANDUMP data is not a bulk string: {other:?}"),
        };
        if next == 0 {
            assert!(
                data.is_empty(),
                "final SCANDUMP reply must carry empty data"
            );
            return out;
        }
        out.push((next, data));
        it = next;
    }
    panic!("SCANDUMP of {key} did not terminate");
}

/// Replay chunks with BF.LOADCHUNK into `key`.
#[track_caller]
pub fn loadchunks(c: &mut Connection, key: &str, chunks: &[(i64, Vec<u8>)]) {
    for (it, data) in chunks {
        let r = redis::cmd("BF.LOADCHUNK")
            .arg(key)
            .arg(*it)
            .arg(data.as_slice())
            .query::<Value>(c);
        match r {
            Ok(v) => assert_eq!(v, Value::Okay, "LOADCHUNK {key} {it}"),
            Err(e) => panic!(
                "BF.LOADCHUNK {key} {it} ({} bytes): {}",
                data.len(),
                err_text(&e)
            ),
        }
    }
}

/// Poll `f` until it returns true or `timeout` passes.
pub fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `INFO <section>` as text.
pub fn info_section(c: &mut Connection, section: &str) -> String {
    redis::cmd("INFO").arg(section).query(c).unwrap()
}

/// Deterministic distinct items `prefix:0`, `prefix:1`, ...
pub fn items(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}:{i}")).collect()
}

/// Add items with BF.MADD in batches; returns the number of 1s.
pub fn madd_all(c: &mut Connection, key: &str, items: &[String]) -> usize {
    let mut new = 0;
    for batch in items.chunks(1000) {
        let mut cmd = redis::cmd("BF.MADD");
        cmd.arg(key);
        for i in batch {
            cmd.arg(i);
        }
        let r: Vec<i64> = cmd
            .query(c)
            .unwrap_or_else(|e| panic!("BF.MADD {key}: {}", err_text(&e)));
        assert_eq!(r.len(), batch.len());
        new += r.iter().filter(|&&x| x == 1).count();
    }
    new
}

/// Assert every item is reported present (no false negatives), checking in MEXISTS batches.
#[track_caller]
pub fn assert_all_exist(c: &mut Connection, key: &str, items: &[String]) {
    for batch in items.chunks(1000) {
        let mut cmd = redis::cmd("BF.MEXISTS");
        cmd.arg(key);
        for i in batch {
            cmd.arg(i);
        }
        let r: Vec<i64> = cmd
            .query(c)
            .unwrap_or_else(|e| panic!("BF.MEXISTS {key}: {}", err_text(&e)));
        for (i, x) in batch.iter().zip(r) {
            assert_eq!(x, 1, "false negative: {i} not in {key}");
        }
    }
}

/// Compare two BF.INFO results: every field but Size first, then Size (so a Size-only difference
/// is reported as such).
#[track_caller]
pub fn assert_info_eq(a: &Info, b: &Info, what: &str) {
    let strip = |i: &Info| Info {
        size: 0,
        ..i.clone()
    };
    assert_eq!(strip(a), strip(b), "BF.INFO differs ({what})");
    assert_eq!(
        a.size, b.size,
        "BF.INFO Size differs ({what}): {a:?} vs {b:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Replication helpers
// ---------------------------------------------------------------------------------------------

/// Value of `name:` in an INFO text.
pub fn info_field(info: &str, name: &str) -> Option<String> {
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .map(|s| s.trim().to_string())
}

/// `REPLICAOF 127.0.0.1 <primary port>` on `replica`, then wait until the link is up and the
/// primary sees it online.
#[track_caller]
pub fn replicate_from(primary: &Server, replica: &Server) {
    // Redis 7.0 defaults to diskless sync after a 5 s delay: start the sync at once.
    raw_ok(
        &mut primary.conn(),
        &["CONFIG", "SET", "repl-diskless-sync-delay", "0"],
    );
    let mut rc = replica.conn();
    let r = raw_ok(
        &mut rc,
        &[
            "REPLICAOF".to_string(),
            "127.0.0.1".into(),
            primary.port().to_string(),
        ],
    );
    assert_eq!(r, Value::Okay);
    let ok = wait_until(Duration::from_secs(60), || {
        info_section(&mut rc, "replication").contains("master_link_status:up")
    });
    assert!(
        ok,
        "replica link not up:\n{}\nreplica log:\n{}",
        info_section(&mut rc, "replication"),
        replica.log_tail()
    );
    let port = format!("port={},", replica.port());
    let mut pc = primary.conn();
    let ok = wait_until(Duration::from_secs(60), || {
        info_section(&mut pc, "replication")
            .lines()
            .any(|l| l.contains(&port) && l.contains("state=online"))
    });
    assert!(ok, "primary does not see the replica online");
}

/// `WAIT n` on the primary, then wait until every replica has applied everything (same offset).
#[track_caller]
pub fn wait_synced(pc: &mut Connection, replicas: &mut [&mut Connection]) {
    let n: i64 = redis::cmd("WAIT")
        .arg(replicas.len())
        .arg(30000)
        .query(pc)
        .unwrap();
    assert_eq!(
        n as usize,
        replicas.len(),
        "WAIT {} returned {n}",
        replicas.len()
    );
    for rc in replicas.iter_mut() {
        let ok = wait_until(Duration::from_secs(30), || {
            let po = info_field(&info_section(pc, "replication"), "master_repl_offset");
            let ro = info_field(&info_section(rc, "replication"), "master_repl_offset");
            po.is_some() && po == ro
        });
        assert!(ok, "replica offset did not catch up");
    }
}

/// Every key, sorted.
pub fn all_keys(c: &mut Connection) -> Vec<Vec<u8>> {
    let mut k: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(c).unwrap();
    k.sort();
    k
}

/// What replicas must agree on: per key DEBUG DIGEST-VALUE, BF.INFO (or its error, e.g. for a
/// filter still being loaded) and TYPE; then DEBUG DIGEST.
pub fn dataset_view(c: &mut Connection) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for k in all_keys(c) {
        let name = String::from_utf8_lossy(&k).into_owned();
        let t: String = redis::cmd("TYPE").arg(k.as_slice()).query(c).unwrap();
        let d: Value = redis::cmd("DEBUG")
            .arg("DIGEST-VALUE")
            .arg(k.as_slice())
            .query(c)
            .unwrap();
        let i = if t == "MBbloom--" {
            format!("{:?}", rawb(c, &[b"BF.INFO", k.as_slice()]))
        } else {
            String::new()
        };
        out.push((name, format!("{t} {d:?} {i}")));
    }
    out.push(("<DEBUG DIGEST>".into(), dataset_digest(c)));
    out
}

/// Assert that every connection sees the same dataset as the first; reports every difference.
#[track_caller]
pub fn assert_same_dataset(conns: &mut [(&str, &mut Connection)]) {
    let (first_name, first) = &mut conns[0];
    let first_name = first_name.to_string();
    let want = dataset_view(first);
    assert!(want.len() > 1, "{first_name} holds no keys");
    for (name, c) in conns[1..].iter_mut() {
        let got = dataset_view(c);
        let mut diffs = Vec::new();
        let wk: Vec<&String> = want.iter().map(|x| &x.0).collect();
        let gk: Vec<&String> = got.iter().map(|x| &x.0).collect();
        if wk != gk {
            diffs.push(format!("keys: {first_name} {wk:?}\n  vs {name} {gk:?}"));
        }
        for (k, v) in &want {
            if let Some((_, g)) = got.iter().find(|(gk, _)| gk == k) {
                if g != v {
                    diffs.push(format!("{k}: {first_name} {v}\n  vs {name} {g}"));
                }
            }
        }
        assert!(
            diffs.is_empty(),
            "{name} differs from {first_name}:\n{}",
            diffs.join("\n")
        );
    }
}

/// Waits until a BGREWRITEAOF (started or scheduled) has finished, and checks it succeeded.
pub fn wait_rewrite_done(c: &mut Connection) {
    let ok = wait_until(Duration::from_secs(120), || {
        let p = info_section(c, "persistence");
        p.contains("aof_rewrite_in_progress:0") && p.contains("aof_rewrite_scheduled:0")
    });
    assert!(
        ok,
        "AOF rewrite did not finish: {}",
        info_section(c, "persistence")
    );
    let p = info_section(c, "persistence");
    assert!(
        p.contains("aof_last_bgrewrite_status:ok"),
        "rewrite failed: {p}"
    );
}

/// CRC-64/Jones as Redis' crc64.c: reflected, polynomial 0xad93d23594c935a9, init 0, no xorout.
pub fn crc64(data: &[u8]) -> u64 {
    static TABLE: std::sync::OnceLock<[u64; 256]> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        const REFLECTED_POLY: u64 = 0x95ac_9329_ac4b_c9b5; // bit-reverse of 0xad93d23594c935a9
        let mut t = [0u64; 256];
        for (i, slot) in t.iter_mut().enumerate() {
            let mut crc = i as u64;
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ REFLECTED_POLY
                } else {
                    crc >> 1
                };
            }
            *slot = crc;
        }
        t
    });
    data.iter().fold(0u64, |crc, &b| {
        table[((crc ^ u64::from(b)) & 0xff) as usize] ^ (crc >> 8)
    })
}

/// Appends the RDB version and the CRC64 of everything before it: a payload RESTORE accepts.
pub fn seal(mut value: Vec<u8>, version: [u8; 2]) -> Vec<u8> {
    value.extend_from_slice(&version);
    let crc = crc64(&value);
    value.extend_from_slice(&crc.to_le_bytes());
    value
}
