//! Merging filters by name over a server or a cluster: `dest` becomes the union of itself and
//! the sources with BF.MERGE, key by key — a plain filter's one key, or partition i of a
//! partitioned filter with partition i of every source (docs/partitions.md).
//!
//! Everything that could refuse is checked before anything changes: the descriptors (same P,
//! routing seed and per-partition parameters), every partition's presence, and every key's
//! BF.SCANDUMP header against the others with the core's own test of alike filters
//! ([`rustbloom_core::merge::check`], the one BF.MERGE applies). Then, one partition at a time:
//!
//! ```text
//!   same slot (or one server):   BF.MERGE {a}dest/i {a}src/i
//!   slots differ (a cluster):    BF.SCANDUMP {b}src/i …  ->  BF.LOADCHUNK {a}rustbloom-merge-tmp:R …
//!                                BF.MERGE {a}dest/i {a}rustbloom-merge-tmp:R;  DEL {a}rustbloom-merge-tmp:R
//! ```
//!
//! so no node holds more than one source partition's extra copy at a time. A missing partitioned
//! `dest` is created from the first source: its partitions by the merges (BF.MERGE creates a
//! missing destination as a copy of its first source, partition identity included), then its
//! descriptor, last, so that a descriptor always has its partitions.
//!
//! A merge sets bits and never clears one, so it is idempotent: when a node fails half way, the
//! partitions merged so far hold the union and the others not yet, a created `dest` has no
//! descriptor yet (its name answers "not found"), and the same merge run again finishes it. A
//! temporary key left behind by a client that died mid-copy is named
//! `{tag}rustbloom-merge-tmp:<16 hex digits>`.

use std::time::Duration;

use redis::{Cmd, Value};
use rustbloom_core::merge::{check, MergeError};
use rustbloom_core::transfer::decode_load_header;
use rustbloom_core::{StoredFilter, Unlimited};

use super::info::{scandump_cmd, scandump_reply};
use super::reply::{as_u64, display, field, info_pairs};
use super::{info_cmd, key_cmd, Filter};
use crate::connection::Connection;
use crate::error::{Error, Result};
use crate::routing::{key_slot, partition_keys, slot_tag};
use crate::transport::{block, Transport};

/// What [`Filter::merge`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MergeReport {
    /// Sources merged: those that exist, each once, `dest` itself left out.
    pub sources: u32,
    /// Whether the filters are partitioned.
    pub partitioned: bool,
    /// Keys of `dest` merged into: its partitions, or 1 for a plain filter (0 when no source
    /// existed).
    pub partitions: u32,
    /// Whether `dest` did not exist and was created.
    pub created: bool,
    /// Source keys copied first to a temporary key in the slot of `dest`'s key (on a cluster,
    /// where their slots differ).
    pub copies: u64,
    /// Bytes those copies read with BF.SCANDUMP and wrote with BF.LOADCHUNK.
    pub bytes_copied: u64,
    /// Sources that do not exist, merged as empty filters (as BF.MERGE takes them).
    pub missing: Vec<Vec<u8>>,
}

/// The descriptor fields two partitioned filters must share to merge, with their names in the
/// refusal. The descriptor's capacity N is not among them: two filters whose N give the same
/// partitions merge partition by partition, and `dest` keeps its own N.
const ALIKE_FIELDS: [(&str, &str); 6] = [
    ("Partitions", "partitions"),
    ("Routing seed", "routing seed"),
    ("Partition capacity", "partition capacity"),
    ("Error rate", "error rate"),
    ("Expansion rate", "expansion"),
    ("Window (ms)", "window"),
];

/// A filter as the merge found it: its keys, and the BF.INFO of its name.
struct Found {
    filter: Filter,
    pairs: Vec<(Value, Value)>,
}

/// One key of `dest` and the source keys merged into it.
struct Unit {
    /// The partition, for a partitioned filter.
    index: Option<u32>,
    dest: Vec<u8>,
    /// (the source's name, its key).
    sources: Vec<(Vec<u8>, Vec<u8>)>,
}

