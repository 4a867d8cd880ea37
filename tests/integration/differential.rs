//! A write the primary accepted is never dropped or changed on its way to a replica, an AOF
//! replay or a reload: one seeded random workload of every write the module takes runs on a
//! primary (`appendonly yes`) with one replica; afterwards the replica, a fresh server loading a
//! copy of the primary's AOF, and the primary after `DEBUG RELOAD` must each hold the primary's
//! keys, value for value (`DEBUG DIGEST-VALUE`, the module's whole RDB encoding of the value).
//! The replica and the AOF server run the test-hooks build, whose sizing differs, and draw random
//! seeds while the primary's default seed is fixed: they must depend on what they were sent only.
//!
//! The workload: creations of every kind (scalable, NONSCALING, EXPANSION x, WINDOW of 50–200 ms
//! and longer, explicit seeds, creation by the first add with the primary's defaults changed),
//! filters migrated from RedisBloom (BF.LOADCHUNK of its SCANDUMP streams, RESTORE of its DUMP
//! payloads of encodings 0 to 4, from the core's fixtures), growth through small capacities,
//! BF.ADD/MADD/INSERT stopped at `bf.max-filter-bytes` (lowered and raised on the primary only:
//! it limits clients, never a replayed write), window writes across generations (BF.ADDAT and
//! real sleeps), COPY, RENAME, DEL, DUMP/RESTORE, MULTI/EXEC, EVAL, BF.LOADCHUNK of the module's
//! own SCANDUMP streams (whole and half-way), partitions and descriptors of partitioned filters
//! (created, and descriptors RESTOREd from forged payloads whose fields may disagree), and AOF
//! rewrites while writes go on.
//!
//! Seeds: [`FIXED_SEEDS`]; `RUSTBLOOM_DIFF_SEED=7,8,9` runs those instead and
//! `RUSTBLOOM_DIFF_OPS=n` sets the operations per seed; `RUSTBLOOM_DIFF_LOG=1` prints every
//! operation (run with `--nocapture`). A difference is reported with its seed, the key, both
//! values and the log of every operation on that key (and its sources).

use std::collections::{BTreeMap, HashMap};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use redis::{Connection, Value};
use rustbloom_core::partition::{Descriptor, PartitionGrowth};
use rustbloom_testkit::payload;
use rustbloom_testkit::redisbloom::reply_text;
use rustbloom_testkit::*;

/// The seeds every run checks.
const FIXED_SEEDS: [u64; 3] = [1, 9, 12];
/// Operations per seed when `RUSTBLOOM_DIFF_OPS` is not set.
const DEFAULT_OPS: usize = 1500;
/// The keys the workload writes (few, so that operations meet on the same filters).
const KEY_POOL: usize = 12;
/// `bf.max-filter-bytes` as the module starts (1 GiB).
const DEFAULT_LIMIT: &str = "1073741824";
/// Operations of a key's log printed with a difference (the latest ones).
const LOG_LINES: usize = 80;
/// Differing keys whose logs are printed, per comparison.
const KEYS_SHOWN: usize = 6;

#[test]
fn replica_aof_and_reload_hold_every_write_the_primary_accepted() {
    let seeds: Vec<u64> = match std::env::var("RUSTBLOOM_DIFF_SEED") {
        Ok(list) if !list.trim().is_empty() => list
            .split(',')
            .map(|s| {
                s.trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("RUSTBLOOM_DIFF_SEED: {s:?} is not a u64"))
            })
            .collect(),
        _ => FIXED_SEEDS.to_vec(),
    };
    let ops = match std::env::var("RUSTBLOOM_DIFF_OPS") {
        Ok(n) if !n.trim().is_empty() => n
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("RUSTBLOOM_DIFF_OPS: {n:?} is not a count")),
        _ => DEFAULT_OPS,
    };
    let fixtures = Fixtures::load();
    let mut failures = Vec::new();
    for &seed in &seeds {
        let outcome = catch_unwind(AssertUnwindSafe(|| run_seed(seed, ops, &fixtures)));
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(report)) => failures.push(report),
            Err(panic) => {
                let text = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failures.push(format!("seed {seed}: the run panicked: {text}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} seeds diverged (rerun one with RUSTBLOOM_DIFF_SEED=<seed> \
         RUSTBLOOM_DIFF_OPS={ops}):\n\n{}",
        failures.len(),
        seeds.len(),
        failures.join("\n\n")
    );
}

// ---------------------------------------------------------------------------------------------
// RedisBloom's own streams and payloads (core/tests/fixtures/redisbloom)
// ---------------------------------------------------------------------------------------------

/// A SCANDUMP stream: (iterator, chunk) per BF.LOADCHUNK, header first.
type Stream = Vec<(i64, Vec<u8>)>;

struct Fixtures {
    /// SCANDUMP streams RedisBloom 2.8.2 wrote, as (name, (iterator, chunk) per LOADCHUNK).
    streams: Vec<(String, Stream)>,
    /// DUMP payloads of RedisBloom filters, encodings 0 to 4, as (name, payload).
    payloads: Vec<(String, Vec<u8>)>,
}

fn unhex(text: &str) -> Vec<u8> {
    if text == "-" {
        return Vec::new();
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("fixture hex"))
        .collect()
}

/// The iterators RedisBloom's SCANDUMP answered with its chunks: 1 with the header; then the
/// cursor (byte offset + 1) after each chunk.
fn with_iterators(chunks: Vec<Vec<u8>>) -> Stream {
    let mut cursor = 1i64;
    let mut out = Vec::new();
    for (i, chunk) in chunks.into_iter().enumerate() {
        if i > 0 {
            cursor += chunk.len() as i64;
        }
        out.push((cursor, chunk));
    }
    out
}

impl Fixtures {
    fn load() -> Fixtures {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("core/tests/fixtures/redisbloom");
        let mut names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("fixture dir entry").path())
            .collect();
        names.sort();
        let mut streams = Vec::new();
        let mut payloads = Vec::new();
        for path in names {
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            if path.extension().is_some_and(|e| e == "case") {
                let lines = |key: &str| -> Vec<Vec<u8>> {
                    text.lines()
                        .filter_map(|l| l.strip_prefix(key)?.strip_prefix(' '))
                        .map(unhex)
                        .collect()
                };
                for (what, chunks) in [("scandump", lines("scandump")), ("after", lines("after"))] {
                    if !chunks.is_empty() {
                        streams.push((format!("{name}/{what}"), with_iterators(chunks)));
                    }
                }
                for payload in lines("payload") {
                    payloads.push((name.clone(), payload));
                }
            } else if name == "dump_v4" {
                payloads.push((name, unhex(text.trim())));
            }
        }
        assert!(
            streams.len() >= 10 && payloads.len() == 5,
            "fixtures missing"
        );
        Fixtures { streams, payloads }
    }
}

