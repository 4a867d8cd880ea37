//! `bfctl migrate`: a live copy of Bloom filters from one server or cluster to another over
//! BF.SCANDUMP / BF.LOADCHUNK (valkey-bloom's objects: DUMP / RESTORE), checked afterwards.
//!
//! The steps, key by key:
//!
//! 1. Before anything is copied: the keys are listed (explicit names checked with TYPE, patterns
//!    through `SCAN MATCH … TYPE MBbloom--` and `TYPE bloomfltr` on every master of a cluster; a
//!    partitioned filter's name brings its partitions), and the run is refused when a destination
//!    key already exists (unless `--replace`) or when source and destination are the same
//!    database.
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
//! 5. A valkey-bloom object (type `bloomfltr`) is copied whole instead of streamed: valkey-bloom
//!    has no BF.SCANDUMP, and DUMP / RESTORE moves its own encoding of the object as it is.
//! 6. A partitioned filter's descriptor is not a dump (BF.SCANDUMP refuses it): once all its
//!    partitions are copied it is created again on the destination from its BF.INFO
//!    (`BF.RESERVE NAME ε N PARTITIONS P seed …`), so a descriptor always has its partitions.

mod check;
mod copy;
mod filter;
mod keys;
mod probes;

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use redis::Value;
use rustbloom_client::{Client, Connection};

use crate::bar;
use crate::count::count;
use copy::Migrator;
use filter::bf_shape;
use keys::{existing, list_keys, Kind};
use probes::Probes;

/// The module type both RedisBloom and rustbloom register.
const BLOOM_TYPE: &str = "MBbloom--";
/// valkey-bloom's module type (rustbloom registers it too, for the objects it took over).
const VALKEY_BLOOM_TYPE: &str = "bloomfltr";
/// Probes per BF.MEXISTS while checking.
const PROBE_BATCH: usize = 1000;
/// Keys per SCAN step.
const SCAN_COUNT: u64 = 1000;
/// Without a progress bar, a line about a long copy at most this often.
const QUIET_REPORT: Duration = Duration::from_secs(10);

/// Copy Bloom filters from a live RedisBloom, valkey-bloom or rustbloom server or cluster to a
/// rustbloom one.
///
/// Each filter is streamed with BF.SCANDUMP / BF.LOADCHUNK (one chunk in memory at a time,
/// any size) into a temporary key beside its destination key, checked against the source
/// (BF.INFO capacity, items, layers and expansion; BF.CARD; BF.MEXISTS of --sample random
/// probes answered alike), and only then renamed onto the destination key, with the
/// source's TTL. A source that changes during its copy is copied again (--retries). Nothing
/// is copied when a destination key already exists, unless --replace. A filter that fails
/// is reported and left out (its destination key unchanged); the others are still copied,
/// and the exit code is 1. valkey-bloom's objects (type bloomfltr) are copied whole with
/// DUMP / RESTORE (the destination must read the source's RDB version) and checked alike.
/// Either side may be a cluster, given by any node's URL: patterns
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
    /// SCAN MATCH … TYPE MBbloom-- and TYPE bloomfltr. None: every Bloom filter of the source
    /// database.
    #[arg(value_name = "KEY|PATTERN")]
    pub keys: Vec<String>,
    /// Overwrite destination keys that already exist (each is replaced only once its copy is
    /// complete and checked).
    #[arg(long)]
    pub replace: bool,
    /// Random probes asked of both copies with BF.MEXISTS; 0 compares BF.INFO and BF.CARD
    /// only.
    #[arg(long, default_value_t = 10000, value_parser = count::<u64>(0, u64::MAX))]
    pub sample: u64,
    /// Fresh copies of a filter that changed while it was copied, before giving up on it.
    #[arg(long, default_value_t = 3, value_parser = count::<u32>(0, u64::MAX))]
    pub retries: u32,
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
    refuse_failed(&failed, n)
}

/// Err listing the keys that failed (the first 20), when any did.
fn refuse_failed(failed: &[(Vec<u8>, String)], n: usize) -> Result<()> {
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
        .filter(|(_, kind)| *kind != Kind::Descriptor)
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
