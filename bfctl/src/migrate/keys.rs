//! The keys a run copies, listed on the source before anything is copied, and the destination's
//! keys that would clash with them.

use std::collections::HashSet;

use anyhow::{anyhow, bail, Context, Result};
use redis::Value;
use rustbloom_client::{Connection, Filter};

use super::{bulk_bytes, text, BLOOM_TYPE, SCAN_COUNT};

/// Items per kind of Bloom key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Filter,
    /// A partitioned filter's descriptor (docs/partitioning.md).
    Descriptor,
}

pub(super) fn is_pattern(arg: &str) -> bool {
    arg.contains(['*', '?', '[', '\\'])
}

/// The keys to copy: explicit names (must be Bloom filters on the source) and the keys matching
/// each pattern on every master (all Bloom keys when none is given), each once, in the order
/// found; a partitioned filter's partitions come before its descriptor.
pub(super) fn list_keys(c: &mut Connection, args: &[String]) -> Result<Vec<(Vec<u8>, Kind)>> {
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
