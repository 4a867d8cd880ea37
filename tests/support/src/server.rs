//! Redis servers for the tests: every [`Server`] runs its own `redis-server` (own temp dir, own
//! unix socket, own TCP port) with the module loaded, waits until it answers PING and is shut
//! down when dropped, so tests are independent and can run in parallel threads.
//!
//! The server binary is `$RUSTBLOOM_SERVER` (a path, or a name looked up on PATH), else Debian's
//! `/usr/bin/redis-server`: `make test` runs the suites once with each server it supports
//! (Redis 7.0 and valkey-server 9.1).

use std::io::{Read, Seek, SeekFrom};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis::{Connection, Value};

/// The server the tests run when `$RUSTBLOOM_SERVER` is not set.
pub const DEFAULT_SERVER: &str = "/usr/bin/redis-server";

/// The server binary under test: `$RUSTBLOOM_SERVER`, else [`DEFAULT_SERVER`].
pub fn server_binary() -> PathBuf {
    match std::env::var_os("RUSTBLOOM_SERVER") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => PathBuf::from(DEFAULT_SERVER),
    }
}

/// Which server the tests run against, as its `INFO server` says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerKind {
    /// `valkey` or `redis`.
    pub name: String,
    /// The version (`valkey_version` on Valkey, `redis_version` on Redis), e.g. (7, 0, 15).
    pub version: (u32, u32, u32),
}

impl ServerKind {
    pub fn is_valkey(&self) -> bool {
        self.name == "valkey"
    }

    /// Whether the server lets a module register config names without its prefix (Redis 8's
    /// REDISMODULE_CONFIG_UNPREFIXED; Valkey 9.1 has no such flag).
    pub fn has_unprefixed_module_configs(&self) -> bool {
        !self.is_valkey() && self.version.0 >= 8
    }
}

/// Reads [`ServerKind`] from `INFO server` on `c`.
pub fn server_kind(c: &mut Connection) -> ServerKind {
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query(c)
        .expect("INFO server");
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(|v| v.trim().to_string())
    };
    let valkey = field("valkey_version");
    let name = if valkey.is_some() || field("server_name").as_deref() == Some("valkey") {
        "valkey"
    } else {
        "redis"
    };
    let version_text = valkey
        .or_else(|| field("redis_version"))
        .expect("INFO server without a version");
    let mut parts = version_text
        .split('.')
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let mut next = || parts.next().unwrap_or(0);
    ServerKind {
        name: name.to_string(),
        version: (next(), next(), next()),
    }
}

/// How long to wait for a server to answer PING after start (also covers RDB/AOF loading).
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Generous socket timeout so that a hung server fails a test instead of hanging it forever.
const IO_TIMEOUT: Duration = Duration::from_secs(120);