// ---------------------------------------------------------------------------------------------
// One seed
// ---------------------------------------------------------------------------------------------

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_millis() as u64
}

/// Runs the workload of `seed` and compares; Err with the report of every difference.
fn run_seed(seed: u64, ops: usize, fixtures: &Fixtures) -> Result<(), String> {
    let rng = ChaCha8Rng::seed_from_u64(seed);
    // Odd seeds rewrite the AOF as the module's own commands, even ones as an RDB preamble.
    let preamble = if seed.is_multiple_of(2) { "yes" } else { "no" };
    let primary = start_aof(preamble);
    // The replica and the AOF server run the test-hooks build, whose sizing differs: a write
    // that reaches them without the exact shape the primary gave it shows as a difference.
    let other_build = test_hooks_module();
    let replica = Server::start_custom(&[], &other_build, &[]);
    replicate_from(&primary, &replica);
    let mut pc = primary.conn();
    // Filters created without a SEED take seed 0 on the primary, so that a seed replays the same
    // bits; the replica and the AOF server keep drawing random seeds: a creation that did not
    // carry its seed would differ there.
    raw_ok(&mut pc, &["CONFIG", "SET", "bf.seed-mode", "fixed"]);
    let mut work = Workload {
        rng,
        c: &mut pc,
        fixtures,
        log: Vec::new(),
        history: HashMap::new(),
        config_note: String::new(),
        limit: DEFAULT_LIMIT.to_string(),
        defaults: None,
        rewrites: 0,
        migrated: Vec::new(),
    };
    // One rewrite late in the run, so that it meets the filters the workload built; the writes
    // after it land in the incremental file.
    let late_rewrite = ops - ops / 5 + work.rng.random_range(0..=ops / 10);
    for op in 0..ops {
        if op == late_rewrite {
            work.rewrite();
        }
        work.step();
    }
    let Workload { log, history, .. } = work;
    let context = Context {
        seed,
        preamble,
        log,
        history,
    };

    let mut report = Vec::new();
    wait_rewrite_done(&mut pc);
    // The replica stops rather than apply a write it cannot: WAIT with a deadline, not an assert.
    let _ = raw(&mut pc, &["WAIT", "1", "30000"]);
    let mut rc = replica.conn();
    let offset = |c: &mut Connection| {
        raw(c, &["INFO", "replication"])
            .ok()
            .and_then(|v| info_field(&value_to_string(&v), "master_repl_offset"))
    };
    let offsets_meet = wait_until(Duration::from_secs(30), || {
        let po = offset(&mut pc);
        po.is_some() && po == offset(&mut rc)
    });
    let want = view(&mut pc).expect("the primary's keys");
    if std::env::var_os("RUSTBLOOM_DIFF_LOG").is_some() {
        eprintln!("seed {seed}, every operation:\n{}", context.log.join("\n"));
    }
    assert!(!want.is_empty(), "seed {seed}: the workload left no keys");

    if !offsets_meet {
        report.push(format!(
            "replica did not reach the primary's offset; replica log:\n{}",
            replica.log_tail()
        ));
    }
    match view(&mut rc) {
        Ok(got) => report.extend(context.compare("replica", &want, &got, &mut pc, &mut rc)),
        Err(e) => report.push(format!(
            "replica: {e}\nreplica log:\n{}",
            replica.log_tail()
        )),
    }
    report.extend(refusals("replica", &replica.log()));

    match Server::try_start_with_dir_copy(
        &["--appendonly", "yes"],
        &other_build,
        &primary.dir().join("appendonlydir"),
        "appendonlydir",
    ) {
        Ok(aof) => {
            let mut ac = aof.conn();
            match view(&mut ac) {
                Ok(got) => report.extend(context.compare("AOF", &want, &got, &mut pc, &mut ac)),
                Err(e) => report.push(format!("AOF: {e}\nlog:\n{}", aof.log_tail())),
            }
            report.extend(refusals("AOF", &aof.log()));
        }
        Err(e) => report.push(format!("AOF: {e}")),
    }

    let mut before = primary.conn();
    match raw(&mut pc, &["DEBUG", "RELOAD"]) {
        Ok(_) => match view(&mut pc) {
            Ok(got) => {
                report.extend(context.compare("DEBUG RELOAD", &want, &got, &mut before, &mut pc))
            }
            Err(e) => report.push(format!("DEBUG RELOAD: {e}")),
        },
        Err(e) => report.push(format!("DEBUG RELOAD: {e}\nlog:\n{}", primary.log_tail())),
    }

    if report.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "seed {seed} ({} operations, aof-use-rdb-preamble {preamble}):\n{}",
            context.log.len(),
            report.join("\n")
        ))
    }
}