/// What merging one [`Unit`] took.
#[derive(Default)]
struct Copied {
    copies: u64,
    bytes: u64,
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A refusal of unlike filters, in BF.MERGE's own words followed by where.
fn differ(what: &str, place: String) -> Error {
    Error::Server(format!("filters differ: {what} ({place})"))
}

impl Filter {
    /// Merges the filters named `sources` into the one named `dest` (created from the first
    /// existing source when missing), as BF.MERGE does for keys of one slot: plain filters, or
    /// partitioned filters partition by partition, on a server or a cluster, through a
    /// temporary copy in the destination's slot where the slots differ. Unlike filters, a
    /// missing partition ([`Error::MissingPartition`]) and filters BF.MERGE refuses are refused
    /// before anything changes. A source that does not exist counts as empty, as in BF.MERGE.
    pub fn merge(conn: &mut Connection, dest: &[u8], sources: &[&[u8]]) -> Result<MergeReport> {
        let cluster = conn.is_cluster();
        block(Filter::merge_on(conn, dest, sources, cluster))
    }

    pub(crate) async fn merge_on(
        conn: &mut impl Transport,
        dest: &[u8],
        sources: &[&[u8]],
        cluster: bool,
    ) -> Result<MergeReport> {
        let mut report = MergeReport::default();
        let target = find(conn, dest).await?;
        let mut found: Vec<Found> = Vec::new();
        for (n, &name) in sources.iter().enumerate() {
            // A source naming `dest`, or named twice, adds nothing more.
            if name == dest || sources[..n].contains(&name) {
                continue;
            }
            match find(conn, name).await? {
                Some(f) => found.push(f),
                None => report.missing.push(name.to_vec()),
            }
        }
        let Some(model) = target.as_ref().or(found.first()) else {
            // Nothing exists: nothing to merge, nor parameters to create `dest` from.
            return Ok(report);
        };
        if found.is_empty() {
            return Ok(report);
        }
        for source in &found {
            alike_layout(model, source)?;
        }
        report.sources = u32::try_from(found.len()).unwrap_or(u32::MAX);
        report.partitioned = model.filter.partitioning.is_some();
        let units = units(dest, model, &found);
        // Every check first, one unit at a time (a header decodes to a filter of zeroed,
        // untouched pages: no more than one unit's are held at once).
        let dest_must_exist = target.is_some() && model.filter.partitioning.is_some();
        for unit in &units {
            check_unit(conn, dest, unit, dest_must_exist).await?;
        }
        for unit in &units {
            let copied = merge_unit(conn, unit, cluster).await?;
            report.copies = report.copies.saturating_add(copied.copies);
            report.bytes_copied = report.bytes_copied.saturating_add(copied.bytes);
            report.partitions = report.partitions.saturating_add(1);
        }
        if target.is_none() {
            report.created = true;
            if model.filter.partitioning.is_some() {
                conn.send_one(&descriptor_cmd(dest, &model.pairs)?).await?;
            }
        }
        Ok(report)
    }
}

/// The filter at `name` and its BF.INFO, or `None` when the key does not exist.
async fn find(conn: &mut impl Transport, name: &[u8]) -> Result<Option<Found>> {
    let reply = conn.send_one(&info_cmd(name)).await;
    let pairs = match &reply {
        Ok(v) => info_pairs(v.clone())?,
        Err(_) => Vec::new(),
    };
    Ok(Filter::from_info(name, reply)?.map(|filter| Found { filter, pairs }))
}

/// Refuses `source` unless it is laid out as `model` (the destination, or the first source):
/// both plain, or both partitioned with the same descriptor fields ([`ALIKE_FIELDS`]).
fn alike_layout(model: &Found, source: &Found) -> Result<()> {
    let names = format!(
        "\"{}\" and \"{}\"",
        text(model.filter.name()),
        text(source.filter.name())
    );
    let shape = |f: &Found| match &f.filter.partitioning {
        Some(p) => format!(
            "\"{}\" has {} partitions",
            text(&f.filter.name),
            p.partitions
        ),
        None => format!("\"{}\" is not partitioned", text(&f.filter.name)),
    };
    match (&model.filter.partitioning, &source.filter.partitioning) {
        (None, None) => Ok(()),
        (Some(_), Some(_)) => {
            for (name, what) in ALIKE_FIELDS {
                let (a, b) = (field(&model.pairs, name), field(&source.pairs, name));
                if a != b {
                    let shown = |v: Option<&Value>| v.map_or("none".to_string(), display);
                    return Err(differ(
                        what,
                        format!("{names}: {} and {}", shown(a), shown(b)),
                    ));
                }
            }
            Ok(())
        }
        _ => Err(differ(
            "partitions",
            format!("{}, {}", shape(model), shape(source)),
        )),
    }
}

/// The keys to merge: for each key of `dest` (laid out as `model`), the sources' keys alike.
fn units(dest: &[u8], model: &Found, found: &[Found]) -> Vec<Unit> {
    let Some(p) = &model.filter.partitioning else {
        let sources = found
            .iter()
            .map(|f| (f.filter.name.clone(), f.filter.name.clone()))
            .collect();
        return vec![Unit {
            index: None,
            dest: dest.to_vec(),
            sources,
        }];
    };
    (0u32..)
        .zip(partition_keys(dest, p.partitions))
        .map(|(i, key)| Unit {
            index: Some(i),
            dest: key,
            sources: found
                .iter()
                .filter_map(|f| {
                    let keys = &f.filter.partitioning.as_ref()?.keys;
                    Some((f.filter.name.clone(), keys.get(i as usize)?.clone()))
                })
                .collect(),
        })
        .collect()
}

/// Checks one unit before anything changes: its keys exist where they must (a partition is
/// never merged as empty, nor recreated in an existing filter) and are alike, by the test
/// BF.MERGE applies.
async fn check_unit(
    conn: &mut impl Transport,
    dest_name: &[u8],
    unit: &Unit,
    dest_must_exist: bool,
) -> Result<()> {
    let missing = |name: &[u8], key: &[u8], index: u32| Error::MissingPartition {
        name: text(name),
        index,
        key: text(key),
    };
    let mut inputs: Vec<StoredFilter> = Vec::with_capacity(unit.sources.len() + 1);
    if exists(conn, &unit.dest).await? {
        inputs.push(header(conn, &unit.dest).await?);
    } else if let Some(index) = unit.index.filter(|_| dest_must_exist) {
        // Only a partitioned destination must exist: a plain one is created by BF.MERGE.
        return Err(missing(dest_name, &unit.dest, index));
    }
    for (name, key) in &unit.sources {
        if let Some(index) = unit.index {
            if !exists(conn, key).await? {
                return Err(missing(name, key, index));
            }
        }
        inputs.push(header(conn, key).await?);
    }
    let Some((first, rest)) = inputs.split_first() else {
        return Ok(());
    };
    let rest: Vec<&StoredFilter> = rest.iter().collect();
    check(first, &rest).map(|_| ()).map_err(|e| {
        let keys: Vec<String> = std::iter::once(&unit.dest)
            .chain(unit.sources.iter().map(|(_, key)| key))
            .map(|key| format!("\"{}\"", text(key)))
            .collect();
        let place = match unit.index {
            Some(i) => format!("partition {i}: {}", keys.join(", ")),
            None => keys.join(", "),
        };
        refusal(e, place)
    })
}

/// BF.MERGE's refusal of `error`, in its words, and where.
fn refusal(error: MergeError, place: String) -> Error {
    let why = match error {
        MergeError::Differ(difference) => return differ(difference.name(), place),
        MergeError::RedisBloom => {
            "BF.MERGE does not merge filters kept in RedisBloom's format (taken over, not rebuilt)"
        }
        MergeError::ValkeyBloom => {
            "BF.MERGE does not merge filters kept in valkey-bloom's format (taken over, not \
             rebuilt)"
        }
        MergeError::Loading => "filter is being loaded by BF.LOADCHUNK",
        MergeError::Limit(_) => "over a memory limit",
    };
    Error::Server(format!("{why} ({place})"))
}

pub(super) async fn exists(conn: &mut impl Transport, key: &[u8]) -> Result<bool> {
    let reply = conn.send_one(&key_cmd("EXISTS", key)).await?;
    Ok(as_u64(&reply) == Some(1))
}

/// The filter `key` holds, with its bits zeroed, from its BF.SCANDUMP header: what BF.MERGE's
/// test of alike filters reads (parameters, seed, layer shapes, partition identity).
pub(super) async fn header(conn: &mut impl Transport, key: &[u8]) -> Result<StoredFilter> {
    let (next, bytes) = scandump_reply(conn.send_one(&scandump_cmd(key, 0)).await?)?;
    let unreadable = |why: String| {
        Error::Protocol(format!(
            "the BF.SCANDUMP header of \"{}\": {why}",
            text(key)
        ))
    };
    if next != 1 {
        return Err(unreadable(format!("iterator {next}, not a header")));
    }
    let loading =
        decode_load_header(&bytes, &mut Unlimited).map_err(|e| unreadable(format!("{e:?}")))?;
    let partition = loading.partition().copied();
    let filter = loading.into_filter();
    let all = filter.bytes();
    let ready = StoredFilter::partly_loaded(filter, all);
    match partition {
        Some(p) => ready
            .with_partition(p)
            .map_err(|e| unreadable(e.to_string())),
        None => Ok(ready),
    }
}

/// Merges one unit: the sources in `dest`'s slot (every source, on one server) with one
/// BF.MERGE, then each other source through a temporary copy.
async fn merge_unit(conn: &mut impl Transport, unit: &Unit, cluster: bool) -> Result<Copied> {
    let slot = key_slot(&unit.dest);
    let (near, far): (Vec<&[u8]>, Vec<&[u8]>) = unit
        .sources
        .iter()
        .map(|(_, key)| key.as_slice())
        .partition(|key| !cluster || key_slot(key) == slot);
    if !near.is_empty() {
        conn.send_one(&merge_cmd(&unit.dest, &near)).await?;
    }
    let mut copied = Copied::default();
    for source in far {
        let bytes = merge_through_copy(conn, &unit.dest, source, slot).await?;
        copied.bytes = copied.bytes.saturating_add(bytes);
        copied.copies = copied.copies.saturating_add(1);
    }
    Ok(copied)
}

fn merge_cmd(dest: &[u8], sources: &[&[u8]]) -> Cmd {
    let mut cmd = key_cmd("BF.MERGE", dest);
    for source in sources {
        cmd.arg(*source);
    }
    cmd
}

/// Copies `source` to a temporary key in `slot` (`dest`'s), merges it into `dest` and deletes
/// it, whatever happened; answers the bytes copied.
async fn merge_through_copy(
    conn: &mut impl Transport,
    dest: &[u8],
    source: &[u8],
    slot: u16,
) -> Result<u64> {
    let tag = slot_tag(slot).ok_or_else(|| Error::Protocol(format!("slot {slot}")))?;
    // A name of its own per copy: two merges at once never write into each other's copy.
    let tmp = format!(
        "{{{tag}}}rustbloom-merge-tmp:{:016x}",
        rand::random::<u64>()
    )
    .into_bytes();
    let merged = copy_and_merge(conn, dest, source, &tmp).await;
    if matches!(&merged, Err(e) if !matches!(e, Error::Server(_))) {
        // A reply the client could not read leaves the connection out of step.
        conn.pause_then_reconnect(Duration::ZERO).await;
    }
    let deleted = conn.send_one(&key_cmd("DEL", &tmp)).await;
    let bytes = merged?;
    deleted?;
    Ok(bytes)
}

/// BF.SCANDUMP of `source` chunk by chunk into BF.LOADCHUNK of `tmp`, then BF.MERGE of `tmp`
/// into `dest`; the bytes copied.
async fn copy_and_merge(
    conn: &mut impl Transport,
    dest: &[u8],
    source: &[u8],
    tmp: &[u8],
) -> Result<u64> {
    let mut it = 0;
    let mut bytes = 0u64;
    loop {
        let (next, data) = scandump_reply(conn.send_one(&scandump_cmd(source, it)).await?)?;
        if next == 0 {
            break;
        }
        let mut load = key_cmd("BF.LOADCHUNK", tmp);
        load.arg(next).arg(&data[..]);
        conn.send_one(&load).await?;
        bytes = bytes.saturating_add(data.len() as u64);
        it = next;
    }
    conn.send_one(&merge_cmd(dest, &[tmp])).await?;
    Ok(bytes)
}

/// `BF.RESERVE dest ε N PARTITIONS P routing_seed growth`: the descriptor of a created `dest`,
/// from its model's BF.INFO (docs/partitions.md §4).
pub(super) fn descriptor_cmd(dest: &[u8], pairs: &[(Value, Value)]) -> Result<Cmd> {
    let given = |name: &str| {
        field(pairs, name)
            .filter(|v| **v != Value::Nil)
            .map(display)
    };
    let needed = |name: &str| {
        given(name).ok_or_else(|| Error::Protocol(format!("a descriptor without {name}")))
    };
    let mut cmd = key_cmd("BF.RESERVE", dest);
    cmd.arg(needed("Error rate")?)
        .arg(needed("Capacity")?)
        .arg("PARTITIONS")
        .arg(needed("Partitions")?)
        .arg(needed("Routing seed")?);
    match (given("Window (ms)"), given("Expansion rate")) {
        (Some(ms), _) => cmd.arg("WINDOW").arg(ms),
        (None, Some(x)) => cmd.arg("EXPANSION").arg(x),
        (None, None) => cmd.arg("NONSCALING"),
    };
    Ok(cmd)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    /// A descriptor's BF.INFO pairs as the module answers them (RESP2).
    fn descriptor_pairs(seed: &str, expansion: Value, window: Value) -> Vec<(Value, Value)> {
        vec![
            (bulk("Partitions"), Value::Int(4)),
            (bulk("Routing seed"), bulk(seed)),
            (bulk("Capacity"), Value::Int(1000)),
            (bulk("Partition capacity"), Value::Int(250)),
            (bulk("Error rate"), bulk("0.001")),
            (bulk("Expansion rate"), expansion),
            (bulk("Window (ms)"), window),
        ]
    }

    fn args(cmd: &Cmd) -> Vec<String> {
        cmd.args_iter()
            .map(|a| match a {
                redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
                _ => String::new(),
            })
            .collect()
    }

    #[test]
    fn a_created_descriptor_repeats_its_models_growth() {
        let head = "BF.RESERVE week 0.001 1000 PARTITIONS 4 7";
        for (expansion, window, growth) in [
            (Value::Int(2), Value::Nil, "EXPANSION 2"),
            (Value::Nil, Value::Nil, "NONSCALING"),
            (Value::Nil, Value::Int(60000), "WINDOW 60000"),
        ] {
            let pairs = descriptor_pairs("7", expansion, window);
            let cmd = descriptor_cmd(b"week", &pairs).expect("a descriptor");
            assert_eq!(args(&cmd).join(" "), format!("{head} {growth}"));
        }
        assert!(descriptor_cmd(b"week", &[]).is_err());
    }

    #[test]
    fn layouts_must_match_field_by_field() {
        let found = |name: &str, seed: &str, partitions: Option<u32>| Found {
            filter: Filter {
                name: name.as_bytes().to_vec(),
                partitioning: partitions.map(|p| super::super::Partitioning {
                    partitions: p,
                    routing_seed: 7,
                    keys: partition_keys(name.as_bytes(), p),
                }),
            },
            pairs: descriptor_pairs(seed, Value::Int(2), Value::Nil),
        };
        let week = found("week", "7", Some(4));
        assert!(alike_layout(&week, &found("mon", "7", Some(4))).is_ok());
        let refusal = |other: &Found| alike_layout(&week, other).unwrap_err().to_string();
        assert_eq!(
            refusal(&found("mon", "8", Some(4))),
            "filters differ: routing seed (\"week\" and \"mon\": 7 and 8)"
        );
        assert_eq!(
            refusal(&found("mon", "7", None)),
            "filters differ: partitions (\"week\" has 4 partitions, \"mon\" is not partitioned)"
        );
    }
}
