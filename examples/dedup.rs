//! The dedup workload end to end (issue 6, item 4).
//!
//! Streams N (default 10,000,000) deterministic pseudo-random lowercase words of length 4..=12
//! through `BF.MADD` in batches of 1000 over one pipelined connection (up to `WINDOW` batches in
//! flight) into a filter reserved for 10M items at 1e-7, and reports wall time, items/s, and the
//! duplicates the filter reported against the exact count (a HashSet over the same sequence,
//! computed after the timed run). With uniform lengths and letters ~7.5% of 10M words are repeats,
//! almost all of them among the 457k possible 4-letter words.
//!
//! Timed ("end to end"): generating the words, encoding the commands, the server's work, reading
//! and counting the replies — from the first BF.MADD sent to the last reply read.
//!
//! Usage:
//!   cargo run --release --example dedup [-- ITEMS] [--url redis://HOST:PORT/]
//!
//! Without `--url` it starts its own redis-server (from PATH) with the module
//! ($RUSTBLOOM_MODULE, else target/release/librustbloom.so) on a free port in a temporary
//! directory, pinned to core 1 while this client pins itself to core 0 (when `taskset` exists and
//! there are 2+ cores), and stops it at the end. With `--url` the key `dedup:bf` there is replaced.

use std::collections::HashSet;
use std::io::Write;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis::Value;

const BATCH: usize = 1000;
/// Batches sent ahead of the replies read: keeps the server busy while the client encodes.
const WINDOW: usize = 8;
const KEY: &str = "dedup:bf";
const ERROR_RATE: &str = "1e-7";
const CAPACITY: u64 = 10_000_000;

/// wyrand: small, fast, deterministic.
struct Rng(u64);

impl Rng {
    #[inline]
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0xa076_1d64_78bd_642f);
        let t = u128::from(self.0) * u128::from(self.0 ^ 0xe703_7ed1_a0b4_28db);
        ((t >> 64) ^ t) as u64
    }

    /// Uniform in 0..n (multiply-shift; the bias is ~n/2^64).
    #[inline]
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
}

/// The word sequence: same seed, same words.
struct Words {
    rng: Rng,
}

impl Words {
    fn new() -> Words {
        Words {
            rng: Rng(0x0dd_ba11_5eed),
        }
    }

    /// Writes the next word into `buf` and returns its length.
    #[inline]
    fn next_into(&mut self, buf: &mut [u8; 12]) -> usize {
        let len = 4 + self.rng.below(9) as usize;
        for b in buf.iter_mut().take(len) {
            *b = b'a' + self.rng.below(26) as u8;
        }
        len
    }
}

/// A word as an integer in base 27 (letters 1..=26): unique for words of up to 12 letters.
fn pack(word: &[u8]) -> u64 {
    word.iter()
        .fold(0u64, |acc, &b| acc * 27 + u64::from(b - b'a' + 1))
}

