//! `bfctl load --offline`: the items added on the client, then merged into the live filter.
//!
//! For each key of the filter (the filter itself, or each partition in turn):
//!
//! 1. its parameters are read from its own BF.SCANDUMP header (error rate, capacity, growth,
//!    hash seed, the first layer's exact shape, the partition's identity), so the filter built
//!    here is alike to it, as BF.MERGE requires;
//! 2. the items that route to it are added on the client ([`crate::fill`]), in input order;
//! 3. that filter is loaded with BF.LOADCHUNK into a temporary key with the hash tag of the live
//!    key's slot (so both are on one node of a cluster), merged with `BF.MERGE key tmp`, and the
//!    temporary key deleted, whatever happened.
//!
//! Nothing already in the filter is lost (a union only sets bits), every item is present once
//! the command returns, and neither the client nor a node ever holds more than one partition's
//! extra copy: a partitioned filter's input is first split by partition into temporary files
//! ([`crate::spill`]), and each partition is built from its own.

use std::path::Path;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use rustbloom_client::filter::as_u64;
use rustbloom_client::routing::{key_slot, slot_tag};
use rustbloom_client::{scandump, Client, Connection, Filter as LiveFilter};
use rustbloom_core::transfer::decode_load_header;
use rustbloom_core::{BloomFilter, Filter, StoredFilter, Unlimited};

use crate::build::jobs;
use crate::fill::{fill, Routing, Target};
use crate::load::LoadArgs;
use crate::rate;
use crate::spill::Spill;

/// What one key's merge did.
struct Merged {
    lines: u64,
    items: u64,
    bytes: u64,
}

pub fn run(url: &str, args: &LoadArgs) -> Result<()> {
    let file = args.file.as_deref().unwrap_or(Path::new("-"));
    let name = args.key.as_str();
    let mut conn = Client::open(url)?.connect()?;
    require_merge(&mut conn)?;
    let Some(live) = args.reserve.open(&mut conn, name)? else {
        return Err(crate::load::needs_capacity(name));
    };
    let started = Instant::now();
    let (keys, routing) = match live.partitioning() {
        Some(p) => (
            p.keys.clone(),
            Some(Routing {
                count: p.partitions,
                routing_seed: p.routing_seed,
            }),
        ),
        None => (vec![live.name().to_vec()], None),
    };
    let before = card(&mut conn, &live)?;
    // A partitioned filter's input, split by partition first (one read of it, stdin included).
    let spill = routing.map(|r| Spill::split(file, r)).transpose()?;
    let (mut lines, mut items, mut bytes) = (0, 0, 0);
    for (index, key) in (0u32..).zip(&keys) {
        let input = spill.as_ref().map_or(file.to_path_buf(), |s| s.path(index));
        let merged = merge_key(&mut conn, key, &input, routing, args.jobs)
            .with_context(|| format!("{}", String::from_utf8_lossy(key)))?;
        if let Some(s) = &spill {
            s.done(index);
        }
        lines += merged.lines;
        items += merged.items;
        bytes += merged.bytes;
    }
    let after = card(&mut conn, &live)?;
    println!(
        "{name}: {lines} items merged offline{}, {items} of them new to the built filter{}, \
         {bytes} bytes sent; BF.CARD {before} -> {after} ({:.2} s, {:.0} items/s)",
        match routing {
            Some(r) => format!(" into {} partitions one at a time", r.count),
            None => String::new(),
        },
        if lines == items {
            String::new()
        } else {
            format!(" ({} repeated or false positives)", lines - items)
        },
        started.elapsed().as_secs_f64(),
        rate(lines, started.elapsed())
    );
    Ok(())
}

/// Refuses a server whose module has no BF.MERGE before anything is built or reserved.
fn require_merge(conn: &mut Connection) -> Result<()> {
    let reply = conn.query(redis::cmd("COMMAND").arg("INFO").arg("BF.MERGE"));
    // A server that refuses COMMAND INFO (an ACL) is asked nothing more: BF.MERGE itself then
    // fails with its own error, after which the temporary key is deleted.
    if let Ok(redis::Value::Array(a)) = reply {
        if a.first().is_none_or(|v| *v == redis::Value::Nil) {
            bail!(
                "--offline needs BF.MERGE, which this server does not know (no rustbloom module, \
                 or one older than BF.MERGE): load without --offline, or `bfctl build` and \
                 `bfctl restore` into a new filter"
            );
        }
    }
    Ok(())
}

