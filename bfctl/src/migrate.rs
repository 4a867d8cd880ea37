//! `bfctl migrate`: a live copy of Bloom filters from one server or cluster to another over
//! BF.SCANDUMP / BF.LOADCHUNK, checked afterwards.
//!
//! The steps, key by key:
//!
//! 1. Before anything is copied: the keys are listed (explicit names checked with TYPE, patterns
//!    through `SCAN MATCH … TYPE MBbloom--` on every master of a cluster; a partitioned filter's
//!    name brings its partitions), and the run is refused when a destination key
//!    already exists (unless `--replace`) or when source and destination are the same database.
//! 2. The filter is streamed chunk by chunk into a temporary key beside the destination key (one
//!    chunk in memory at a time, whatever the filter's size), between two BF.INFO snapshots of
//!    the source: a filter that changed meanwhile (its item count or layers moved) is copied
//!    again, up to `--retries` times, since only an unchanged source gives a consistent copy.
//! 3. The copy is checked against the source: BF.INFO capacity, items, layers and expansion,
//!    BF.CARD, and BF.MEXISTS of `--sample` random probes, answer by answer.
//! 4. Only then is the temporary key renamed onto the destination key (RENAMENX, or RENAME with
//!    `--replace`), so readers of the destination never see a half-loaded filter and a failure
//!    leaves the destination as it was. A TTL on the source key is carried over. On a cluster the
//!    temporary key carries the hash tag of the destination key's slot, so both are on one node.
//! 5. A partitioned filter's descriptor is not a dump (BF.SCANDUMP refuses it): once all its
//!    partitions are copied it is created again on the destination from its BF.INFO
//!    (`BF.RESERVE NAME ε N PARTITIONS P seed …`), so a descriptor always has its partitions.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use redis::Value;
use rustbloom_client::filter::as_u64;
use rustbloom_client::routing::{key_slot, partition_of, slot_tag};
use rustbloom_client::{scandump, Client, Connection, Filter, KeyInfo};

use crate::bar;
use crate::dump::descriptor_args;

/// The module type both RedisBloom and rustbloom register.
const BLOOM_TYPE: &str = "MBbloom--";
/// Probes per BF.MEXISTS while checking.
const PROBE_BATCH: usize = 1000;
/// Keys per SCAN step.
const SCAN_COUNT: u64 = 1000;
/// Without a progress bar, a line about a long copy at most this often.
const QUIET_REPORT: Duration = Duration::from_secs(10);

/// Copy Bloom filters from a live RedisBloom or rustbloom server or cluster to a rustbloom one.
///
/// Each filter is streamed with BF.SCANDUMP / BF.LOADCHUNK (one chunk in memory at a time,
/// any size) into a temporary key beside its destination key, checked against the source
/// (BF.INFO capacity, items, layers and expansion; BF.CARD; BF.MEXISTS of --sample random
/// probes answered alike), and only then renamed onto the destination key, with the
/// source's TTL. A source that changes during its copy is copied again (--retries). Nothing
/// is copied when a destination key already exists, unless --replace. A filter that fails
/// is reported and left out (its destination key unchanged); the others are still copied,
/// and the exit code is 1. Either side may be a cluster, given by any node's URL: patterns
/// are matched on every master, and a partitioned filter's name copies its partitions and
/// then creates its descriptor. `--url` is not used: give both servers.
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Options {
    /// Source server: redis://[user:password@]host:port[/db] or redis+unix:///path/to.sock
    #[arg(long)]
    pub from: String,
    /// Destination server (rustbloom), same forms.
    #[arg(long)]
    pub to: String,
    /// Keys to copy; an argument with a glob character (* ? [ \) is a pattern matched with
    /// SCAN MATCH … TYPE MBbloom--. None: every Bloom filter of the source database.
    #[arg(value_name = "KEY|PATTERN")]
    pub keys: Vec<String>,
    /// Overwrite destination keys that already exist (each is replaced only once its copy is
    /// complete and checked).
    #[arg(long)]
    pub replace: bool,
    /// Random probes asked of both copies with BF.MEXISTS; 0 compares BF.INFO and BF.CARD
    /// only.
    #[arg(long, default_value_t = 10000)]
    pub sample: u64,
    /// Fresh copies of a filter that changed while it was copied, before giving up on it.
    #[arg(long, default_value_t = 3)]
    pub retries: u32,
}

