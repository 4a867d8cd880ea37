//! What a filter's keys say of it: BF.INFO of the name and of every partition, where each
//! partition lives, and how the partitions fall short of the descriptor.

use std::collections::BTreeMap;

use redis::{Cmd, Value};

use super::reply::{as_bytes, as_u64, field, info_pairs};
use super::reply::{as_text, display};
use super::send::{send_raw, INFO_RETRY};
use super::{info_cmd, key_cmd, Filter, Partitioning};
use crate::connection::Connection;
use crate::error::{Error, Result};
use crate::routing::key_slot;
use crate::routing::Master;
use crate::transport::{block, Transport};

/// One key's BF.INFO, as far as a client needs it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KeyInfo {
    pub capacity: u64,
    pub size: u64,
    pub filters: u64,
    pub items: u64,
    /// `None` when NONSCALING or WINDOW.
    pub expansion: Option<u64>,
    /// A window filter's window, in milliseconds.
    pub window_ms: Option<u64>,
    /// A window filter's generation (the unit in which it forgets), in milliseconds.
    pub generation_ms: Option<u64>,
    /// On a partition key: (index, partitions, routing seed).
    pub partition: Option<(u32, u32, u64)>,
}

/// A partition as [`Filter::info`] found it.
#[derive(Clone, Debug)]
pub struct PartitionInfo {
    pub index: u32,
    pub key: Vec<u8>,
    pub slot: u16,
    /// The master serving its slot (`host:port`), on a cluster or a single server.
    pub master: String,
    /// `None` when the key does not exist.
    pub info: Option<KeyInfo>,
}

/// Sums over some partitions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub partitions: u64,
    pub capacity: u64,
    pub size: u64,
    pub items: u64,
}

/// What [`Filter::info`] reports.
#[derive(Clone, Debug)]
pub struct FilterInfo {
    /// BF.INFO of the name (the descriptor of a partitioned filter), field by field as text.
    pub fields: Vec<(String, String)>,
    /// The name's own BF.INFO numbers.
    pub key: KeyInfo,
    /// Every partition, in order (empty for a plain filter).
    pub partitions: Vec<PartitionInfo>,
    /// Every way the partitions fall short: missing, or disagreeing on index, P or seed.
    pub problems: Vec<String>,
}

impl FilterInfo {
    /// Totals over the partitions present.
    pub fn totals(&self) -> Totals {
        let mut t = Totals::default();
        for p in &self.partitions {
            add_to(&mut t, p);
        }
        t
    }

    /// Totals per master, by address.
    pub fn per_master(&self) -> BTreeMap<String, Totals> {
        let mut m: BTreeMap<String, Totals> = BTreeMap::new();
        for p in &self.partitions {
            add_to(m.entry(p.master.clone()).or_default(), p);
        }
        m
    }
}

impl KeyInfo {
    /// BF.INFO of one key (routed by the key on a cluster).
    pub fn read(conn: &mut Connection, key: &[u8]) -> Result<KeyInfo> {
        let reply = conn.query(redis::cmd("BF.INFO").arg(key))?;
        Ok(key_info(&info_pairs(reply)?))
    }
}

/// One BF.SCANDUMP step of `key` from iterator `it`: the next iterator (0 once the filter has
/// been read) and the chunk.
pub fn scandump(conn: &mut Connection, key: &[u8], it: u64) -> Result<(u64, Vec<u8>)> {
    scandump_reply(conn.query(&scandump_cmd(key, it))?)
}

/// `BF.SCANDUMP key it`.
pub(super) fn scandump_cmd(key: &[u8], it: u64) -> Cmd {
    let mut cmd = key_cmd("BF.SCANDUMP", key);
    cmd.arg(it);
    cmd
}

/// The next iterator and the chunk of a BF.SCANDUMP reply.
pub(super) fn scandump_reply(reply: Value) -> Result<(u64, Vec<u8>)> {
    let Value::Array(v) = reply else {
        return Err(Error::Protocol(format!("BF.SCANDUMP answered {reply:?}")));
    };
    let [next, data] = v.as_slice() else {
        return Err(Error::Protocol(format!(
            "BF.SCANDUMP answered {} values",
            v.len()
        )));
    };
    let next =
        as_u64(next).ok_or_else(|| Error::Protocol(format!("BF.SCANDUMP iterator {next:?}")))?;
    let data = match data {
        Value::Nil => Vec::new(),
        other => {
            as_bytes(other).ok_or_else(|| Error::Protocol(format!("BF.SCANDUMP data {other:?}")))?
        }
    };
    Ok((next, data))
}

fn add_to(t: &mut Totals, p: &PartitionInfo) {
    t.partitions += 1;
    if let Some(i) = &p.info {
        t.capacity = t.capacity.saturating_add(i.capacity);
        t.size = t.size.saturating_add(i.size);
        t.items = t.items.saturating_add(i.items);
    }
}