/// BF.CARD of the filter (summed over its partitions).
fn card(conn: &mut Connection, filter: &LiveFilter) -> Result<u64> {
    let keys = match filter.partitioning() {
        Some(p) => p.keys.clone(),
        None => vec![filter.name().to_vec()],
    };
    let mut total = 0u64;
    for key in keys {
        let v = conn.query(redis::cmd("BF.CARD").arg(&key[..]))?;
        let n = as_u64(&v).ok_or_else(|| anyhow!("unexpected BF.CARD reply {v:?}"))?;
        total = total.saturating_add(n);
    }
    Ok(total)
}

/// An empty filter alike to the live one at `key`, from its BF.SCANDUMP header.
fn alike(conn: &mut Connection, key: &[u8]) -> Result<StoredFilter> {
    let (next, header) = scandump(conn, key, 0).context("BF.SCANDUMP 0")?;
    if next != 1 {
        bail!("BF.SCANDUMP 0 answered iterator {next}, not a header");
    }
    // The header decodes to the live filter with zeroed bits: only its parameters are kept.
    let live = decode_load_header(&header, &mut Unlimited)
        .map_err(|e| anyhow!("cannot read the filter's header: {e:?}"))?;
    let Filter::Scalable(filter) = live.filter() else {
        bail!(
            "only rustbloom's own scalable filters merge (not window filters, nor filters kept \
             in RedisBloom's or valkey-bloom's format)"
        );
    };
    let first = filter.layers()[0].size();
    let empty = BloomFilter::with_first_layer(*filter.params(), first, &mut Unlimited)
        .map_err(|e| anyhow!("cannot make a filter like it: {e}"))?;
    let stored = StoredFilter::ready_filter(Filter::Scalable(empty));
    match live.partition() {
        Some(p) => stored
            .with_partition(*p)
            .map_err(|e| anyhow!("partition {}: {e:?}", p.index())),
        None => Ok(stored),
    }
}

/// Builds the items of `key` on the client and merges them into it through a temporary key.
fn merge_key(
    conn: &mut Connection,
    key: &[u8],
    file: &Path,
    routing: Option<Routing>,
    jobs_given: Option<usize>,
) -> Result<Merged> {
    let stored = alike(conn, key)?;
    let index = stored.partition().map_or(0, |p| p.index());
    let (mut targets, lines) = fill(
        file,
        vec![Target::new(index, stored)],
        routing,
        jobs(jobs_given),
    )?;
    let target = targets
        .pop()
        .ok_or_else(|| anyhow!("the built filter went missing"))?;
    let tag = slot_tag(key_slot(key)).unwrap_or_default();
    let mut tmp = format!("{{{tag}}}bfctl-offline-tmp-{}:", std::process::id()).into_bytes();
    tmp.extend_from_slice(key);
    let result = load_and_merge(conn, key, &tmp, &target.stored);
    if result.is_err() {
        // A reply the client could not read leaves the connection out of step.
        let _ = conn.reconnect();
    }
    // The temporary key never stays, whatever happened.
    let deleted = conn.query(redis::cmd("DEL").arg(&tmp[..]));
    let bytes = result?;
    deleted.context("DEL of the temporary key")?;
    Ok(Merged {
        lines,
        items: target.added,
        bytes,
    })
}

/// BF.LOADCHUNK of `built` into `tmp`, then BF.MERGE of `tmp` into `key`; the bytes sent.
fn load_and_merge(
    conn: &mut Connection,
    key: &[u8],
    tmp: &[u8],
    built: &StoredFilter,
) -> Result<u64> {
    // A leftover of an interrupted run: ours to remove.
    conn.query(redis::cmd("DEL").arg(tmp))
        .context("DEL of the temporary key")?;
    let mut it = 0;
    let mut bytes = 0u64;
    loop {
        let (next, data) = built.scandump_step(it);
        if next == 0 {
            break;
        }
        conn.query(redis::cmd("BF.LOADCHUNK").arg(tmp).arg(next).arg(&data[..]))
            .with_context(|| format!("BF.LOADCHUNK {next} of the temporary key"))?;
        bytes += data.len() as u64;
        it = next;
    }
    conn.query(redis::cmd("BF.MERGE").arg(key).arg(tmp))
        .context("BF.MERGE of the built filter into the live one")?;
    Ok(bytes)
}