/// The BF.INFO fields a faithful copy keeps (Size is left out: it is each module's own
/// accounting of memory).
fn same_filter(a: &KeyInfo, b: &KeyInfo) -> bool {
    a.capacity == b.capacity
        && a.items == b.items
        && a.filters == b.filters
        && a.expansion == b.expansion
        && a.window_ms == b.window_ms
        && a.partition == b.partition
}

fn describe(s: &KeyInfo) -> String {
    format!(
        "capacity {}, items {}, layers {}, {}{}",
        s.capacity,
        s.items,
        s.filters,
        match (s.window_ms, s.expansion) {
            (Some(ms), _) => format!("window filter of {ms} ms"),
            (None, Some(x)) => format!("expansion {x}"),
            (None, None) => "expansion none (non-scaling)".into(),
        },
        match s.partition {
            Some((i, p, _)) => format!(", partition {i} of {p}"),
            None => String::new(),
        }
    )
}

/// Items per kind of Bloom key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Filter,
    /// A partitioned filter's descriptor (docs/partitioning.md).
    Descriptor,
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

fn bf_shape(c: &mut Connection, key: &[u8]) -> Result<KeyInfo> {
    let shape = KeyInfo::read(c, key)?;
    if shape.filters == 0 {
        bail!("BF.INFO did not report capacity, items and number of filters");
    }
    Ok(shape)
}

fn card(c: &mut Connection, key: &[u8]) -> Result<u64> {
    let v = c.query(redis::cmd("BF.CARD").arg(key))?;
    as_u64(&v).ok_or_else(|| anyhow!("unexpected BF.CARD reply {v:?}"))
}

/// Refuses a destination without the module before anything is copied: its errors would
/// otherwise come key by key (and echo a filter's binary header back).
fn require_module(c: &mut Connection, url: &str) -> Result<()> {
    let reply = c.query(redis::cmd("COMMAND").arg("INFO").arg("BF.LOADCHUNK"));
    // A server that refuses COMMAND INFO (an ACL) is asked nothing more: each key then fails
    // with its own error if the module is missing.
    if let Ok(Value::Array(a)) = reply {
        if a.first().is_none_or(|v| *v == Value::Nil) {
            bail!(
                "nothing copied: the rustbloom module is not loaded on the destination ({url} \
                 does not know BF.LOADCHUNK); load it with `loadmodule /path/to/librustbloom.so` \
                 in its configuration or `MODULE LOAD /path/to/librustbloom.so`"
            );
        }
    }
    Ok(())
}