/// Per key: `TYPE` and `DEBUG DIGEST-VALUE`.
fn view(c: &mut Connection) -> Result<BTreeMap<Vec<u8>, String>, String> {
    let keys = match raw(c, &["KEYS", "*"])? {
        Value::Array(keys) => keys,
        other => return Err(format!("KEYS: {other:?}")),
    };
    let mut out = BTreeMap::new();
    for key in keys {
        let Value::BulkString(key) = key else {
            return Err(format!("KEYS answered {key:?}"));
        };
        let kind = value_to_string(&rawb(c, &[b"TYPE", &key])?);
        let digest = reply_text(&rawb(c, &[b"DEBUG", b"DIGEST-VALUE", &key])?);
        out.insert(key, format!("{kind} {digest}"));
    }
    Ok(out)
}

/// The module's log lines saying it stopped rather than apply a replayed write.
fn refusals(who: &str, log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.contains("cannot apply a replicated or AOF write"))
        .map(|l| format!("{who} refused a write the primary accepted: {l}"))
        .collect()
}

struct Context {
    seed: u64,
    preamble: &'static str,
    log: Vec<String>,
    history: HashMap<Vec<u8>, Vec<usize>>,
}

impl Context {
    /// The differences of `got` (on `who`) from the primary's `want`, each with its key's log.
    fn compare(
        &self,
        who: &str,
        want: &BTreeMap<Vec<u8>, String>,
        got: &BTreeMap<Vec<u8>, String>,
        primary: &mut Connection,
        other: &mut Connection,
    ) -> Vec<String> {
        let mut differing: Vec<&Vec<u8>> = want
            .keys()
            .chain(got.keys())
            .filter(|k| want.get(*k) != got.get(*k))
            .collect();
        differing.sort();
        differing.dedup();
        let mut out = Vec::new();
        for (n, key) in differing.iter().enumerate() {
            let name = String::from_utf8_lossy(key);
            let side = |v: Option<&String>| v.cloned().unwrap_or_else(|| "(no key)".into());
            let mut text = format!(
                "seed {} [{who}] key {name}: primary {} | {who} {}",
                self.seed,
                side(want.get(*key)),
                side(got.get(*key))
            );
            if n < KEYS_SHOWN {
                let info = |c: &mut Connection| match rawb(c, &[b"BF.INFO", key]) {
                    Ok(v) => reply_text(&v),
                    Err(e) => format!("error({e})"),
                };
                text += &format!(
                    "\n  BF.INFO primary {}\n  BF.INFO {who} {}\n  operations on {name} \
                     (aof-use-rdb-preamble {}):\n{}",
                    info(primary),
                    info(other),
                    self.preamble,
                    self.key_log(key)
                );
            }
            out.push(text);
        }
        if differing.len() > KEYS_SHOWN {
            out.push(format!(
                "[{who}] {} keys differ; the logs of the first {KEYS_SHOWN} are shown",
                differing.len()
            ));
        }
        out
    }

    fn key_log(&self, key: &[u8]) -> String {
        let entries = self.history.get(key).map(Vec::as_slice).unwrap_or(&[]);
        let skip = entries.len().saturating_sub(LOG_LINES);
        let mut lines: Vec<String> = Vec::new();
        if skip > 0 {
            lines.push(format!("    … {skip} earlier operations"));
        }
        lines.extend(
            entries[skip..]
                .iter()
                .map(|&i| format!("    {}", self.log[i])),
        );
        lines.join("\n")
    }
}

// ---------------------------------------------------------------------------------------------
// The workload
// ---------------------------------------------------------------------------------------------

struct Workload<'a> {
    rng: ChaCha8Rng,
    c: &'a mut Connection,
    fixtures: &'a Fixtures,
    /// Every operation, with its reply.
    log: Vec<String>,
    /// Per key, the operations (indices into `log`) that shaped its value, its sources' included.
    history: HashMap<Vec<u8>, Vec<usize>>,
    /// The primary-only settings in force, noted on every operation.
    config_note: String,
    limit: String,
    /// `bf.error-rate`, `bf.initial-capacity`, `bf.expansion` when changed from the defaults.
    defaults: Option<(String, String, String)>,
    rewrites: u32,
    /// Keys a RedisBloom filter was migrated into (they may have changed since).
    migrated: Vec<Vec<u8>>,
}

/// An argument as the log shows it: text as is, binary in hex, long values by their length.
fn show_arg(a: &[u8]) -> String {
    if a.len() > 48 {
        format!("<{} bytes>", a.len())
    } else if !a.is_empty() && a.iter().all(|b| b.is_ascii_graphic()) {
        String::from_utf8_lossy(a).into_owned()
    } else {
        let hex: String = a.iter().map(|b| format!("{b:02x}")).collect();
        format!("x'{hex}'")
    }
}

fn show_command(args: &[Vec<u8>]) -> String {
    const SHOWN: usize = 14;
    let mut parts: Vec<String> = args.iter().take(SHOWN).map(|a| show_arg(a)).collect();
    if args.len() > SHOWN {
        parts.push(format!("… (+{} args)", args.len() - SHOWN));
    }
    parts.join(" ")
}

/// A reply as the log shows it; in arrays, runs of the same answer as `answer×count`.
fn show_reply(r: &Result<Value, String>) -> String {
    let text = match r {
        Ok(Value::Array(answers)) => {
            let mut runs: Vec<(String, usize)> = Vec::new();
            for answer in answers {
                let text = reply_text(answer);
                match runs.last_mut() {
                    Some((last, count)) if *last == text => *count += 1,
                    _ => runs.push((text, 1)),
                }
            }
            let runs: Vec<String> = runs
                .into_iter()
                .map(|(text, count)| match count {
                    1 => text,
                    _ => format!("{text}×{count}"),
                })
                .collect();
            format!("[{}]", runs.join(","))
        }
        Ok(v) => reply_text(v),
        Err(e) => format!("error({e})"),
    };
    if text.chars().count() > 240 {
        format!("{}…", text.chars().take(240).collect::<String>())
    } else {
        text
    }
}