fn push_bulk(out: &mut Vec<u8>, bytes: &[u8]) {
    write!(out, "${}\r\n", bytes.len()).unwrap();
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

/// A redis-server of our own, killed on drop.
struct Server {
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn have_taskset() -> bool {
    Command::new("taskset")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn start_server() -> (Server, String) {
    let module = std::env::var_os("RUSTBLOOM_MODULE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release/librustbloom.so")
        });
    assert!(
        module.exists(),
        "module not found at {} (cargo build --release, or set RUSTBLOOM_MODULE)",
        module.display()
    );
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let dir = tempfile::tempdir().expect("temp dir");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pin = cores >= 2 && have_taskset();
    if pin {
        // Pin this client (still single-threaded) to core 0.
        let _ = Command::new("taskset")
            .args(["-p", "-c", "0", &std::process::id().to_string()])
            .stdout(Stdio::null())
            .status();
    }
    let mut cmd = if pin {
        let mut c = Command::new("taskset");
        c.args(["-c", "1", "redis-server"]);
        c
    } else {
        Command::new("redis-server")
    };
    cmd.args([
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
    ])
    .args(["--appendonly", "no", "--protected-mode", "no"])
    .arg("--dir")
    .arg(dir.path())
    .arg("--loadmodule")
    .arg(&module)
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    let child = cmd.spawn().expect("start redis-server");
    let url = format!("redis://127.0.0.1:{port}/");
    let server = Server { child, _dir: dir };
    let client = redis::Client::open(url.as_str()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(mut c) = client.get_connection() {
            if redis::cmd("PING").query::<String>(&mut c).is_ok() {
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "redis-server did not come up on port {port}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!(
        "started redis-server on port {port} with {}{}",
        module.display(),
        if pin {
            " (server on core 1, client on core 0)"
        } else {
            ""
        }
    );
    (server, url)
}

/// Counts the zeros ("already present") in a BF.MADD reply.
fn count_present(reply: Value, expected: usize) -> u64 {
    match reply {
        Value::Array(items) => {
            assert_eq!(items.len(), expected, "short BF.MADD reply");
            items
                .iter()
                .map(|v| match v {
                    Value::Int(0) | Value::Boolean(false) => 1,
                    Value::Int(1) | Value::Boolean(true) => 0,
                    other => panic!("unexpected item in BF.MADD reply: {other:?}"),
                })
                .sum()
        }
        other => panic!("unexpected BF.MADD reply: {other:?}"),
    }
}

fn main() {
    let mut items: u64 = 10_000_000;
    let mut url: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--url" => url = Some(args.next().expect("--url needs a value")),
            "-h" | "--help" => {
                println!("usage: dedup [ITEMS] [--url redis://HOST:PORT/]");
                return;
            }
            n => {
                items = n
                    .replace('_', "")
                    .parse()
                    .expect("ITEMS must be an integer")
            }
        }
    }

    let (_server, url) = match url {
        Some(url) => (None, url),
        None => {
            let (server, url) = start_server();
            (Some(server), url)
        }
    };
    let client = redis::Client::open(url.as_str()).expect("url");
    let mut con = client.get_connection().expect("connect");
    redis::cmd("DEL")
        .arg(KEY)
        .query::<i64>(&mut con)
        .expect("DEL");
    redis::cmd("BF.RESERVE")
        .arg(KEY)
        .arg(ERROR_RATE)
        .arg(CAPACITY)
        .query::<()>(&mut con)
        .expect("BF.RESERVE (is the module loaded?)");

    let server_pid = _server.as_ref().map(|s| s.child.id());
    let server_cpu_before = server_pid.map(cpu_seconds);
    let client_cpu_before = cpu_seconds(std::process::id());

    // ---- timed: generate, encode, send, read ----
    let started = Instant::now();
    let mut words = Words::new();
    let mut word = [0u8; 12];
    let mut packed: Vec<u8> = Vec::with_capacity(BATCH * 20 + 64);
    let mut in_flight: std::collections::VecDeque<usize> = std::collections::VecDeque::new();
    let mut reported_dups = 0u64;
    let mut sent = 0u64;
    while sent < items {
        let n = (items - sent).min(BATCH as u64) as usize;
        packed.clear();
        write!(packed, "*{}\r\n$7\r\nBF.MADD\r\n", n + 2).unwrap();
        push_bulk(&mut packed, KEY.as_bytes());
        for _ in 0..n {
            let len = words.next_into(&mut word);
            // Lengths are 4..=12: one digit or two.
            packed.push(b'$');
            if len >= 10 {
                packed.push(b'1');
                packed.push(b'0' + (len - 10) as u8);
            } else {
                packed.push(b'0' + len as u8);
            }
            packed.extend_from_slice(b"\r\n");
            packed.extend_from_slice(&word[..len]);
            packed.extend_from_slice(b"\r\n");
        }
        con.send_packed_command(&packed).expect("send");
        in_flight.push_back(n);
        sent += n as u64;
        if in_flight.len() >= WINDOW {
            let expected = in_flight.pop_front().unwrap();
            reported_dups += count_present(con.recv_response().expect("reply"), expected);
        }
    }
    while let Some(expected) = in_flight.pop_front() {
        reported_dups += count_present(con.recv_response().expect("reply"), expected);
    }
    let wall = started.elapsed();
    // ---- end of timed part ----
    let client_cpu = cpu_seconds(std::process::id()) - client_cpu_before;
    let server_cpu = server_pid
        .zip(server_cpu_before)
        .map(|(pid, before)| cpu_seconds(pid) - before);

    let card: i64 = redis::cmd("BF.CARD").arg(KEY).query(&mut con).unwrap_or(-1);
    let info: Value = redis::cmd("BF.INFO")
        .arg(KEY)
        .query(&mut con)
        .unwrap_or(Value::Nil);

    let exact_started = Instant::now();
    let mut seen: HashSet<u64> = HashSet::with_capacity(items as usize);
    let mut words = Words::new();
    let mut exact_dups = 0u64;
    for _ in 0..items {
        let len = words.next_into(&mut word);
        if !seen.insert(pack(&word[..len])) {
            exact_dups += 1;
        }
    }
    let exact_time = exact_started.elapsed();

    let secs = wall.as_secs_f64();
    println!("dedup: {items} words (lowercase, length 4..=12), BF.MADD x{BATCH}, window {WINDOW}, filter 10M @ {ERROR_RATE}");
    println!("  wall time       {secs:.3} s");
    println!("  items/s         {:.0}", items as f64 / secs);
    println!("  distinct (exact)        {}", items - exact_dups);
    println!(
        "  duplicates exact        {exact_dups} ({:.2}%)",
        100.0 * exact_dups as f64 / items as f64
    );
    println!("  duplicates reported     {reported_dups}");
    println!(
        "  false positives         {} (reported - exact; never negative: the filter has no false negatives)",
        reported_dups as i64 - exact_dups as i64
    );
    println!(
        "  client CPU      {client_cpu:.2} s (this process: generating, encoding, parsing replies)"
    );
    match server_cpu {
        Some(cpu) => println!(
            "  server CPU      {cpu:.2} s ({:.0} ns per item, {:.1} µs per BF.MADD of {BATCH})",
            cpu * 1e9 / items as f64,
            cpu * 1e6 / items.div_ceil(BATCH as u64) as f64
        ),
        None => println!("  server CPU      n/a (remote server)"),
    }
    println!("  BF.CARD                 {card}");
    println!("  BF.INFO                 {}", format_info(&info));
    println!(
        "  (exact count via HashSet, untimed: {:.2} s)",
        exact_time.as_secs_f64()
    );
    assert!(
        reported_dups >= exact_dups,
        "the filter missed a duplicate: false negative"
    );
}

/// utime + stime of a process in seconds, from /proc/PID/stat (0 where there is no /proc).
fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the command name, which is in parentheses and may contain spaces.
    let rest = stat.rsplit_once(") ").map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|f| f.parse::<f64>().ok()))
        .sum();
    // USER_HZ is 100 on every Linux configuration a Debian server runs.
    ticks / 100.0
}

fn format_info(info: &Value) -> String {
    fn flat(v: &Value) -> String {
        match v {
            Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            Value::SimpleString(s) => s.clone(),
            Value::Int(i) => i.to_string(),
            Value::Double(d) => d.to_string(),
            other => format!("{other:?}"),
        }
    }
    match info {
        Value::Array(items) => items
            .chunks(2)
            .map(|kv| kv.iter().map(flat).collect::<Vec<_>>().join(": "))
            .collect::<Vec<_>>()
            .join(", "),
        Value::Map(kv) => kv
            .iter()
            .map(|(k, v)| format!("{}: {}", flat(k), flat(v)))
            .collect::<Vec<_>>()
            .join(", "),
        other => format!("{other:?}"),
    }
}