/// Identity of the server behind a connection and the database it uses, to refuse copying a
/// database onto itself.
fn identity(c: &mut Connection, url: &str) -> Result<(String, i64)> {
    let who = if c.is_cluster() {
        // A cluster is the same cluster when it has the same masters.
        let mut masters: Vec<String> = c.masters()?.into_iter().map(|m| m.addr).collect();
        masters.sort();
        masters.join(",")
    } else {
        let v = c.query(redis::cmd("INFO").arg("server"))?;
        text(&v)
            .lines()
            .find_map(|l| l.strip_prefix("run_id:"))
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    let db = redis::Client::open(url)
        .map(|c| c.get_connection_info().redis_settings().db())
        .unwrap_or(0);
    Ok((who, db))
}

/// The keys to copy: explicit names (must be Bloom filters on the source) and the keys matching
/// each pattern on every master (all Bloom keys when none is given), each once, in the order
/// found; a partitioned filter's partitions come before its descriptor.
fn list_keys(c: &mut Connection, args: &[String]) -> Result<Vec<(Vec<u8>, Kind)>> {
    let mut seen: HashSet<Vec<u8>> = HashSet::new();
    let mut out = Vec::new();
    let default = ["*".to_string()];
    let args = if args.is_empty() { &default[..] } else { args };
    let mut problems = Vec::new();
    for arg in args {
        if is_pattern(arg) {
            for master in c.masters()? {
                let slot = master.ranges.first().map_or(0, |r| r.0);
                let mut cursor: u64 = 0;
                loop {
                    let v = c
                        .to_slot(
                            redis::cmd("SCAN")
                                .arg(cursor)
                                .arg("MATCH")
                                .arg(arg)
                                .arg("COUNT")
                                .arg(SCAN_COUNT)
                                .arg("TYPE")
                                .arg(BLOOM_TYPE),
                            slot,
                        )
                        .map_err(|e| anyhow!("{e}"))
                        .with_context(|| {
                            format!("SCAN MATCH {arg} on the source ({})", master.addr)
                        })?;
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
            }
        } else {
            let key = arg.as_bytes().to_vec();
            let t = text(&c.query(redis::cmd("TYPE").arg(&key[..]))?);
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
    // Descriptors: their partitions first (each once), then the descriptor.
    let mut ordered: Vec<(Vec<u8>, Kind)> = Vec::with_capacity(out.len());
    let mut descriptors = Vec::new();
    let mut placed: HashSet<Vec<u8>> = HashSet::new();
    for key in out {
        match Filter::discover(c, &key)?.and_then(|f| f.partitioning().map(|p| p.keys.clone())) {
            Some(parts) => {
                for part in parts {
                    if placed.insert(part.clone()) {
                        ordered.push((part, Kind::Filter));
                    }
                }
                descriptors.push(key);
            }
            None => {
                if placed.insert(key.clone()) {
                    ordered.push((key, Kind::Filter));
                }
            }
        }
    }
    ordered.extend(descriptors.into_iter().map(|k| (k, Kind::Descriptor)));
    Ok(ordered)
}

/// Destination keys that already exist, with their type.
fn existing(c: &mut Connection, keys: &[Vec<u8>]) -> Result<Vec<(Vec<u8>, String)>> {
    let mut out = Vec::new();
    for batch in keys.chunks(1000) {
        let cmds: Vec<redis::Cmd> = batch
            .iter()
            .map(|k| {
                let mut cmd = redis::cmd("TYPE");
                cmd.arg(&k[..]);
                cmd
            })
            .collect();
        let types = c.pipeline(&cmds).map_err(|e| anyhow!("TYPE: {e}"))?;
        for (k, t) in batch.iter().zip(types) {
            if let Value::ServerError(e) = &t {
                bail!("TYPE: {}", rustbloom_client::error::server_error_text(e));
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

    /// A probe for `shape`'s key: on a partition, one that routes to it (the module refuses
    /// items of other partitions).
    fn item_for(&mut self, shape: &KeyInfo) -> Vec<u8> {
        loop {
            let item = self.item();
            match shape.partition {
                Some((i, p, seed)) if partition_of(&item, seed, p) != i => {}
                _ => return item,
            }
        }
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

fn mexists(c: &mut Connection, key: &[u8], items: &[Vec<u8>]) -> Result<Vec<u64>> {
    let mut cmd = redis::cmd("BF.MEXISTS");
    cmd.arg(key);
    for i in items {
        cmd.arg(&i[..]);
    }
    match c.query(&cmd)? {
        Value::Array(a) => a
            .iter()
            .map(|v| as_u64(v).ok_or_else(|| anyhow!("unexpected BF.MEXISTS answer {v:?}")))
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
    /// A bar is drawn (otherwise a line about a long copy now and then).
    progress: bool,
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
    ) -> Result<(Copied, std::result::Result<KeyInfo, Mismatch>)> {
        let before = bf_shape(self.src, key).context("BF.INFO on the source")?;
        // A leftover temporary key of an earlier, interrupted run: ours to remove.
        self.dst
            .query(redis::cmd("DEL").arg(tmp))
            .context("DEL of the temporary key")?;
        let mut it: u64 = 0;
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
            self.dst
                .query(redis::cmd("BF.LOADCHUNK").arg(tmp).arg(next).arg(&data[..]))
                .map_err(|e| {
                    let e = anyhow::Error::new(e);
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
            if !self.progress && last_report.elapsed() >= QUIET_REPORT {
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
        if !same_filter(&after, &before) {
            return Ok((
                copied,
                Err(Mismatch::SourceChanged(format!(
                    "before the copy: {}; after: {}",
                    describe(&before),
                    describe(&after)
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
        snapshot: &KeyInfo,
    ) -> Result<std::result::Result<u64, Mismatch>> {
        let copy = bf_shape(self.dst, tmp).context("BF.INFO of the copy")?;
        if !same_filter(&copy, snapshot) {
            return Ok(Err(Mismatch::Differs(format!(
                "BF.INFO differs: source {}; copy {}",
                describe(snapshot),
                describe(&copy)
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
            let batch: Vec<Vec<u8>> = (0..n).map(|_| self.probes.item_for(snapshot)).collect();
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
        snapshot: &KeyInfo,
        what: String,
    ) -> Result<std::result::Result<u64, Mismatch>> {
        let now = bf_shape(self.src, key).context("BF.INFO on the source")?;
        if same_filter(&now, snapshot) {
            Ok(Err(Mismatch::Differs(what)))
        } else {
            Ok(Err(Mismatch::SourceChanged(format!(
                "{what}; the source changed meanwhile ({})",
                describe(&now)
            ))))
        }
    }

    /// Creates a partitioned filter's descriptor on the destination from the source's, once
    /// every one of its partitions was copied (`failed`: the keys that were not).
    fn migrate_descriptor(&mut self, key: &[u8], failed: &[(Vec<u8>, String)]) -> Result<String> {
        let filter = Filter::discover(self.src, key)?
            .filter(|f| f.partitioning().is_some())
            .ok_or_else(|| anyhow!("no longer a partitioned filter on the source"))?;
        let parts = filter.partitioning().map_or(0, |p| p.partitions);
        if let Some((k, _)) = failed
            .iter()
            .find(|(k, _)| filter.keys().iter().skip(1).any(|p| p == k))
        {
            bail!(
                "its partition {} was not copied; the descriptor is left out",
                show(k)
            );
        }
        let args = descriptor_args(&filter.info(self.src)?)?;
        if self.opts.replace {
            self.dst
                .query(redis::cmd("DEL").arg(key))
                .context("DEL of the destination's descriptor")?;
        }
        let mut cmd = redis::cmd("BF.RESERVE");
        cmd.arg(key);
        for a in &args {
            cmd.arg(a.as_slice());
        }
        self.dst
            .query(&cmd)
            .context("BF.RESERVE of the descriptor on the destination")?;
        Ok(format!("the descriptor of its {parts} partitions"))
    }

    /// Copies every key in order, a line for each; the keys that failed, with why.
    fn migrate_all(&mut self, keys: &[(Vec<u8>, Kind)]) -> Vec<(Vec<u8>, String)> {
        let mut failed: Vec<(Vec<u8>, String)> = Vec::new();
        let n = keys.len();
        for (i, (key, kind)) in keys.iter().enumerate() {
            self.pb.set_message(format!("{}/{n} {}", i + 1, show(key)));
            let outcome = match kind {
                Kind::Filter => self.migrate_key(key),
                Kind::Descriptor => self.migrate_descriptor(key, &failed),
            };
            match outcome {
                Ok(line) => self
                    .pb
                    .suspend(|| eprintln!("[{}/{n}] {}: copied, {line}", i + 1, show(key))),
                Err(e) => {
                    let msg = format!("{e:#}");
                    self.pb
                        .suspend(|| eprintln!("[{}/{n}] {}: FAILED: {msg}", i + 1, show(key)));
                    failed.push((key.clone(), msg));
                }
            }
        }
        failed
    }

    /// Copies one key; Ok(summary line) or the reason it was not copied. The destination key is
    /// written only by the final rename.
    fn migrate_key(&mut self, key: &[u8]) -> Result<String> {
        let start = Instant::now();
        // The hash tag of the key's own slot keeps the temporary key on the key's node, where
        // RENAME can move it (a cluster refuses a RENAME across slots).
        let tag = slot_tag(key_slot(key)).unwrap_or_default();
        let mut tmp = format!("{{{tag}}}bfctl-migrate-tmp-{}:", std::process::id()).into_bytes();
        tmp.extend_from_slice(key);
        let result = self.migrate_via(key, &tmp, start);
        if result.is_err() {
            // A reply the client could not read leaves its connection out of step with the
            // server: fresh connections, so that the next key fails (or not) for its own reason.
            let _ = self.src.reconnect();
            let _ = self.dst.reconnect();
            // Never leave the temporary key behind (the destination key was not touched).
            let _ = self.dst.query(redis::cmd("DEL").arg(&tmp[..]));
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
        let pttl = match self.src.query(redis::cmd("PTTL").arg(key))? {
            Value::Int(ms) => ms,
            _ => -1,
        };
        if self.opts.replace {
            self.dst
                .query(redis::cmd("RENAME").arg(tmp).arg(key))
                .context("RENAME of the copy onto the destination key")?;
        } else {
            let v = self
                .dst
                .query(redis::cmd("RENAMENX").arg(tmp).arg(key))
                .context("RENAMENX of the copy onto the destination key")?;
            if as_u64(&v) != Some(1) {
                bail!("the key was created on the destination during the copy; left as it is (use --replace to overwrite)");
            }
        }
        if pttl > 0 {
            self.dst
                .query(redis::cmd("PEXPIRE").arg(key).arg(pttl))
                .context("PEXPIRE of the destination key")?;
        }
        self.done_bytes += copied.bytes;
        Ok(format!(
            "{} bytes in {} chunks; {}; {} random probes answered alike ({} of them present){}{} ({:.2} s)",
            copied.bytes,
            copied.chunks,
            describe(&snapshot),
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

pub fn run(opts: &Options, progress: bool) -> Result<()> {
    let (mut src, mut dst) = connect(opts)?;
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
        refuse_existing(&mut dst, &keys)?;
    }
    let total = if progress {
        source_bytes(&mut src, &keys)
    } else {
        0
    };
    eprintln!(
        "copying {} Bloom filter{} from {} to {}",
        keys.len(),
        if keys.len() == 1 { "" } else { "s" },
        opts.from,
        opts.to
    );
    let pb = bar(
        progress,
        Some(total),
        "{spinner} [{elapsed_precise}] [{wide_bar}] {bytes}/{total_bytes} {bytes_per_sec} {msg}",
    );
    let mut m = Migrator {
        src: &mut src,
        dst: &mut dst,
        opts,
        progress,
        pb: pb.clone(),
        probes: Probes(probe_seed()),
        done_bytes: 0,
    };
    let started = Instant::now();
    let failed = m.migrate_all(&keys);
    pb.finish_and_clear();
    let n = keys.len();
    eprintln!(
        "{} of {n} filters copied and checked, {} bytes ({:.2} s)",
        n - failed.len(),
        m.done_bytes,
        started.elapsed().as_secs_f64()
    );
    if failed.is_empty() {
        return Ok(());
    }
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
    )
}

/// Connections to the source and to the destination, refused when the destination has no Bloom
/// module or is the source's own database.
fn connect(opts: &Options) -> Result<(Connection, Connection)> {
    let mut src = Client::open(&opts.from)
        .and_then(|c| c.connect())
        .context("source (--from)")?;
    let mut dst = Client::open(&opts.to)
        .and_then(|c| c.connect())
        .context("destination (--to)")?;
    require_module(&mut dst, &opts.to)?;
    let (src_id, src_db) = identity(&mut src, &opts.from)?;
    let (dst_id, dst_db) = identity(&mut dst, &opts.to)?;
    if !src_id.is_empty() && src_id == dst_id && src_db == dst_db {
        bail!(
            "--from and --to are the same server and database (run_id {src_id}, db {src_db}): \
             refusing to copy a database onto itself"
        );
    }
    Ok((src, dst))
}

/// Refuses the whole run when any of `keys` already exists on the destination.
fn refuse_existing(dst: &mut Connection, keys: &[(Vec<u8>, Kind)]) -> Result<()> {
    let names: Vec<Vec<u8>> = keys.iter().map(|(k, _)| k.clone()).collect();
    let clash = existing(dst, &names).context("checking the destination's keys")?;
    if clash.is_empty() {
        return Ok(());
    }
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
    )
}

/// The total for the bar: the filters' sizes as the source reports them (close to the bytes the
/// stream carries).
fn source_bytes(src: &mut Connection, keys: &[(Vec<u8>, Kind)]) -> u64 {
    keys.iter()
        .filter(|(_, kind)| *kind == Kind::Filter)
        .filter_map(|(k, _)| bf_shape(src, k).ok())
        .map(|s| s.size)
        .sum()
}

/// A seed for the random probes that differs from run to run and between runs started together.
fn probe_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
        ^ u64::from(std::process::id()).rotate_left(32)
}
