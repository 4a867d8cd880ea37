//! The keys a run copies, listed on the source before anything is copied, and the destination's
//! keys that would clash with them.

use std::collections::HashSet;

use anyhow::{anyhow, bail, Context, Result};
use redis::Value;
use rustbloom_client::{Connection, Filter};

use super::{bulk_bytes, text, BLOOM_TYPE, SCAN_COUNT, VALKEY_BLOOM_TYPE};

/// Items per kind of Bloom key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Filter,
    /// A partitioned filter's descriptor (docs/partitions.md).
    Descriptor,
    /// A valkey-bloom object (type `bloomfltr`): valkey-bloom has no BF.SCANDUMP, so it is
    /// copied whole with DUMP / RESTORE.
    ValkeyBloom,
}

/// The kind of key of type `t`, when it is one of the Bloom types.
fn kind_of_type(t: &str) -> Option<Kind> {
    match t {
        BLOOM_TYPE => Some(Kind::Filter),
        VALKEY_BLOOM_TYPE => Some(Kind::ValkeyBloom),
        _ => None,
    }
}

pub(super) fn is_pattern(arg: &str) -> bool {
    arg.contains(['*', '?', '[', '\\'])
}

/// The keys to copy: explicit names (must be Bloom filters on the source) and the keys matching
/// each pattern on every master (all Bloom keys when none is given), each once, in the order
/// found; a partitioned filter's partitions come before its descriptor.
pub(super) fn list_keys(c: &mut Connection, args: &[String]) -> Result<Vec<(Vec<u8>, Kind)>> {
    let mut found = Found::default();
    let default = ["*".to_string()];
    let args = if args.is_empty() { &default[..] } else { args };
    let mut problems = Vec::new();
    for arg in args {
        if is_pattern(arg) {
            for t in [BLOOM_TYPE, VALKEY_BLOOM_TYPE] {
                scan_pattern(c, arg, t, &mut found)?;
            }
        } else {
            match named_key(c, arg)? {
                Ok((key, kind)) => found.add(key, kind),
                Err(problem) => problems.push(problem),
            }
        }
    }
    if !problems.is_empty() {
        bail!("nothing copied:\n  {}", problems.join("\n  "));
    }
    partitions_first(c, found.keys)
}

/// Keys in the order found, each once, with their kind (Filter or ValkeyBloom).
#[derive(Default)]
struct Found {
    seen: HashSet<Vec<u8>>,
    keys: Vec<(Vec<u8>, Kind)>,
}

impl Found {
    fn add(&mut self, key: Vec<u8>, kind: Kind) {
        if self.seen.insert(key.clone()) {
            self.keys.push((key, kind));
        }
    }
}

/// The keys of type `bloom_type` matching `pattern` on every master of the source.
fn scan_pattern(
    c: &mut Connection,
    pattern: &str,
    bloom_type: &str,
    found: &mut Found,
) -> Result<()> {
    let kind = kind_of_type(bloom_type).ok_or_else(|| anyhow!("{bloom_type}: not a Bloom type"))?;
    for master in c.masters()? {
        let slot = master.ranges.first().map_or(0, |r| r.0);
        let mut cursor: u64 = 0;
        loop {
            let (next, keys) = scan_step(c, pattern, bloom_type, cursor, (slot, &master.addr))?;
            for k in keys {
                let k = bulk_bytes(&k).ok_or_else(|| anyhow!("bad SCAN key {k:?}"))?;
                found.add(k, kind);
            }
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
    }
    Ok(())
}

/// One SCAN step for keys of `bloom_type` on the master serving `slot` (at `addr`): the next
/// cursor and the keys it returned.
fn scan_step(
    c: &mut Connection,
    pattern: &str,
    bloom_type: &str,
    cursor: u64,
    (slot, addr): (u16, &str),
) -> Result<(u64, Vec<Value>)> {
    let v = c
        .to_slot(
            redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(SCAN_COUNT)
                .arg("TYPE")
                .arg(bloom_type),
            slot,
        )
        .map_err(|e| anyhow!("{e}"))
        .with_context(|| format!("SCAN MATCH {pattern} on the source ({addr})"))?;
    let (next, keys) = match v {
        Value::Array(mut a) if a.len() == 2 => {
            let keys = a.pop().unwrap_or(Value::Nil);
            let next = a.pop().unwrap_or(Value::Nil);
            (next, keys)
        }
        // A server where no module registers the type (Valkey says so; Redis answers no keys):
        // no key of that kind to copy.
        Value::ServerError(e) if format!("{e:?}").contains("unknown type name") => {
            return Ok((0, Vec::new()))
        }
        other => bail!("unexpected SCAN reply {other:?}"),
    };
    let next = text(&next)
        .parse()
        .map_err(|_| anyhow!("bad SCAN cursor {next:?}"))?;
    match keys {
        Value::Array(k) => Ok((next, k)),
        other => bail!("unexpected SCAN keys {other:?}"),
    }
}

/// A key named on the command line: Ok(Ok((key, kind))) when it is a Bloom filter on the
/// source, else Ok(Err(why not)).
fn named_key(
    c: &mut Connection,
    arg: &str,
) -> Result<std::result::Result<(Vec<u8>, Kind), String>> {
    let key = arg.as_bytes().to_vec();
    let t = text(&c.query(redis::cmd("TYPE").arg(&key[..]))?);
    Ok(match kind_of_type(&t) {
        Some(kind) => Ok((key, kind)),
        None if t == "none" => Err(format!("{arg}: no such key on the source")),
        None => Err(format!("{arg}: a {t} on the source, not a Bloom filter")),
    })
}

/// `keys` in order, each once, with a partitioned filter's partitions in place of its
/// descriptor and the descriptors last (they are created once their partitions are copied).
/// valkey-bloom objects are never partitioned.
fn partitions_first(
    c: &mut Connection,
    keys: Vec<(Vec<u8>, Kind)>,
) -> Result<Vec<(Vec<u8>, Kind)>> {
    let mut ordered: Vec<(Vec<u8>, Kind)> = Vec::with_capacity(keys.len());
    let mut descriptors = Vec::new();
    let mut placed: HashSet<Vec<u8>> = HashSet::new();
    for (key, kind) in keys {
        if kind == Kind::ValkeyBloom {
            if placed.insert(key.clone()) {
                ordered.push((key, kind));
            }
            continue;
        }
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
pub(super) fn existing(c: &mut Connection, keys: &[Vec<u8>]) -> Result<Vec<(Vec<u8>, String)>> {
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
