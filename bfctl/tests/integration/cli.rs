//! bfctl end to end: the built binary against a real redis-server with the module.

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The server binary: `$RUSTBLOOM_SERVER` (as the module's integration tests), else Debian's.
fn server_binary() -> PathBuf {
    match std::env::var_os("RUSTBLOOM_SERVER") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => PathBuf::from("/usr/bin/redis-server"),
    }
}

use crate::common::{bfctl_at, ok, BFCTL};

fn module_path() -> PathBuf {
    let p = match std::env::var_os("RUSTBLOOM_MODULE") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/release/librustbloom.so"),
    };
    assert!(
        p.exists(),
        "module not found at {}: run `make build` first or set RUSTBLOOM_MODULE",
        p.display()
    );
    p.canonicalize().unwrap()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A redis-server in its own temp dir on a unix socket, shut down on drop.
struct Server {
    dir: tempfile::TempDir,
    child: Child,
}

impl Server {
    fn start() -> Server {
        Server::start_inner(true)
    }

    fn start_without_module() -> Server {
        Server::start_inner(false)
    }

    fn start_inner(with_module: bool) -> Server {
        let dir = tempfile::Builder::new().prefix("bfctl").tempdir().unwrap();
        let sock = dir.path().join("redis.sock");
        let mut cmd = Command::new(server_binary());
        cmd.args(["--port", &free_port().to_string(), "--bind", "127.0.0.1"])
            .args([
                "--unixsocket",
                sock.to_str().unwrap(),
                "--unixsocketperm",
                "700",
            ])
            .args([
                "--dir",
                dir.path().to_str().unwrap(),
                "--logfile",
                "redis.log",
            ])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"]);
        if with_module {
            cmd.args(["--loadmodule", module_path().to_str().unwrap()]);
        }
        let child = cmd
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        let s = Server { dir, child };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if sock.exists() {
                if let Ok(mut c) = s.conn() {
                    if redis::cmd("PING").query::<String>(&mut c).is_ok() {
                        return s;
                    }
                }
            }
            assert!(Instant::now() < deadline, "redis-server did not come up");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn url(&self) -> String {
        format!(
            "redis+unix://{}",
            self.dir.path().join("redis.sock").display()
        )
    }

    fn conn(&self) -> redis::RedisResult<redis::Connection> {
        redis::Client::open(self.url())?.get_connection()
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Runs bfctl with `--url` set to this server, feeding `stdin`.
    fn bfctl(&self, args: &[&str], stdin: &[u8]) -> Output {
        bfctl_at(&self.url(), args, stdin)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(mut c) = self.conn() {
            let _: redis::RedisResult<()> = redis::cmd("SHUTDOWN").arg("NOSAVE").query(&mut c);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn fails(out: &Output) -> String {
    assert!(!out.status.success(), "bfctl should have failed");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn lines(range: std::ops::Range<u32>) -> String {
    range.map(|i| format!("item-{i}\n")).collect()
}

fn card(s: &Server, key: &str) -> i64 {
    redis::cmd("BF.CARD")
        .arg(key)
        .query(&mut s.conn().unwrap())
        .unwrap()
}

fn mexists(s: &Server, key: &str, items: &[String]) -> Vec<bool> {
    redis::cmd("BF.MEXISTS")
        .arg(key)
        .arg(items)
        .query(&mut s.conn().unwrap())
        .unwrap()
}

/// The number before `word` in a summary line.
fn count_before(text: &str, word: &str) -> u64 {
    let i = text
        .find(word)
        .unwrap_or_else(|| panic!("{word:?} not in {text:?}"));
    text[..i]
        .split_whitespace()
        .last()
        .unwrap()
        .trim_matches(',')
        .parse()
        .unwrap()
}

#[test]
fn load_from_file_and_stdin_counts_new_and_present() {
    let s = Server::start();
    let file = s.path("items.txt");
    std::fs::write(&file, lines(0..5000)).unwrap();
    let out = ok(&s.bfctl(
        &[
            "load",
            "urls",
            file.to_str().unwrap(),
            "--capacity",
            "10000",
            "--error",
            "0.001",
            "--batch",
            "100",
            "--pipeline",
            "4",
        ],
        b"",
    ));
    assert_eq!(count_before(&out, "items"), 5000, "{out}");
    let new = count_before(&out, "new");
    assert!(new >= 4990, "{out}");
    assert_eq!(new + count_before(&out, "already present"), 5000);
    assert_eq!(card(&s, "urls") as u64, new);
    // --capacity/--error reserved the key before loading.
    let cap: Vec<i64> = redis::cmd("BF.INFO")
        .arg("urls")
        .arg("CAPACITY")
        .query(&mut s.conn().unwrap())
        .unwrap();
    assert_eq!(cap, vec![10000]);
    let all: Vec<String> = (0..5000).map(|i| format!("item-{i}")).collect();
    assert!(mexists(&s, "urls", &all).iter().all(|&b| b));

    // Again through stdin (`-`), with CRLF line ends: everything is already there.
    let crlf = lines(0..5000).replace('\n', "\r\n");
    let out = ok(&s.bfctl(&["load", "urls", "-"], crlf.as_bytes()));
    assert_eq!(count_before(&out, "new"), 0, "{out}");
    assert_eq!(count_before(&out, "already present"), 5000, "{out}");
    // No FILE argument reads stdin too; an empty input is fine.
    let out = ok(&s.bfctl(&["load", "urls"], b""));
    assert_eq!(count_before(&out, "items"), 0, "{out}");
}

#[test]
fn load_reports_a_full_nonscaling_filter() {
    let s = Server::start();
    let mut c = s.conn().unwrap();
    let _: () = redis::cmd("BF.RESERVE")
        .arg("small")
        .arg(0.01)
        .arg(10)
        .arg("NONSCALING")
        .query(&mut c)
        .unwrap();
    let err = fails(&s.bfctl(&["load", "small", "--batch", "7"], lines(0..100).as_bytes()));
    assert!(err.contains("non scaling filter is full"), "{err}");
    assert!(err.contains("load stopped"), "{err}");
}

#[test]
fn load_refuses_shape_options_without_a_capacity_and_creates_nothing() {
    let s = Server::start();
    for options in [
        &["--error", "0.001"][..],
        &["--nonscaling"],
        &["--expansion", "4"],
    ] {
        let mut args = vec!["load", "sized"];
        args.extend_from_slice(options);
        let err = fails(&s.bfctl(&args, lines(0..10).as_bytes()));
        assert!(err.contains("give --capacity"), "{options:?}: {err}");
        let exists: i64 = redis::cmd("EXISTS")
            .arg("sized")
            .query(&mut s.conn().unwrap())
            .unwrap();
        assert_eq!(exists, 0, "{options:?} created the filter");
    }
    // With no option at all, the first item's BF.INSERT creates it with the server's defaults.
    // Seed 0 (`bf.seed-mode fixed`): with a random seed one of the 10 items now and then reads
    // as present by chance in the filter of 100 at 1% (a count of 4 came out one short for about
    // 6 seeds in a million), and the count would be one short.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("bf.seed-mode")
        .arg("fixed")
        .query(&mut s.conn().unwrap())
        .unwrap();
    ok(&s.bfctl(&["load", "sized"], lines(0..10).as_bytes()));
    assert_eq!(card(&s, "sized"), 10);
}

#[test]
fn dedup_prints_only_unseen_lines_in_order() {
    let s = Server::start();
    // Repeats within one batch, across batches, and of lines seen in an earlier run.
    let mut input = String::new();
    for i in 0..3000u32 {
        input.push_str(&format!("line-{}\n", i % 1000));
        if i % 7 == 0 {
            input.push_str(&format!("line-{}\n", i % 1000)); // immediate repeat, same batch
        }
    }
    // A fixed seed and a low error rate make the run deterministic and free of false positives.
    let _: () = redis::cmd("BF.RESERVE")
        .arg("seen")
        .arg(0.0001)
        .arg(10000)
        .arg("SEED")
        .arg(1)
        .query(&mut s.conn().unwrap())
        .unwrap();
    let out = ok(&s.bfctl(&["dedup", "seen", "--batch", "64"], input.as_bytes()));
    let got: Vec<&str> = out.lines().collect();
    let want: Vec<String> = (0..1000).map(|i| format!("line-{i}")).collect();
    assert_eq!(got.len(), 1000);
    let mut last = None;
    for g in &got {
        let n: usize = g.strip_prefix("line-").unwrap().parse().unwrap();
        assert!(last.is_none_or(|l| n > l), "out of order or repeated: {g}");
        last = Some(n);
        assert_eq!(want[n], *g);
    }
    // A second run over the same lines prints nothing.
    let again = ok(&s.bfctl(&["dedup", "seen"], input.as_bytes()));
    assert_eq!(again, "");
    // New lines mixed in come through; a final line without a newline too, as it was.
    let mixed = "line-5\nfresh-1\nline-6\nfresh-1\nfresh-2";
    let out = ok(&s.bfctl(&["dedup", "seen", "--batch", "1000"], mixed.as_bytes()));
    assert_eq!(out, "fresh-1\nfresh-2");
}

#[test]
fn dedup_copies_its_lines_byte_for_byte() {
    let s = Server::start();
    // CRLF and LF lines, a lone \r inside a line, and a last line without an end: every new
    // line comes out exactly as it went in; "a\r\n" and "a\n" are one item.
    let input: &[u8] = b"a\r\nb\nx\ry\r\na\nb\r\n\r\n\nc";
    for (batch, pipeline) in [("1", "1"), ("1000", "8")] {
        let name = format!("exact{batch}");
        let out = s.bfctl(
            &[
                "dedup",
                &name,
                "--capacity",
                "1000",
                "--error",
                "1e-9",
                "--batch",
                batch,
                "--pipeline",
                pipeline,
            ],
            input,
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "a\r\nb\nx\ry\r\n\r\nc",
            "--batch {batch} --pipeline {pipeline}"
        );
    }
}

#[test]
fn dedup_names_a_missing_partition() {
    let s = Server::start();
    ok(&s.bfctl(
        &["reserve", "parts", "0.01", "1000", "--partitions", "4"],
        b"",
    ));
    let mut conn = rustbloom_client::Client::open(&s.url())
        .unwrap()
        .connect()
        .unwrap();
    let f = rustbloom_client::Filter::discover(&mut conn, b"parts")
        .unwrap()
        .unwrap();
    let keys = f.partitioning().unwrap().keys.clone();
    for key in &keys {
        let _: i64 = redis::cmd("DEL")
            .arg(key.as_slice())
            .query(&mut s.conn().unwrap())
            .unwrap();
    }
    let err = fails(&s.bfctl(&["dedup", "parts"], lines(0..100).as_bytes()));
    // The contract's sentence (docs/partitions.md, "One contract").
    let named = keys.iter().enumerate().any(|(i, k)| {
        err.contains(&format!(
            "partition {i} of \"parts\" is missing (key \"{}\"): restore it or recreate the \
             filter",
            String::from_utf8_lossy(k)
        ))
    });
    assert!(named, "{err}");
    assert!(err.contains("0 lines answered"), "{err}");
    // Nothing was recreated.
    for key in &keys {
        let n: i64 = redis::cmd("EXISTS")
            .arg(key.as_slice())
            .query(&mut s.conn().unwrap())
            .unwrap();
        assert_eq!(n, 0);
    }
}

#[test]
fn dedup_refuses_a_missing_filter_without_capacity_and_reserves_it_with_one() {
    let s = Server::start();
    let err = fails(&s.bfctl(&["dedup", "k"], b"a\n"));
    assert!(err.contains("--capacity"), "{err}");
    let exists: i64 = redis::cmd("EXISTS")
        .arg("k")
        .query(&mut s.conn().unwrap())
        .unwrap();
    assert_eq!(exists, 0, "a refused dedup created the filter");
    let out = ok(&s.bfctl(
        &[
            "dedup",
            "k",
            "--batch",
            "1",
            "--capacity",
            "5000",
            "--error",
            "0.001",
        ],
        b"a\nb\na\n\nc\n\nb\n",
    ));
    assert_eq!(out, "a\nb\n\nc\n");
    let info = ok(&s.bfctl(&["info", "k"], b""));
    assert_eq!(field(&info, "capacity:"), "5000");
    assert!(info.contains("error rate:        0.001"), "{info}");
    // Once it exists the options are not needed (and a second --capacity changes nothing).
    let out = ok(&s.bfctl(&["dedup", "k", "--capacity", "7"], b"c\nd\n"));
    assert_eq!(out, "d\n");
    assert_eq!(
        field(&ok(&s.bfctl(&["info", "k"], b"")), "capacity:"),
        "5000"
    );
}

/// The lines of `input` seen for the first time, in order.
fn distinct_in_order(input: &str) -> String {
    let mut seen = std::collections::HashSet::new();
    let mut out = String::new();
    for l in input.lines() {
        if seen.insert(l) {
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

#[test]
fn dedup_prints_exactly_the_distinct_lines_whatever_the_batches_in_flight() {
    let s = Server::start();
    // 20,000 lines of 6,000 distinct ones, some long, some with \r\n, some empty.
    let mut input = String::new();
    let mut x: u64 = 7;
    for _ in 0..20_000 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let n = (x >> 33) % 6000;
        if n.is_multiple_of(97) {
            input.push_str(&format!("{}\n", "long-".repeat(40 + (n % 50) as usize)));
        } else if n == 1 {
            input.push('\n');
        } else {
            input.push_str(&format!("w{n}\n"));
        }
    }
    let want = distinct_in_order(&input);
    for (i, (batch, pipeline)) in [("1000", "8"), ("7", "1"), ("100", "64")]
        .iter()
        .enumerate()
    {
        let name = format!("d{i}");
        let _: () = redis::cmd("BF.RESERVE")
            .arg(&name)
            .arg(0.000001)
            .arg(10000)
            .arg("SEED")
            .arg(1)
            .query(&mut s.conn().unwrap())
            .unwrap();
        let out = ok(&s.bfctl(
            &["dedup", &name, "--batch", batch, "--pipeline", pipeline],
            input.as_bytes(),
        ));
        assert!(out == want, "--batch {batch} --pipeline {pipeline}");
    }
    // From a file as from stdin, and a file with \r\n endings gives the same lines.
    let f = s.path("words");
    std::fs::write(&f, input.replace('\n', "\r\n")).unwrap();
    let out = ok(&s.bfctl(
        &[
            "dedup",
            "fromfile",
            f.to_str().unwrap(),
            "--capacity",
            "10000",
            "--error",
            "1e-6",
        ],
        b"",
    ));
    assert!(out == want.replace('\n', "\r\n"));
}

#[test]
fn dedup_answers_a_slow_stream_line_by_line() {
    use std::io::{BufRead, BufReader};
    let s = Server::start();
    let mut child = Command::new(BFCTL)
        .args(["--url", &s.url(), "dedup", "tail", "--capacity", "100"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    let deadline = std::time::Duration::from_secs(30);
    // Each line must come out while the input is still open.
    stdin.write_all(b"first\n").unwrap();
    stdin.flush().unwrap();
    assert_eq!(rx.recv_timeout(deadline).unwrap(), "first");
    stdin.write_all(b"first\nsecond\n").unwrap();
    stdin.flush().unwrap();
    assert_eq!(rx.recv_timeout(deadline).unwrap(), "second");
    drop(stdin);
    assert!(child.wait().unwrap().success());
    reader.join().unwrap();
    assert!(rx.try_recv().is_err(), "nothing more");
}

#[test]
fn dump_and_restore_round_trip() {
    let s = Server::start();
    let mut c = s.conn().unwrap();
    let _: () = redis::cmd("BF.RESERVE")
        .arg("src")
        .arg(0.001)
        .arg(200000)
        .arg("SEED")
        .arg(42)
        .query(&mut c)
        .unwrap();
    ok(&s.bfctl(&["load", "src"], lines(0..20000).as_bytes()));
    let dump = s.path("src.bfdump");
    ok(&s.bfctl(&["dump", "src", dump.to_str().unwrap()], b""));
    let bytes = std::fs::read(&dump).unwrap();
    assert_eq!(&bytes[..8], b"BFCTLDMP");
    assert_eq!(u32::from_le_bytes(bytes[8..12].try_into().unwrap()), 1);

    ok(&s.bfctl(&["restore", "dst", dump.to_str().unwrap()], b""));
    let digest = |k: &str, c: &mut redis::Connection| -> Vec<i64> {
        redis::cmd("BF.INFO")
            .arg(k)
            .query::<Vec<redis::Value>>(c)
            .unwrap()
            .iter()
            .filter_map(|v| match v {
                redis::Value::Int(i) => Some(*i),
                _ => None,
            })
            .collect()
    };
    assert_eq!(digest("src", &mut c), digest("dst", &mut c));
    let all: Vec<String> = (0..20000).map(|i| format!("item-{i}")).collect();
    assert!(mexists(&s, "dst", &all).iter().all(|&b| b));
    assert_eq!(card(&s, "dst"), card(&s, "src"));

    // Restoring onto an existing key is refused unless --force.
    let err = fails(&s.bfctl(&["restore", "dst", dump.to_str().unwrap()], b""));
    assert!(err.contains("already exists"), "{err}");
    ok(&s.bfctl(&["restore", "dst", dump.to_str().unwrap(), "--force"], b""));
    assert_eq!(card(&s, "dst"), card(&s, "src"));

    // Through stdout/stdin as well.
    let out = s.bfctl(&["dump", "src", "-"], b"");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    ok(&s.bfctl(&["restore", "viapipe", "-"], &out.stdout));
    assert_eq!(card(&s, "viapipe"), card(&s, "src"));

    // A truncated or foreign file is refused and leaves no half-loaded key behind.
    let cut = s.path("cut.bfdump");
    std::fs::write(&cut, &bytes[..bytes.len() - 100]).unwrap();
    let err = fails(&s.bfctl(&["restore", "cut", cut.to_str().unwrap()], b""));
    assert!(err.contains("truncated"), "{err}");
    let exists: i64 = redis::cmd("EXISTS").arg("cut").query(&mut c).unwrap();
    assert_eq!(exists, 0);
    let junk = s.path("junk");
    std::fs::write(&junk, b"hello world, not a dump file").unwrap();
    let err = fails(&s.bfctl(&["restore", "j", junk.to_str().unwrap()], b""));
    assert!(err.contains("not a bfctl dump file"), "{err}");
    // A corrupted chunk is refused by the module; the key is removed again.
    let mut bad = bytes.clone();
    let n = bad.len();
    bad[n - 200] ^= 0xff;
    let badf = s.path("bad.bfdump");
    std::fs::write(&badf, &bad).unwrap();
    let err = fails(&s.bfctl(&["restore", "bad", badf.to_str().unwrap()], b""));
    assert!(err.contains("BF.LOADCHUNK"), "{err}");
    let exists: i64 = redis::cmd("EXISTS").arg("bad").query(&mut c).unwrap();
    assert_eq!(exists, 0);

    // Dumping a missing key fails and leaves no file.
    let none = s.path("none.bfdump");
    let err = fails(&s.bfctl(&["dump", "missing", none.to_str().unwrap()], b""));
    assert!(err.contains("not found"), "{err}");
    assert!(!none.exists());
}

fn field(out: &str, name: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix(name))
        .unwrap_or_else(|| panic!("{name} not in {out}"))
        .trim()
        .to_string()
}

#[test]
fn info_reports_layers_and_estimated_rate() {
    let s = Server::start();
    let mut c = s.conn().unwrap();
    let _: () = redis::cmd("BF.RESERVE")
        .arg("k")
        .arg(0.001)
        .arg(1000)
        .arg("SEED")
        .arg(7)
        .query(&mut c)
        .unwrap();
    ok(&s.bfctl(&["load", "k"], lines(0..3500).as_bytes()));
    let out = ok(&s.bfctl(&["info", "k"], b""));
    assert_eq!(field(&out, "capacity:"), "7000", "{out}"); // 1000 + 2000 + 4000
    let items: u64 = field(&out, "items:").parse().unwrap();
    assert!((3490..=3500).contains(&items), "{out}");
    assert!(
        field(&out, "layers:").starts_with("3 (expansion 2)"),
        "{out}"
    );
    assert!(
        field(&out, "error rate:").starts_with("0.001 (from the filter's header)"),
        "{out}"
    );
    let size: i64 = redis::cmd("BF.INFO")
        .arg("k")
        .arg("SIZE")
        .query::<Vec<i64>>(&mut c)
        .unwrap()[0];
    assert!(
        field(&out, "bytes:").starts_with(&size.to_string()),
        "{out}"
    );
    let bpi: f64 = field(&out, "bits per item:").parse().unwrap();
    assert!(bpi > 10.0 && bpi < 60.0, "{out}");
    let fpr: f64 = field(&out, "estimated FPR now:")
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    // Layers 0 and 1 are full (~0.05% + ~0.025%), layer 2 partly: under the requested 0.1%.
    assert!(fpr > 0.0005 && fpr < 0.001, "{out}");
    // Per-layer table: three rows.
    let rows = out
        .lines()
        .skip_while(|l| !l.starts_with("layer "))
        .skip(1)
        .count();
    assert_eq!(rows, 3, "{out}");

    // --scan measures the fill; it agrees with the estimate closely.
    let scanned = ok(&s.bfctl(&["info", "k", "--scan"], b""));
    assert!(scanned.contains("measured fill"), "{scanned}");
    let f2: f64 = field(&scanned, "estimated FPR now:")
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!((f2 / fpr - 1.0).abs() < 0.5, "{fpr} vs {f2}");

    // Non-scaling and missing keys.
    let _: () = redis::cmd("BF.RESERVE")
        .arg("ns")
        .arg(0.01)
        .arg(100)
        .arg("NONSCALING")
        .query(&mut c)
        .unwrap();
    let out = ok(&s.bfctl(&["info", "ns"], b""));
    assert!(field(&out, "layers:").contains("non-scaling"), "{out}");
    assert!(field(&out, "bits per item:").contains("empty"), "{out}");
    let err = fails(&s.bfctl(&["info", "nope"], b""));
    assert!(err.contains("not found"), "{err}");
}

#[test]
fn plan_matches_what_the_module_reserves() {
    let s = Server::start();
    let out = ok(&bfctl_at(
        "redis://127.0.0.1:1",
        &["plan", "--items", "100000", "--error", "0.001"],
        b"",
    ));
    assert!(out.starts_with("BF.RESERVE key 0.001 100000\n"), "{out}");
    let line = out.lines().find(|l| l.starts_with("first layer:")).unwrap();
    let bytes: u64 = line.split_whitespace().nth(2).unwrap().parse().unwrap();
    let mut c = s.conn().unwrap();
    let _: () = redis::cmd("BF.RESERVE")
        .arg("p")
        .arg(0.001)
        .arg(100000)
        .query(&mut c)
        .unwrap();
    let size: i64 = redis::cmd("BF.INFO")
        .arg("p")
        .arg("SIZE")
        .query::<Vec<i64>>(&mut c)
        .unwrap()[0];
    let info = ok(&s.bfctl(&["info", "p"], b""));
    // `info` shows the bytes of bits; plan's first layer must be exactly that.
    assert!(
        info.contains(&format!("({bytes} of them bits)")),
        "plan {bytes}, info {info}"
    );
    assert!(size as u64 >= bytes);
    assert!(line.contains("hashes"));
    // The table: rows up to full capacity, then growth rows for a scaling filter.
    assert!(out.contains("(layers full)"));
    let full = out.lines().find(|l| l.starts_with("100000 ")).unwrap();
    let rate: f64 = full.split_whitespace().nth(4).unwrap().parse().unwrap();
    assert!(rate <= 0.0005 * 1.0001 && rate > 0.0004, "{full}");
    assert!(out.lines().any(|l| l.starts_with("300000 ")), "{out}");

    let ns = ok(&bfctl_at(
        "redis://127.0.0.1:1",
        &["plan", "--items", "1000", "--error", "0.01", "--nonscaling"],
        b"",
    ));
    assert!(
        ns.contains("NONSCALING") && ns.contains("non scaling filter is full"),
        "{ns}"
    );
    let err = fails(&bfctl_at(
        "redis://127.0.0.1:1",
        &["plan", "--items", "10", "--error", "2"],
        b"",
    ));
    assert!(err.contains("--error"), "{err}");
    let err = fails(&bfctl_at(
        "redis://127.0.0.1:1",
        &["plan", "--items", "0", "--error", "0.1"],
        b"",
    ));
    assert!(err.contains("--items"), "{err}");
}

#[test]
fn plan_with_partitions_shows_each_partition_and_the_total() {
    let out = ok(&bfctl_at(
        "redis://127.0.0.1:1",
        &[
            "plan",
            "--items",
            "1000000000",
            "--error",
            "1e-9",
            "--nonscaling",
            "--partitions",
            "16",
        ],
        b"",
    ));
    let number = |prefix: &str| -> u64 {
        let line = out.lines().find(|l| l.starts_with(prefix)).unwrap();
        line[prefix.len()..]
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let each = number("per partition:");
    let total = number("all 16:");
    assert_eq!(total, 16 * each, "{out}");
    assert!(each < 1 << 30, "{out}");
    assert!(
        out.contains("each partition is under the default bf.max-filter-bytes"),
        "{out}"
    );
    // The partition's capacity is docs/partitions.md's, and its table is that of a plain
    // filter of that capacity.
    let c = rustbloom_client::routing::partition_capacity(1_000_000_000, 16, true);
    assert!(
        out.contains(&format!("16 partitions of {c} items each")),
        "{out}"
    );
    let plain = ok(&bfctl_at(
        "redis://127.0.0.1:1",
        &[
            "plan",
            "--items",
            &c.to_string(),
            "--error",
            "1e-9",
            "--nonscaling",
        ],
        b"",
    ));
    let first = |text: &str| {
        text.lines()
            .find(|l| l.starts_with("first layer:"))
            .unwrap()
            .to_string()
    };
    assert_eq!(first(&out), first(&plain));
    assert!(first(&plain).contains(&format!("{each} bytes")));
    // Unpartitioned, the same filter is over the cap: that is what partitions are for.
    let whole = ok(&bfctl_at(
        "redis://127.0.0.1:1",
        &[
            "plan",
            "--items",
            "1000000000",
            "--error",
            "1e-9",
            "--nonscaling",
        ],
        b"",
    ));
    let bytes: u64 = first(&whole)
        .split_whitespace()
        .nth(2)
        .unwrap()
        .parse()
        .unwrap();
    assert!(bytes > 1 << 30);
    // Few partitions of a filter too big for one: each is flagged.
    let over = ok(&bfctl_at(
        "redis://127.0.0.1:1",
        &[
            "plan",
            "--items",
            "1000000000",
            "--error",
            "1e-9",
            "--nonscaling",
            "--partitions",
            "2",
        ],
        b"",
    ));
    assert!(
        over.contains("each partition is over the default bf.max-filter-bytes"),
        "{over}"
    );
    let err = fails(&bfctl_at(
        "redis://127.0.0.1:1",
        &[
            "plan",
            "--items",
            "1000",
            "--error",
            "0.01",
            "--partitions",
            "0",
        ],
        b"",
    ));
    assert!(err.contains("--partitions"), "{err}");
}

#[test]
fn info_and_plan_show_window_filters() {
    let s = Server::start();
    let mut c = s.conn().unwrap();
    let _: () = redis::cmd("BF.RESERVE")
        .arg("w")
        .arg(0.01)
        .arg(1000)
        .arg("WINDOW")
        .arg(60000)
        .arg("SEED")
        .arg(7)
        .query(&mut c)
        .unwrap();
    // 300 items at once land in one generation's slot, sized for a third of the capacity.
    ok(&s.bfctl(&["load", "w"], lines(0..300).as_bytes()));
    let info: Vec<redis::Value> = redis::cmd("BF.INFO").arg("w").query(&mut c).unwrap();
    let info_field = |name: &str| -> i64 {
        let at = info
            .iter()
            .position(|v| *v == redis::Value::SimpleString(name.into()))
            .or_else(|| {
                info.iter()
                    .position(|v| *v == redis::Value::BulkString(name.as_bytes().to_vec()))
            })
            .unwrap_or_else(|| panic!("{name} not in {info:?}"));
        redis::from_redis_value(info[at + 1].clone()).unwrap()
    };
    let out = ok(&s.bfctl(&["info", "w"], b""));
    assert!(field(&out, "kind:").starts_with("sliding window"), "{out}");
    assert!(
        field(&out, "window:").starts_with("60000 ms, in generations of 20000 ms (4 slots)"),
        "{out}"
    );
    let last = info_field("Last write (ms)");
    assert!(
        field(&out, "last write:").starts_with(&format!("{last} (Unix ms)")),
        "{out}"
    );
    assert!(field(&out, "capacity:").starts_with("1000 "), "{out}");
    let items: u64 = field(&out, "items:")
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(items as i64, card(&s, "w"));
    assert!((290..=300).contains(&items), "{out}");
    let size = info_field("Size");
    assert!(
        field(&out, "bytes:").starts_with(&size.to_string()),
        "{out}"
    );
    assert!(
        field(&out, "error rate:").starts_with("0.01 (from the filter's header)"),
        "{out}"
    );
    let fpr: f64 = field(&out, "estimated FPR now:")
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    // One slot holding its share: about its 0.9·ε/4.
    assert!(fpr > 0.0 && fpr < 0.005, "{out}");
    // One row per slot; the items of the live slots add up to BF.CARD.
    let rows: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("slot "))
        .skip(1)
        .collect();
    assert_eq!(rows.len(), 4, "{out}");
    let live: u64 = rows
        .iter()
        .filter(|r| r.split_whitespace().nth(2) == Some("live"))
        .map(|r| r.split_whitespace().nth(3).unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(live, items, "{out}");
    // --scan counts the set bits of each slot instead.
    let scanned = ok(&s.bfctl(&["info", "w", "--scan"], b""));
    assert!(scanned.contains("measured fill"), "{scanned}");
    let measured: f64 = field(&scanned, "estimated FPR now:")
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!((measured / fpr - 1.0).abs() < 0.5, "{fpr} vs {measured}");

    // plan --window: the shape the module reserves, against a classic filter.
    let plan = ok(&bfctl_at(
        "redis://127.0.0.1:1",
        &[
            "plan", "--items", "1000", "--error", "0.01", "--window", "60000",
        ],
        b"",
    ));
    assert!(
        plan.starts_with("BF.RESERVE key 0.01 1000 WINDOW 60000\n"),
        "{plan}"
    );
    let memory = field(&plan, "memory:");
    let bits_bytes = memory.split_whitespace().next().unwrap();
    assert!(
        out.contains(&format!("({bits_bytes} of them bits)")),
        "plan {memory}, info {out}"
    );
    let ratio: f64 = field(&plan, "classic:")
        .rsplit(' ')
        .next()
        .unwrap()
        .trim_end_matches('x')
        .parse()
        .unwrap();
    assert!(ratio > 1.0 && ratio <= 2.1, "{plan}");
    let capacity_row = plan.lines().find(|l| l.ends_with("(capacity)")).unwrap();
    let rate: f64 = capacity_row
        .split_whitespace()
        .nth(2)
        .unwrap()
        .parse()
        .unwrap();
    assert!(rate <= 0.01 && rate > 0.005, "{capacity_row}");
    for (args, complaint) in [
        (&["--window", "3"][..], "--window"),
        (&["--window", "1000", "--nonscaling"], "cannot be used with"),
        (
            &["--window", "1000", "--expansion", "4"],
            "cannot be used with",
        ),
    ] {
        let mut all = vec!["plan", "--items", "1000", "--error", "0.01"];
        all.extend(args);
        let err = fails(&bfctl_at("redis://127.0.0.1:1", &all, b""));
        assert!(err.contains(complaint), "{args:?}: {err}");
    }
}

#[test]
fn clear_errors_without_server_or_module() {
    let port = free_port();
    let url = format!("redis://127.0.0.1:{port}");
    for args in [
        &["load", "k"][..],
        &["dedup", "k"],
        &["info", "k"],
        &["dump", "k", "/dev/null"],
    ] {
        let err = fails(&bfctl_at(&url, args, b"a\n"));
        assert!(
            err.contains("cannot connect") && err.contains("is redis-server running"),
            "{err}"
        );
    }
    let s = Server::start_without_module();
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("d");
    for args in [
        vec!["load", "k"],
        vec!["dedup", "k"],
        vec!["info", "k"],
        vec!["dump", "k", f.to_str().unwrap()],
    ] {
        let err = fails(&s.bfctl(&args, b"a\n"));
        assert!(
            err.contains("rustbloom module is not loaded"),
            "{args:?}: {err}"
        );
    }
    let err = fails(&bfctl_at("not-a-url", &["info", "k"], b""));
    assert!(err.contains("invalid server URL"), "{err}");
}

#[test]
fn wrong_type_key_is_reported() {
    let s = Server::start();
    let mut c = s.conn().unwrap();
    let _: () = redis::cmd("SET").arg("str").arg("x").query(&mut c).unwrap();
    let err = fails(&s.bfctl(&["load", "str"], b"a\n"));
    assert!(err.contains("WRONGTYPE"), "{err}");
    let err = fails(&s.bfctl(&["dedup", "str"], b"a\n"));
    assert!(err.contains("WRONGTYPE"), "{err}");
}

/// `bfctl info` of one partition's key reads the filter's header inside the partition's identity:
/// a window partition reports its slots, a scalable one its layers from the header, not rebuilt.
#[test]
fn info_describes_one_partition_of_either_kind() {
    let s = Server::start();
    ok(&s.bfctl(
        &[
            "reserve",
            "w",
            "0.01",
            "1000",
            "--window",
            "60000",
            "--partitions",
            "4",
        ],
        b"",
    ));
    ok(&s.bfctl(
        &["reserve", "p", "0.001", "10000", "--partitions", "2"],
        b"",
    ));
    let mut c = s.conn().unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*/0").query(&mut c).unwrap();
    let key_of = |name: &str| {
        keys.iter()
            .find(|k| k.ends_with(&format!("}}{name}/0")))
            .unwrap_or_else(|| panic!("no partition 0 of {name} in {keys:?}"))
            .clone()
    };
    let window = ok(&s.bfctl(&["info", &key_of("w")], b""));
    assert!(
        field(&window, "kind:").starts_with("sliding window"),
        "{window}"
    );
    assert!(field(&window, "capacity:").starts_with("250 "), "{window}");
    let layers = ok(&s.bfctl(&["info", &key_of("p")], b""));
    assert_eq!(field(&layers, "capacity:"), "5000", "{layers}");
    assert!(
        field(&layers, "error rate:").starts_with("0.001 (from the filter's header)"),
        "{layers}"
    );
}
