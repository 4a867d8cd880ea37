//! `bfctl migrate`: a live copy of Bloom filters from one server to another over BF.SCANDUMP /
//! BF.LOADCHUNK, checked afterwards.
//!
//! The plan, key by key:
//!
//! 1. Before anything is copied: the keys are listed (explicit names checked with TYPE, patterns
//!    through `SCAN MATCH … TYPE MBbloom--`), and the run is refused when a destination key
//!    already exists (unless `--replace`) or when source and destination are the same database.
//! 2. The filter is streamed chunk by chunk into a temporary key beside the destination key (one
//!    chunk in memory at a time, whatever the filter's size), between two BF.INFO snapshots of
//!    the source: a filter that changed meanwhile (its item count or layers moved) is copied
//!    again, up to `--retries` times, since only an unchanged source gives a consistent copy.
//! 3. The copy is checked against the source: BF.INFO capacity, items, layers and expansion,
//!    BF.CARD, and BF.MEXISTS of `--sample` random probes, answer by answer.
//! 4. Only then is the temporary key renamed onto the destination key (RENAMENX, or RENAME with
//!    `--replace`), so readers of the destination never see a half-loaded filter and a failure
//!    leaves the destination as it was. A TTL on the source key is carried over.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use redis::{Connection, Value};

use super::{as_int, bar, connect, info_pairs, query};

/// The module type both RedisBloom and rustbloom register.
const BLOOM_TYPE: &str = "MBbloom--";
/// Probes per BF.MEXISTS while checking.
const PROBE_BATCH: usize = 1000;
/// Keys per SCAN step.
const SCAN_COUNT: u64 = 1000;
/// Without a progress bar, a line about a long copy at most this often.
const QUIET_REPORT: Duration = Duration::from_secs(10);

pub struct Options {
    pub from: String,
    pub to: String,
    pub keys: Vec<String>,
    pub replace: bool,
    pub sample: u64,
    pub retries: u32,
    pub progress: bool,
}

/// What BF.INFO says about a filter, the fields a faithful copy keeps (Size is left out: it is
/// each module's own accounting of memory).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Shape {
    capacity: i64,
    items: i64,
    filters: i64,
    /// None for a non-scaling filter.
    expansion: Option<i64>,
    size: i64,
}

impl Shape {
    fn same_filter(&self, other: &Shape) -> bool {
        self.capacity == other.capacity
            && self.items == other.items
            && self.filters == other.filters
            && self.expansion == other.expansion
    }

    fn describe(&self) -> String {
        format!(
            "capacity {}, items {}, layers {}, expansion {}",
            self.capacity,
            self.items,
            self.filters,
            match self.expansion {
                Some(x) => x.to_string(),
                None => "none (non-scaling)".into(),
            }
        )
    }
}

/// A key as text for messages (keys are binary-safe; invalid UTF-8 is shown escaped).
fn show(key: &[u8]) -> String {
    let s = String::from_utf8_lossy(key);
    if s.chars()
        .all(|c| !c.is_control() && c != char::REPLACEMENT_CHARACTER)
    {
        s.into_owned()
    } else {
        format!("{:?}", key.escape_ascii().to_string())
    }
}

fn is_pattern(arg: &str) -> bool {
    arg.contains(['*', '?', '[', '\\'])
}

fn bulk_bytes(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::BulkString(b) => Some(b.clone()),
        Value::SimpleString(s) => Some(s.clone().into_bytes()),
        Value::Okay => Some(b"OK".to_vec()),
        _ => None,
    }
}

fn text(v: &Value) -> String {
    bulk_bytes(v)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_else(|| format!("{v:?}"))
}