fn b(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

const ERROR_RATES: [&str; 6] = ["0.1", "0.05", "0.01", "0.001", "0.0001", "0.000001"];
const CAPACITIES: [&str; 7] = ["1", "2", "5", "10", "50", "100", "300"];
const WINDOWS: [&str; 7] = ["50", "80", "120", "200", "1000", "5000", "60000"];
/// `bf.max-filter-bytes` values the primary switches between.
const LIMITS: [&str; 6] = ["64", "200", "1000", "5000", "20000", "100000"];

impl Workload<'_> {
    fn pick<'s>(&mut self, from: &[&'s str]) -> &'s str {
        from[self.rng.random_range(0..from.len())]
    }

    fn key(&mut self) -> String {
        format!("k{}", self.rng.random_range(0..KEY_POOL))
    }

    /// The keys on the primary now (not logged: a read).
    fn existing(&mut self) -> Vec<Vec<u8>> {
        all_keys(self.c)
    }

    /// An existing key (half the time, when there is any) or one of the pool.
    fn source_key(&mut self) -> Vec<u8> {
        let keys = self.existing();
        if !keys.is_empty() && self.rng.random_bool(0.8) {
            keys[self.rng.random_range(0..keys.len())].clone()
        } else {
            b(&self.key())
        }
    }

    /// One of the window filters on the primary, if there is any.
    fn window_key(&mut self) -> Option<String> {
        let windows: Vec<String> = self
            .existing()
            .into_iter()
            .map(|k| String::from_utf8_lossy(&k).into_owned())
            .filter(|k| window_of(self.c, k).is_some())
            .collect();
        (!windows.is_empty()).then(|| windows[self.rng.random_range(0..windows.len())].clone())
    }

    fn item(&mut self) -> Vec<u8> {
        if self.rng.random_bool(0.85) {
            format!("i{}", self.rng.random_range(0..3000)).into_bytes()
        } else {
            let mut v = vec![0u8; self.rng.random_range(0..12)];
            self.rng.fill_bytes(&mut v);
            v
        }
    }

    /// 1 to 800 items, mostly few; the large batches push layers.
    fn items(&mut self) -> Vec<Vec<u8>> {
        let n = match self.rng.random_range(0..100) {
            0..=69 => self.rng.random_range(1..=20),
            70..=94 => self.rng.random_range(20..=200),
            _ => self.rng.random_range(200..=800),
        };
        (0..n).map(|_| self.item()).collect()
    }

    /// Appends an operation to the log and to the history of `keys`.
    fn record(&mut self, text: String, keys: &[&[u8]]) -> usize {
        let i = self.log.len();
        self.log.push(format!("#{i} {text}{}", self.config_note));
        for key in keys {
            self.history.entry(key.to_vec()).or_default().push(i);
        }
        i
    }

    /// Sends one command to the primary and logs it under `keys`.
    fn send(&mut self, args: &[Vec<u8>], keys: &[&[u8]]) -> Result<Value, String> {
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        let r = rawb(self.c, &refs);
        self.record(
            format!("{} -> {}", show_command(args), show_reply(&r)),
            keys,
        );
        r
    }

    /// `dst` now holds what `src` held: its history continues `src`'s.
    fn inherit(&mut self, src: &[u8], dst: &[u8]) {
        let from = self.history.get(src).cloned().unwrap_or_default();
        self.history.insert(dst.to_vec(), from);
    }

    /// One operation. Its choices come from a generator of its own, seeded from the main one, so
    /// that operation n is drawn alike whatever the server answered before (window filters follow
    /// the clock, so their answers vary from run to run).
    fn step(&mut self) {
        let op_rng = ChaCha8Rng::seed_from_u64(self.rng.random());
        let main = std::mem::replace(&mut self.rng, op_rng);
        self.operation();
        self.rng = main;
    }

    fn operation(&mut self) {
        let key = self.key();
        match self.rng.random_range(0..100) {
            0..=4 => {
                self.maybe_delete(&key);
                let cmd = self.reserve(&key);
                let _ = self.send(&cmd, &[key.as_bytes()]);
            }
            5 => {
                self.maybe_delete(&key);
                let cmd = self.reserve_partitioned(&key);
                let _ = self.send(&cmd, &[key.as_bytes()]);
            }
            6..=9 => {
                self.maybe_delete(&key);
                let cmd = self.reserve_window(&key);
                let _ = self.send(&cmd, &[key.as_bytes()]);
            }
            10..=15 => self.grow_at_limit(),
            16..=42 => {
                let cmd = self.bf_write(&key);
                let _ = self.send(&cmd, &[&cmd[1]]);
            }
            43..=46 => self.set_limit(),
            47..=48 => self.set_defaults(),
            49..=51 => self.copy(&key),
            52..=53 => self.rename(&key),
            54..=55 => {
                let _ = self.send(&[b("DEL"), b(&key)], &[key.as_bytes()]);
            }
            56..=60 => self.multi(),
            61..=64 => self.eval(),
            65..=68 => self.own_loadchunk(&key),
            69..=71 => self.redisbloom_loadchunk(&key),
            72..=74 => self.redisbloom_restore(&key),
            75 => self.own_restore(&key),
            76 | 83 => {
                // A key of its own, which other writes rarely replace: most meet a rewrite.
                let dst = format!("d{}", self.log.len());
                self.forged_descriptor_restore(&dst);
            }
            // Two rewrites drawn per seed at most, besides the late one.
            77 if self.rewrites < 2 => {
                self.rewrites += 1;
                self.rewrite();
            }
            78 => self.crafted_loadchunk(&key),
            79..=82 => {
                let ms = self.rng.random_range(2..=40);
                std::thread::sleep(Duration::from_millis(ms));
            }
            _ => {
                let key = self.window_key().unwrap_or(key);
                let cmd = self.addat(&key);
                let _ = self.send(&cmd, &[key.as_bytes()]);
            }
        }
    }

    /// Half the time, DEL `key` first: keys come and go, filled filters leave.
    fn maybe_delete(&mut self, key: &str) {
        if self.rng.random_bool(0.5) {
            let _ = self.send(&[b("DEL"), b(key)], &[key.as_bytes()]);
        }
    }

    /// `bf.max-filter-bytes` set a little above an existing filter's size, then a batch large
    /// enough to need a new layer: the primary stops the batch at the limit.
    fn grow_at_limit(&mut self) {
        let key = if !self.migrated.is_empty() && self.rng.random_bool(0.7) {
            self.migrated[self.rng.random_range(0..self.migrated.len())].clone()
        } else {
            self.source_key()
        };
        let size = match rawb(self.c, &[b"BF.INFO", &key, b"SIZE"]) {
            Ok(Value::Array(a)) => match a.first() {
                Some(Value::Int(size)) => *size,
                _ => return,
            },
            Ok(Value::Int(size)) => size,
            _ => return,
        };
        self.set_limit_to(&(size + size / 4).max(64).to_string());
        let n = self.rng.random_range(100..=1500);
        let verb = self.pick(&["BF.MADD", "BF.INSERT", "BF.ADD"]);
        let mut cmd = vec![b(verb), key.clone()];
        if verb == "BF.ADD" {
            // One by one: the add that needs the layer is refused, the ones before stay.
            for _ in 0..n {
                let cmd = vec![b(verb), key.clone(), self.item()];
                let refs: Vec<&[u8]> = cmd.iter().map(Vec::as_slice).collect();
                if rawb(self.c, &refs).is_err() {
                    let _ = self.send(&cmd, &[&key]);
                    return;
                }
            }
            self.record(
                format!(
                    "BF.ADD {} of {n} items, one by one -> all added",
                    show_arg(&key)
                ),
                &[&key],
            );
            return;
        }
        if verb == "BF.INSERT" {
            cmd.push(b("ITEMS"));
        }
        cmd.extend((0..n).map(|_| self.item()));
        let _ = self.send(&cmd, &[&key]);
        if self.rng.random_bool(0.5) {
            self.set_limit_to(DEFAULT_LIMIT);
        }
    }

    /// BF.RESERVE of a scalable filter: EXPANSION x, NONSCALING, or neither; a SEED sometimes.
    fn reserve(&mut self, key: &str) -> Vec<Vec<u8>> {
        let mut cmd = vec![
            b("BF.RESERVE"),
            b(key),
            b(self.pick(&ERROR_RATES)),
            b(self.pick(&CAPACITIES)),
        ];
        match self.rng.random_range(0..4) {
            0 => cmd.push(b("NONSCALING")),
            1 | 2 => {
                let x = self.pick(&["1", "2", "3", "4", "7"]);
                cmd.extend([b("EXPANSION"), b(x)]);
            }
            _ => {}
        }
        if self.rng.random_bool(0.3) {
            cmd.extend([b("SEED"), self.rng.random::<u64>().to_string().into_bytes()]);
        }
        cmd
    }

    /// BF.RESERVE of one partition of a partitioned filter (of at most 3, so that some items
    /// route to it; routing seed 0 among others, the primary's fixed seed) or of a descriptor
    /// (N up to past what its partitions may hold), with any growth.
    fn reserve_partitioned(&mut self, key: &str) -> Vec<Vec<u8>> {
        let count = self.rng.random_range(1..=3u32);
        let partitions = count.to_string();
        let routing_seed = self.rng.random_range(0..3u64).to_string();
        let partition = self.rng.random_bool(0.6);
        let capacity = if partition {
            self.pick(&CAPACITIES)
        } else {
            self.pick(&["1", "7", "1000", "100000", "1073741824", "3221225473"])
        };
        let mut cmd = vec![
            b("BF.RESERVE"),
            b(key),
            b(self.pick(&ERROR_RATES)),
            b(capacity),
        ];
        match self.rng.random_range(0..4) {
            0 => cmd.push(b("NONSCALING")),
            1 => cmd.extend([b("EXPANSION"), b(self.pick(&["1", "2", "5"]))]),
            2 => cmd.extend([b("WINDOW"), b(self.pick(&WINDOWS))]),
            _ => {}
        }
        if partition {
            let index = self.rng.random_range(0..count).to_string();
            cmd.extend([b("PARTITION"), b(&index), b(&partitions), b(&routing_seed)]);
        } else {
            cmd.extend([b("PARTITIONS"), b(&partitions), b(&routing_seed)]);
        }
        cmd
    }

    /// RESTORE of a descriptor forged from one BF.RESERVE ... PARTITIONS would make, its
    /// partition capacity or its N changed half the time: whatever the primary accepts, the
    /// replica, the AOF (rewritten as BF.RESERVE) and a reload must hold alike.
    fn forged_descriptor_restore(&mut self, dst: &str) {
        let growth = match self.rng.random_range(0..3) {
            0 => PartitionGrowth::NonScaling,
            1 => PartitionGrowth::Scaling { expansion: 2 },
            _ => PartitionGrowth::Window { window_ms: 60_000 },
        };
        let partitions = self.rng.random_range(1..=8u32);
        let capacity = self.rng.random_range(1..=1u64 << 30);
        let Ok(descriptor) = Descriptor::new(partitions, 5, capacity, 0.01, growth) else {
            return;
        };
        let c = descriptor.partition_capacity();
        let (n, c) = match self.rng.random_range(0..4) {
            0 => (None, Some(c.saturating_sub(1))),
            1 => (None, Some(c + 1)),
            2 => (Some(capacity * 2), None),
            _ => (None, None),
        };
        let bytes = payload::forge_descriptor(&descriptor.encode(), None, n, c);
        let version = payload::rdb_version(self.c);
        let restore = payload::descriptor_payload(&bytes, version);
        let r = rawb(
            self.c,
            &[b"RESTORE", dst.as_bytes(), b"0", &restore, b"REPLACE"],
        );
        self.history.remove(dst.as_bytes());
        self.record(
            format!(
                "RESTORE {dst} 0 <descriptor P {partitions} N {} c {}> REPLACE -> {}",
                n.unwrap_or(capacity),
                c.unwrap_or(descriptor.partition_capacity()),
                show_reply(&r)
            ),
            &[dst.as_bytes()],
        );
    }

    fn reserve_window(&mut self, key: &str) -> Vec<Vec<u8>> {
        let mut cmd = vec![
            b("BF.RESERVE"),
            b(key),
            b(self.pick(&ERROR_RATES)),
            b(self.pick(&CAPACITIES)),
            b("WINDOW"),
            b(self.pick(&WINDOWS)),
        ];
        if self.rng.random_bool(0.3) {
            cmd.extend([b("SEED"), self.rng.random::<u64>().to_string().into_bytes()]);
        }
        cmd
    }

    /// A write of `key`'s items: BF.ADD, BF.MADD, BF.INSERT (creating with options, with
    /// defaults, or NOCREATE), BF.ADDAT.
    fn bf_write(&mut self, key: &str) -> Vec<Vec<u8>> {
        match self.rng.random_range(0..10) {
            0..=1 => vec![b("BF.ADD"), b(key), self.item()],
            2..=5 => {
                let mut cmd = vec![b("BF.MADD"), b(key)];
                cmd.extend(self.items());
                cmd
            }
            6..=8 => {
                let mut cmd = vec![b("BF.INSERT"), b(key)];
                match self.rng.random_range(0..5) {
                    0 => cmd.push(b("NOCREATE")),
                    1 => {}
                    _ => {
                        if self.rng.random_bool(0.7) {
                            cmd.extend([b("CAPACITY"), b(self.pick(&CAPACITIES))]);
                        }
                        if self.rng.random_bool(0.7) {
                            cmd.extend([b("ERROR"), b(self.pick(&ERROR_RATES))]);
                        }
                        match self.rng.random_range(0..5) {
                            0 => cmd.push(b("NONSCALING")),
                            1 => cmd.extend([b("EXPANSION"), b(self.pick(&["1", "2", "5"]))]),
                            2 => cmd.extend([b("WINDOW"), b(self.pick(&WINDOWS))]),
                            _ => {}
                        }
                        if self.rng.random_bool(0.2) {
                            cmd.extend([
                                b("SEED"),
                                self.rng.random::<u64>().to_string().into_bytes(),
                            ]);
                        }
                    }
                }
                cmd.push(b("ITEMS"));
                cmd.extend(self.items());
                cmd
            }
            _ => match self.window_key() {
                Some(window) if window == key || self.rng.random_bool(0.8) => self.addat(&window),
                _ => self.addat(key),
            },
        }
    }

    /// BF.ADDAT with a timestamp around the filter's time and the clock: ahead by up to half a
    /// window (a later generation), at the clock, or in the past (counts as the filter's time).
    fn addat(&mut self, key: &str) -> Vec<Vec<u8>> {
        let (window, last) = window_of(self.c, key).unwrap_or((1000, 0));
        let base = now_ms().max(last);
        let at = match self.rng.random_range(0..4) {
            0 => base + self.rng.random_range(0..=window / 2),
            1 => base,
            2 => base.saturating_sub(self.rng.random_range(0..=3 * window)),
            _ => last + self.rng.random_range(window / 3..=window),
        };
        let mut cmd = vec![b("BF.ADDAT"), b(key), at.to_string().into_bytes()];
        let n = self.rng.random_range(1..=30);
        cmd.extend((0..n).map(|_| self.item()));
        cmd
    }

    /// Lowers or raises `bf.max-filter-bytes` on the primary: a limit on clients' writes.
    fn set_limit(&mut self) {
        let limit = if self.rng.random_bool(0.5) {
            DEFAULT_LIMIT
        } else {
            self.pick(&LIMITS)
        };
        self.set_limit_to(limit);
    }

    fn set_limit_to(&mut self, limit: &str) {
        let r = raw(self.c, &["CONFIG", "SET", "bf.max-filter-bytes", limit]);
        if r.is_ok() {
            self.limit = limit.to_string();
        }
        self.note_config();
        self.record(
            format!(
                "CONFIG SET bf.max-filter-bytes {limit} -> {}",
                show_reply(&r)
            ),
            &[],
        );
    }

    /// Changes the defaults of filters created without parameters, on the primary only: a
    /// creation must replicate them explicitly.
    fn set_defaults(&mut self) {
        let settings = if self.rng.random_bool(0.3) {
            ("0.01", "100", "2")
        } else {
            (
                self.pick(&ERROR_RATES),
                self.pick(&CAPACITIES),
                self.pick(&["1", "2", "3", "6"]),
            )
        };
        let mut replies = Vec::new();
        for (name, value) in [
            ("bf.error-rate", settings.0),
            ("bf.initial-capacity", settings.1),
            ("bf.expansion", settings.2),
        ] {
            let r = raw(self.c, &["CONFIG", "SET", name, value]);
            replies.push(format!("{name} {value} -> {}", show_reply(&r)));
        }
        self.defaults = if settings == ("0.01", "100", "2") {
            None
        } else {
            Some((
                settings.0.to_string(),
                settings.1.to_string(),
                settings.2.to_string(),
            ))
        };
        self.note_config();
        self.record(format!("CONFIG SET {}", replies.join(", ")), &[]);
    }

    fn note_config(&mut self) {
        let mut note = String::new();
        if self.limit != DEFAULT_LIMIT {
            note += &format!(" [max-filter-bytes {}]", self.limit);
        }
        if let Some((rate, capacity, expansion)) = &self.defaults {
            note += &format!(" [defaults {rate} {capacity} x{expansion}]");
        }
        self.config_note = note;
    }

    fn copy(&mut self, dst: &str) {
        let src = self.source_key();
        let mut cmd = vec![b("COPY"), src.clone(), b(dst)];
        if self.rng.random_bool(0.5) {
            cmd.push(b("REPLACE"));
        }
        let refs: Vec<&[u8]> = cmd.iter().map(Vec::as_slice).collect();
        let r = rawb(self.c, &refs);
        if matches!(r, Ok(Value::Int(1))) {
            self.inherit(&src, dst.as_bytes());
        }
        let text = format!("{} -> {}", show_command(&cmd), show_reply(&r));
        self.record(text, &[&src, dst.as_bytes()]);
    }

    fn rename(&mut self, dst: &str) {
        let src = self.source_key();
        let cmd = vec![b("RENAME"), src.clone(), b(dst)];
        let refs: Vec<&[u8]> = cmd.iter().map(Vec::as_slice).collect();
        let r = rawb(self.c, &refs);
        if r.is_ok() && src != dst.as_bytes() {
            self.inherit(&src, dst.as_bytes());
        }
        let text = format!("{} -> {}", show_command(&cmd), show_reply(&r));
        self.record(text, &[&src, dst.as_bytes()]);
    }

    /// MULTI, two to five writes (DEL among them), EXEC.
    fn multi(&mut self) {
        let n = self.rng.random_range(2..=5);
        let mut cmds = Vec::new();
        for _ in 0..n {
            let key = self.key();
            let cmd = match self.rng.random_range(0..8) {
                0 => self.reserve(&key),
                1 => self.reserve_window(&key),
                2 => vec![b("DEL"), b(&key)],
                _ => self.bf_write(&key),
            };
            cmds.push(cmd);
        }
        let mut replies = vec![rawb(self.c, &[b"MULTI"])];
        for cmd in &cmds {
            let refs: Vec<&[u8]> = cmd.iter().map(Vec::as_slice).collect();
            replies.push(rawb(self.c, &refs));
        }
        let exec = rawb(self.c, &[b"EXEC"]);
        let first = self.log.len();
        for (i, cmd) in cmds.iter().enumerate() {
            let result = match &exec {
                Ok(Value::Array(results)) => results
                    .get(i)
                    .map(reply_text)
                    .unwrap_or_else(|| "(no result)".into()),
                other => format!(
                    "queued {} / EXEC {}",
                    show_reply(&replies[i + 1]),
                    show_reply(other)
                ),
            };
            let shown = result.chars().take(160).collect::<String>();
            self.record(
                format!("MULTI(at #{first}) {} -> {shown}", show_command(cmd)),
                &[&cmd[1]],
            );
        }
    }

    /// EVAL of a script that calls two BF.* writes (pcall: an error is its reply, not the
    /// script's end).
    fn eval(&mut self) {
        const SCRIPT: &str = "local n = tonumber(ARGV[1]) \
            local r1 = redis.pcall(ARGV[2], KEYS[1], unpack(ARGV, 3, n + 1)) \
            local r2 = redis.pcall(ARGV[n + 2], KEYS[2], unpack(ARGV, n + 3)) \
            return {r1, r2}";
        let (k1, k2) = (self.key(), self.key());
        let mut first = self.bf_write(&k1);
        let mut second = self.bf_write(&k2);
        let (k1, k2) = (first[1].clone(), second[1].clone());
        // Lua's unpack takes a few thousand values at most.
        first.truncate(200);
        second.truncate(200);
        let mut cmd = vec![b("EVAL"), b(SCRIPT), b("2"), k1.clone(), k2.clone()];
        cmd.push((first.len() - 1).to_string().into_bytes());
        cmd.push(first[0].clone());
        cmd.extend(first[2..].iter().cloned());
        cmd.push(second[0].clone());
        cmd.extend(second[2..].iter().cloned());
        let refs: Vec<&[u8]> = cmd.iter().map(Vec::as_slice).collect();
        let r = rawb(self.c, &refs);
        let text = format!(
            "EVAL {{{} | {}}} -> {}",
            show_command(&first),
            show_command(&second),
            show_reply(&r)
        );
        self.record(text, &[&k1, &k2]);
    }

    /// BF.LOADCHUNK into `dst` (deleted first) of `chunks`: all of them, or (a quarter of the
    /// time) the header and only some, leaving a filter half-loaded.
    fn loadchunks(&mut self, dst: &str, source: &str, chunks: &[(i64, Vec<u8>)]) {
        let _ = self.send(&[b("DEL"), b(dst)], &[dst.as_bytes()]);
        let count = if chunks.len() > 1 && self.rng.random_bool(0.25) {
            self.rng.random_range(1..chunks.len())
        } else {
            chunks.len()
        };
        let mut replies = Vec::new();
        for (it, data) in &chunks[..count] {
            let r = rawb(
                self.c,
                &[
                    b"BF.LOADCHUNK",
                    dst.as_bytes(),
                    it.to_string().as_bytes(),
                    data,
                ],
            );
            replies.push(show_reply(&r));
        }
        replies.dedup();
        self.record(
            format!(
                "BF.LOADCHUNK {dst} of {source}: {count} of {} chunks -> {}",
                chunks.len(),
                replies.join(",")
            ),
            &[dst.as_bytes()],
        );
    }

    /// BF.SCANDUMP of an existing key, loaded into `dst` by BF.LOADCHUNK.
    fn own_loadchunk(&mut self, dst: &str) {
        let src = self.source_key();
        let mut chunks = Vec::new();
        let mut it = 0i64;
        let mut error = None;
        for _ in 0..100_000 {
            match rawb(self.c, &[b"BF.SCANDUMP", &src, it.to_string().as_bytes()]) {
                Ok(Value::Array(a)) => match (a.first(), a.get(1)) {
                    (Some(Value::Int(0)), _) => break,
                    (Some(Value::Int(next)), Some(Value::BulkString(data))) => {
                        chunks.push((*next, data.clone()));
                        it = *next;
                    }
                    _ => {
                        error = Some(format!("{a:?}"));
                        break;
                    }
                },
                other => {
                    error = Some(show_reply(&other));
                    break;
                }
            }
        }
        let source = format!("SCANDUMP {}", show_arg(&src));
        match error {
            Some(e) => {
                self.record(format!("BF.SCANDUMP {} -> {e}", show_arg(&src)), &[&src]);
            }
            None if chunks.is_empty() => {}
            None => {
                self.inherit(&src, dst.as_bytes());
                self.loadchunks(dst, &source, &chunks);
            }
        }
    }

    /// BF.LOADCHUNK of a crafted header (an existing filter's, its fields mutated and its
    /// checksum made right) and chunks of random bits under correct checksums: whatever the
    /// primary accepts, the replica and the AOF must hold alike.
    fn crafted_loadchunk(&mut self, dst: &str) {
        let src = self.source_key();
        let header = match rawb(self.c, &[b"BF.SCANDUMP", &src, b"0"]) {
            Ok(Value::Array(a)) => match a.get(1) {
                Some(Value::BulkString(h)) => h.clone(),
                _ => return,
            },
            _ => return,
        };
        // The scalable filter's header: magic, version 1, 56 bytes and 24 per layer.
        if !header.starts_with(b"RBLM\x01") || header.len() < 80 || (header.len() - 56) % 24 != 0 {
            return;
        }
        let header = payload::mutate_header(&mut self.rng, &header);
        let _ = self.send(&[b("DEL"), b(dst)], &[dst.as_bytes()]);
        let mut replies = vec![show_reply(&rawb(
            self.c,
            &[b"BF.LOADCHUNK", dst.as_bytes(), b"1", &header],
        ))];
        let layers = payload::get(&header, 36, 4) as usize;
        let total: u64 = (0..layers.min((header.len() - 56) / 24))
            .map(|l| payload::get(&header, 48 + 24 * l + 8, 8) / 8)
            .fold(0u64, u64::saturating_add);
        let mut offset = 0u64;
        // Small bit arrays only: a crafted size of terabytes stays a half-loaded key.
        while replies[0] == "OK" && offset < total && total <= 1 << 20 {
            let len = (total - offset).min(self.rng.random_range(1..=8192));
            let bits: Vec<u8> = (0..len).map(|_| self.rng.random()).collect();
            let chunk = payload::forge_chunk(&header, offset, &bits);
            let it = (1 + offset + len).to_string();
            replies.push(show_reply(&rawb(
                self.c,
                &[b"BF.LOADCHUNK", dst.as_bytes(), it.as_bytes(), &chunk],
            )));
            offset += len;
        }
        replies.dedup();
        self.history.remove(dst.as_bytes());
        self.record(
            format!(
                "BF.LOADCHUNK {dst} of a crafted header <hex {}> and {} bytes of random bits -> {}",
                header
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>(),
                offset,
                replies.join(",")
            ),
            &[dst.as_bytes()],
        );
    }

    fn redisbloom_loadchunk(&mut self, dst: &str) {
        let fixtures = self.fixtures;
        let (name, chunks) = &fixtures.streams[self.rng.random_range(0..fixtures.streams.len())];
        self.history.remove(dst.as_bytes());
        self.migrated.push(b(dst));
        self.loadchunks(dst, &format!("RedisBloom {name}"), chunks);
    }

    /// RESTORE of a RedisBloom DUMP payload (encodings 0 to 4).
    fn redisbloom_restore(&mut self, dst: &str) {
        let fixtures = self.fixtures;
        let (name, payload) = &fixtures.payloads[self.rng.random_range(0..fixtures.payloads.len())];
        let r = rawb(
            self.c,
            &[b"RESTORE", dst.as_bytes(), b"0", payload, b"REPLACE"],
        );
        if r.is_ok() {
            self.history.remove(dst.as_bytes());
            self.migrated.push(b(dst));
        }
        self.record(
            format!(
                "RESTORE {dst} 0 <RedisBloom {name}> REPLACE -> {}",
                show_reply(&r)
            ),
            &[dst.as_bytes()],
        );
    }

    /// DUMP of an existing key, RESTOREd into `dst`.
    fn own_restore(&mut self, dst: &str) {
        let src = self.source_key();
        let Ok(Value::BulkString(payload)) = rawb(self.c, &[b"DUMP", &src]) else {
            return;
        };
        let r = rawb(
            self.c,
            &[b"RESTORE", dst.as_bytes(), b"0", &payload, b"REPLACE"],
        );
        if r.is_ok() {
            self.inherit(&src, dst.as_bytes());
        }
        self.record(
            format!(
                "RESTORE {dst} 0 <DUMP {}> REPLACE -> {}",
                show_arg(&src),
                show_reply(&r)
            ),
            &[dst.as_bytes()],
        );
    }

    /// BGREWRITEAOF; the writes after it go on while it runs.
    fn rewrite(&mut self) {
        let r = raw(self.c, &["BGREWRITEAOF"]);
        self.record(format!("BGREWRITEAOF -> {}", show_reply(&r)), &[]);
    }
}

/// A window filter's window and time (`Last write (ms)`), or None for any other key (a
/// descriptor's `Window (ms)` is nil, or has no time with it).
fn window_of(c: &mut Connection, key: &str) -> Option<(u64, u64)> {
    let Ok(Value::Array(fields)) = raw(c, &["BF.INFO", key]) else {
        return None;
    };
    let field = |name: &str| {
        fields
            .chunks(2)
            .find(|p| value_to_string(&p[0]) == name)
            .and_then(|p| match p[1] {
                Value::Int(value) => u64::try_from(value).ok(),
                _ => None,
            })
    };
    Some((field("Window (ms)")?, field("Last write (ms)")?))
}