impl Filter {
    /// BF.INFO of the name and, for a partitioned filter, of every partition with the master it
    /// lives on, and every way the partitions fall short.
    pub fn info(&self, conn: &mut Connection) -> Result<FilterInfo> {
        block(self.info_on(conn))
    }

    pub(crate) async fn info_on(&self, conn: &mut impl Transport) -> Result<FilterInfo> {
        let head = conn.send_one(&info_cmd(&self.name)).await?;
        let Some(routing) = &self.partitioning else {
            return self.info_from(head, &[], Vec::new(), &[]);
        };
        let present = send_raw(conn, &exists_cmds(routing)[..], INFO_RETRY).await?;
        let asked = partition_info_cmds(routing, &present);
        let infos = send_raw(conn, &asked[..], INFO_RETRY).await?;
        let masters = conn.slot_map().await?;
        self.info_from(head, &present, infos, &masters)
    }

    /// [`Filter::info`] from the name's BF.INFO reply, the EXISTS replies of the partitions,
    /// the BF.INFO replies of those present ([`partition_info_cmds`]) and the slot map.
    fn info_from(
        &self,
        head: Value,
        present: &[Value],
        infos: Vec<Value>,
        masters: &[Master],
    ) -> Result<FilterInfo> {
        let pairs = info_pairs(head)?;
        let fields = pairs
            .iter()
            .filter_map(|(k, v)| Some((as_text(k)?, display(v))))
            .collect();
        let key = key_info(&pairs);
        let mut out = FilterInfo {
            fields,
            key,
            partitions: Vec::new(),
            problems: Vec::new(),
        };
        let Some(routing) = &self.partitioning else {
            return Ok(out);
        };
        let mut replies = infos.into_iter();
        for (i, k) in routing.keys.iter().enumerate() {
            let index = i as u32;
            let slot = key_slot(k);
            let info = if present.get(i).and_then(as_u64) == Some(1) {
                let reply = replies
                    .next()
                    .ok_or_else(|| Error::Protocol("fewer BF.INFO replies than asked".into()))?;
                Some(key_info(&info_pairs(reply)?))
            } else {
                None
            };
            if let Some(problem) = partition_problem(routing, index, k, info.as_ref()) {
                out.problems.push(problem);
            }
            let master = masters
                .iter()
                .find(|m| m.owns(slot))
                .map(|m| m.addr.clone())
                .unwrap_or_else(|| "(no master)".to_string());
            out.partitions.push(PartitionInfo {
                index,
                key: k.clone(),
                slot,
                master,
                info,
            });
        }
        Ok(out)
    }
}

/// The EXISTS of every partition key, in order.
fn exists_cmds(routing: &Partitioning) -> Vec<Cmd> {
    routing.keys.iter().map(|k| key_cmd("EXISTS", k)).collect()
}

/// The BF.INFO of every partition key whose EXISTS (`present`) answered 1.
fn partition_info_cmds(routing: &Partitioning, present: &[Value]) -> Vec<Cmd> {
    routing
        .keys
        .iter()
        .zip(present)
        .filter(|(_, p)| as_u64(p) == Some(1))
        .map(|(k, _)| info_cmd(k))
        .collect()
}

/// How partition `index` (key `k`, BF.INFO `info`) falls short of the descriptor, if it does.
fn partition_problem(
    routing: &Partitioning,
    index: u32,
    k: &[u8],
    info: Option<&KeyInfo>,
) -> Option<String> {
    let key_text = String::from_utf8_lossy(k);
    let Some(info) = info else {
        return Some(format!("partition {key_text} is missing"));
    };
    match info.partition {
        None => Some(format!(
            "{key_text} is not a partition (no Partition field)"
        )),
        Some((pi, pp, ps)) => {
            (pi != index || pp != routing.partitions || ps != routing.routing_seed).then(|| {
                format!(
                    "{key_text} says it is partition {pi} of {pp} with seed {ps}; the \
                     descriptor says {index} of {} with seed {}",
                    routing.partitions, routing.routing_seed
                )
            })
        }
    }
}

pub(super) fn key_info(pairs: &[(Value, Value)]) -> KeyInfo {
    let n = |name| field(pairs, name).and_then(as_u64);
    let partition = match (n("Partition"), n("Partitions"), n("Routing seed")) {
        (Some(i), Some(p), Some(s)) => match (u32::try_from(i), u32::try_from(p)) {
            (Ok(i), Ok(p)) => Some((i, p, s)),
            _ => None,
        },
        _ => None,
    };
    KeyInfo {
        capacity: n("Capacity").unwrap_or(0),
        size: n("Size").unwrap_or(0),
        filters: n("Number of filters").unwrap_or(0),
        items: n("Number of items inserted").unwrap_or(0),
        expansion: n("Expansion rate"),
        window_ms: n("Window (ms)"),
        generation_ms: n("Generation (ms)"),
        partition,
    }
}