fn bf_shape(c: &mut Connection, key: &[u8]) -> Result<Shape> {
    let pairs = info_pairs(query(c, redis::cmd("BF.INFO").arg(key))?)?;
    let mut shape = Shape {
        capacity: -1,
        items: -1,
        filters: -1,
        expansion: None,
        size: -1,
    };
    for (k, v) in pairs {
        let n = as_int(&v);
        match text(&k).as_str() {
            "Capacity" => shape.capacity = n.unwrap_or(-1),
            "Size" => shape.size = n.unwrap_or(-1),
            "Number of filters" => shape.filters = n.unwrap_or(-1),
            "Number of items inserted" => shape.items = n.unwrap_or(-1),
            "Expansion rate" => shape.expansion = n,
            _ => {}
        }
    }
    if shape.capacity < 0 || shape.items < 0 || shape.filters < 0 {
        bail!("BF.INFO did not report capacity, items and number of filters");
    }
    Ok(shape)
}

fn card(c: &mut Connection, key: &[u8]) -> Result<i64> {
    let v = query(c, redis::cmd("BF.CARD").arg(key))?;
    as_int(&v).ok_or_else(|| anyhow!("unexpected BF.CARD reply {v:?}"))
}

/// One BF.SCANDUMP step: (next iterator, data).
fn scandump(c: &mut Connection, key: &[u8], it: i64) -> Result<(i64, Vec<u8>)> {
    let reply = query(c, redis::cmd("BF.SCANDUMP").arg(key).arg(it))?;
    match reply {
        Value::Array(v) if v.len() == 2 => {
            let next =
                as_int(&v[0]).ok_or_else(|| anyhow!("bad BF.SCANDUMP iterator {:?}", v[0]))?;
            let data = match &v[1] {
                Value::Nil => Vec::new(),
                d => bulk_bytes(d).ok_or_else(|| anyhow!("bad BF.SCANDUMP data {d:?}"))?,
            };
            Ok((next, data))
        }
        other => bail!("unexpected BF.SCANDUMP reply {other:?}"),
    }
}