/// Path of the module under test: `$RUSTBLOOM_MODULE`, else `target/release/librustbloom.so` of
/// the workspace (two levels above this crate, `tests/support`).
pub fn module_path() -> PathBuf {
    let p = match std::env::var_os("RUSTBLOOM_MODULE") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/release/librustbloom.so"),
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

/// Path of the second build of the module, with the feature `test-hooks` (`make test` builds it):
/// its sizing differs by one unit per layer and slot, as another release's might, and one item
/// panics when hashed. `$RUSTBLOOM_TEST_HOOKS_MODULE`, else
/// `target/test-hooks/release/librustbloom.so` of the workspace.
pub fn test_hooks_module() -> PathBuf {
    let p = match std::env::var_os("RUSTBLOOM_TEST_HOOKS_MODULE") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../target/test-hooks/release/librustbloom.so"),
    };
    assert!(
        p.exists(),
        "{} is missing: make test builds it (cargo build --release -p rustbloom --lib \
         --features test-hooks --target-dir target/test-hooks)",
        p.display()
    );
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
    /// A command that runs the server (e.g. `prlimit --as=N`), empty to run it directly.
    wrapper: Vec<String>,
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

    /// Start a server with another build of the module (`module`), run through `wrapper` (e.g.
    /// `["prlimit", "--as=400000000"]`; empty to run it directly).
    pub fn start_custom(extra_args: &[&str], module: &Path, wrapper: &[&str]) -> Server {
        let mut s = Server::new(extra_args, Some(module.to_path_buf()), false);
        s.wrapper = wrapper.iter().map(|s| s.to_string()).collect();
        s.spawn_and_wait(None);
        s
    }

    /// Starts a stopped server again, in the same directory, run through `wrapper` from now on:
    /// Err with its log when it does not come up (it is then stopped).
    pub fn try_start_again_with_wrapper(&mut self, wrapper: &[&str]) -> Result<(), String> {
        assert!(
            self.child.is_none(),
            "try_start_again: server still running"
        );
        self.wrapper = wrapper.iter().map(|s| s.to_string()).collect();
        let log_len = std::fs::metadata(self.log_path())
            .map(|m| m.len())
            .unwrap_or(0);
        self.spawn();
        match self.wait_ready() {
            Ok(()) => Ok(()),
            Err(_) => {
                self.kill();
                Err(self.log_since(log_len))
            }
        }
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

    /// Start a server with the module build `module` after copying the files of the directory
    /// `from` into `name` under its fresh data directory (e.g. another server's `appendonlydir`,
    /// to load a copy of its AOF): Err with its log when it does not come up (a load it refuses is
    /// a result, not a harness failure).
    pub fn try_start_with_dir_copy(
        extra_args: &[&str],
        module: &Path,
        from: &Path,
        name: &str,
    ) -> Result<Server, String> {
        let mut s = Server::new(extra_args, Some(module.to_path_buf()), false);
        let to = s.dir.path().join(name);
        std::fs::create_dir_all(&to).map_err(|e| format!("create {}: {e}", to.display()))?;
        let entries = std::fs::read_dir(from).map_err(|e| format!("{}: {e}", from.display()))?;
        for entry in entries {
            let path = entry
                .map_err(|e| format!("{}: {e}", from.display()))?
                .path();
            if let Some(file) = path.file_name().filter(|_| path.is_file()) {
                std::fs::copy(&path, to.join(file))
                    .map_err(|e| format!("copy {}: {e}", path.display()))?;
            }
        }
        s.port = free_port();
        s.spawn();
        match s.wait_ready() {
            Ok(()) => Ok(s),
            Err(exited) => {
                s.kill();
                Err(format!(
                    "server loading a copy of {} did not come up ({}); log tail:\n{}",
                    from.display(),
                    if exited { "process exited" } else { "timeout" },
                    s.log_tail()
                ))
            }
        }
    }

    /// Start a server with another module (`module`, e.g. RedisBloom's) after writing `files`
    /// (name, contents) into its fresh data directory.
    pub fn start_module_with_files(
        extra_args: &[&str],
        module: &Path,
        files: &[(&str, &[u8])],
    ) -> Server {
        Server::start_full(extra_args, Some(module.to_path_buf()), files, false)
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
        let s = Server::new(extra_args, module, cluster_bus);
        for (name, contents) in files {
            std::fs::write(s.dir.path().join(name), contents).expect("write file into server dir");
        }
        let mut s = s;
        s.spawn_and_wait(None);
        s
    }

    /// A server not yet started, in a fresh directory.
    fn new(extra_args: &[&str], module: Option<PathBuf>, cluster_bus: bool) -> Server {
        let dir = tempfile::Builder::new()
            .prefix("rb")
            .tempdir()
            .expect("create temp dir");
        let socket = dir.path().join("redis.sock");
        Server {
            dir,
            socket,
            port: 0,
            child: None,
            extra: extra_args.iter().map(|s| s.to_string()).collect(),
            module,
            wrapper: Vec::new(),
            cluster_bus,
        }
    }

    /// Spawns the server process on the current port (the caller waits for it).
    fn spawn(&mut self) {
        let _ = std::fs::remove_file(&self.socket);
        let server = server_binary();
        let mut command = match self.wrapper.split_first() {
            Some((program, rest)) => {
                let mut command = Command::new(program);
                command.args(rest).arg(&server);
                command
            }
            None => Command::new(&server),
        };
        let child = command
            .args(self.args())
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", server.display()));
        self.child = Some(child);
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
            let log_len = std::fs::metadata(self.log_path())
                .map(|m| m.len())
                .unwrap_or(0);
            self.spawn();
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