/// Identity of the server behind a connection and the database it uses, to refuse copying a
/// database onto itself.
fn identity(c: &mut Connection, url: &str) -> Result<(String, i64)> {
    let v = query(c, redis::cmd("INFO").arg("server"))?;
    let info = text(&v);
    let run_id = info
        .lines()
        .find_map(|l| l.strip_prefix("run_id:"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let db = redis::Client::open(url)
        .map(|c| c.get_connection_info().redis_settings().db())
        .unwrap_or(0);
    Ok((run_id, db))
}

/// The keys to copy: explicit names (must be Bloom filters on the source) and the keys matching
/// each pattern (all Bloom keys when none is given), each once, in the order found.
fn list_keys(c: &mut Connection, args: &[String]) -> Result<Vec<Vec<u8>>> {
    let mut seen: HashSet<Vec<u8>> = HashSet::new();
    let mut out = Vec::new();
    let default = ["*".to_string()];
    let args = if args.is_empty() { &default[..] } else { args };
    let mut problems = Vec::new();
    for arg in args {
        if is_pattern(arg) {
            let mut cursor: u64 = 0;
            loop {
                let v = query(
                    c,
                    redis::cmd("SCAN")
                        .arg(cursor)
                        .arg("MATCH")
                        .arg(arg)
                        .arg("COUNT")
                        .arg(SCAN_COUNT)
                        .arg("TYPE")
                        .arg(BLOOM_TYPE),
                )
                .with_context(|| format!("SCAN MATCH {arg} on the source"))?;
                let (next, keys) = match v {
                    Value::Array(mut a) if a.len() == 2 => {
                        let keys = a.pop().unwrap_or(Value::Nil);
                        let next = a.pop().unwrap_or(Value::Nil);
                        (next, keys)
                    }
                    other => bail!("unexpected SCAN reply {other:?}"),
                };
                cursor = text(&next)
                    .parse()
                    .map_err(|_| anyhow!("bad SCAN cursor {next:?}"))?;
                let keys = match keys {
                    Value::Array(k) => k,
                    other => bail!("unexpected SCAN keys {other:?}"),
                };
                for k in keys {
                    let k = bulk_bytes(&k).ok_or_else(|| anyhow!("bad SCAN key {k:?}"))?;
                    if seen.insert(k.clone()) {
                        out.push(k);
                    }
                }
                if cursor == 0 {
                    break;
                }
            }
        } else {
            let key = arg.as_bytes().to_vec();
            let t = text(&query(c, redis::cmd("TYPE").arg(&key[..]))?);
            if t == "none" {
                problems.push(format!("{arg}: no such key on the source"));
            } else if t != BLOOM_TYPE {
                problems.push(format!("{arg}: a {t} on the source, not a Bloom filter"));
            } else if seen.insert(key.clone()) {
                out.push(key);
            }
        }
    }
    if !problems.is_empty() {
        bail!("nothing copied:\n  {}", problems.join("\n  "));
    }
    Ok(out)
}

/// Destination keys that already exist, with their type.
fn existing(c: &mut Connection, keys: &[Vec<u8>]) -> Result<Vec<(Vec<u8>, String)>> {
    let mut out = Vec::new();
    for batch in keys.chunks(1000) {
        let mut pipe = redis::pipe();
        for k in batch {
            pipe.cmd("TYPE").arg(&k[..]);
        }
        let types: Vec<Value> = pipe.query(c).map_err(super::cmd_err)?;
        for (k, t) in batch.iter().zip(types) {
            if let Value::ServerError(e) = &t {
                return Err(super::explain(super::server_error_text(e)));
            }
            let t = text(&t);
            if t != "none" {
                out.push((k.clone(), t));
            }
        }
    }
    Ok(out)
}

/// Tiny deterministic generator for the probes (splitmix64); seeded per run.
struct Probes(u64);

impl Probes {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A probe of 1 to 24 random bytes.
    fn item(&mut self) -> Vec<u8> {
        let len = 1 + (self.next_u64() % 24) as usize;
        let mut v = Vec::with_capacity(len + 8);
        while v.len() < len {
            v.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        v.truncate(len);
        v
    }
}

fn mexists(c: &mut Connection, key: &[u8], items: &[Vec<u8>]) -> Result<Vec<i64>> {
    let mut cmd = redis::cmd("BF.MEXISTS");
    cmd.arg(key);
    for i in items {
        cmd.arg(&i[..]);
    }
    match query(c, &cmd)? {
        Value::Array(a) => a
            .iter()
            .map(|v| as_int(v).ok_or_else(|| anyhow!("unexpected BF.MEXISTS answer {v:?}")))
            .collect(),
        other => bail!("unexpected BF.MEXISTS reply {other:?}"),
    }
}

/// Why a copy is not accepted.
enum Mismatch {
    /// The source changed while it was read: a fresh copy may succeed.
    SourceChanged(String),
    /// The copy answers differently from an unchanged source.
    Differs(String),
}

struct Copied {
    chunks: u64,
    bytes: u64,
}

struct Migrator<'a> {
    src: &'a mut Connection,
    dst: &'a mut Connection,
    opts: &'a Options,
    pb: indicatif::ProgressBar,
    probes: Probes,
    /// Bytes copied by the keys done so far (for the bar).
    done_bytes: u64,
}

impl Migrator<'_> {
    /// Streams the filter into `tmp` on the destination; returns the source's BF.INFO from before
    /// the copy when it was unchanged after it.
    fn copy(
        &mut self,
        key: &[u8],
        tmp: &[u8],
    ) -> Result<(Copied, std::result::Result<Shape, Mismatch>)> {
        let before = bf_shape(self.src, key).context("BF.INFO on the source")?;
        // A leftover temporary key of an earlier, interrupted run: ours to remove.
        query(self.dst, redis::cmd("DEL").arg(tmp)).context("DEL of the temporary key")?;
        let mut it: i64 = 0;
        let mut copied = Copied {
            chunks: 0,
            bytes: 0,
        };
        let mut last_report = Instant::now();
        loop {
            let (next, data) = scandump(self.src, key, it)
                .with_context(|| format!("BF.SCANDUMP {it} on the source"))?;
            if next == 0 {
                break;
            }
            if next <= it && it != 0 {
                bail!("BF.SCANDUMP on the source went back from iterator {it} to {next}");
            }
            query(
                self.dst,
                redis::cmd("BF.LOADCHUNK").arg(tmp).arg(next).arg(&data[..]),
            )
            .map_err(|e| {
                if copied.chunks == 0 {
                    // The header: the destination does not read this dump format.
                    e.context(
                        "the destination refused the filter's header: it must be a rustbloom \
                         that reads the source's format (RedisBloom's or its own)",
                    )
                } else {
                    e
                }
            })
            .with_context(|| {
                format!(
                    "BF.LOADCHUNK {next} ({} bytes, chunk {}) on the destination",
                    data.len(),
                    copied.chunks + 1
                )
            })?;
            copied.chunks += 1;
            copied.bytes += data.len() as u64;
            self.pb.set_position(self.done_bytes + copied.bytes);
            if !self.opts.progress && last_report.elapsed() >= QUIET_REPORT {
                last_report = Instant::now();
                eprintln!(
                    "  {}: {} bytes in {} chunks so far",
                    show(key),
                    copied.bytes,
                    copied.chunks
                );
            }
            it = next;
        }
        let after = bf_shape(self.src, key).context("BF.INFO on the source after the copy")?;
        if !after.same_filter(&before) {
            return Ok((
                copied,
                Err(Mismatch::SourceChanged(format!(
                    "before the copy: {}; after: {}",
                    before.describe(),
                    after.describe()
                ))),
            ));
        }
        Ok((copied, Ok(before)))
    }

    /// Checks the copy in `tmp` against the source (`snapshot`: its BF.INFO during the copy).
    /// Ok(Ok(probes the source answered 1)) when the copy answers alike.
    fn check(
        &mut self,
        key: &[u8],
        tmp: &[u8],
        snapshot: &Shape,
    ) -> Result<std::result::Result<u64, Mismatch>> {
        let copy = bf_shape(self.dst, tmp).context("BF.INFO of the copy")?;
        if !copy.same_filter(snapshot) {
            return Ok(Err(Mismatch::Differs(format!(
                "BF.INFO differs: source {}; copy {}",
                snapshot.describe(),
                copy.describe()
            ))));
        }
        let (sc, dc) = (
            card(self.src, key).context("BF.CARD on the source")?,
            card(self.dst, tmp).context("BF.CARD of the copy")?,
        );
        if sc != dc {
            return self.changed_or(
                key,
                snapshot,
                format!("BF.CARD differs: source {sc}, copy {dc}"),
            );
        }
        let mut left = self.opts.sample;
        let mut positives = 0u64;
        while left > 0 {
            let n = left.min(PROBE_BATCH as u64) as usize;
            let batch: Vec<Vec<u8>> = (0..n).map(|_| self.probes.item()).collect();
            let a = mexists(self.src, key, &batch).context("BF.MEXISTS on the source")?;
            let b = mexists(self.dst, tmp, &batch).context("BF.MEXISTS of the copy")?;
            if a.len() != n || b.len() != n {
                bail!(
                    "BF.MEXISTS answered {} and {} answers for {n} probes",
                    a.len(),
                    b.len()
                );
            }
            if let Some(i) = (0..n).find(|&i| a[i] != b[i]) {
                return self.changed_or(
                    key,
                    snapshot,
                    format!(
                        "probe {:?} answers {} on the source and {} on the copy",
                        batch[i].escape_ascii().to_string(),
                        a[i],
                        b[i]
                    ),
                );
            }
            positives += a.iter().filter(|&&x| x == 1).count() as u64;
            left -= n as u64;
        }
        Ok(Ok(positives))
    }

    /// A difference is the copy's fault only when the source is still as it was copied.
    fn changed_or(
        &mut self,
        key: &[u8],
        snapshot: &Shape,
        what: String,
    ) -> Result<std::result::Result<u64, Mismatch>> {
        let now = bf_shape(self.src, key).context("BF.INFO on the source")?;
        if now.same_filter(snapshot) {
            Ok(Err(Mismatch::Differs(what)))
        } else {
            Ok(Err(Mismatch::SourceChanged(format!(
                "{what}; the source changed meanwhile ({})",
                now.describe()
            ))))
        }
    }

    /// Copies one key; Ok(summary line) or the reason it was not copied. The destination key is
    /// written only by the final rename.
    fn migrate_key(&mut self, key: &[u8]) -> Result<String> {
        let start = Instant::now();
        let mut tmp = key.to_vec();
        tmp.extend_from_slice(format!(":bfctl-migrate-tmp-{}", std::process::id()).as_bytes());
        let result = self.migrate_via(key, &tmp, start);
        if result.is_err() {
            // Never leave the temporary key behind (the destination key was not touched).
            let _ = query(self.dst, redis::cmd("DEL").arg(&tmp[..]));
        }
        result
    }

    fn migrate_via(&mut self, key: &[u8], tmp: &[u8], start: Instant) -> Result<String> {
        let mut attempt = 0;
        let (copied, snapshot, positives) = loop {
            attempt += 1;
            let (copied, outcome) = self.copy(key, tmp)?;
            let outcome = match outcome {
                Ok(snapshot) => match self.check(key, tmp, &snapshot)? {
                    Ok(positives) => Ok((snapshot, positives)),
                    Err(m) => Err(m),
                },
                Err(m) => Err(m),
            };
            match outcome {
                Ok((snapshot, positives)) => break (copied, snapshot, positives),
                Err(Mismatch::Differs(what)) => {
                    bail!("the copy does not answer like the source: {what}")
                }
                Err(Mismatch::SourceChanged(what)) => {
                    if attempt > self.opts.retries {
                        bail!(
                            "the source kept changing during the copy ({what}); tried {attempt} \
                             times: stop writes to it or raise --retries"
                        );
                    }
                    eprintln!(
                        "  {}: the source changed during the copy ({what}); copying again",
                        show(key)
                    );
                }
            }
        };
        // The source's TTL, taken after the copy: the key must not outlive it.
        let pttl = as_int(&query(self.src, redis::cmd("PTTL").arg(key))?).unwrap_or(-1);
        if self.opts.replace {
            query(self.dst, redis::cmd("RENAME").arg(tmp).arg(key))
                .context("RENAME of the copy onto the destination key")?;
        } else {
            let v = query(self.dst, redis::cmd("RENAMENX").arg(tmp).arg(key))
                .context("RENAMENX of the copy onto the destination key")?;
            if as_int(&v) != Some(1) {
                bail!("the key was created on the destination during the copy; left as it is (use --replace to overwrite)");
            }
        }
        if pttl > 0 {
            query(self.dst, redis::cmd("PEXPIRE").arg(key).arg(pttl))
                .context("PEXPIRE of the destination key")?;
        }
        self.done_bytes += copied.bytes;
        Ok(format!(
            "{} bytes in {} chunks; {}; {} random probes answered alike ({} of them present){}{} ({:.2} s)",
            copied.bytes,
            copied.chunks,
            snapshot.describe(),
            self.opts.sample,
            positives,
            if pttl > 0 {
                format!("; TTL {pttl} ms carried over")
            } else {
                String::new()
            },
            if attempt > 1 {
                format!("; {attempt} attempts")
            } else {
                String::new()
            },
            start.elapsed().as_secs_f64()
        ))
    }
}

pub fn migrate(opts: &Options) -> Result<()> {
    let mut src = connect(&opts.from).context("source (--from)")?;
    let mut dst = connect(&opts.to).context("destination (--to)")?;
    let (src_id, src_db) = identity(&mut src, &opts.from)?;
    let (dst_id, dst_db) = identity(&mut dst, &opts.to)?;
    if !src_id.is_empty() && src_id == dst_id && src_db == dst_db {
        bail!(
            "--from and --to are the same server and database (run_id {src_id}, db {src_db}): \
             refusing to copy a database onto itself"
        );
    }
    let keys = list_keys(&mut src, &opts.keys)?;
    if keys.is_empty() {
        eprintln!(
            "no Bloom filters (type {BLOOM_TYPE}) match {} on the source: nothing to copy",
            if opts.keys.is_empty() {
                "*".to_string()
            } else {
                opts.keys.join(" ")
            }
        );
        return Ok(());
    }
    if !opts.replace {
        let clash = existing(&mut dst, &keys).context("checking the destination's keys")?;
        if !clash.is_empty() {
            let shown: Vec<String> = clash
                .iter()
                .take(10)
                .map(|(k, t)| format!("{} ({t})", show(k)))
                .collect();
            bail!(
                "nothing copied: {} of the {} keys already exist on the destination: {}{}; \
                 pass --replace to overwrite them (each is replaced only once its copy is \
                 complete and checked)",
                clash.len(),
                keys.len(),
                shown.join(", "),
                if clash.len() > shown.len() {
                    ", …"
                } else {
                    ""
                }
            );
        }
    }
    // Total for the bar: the filters' sizes as the source reports them (close to the bytes the
    // stream carries).
    let mut total = 0u64;
    if opts.progress {
        for k in &keys {
            if let Ok(s) = bf_shape(&mut src, k) {
                total += u64::try_from(s.size).unwrap_or(0);
            }
        }
    }
    eprintln!(
        "copying {} Bloom filter{} from {} to {}",
        keys.len(),
        if keys.len() == 1 { "" } else { "s" },
        opts.from,
        opts.to
    );
    let pb = bar(
        opts.progress,
        Some(total),
        "{spinner} [{elapsed_precise}] [{wide_bar}] {bytes}/{total_bytes} {bytes_per_sec} {msg}",
    );
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
        ^ u64::from(std::process::id()).rotate_left(32);
    let mut m = Migrator {
        src: &mut src,
        dst: &mut dst,
        opts,
        pb: pb.clone(),
        probes: Probes(seed),
        done_bytes: 0,
    };
    let started = Instant::now();
    let mut failed: Vec<(Vec<u8>, String)> = Vec::new();
    let n = keys.len();
    for (i, key) in keys.iter().enumerate() {
        pb.set_message(format!("{}/{n} {}", i + 1, show(key)));
        match m.migrate_key(key) {
            Ok(line) => pb.suspend(|| eprintln!("[{}/{n}] {}: copied, {line}", i + 1, show(key))),
            Err(e) => {
                let msg = format!("{e:#}");
                pb.suspend(|| eprintln!("[{}/{n}] {}: FAILED: {msg}", i + 1, show(key)));
                failed.push((key.clone(), msg));
            }
        }
    }
    pb.finish_and_clear();
    let copied = n - failed.len();
    eprintln!(
        "{copied} of {n} filters copied and checked, {} bytes ({:.2} s)",
        m.done_bytes,
        started.elapsed().as_secs_f64()
    );
    if !failed.is_empty() {
        let list: Vec<String> = failed
            .iter()
            .take(20)
            .map(|(k, e)| format!("  {}: {e}", show(k)))
            .collect();
        bail!(
            "{} of {n} filters were not copied (their destination keys are unchanged):\n{}{}",
            failed.len(),
            list.join("\n"),
            if failed.len() > list.len() {
                "\n  …"
            } else {
                ""
            }
        );
    }
    Ok(())
}
