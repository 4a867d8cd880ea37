//! A filter by its name, plain (one key) or partitioned (`docs/partitions.md`: a descriptor at
//! the name and P partition keys), with the same operations on both: reserve, add, look up,
//! describe, merge, delete.

mod batches;
#[cfg(test)]
mod deadlines;
mod info;
mod like;
mod merge;
pub(crate) mod reply;
mod reserve;
mod send;
mod write;

use batches::Batches;
pub(crate) use batches::Head;
pub use info::{scandump, FilterInfo, KeyInfo, PartitionInfo, Totals};
pub use merge::MergeReport;
use reply::{as_bytes, field};
pub use reply::{as_u64, info_pairs};
use send::{send_raw, INFO_RETRY};

use redis::{Cmd, Value};

use crate::connection::Connection;
pub use crate::delivery::{ReadOptions, Stall, StallWatcher, WriteOptions, DEFAULT_RETRY_FOR};
use crate::error::{Error, Result};
use crate::routing::{key_slot, partition_keys, MAX_PARTITIONS};
use crate::transport::{block, Transport};

/// How a filter grows once its capacity is reached.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Growth {
    /// Adds layers; `None` leaves the server's default expansion.
    Scaling { expansion: Option<u32> },
    /// Refuses items past its capacity.
    NonScaling,
    /// A sliding window of this many milliseconds.
    Window { ms: u64 },
}

/// What `BF.RESERVE` is asked for.
#[derive(Clone, Debug, PartialEq)]
pub struct ReserveOptions {
    pub error_rate: f64,
    /// Items in all (for a partitioned filter: spread over the partitions).
    pub capacity: u64,
    pub growth: Growth,
    /// Partitions; `None` reserves a plain filter.
    pub partitions: Option<u32>,
}

/// A partitioned filter's routing: P, the routing seed and the partition keys in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partitioning {
    pub partitions: u32,
    pub routing_seed: u64,
    pub keys: Vec<Vec<u8>>,
}

/// A filter: its name, and its routing when it is partitioned.
#[derive(Clone, Debug)]
pub struct Filter {
    name: Vec<u8>,
    partitioning: Option<Partitioning>,
}

/// A command of one key (`DEL key`, `EXISTS key`, `BF.INFO key`).
fn key_cmd(name: &str, key: &[u8]) -> Cmd {
    let mut c = redis::cmd(name);
    c.arg(key);
    c
}

/// `BF.INFO key`.
fn info_cmd(key: &[u8]) -> Cmd {
    key_cmd("BF.INFO", key)
}

impl Filter {
    /// A plain filter at `name` (nothing is asked of the server; adds fail with
    /// [`Error::Vanished`] while the key does not exist).
    pub fn plain(name: &[u8]) -> Filter {
        Filter {
            name: name.to_vec(),
            partitioning: None,
        }
    }

    pub fn name(&self) -> &[u8] {
        &self.name
    }

    fn name_text(&self) -> String {
        String::from_utf8_lossy(&self.name).into_owned()
    }

    /// The routing, when partitioned.
    pub fn partitioning(&self) -> Option<&Partitioning> {
        self.partitioning.as_ref()
    }

    /// Every key the filter is made of: the name, then the partitions.
    pub fn keys(&self) -> Vec<Vec<u8>> {
        let mut keys = vec![self.name.clone()];
        if let Some(p) = &self.partitioning {
            keys.extend(p.keys.iter().cloned());
        }
        keys
    }

    /// Looks `name` up with one BF.INFO: a descriptor gives the partitioned filter's routing,
    /// any other filter is plain. `None` when the key does not exist. A BF.INFO whose reply was
    /// lost (its node down, a failover in progress) is sent again for up to
    /// [`DEFAULT_RETRY_FOR`], as lookups are, then [`Error::Connection`].
    pub fn discover(conn: &mut Connection, name: &[u8]) -> Result<Option<Filter>> {
        block(Filter::discover_on(conn, name))
    }

    pub(crate) async fn discover_on(
        conn: &mut impl Transport,
        name: &[u8],
    ) -> Result<Option<Filter>> {
        let reply = send_raw(conn, &[info_cmd(name)][..], INFO_RETRY).await;
        let reply = reply.and_then(|replies| {
            replies
                .into_iter()
                .next()
                .ok_or_else(|| Error::Protocol("no reply to BF.INFO".into()))
        });
        Filter::from_info(name, reply)
    }

    /// The filter at `name` from its BF.INFO reply ([`Filter::discover`]).
    fn from_info(name: &[u8], reply: Result<Value>) -> Result<Option<Filter>> {
        let reply = match reply {
            Ok(v) => v,
            Err(Error::Server(t)) if t.contains("not found") => return Ok(None),
            Err(e) => return Err(e),
        };
        let pairs = info_pairs(reply)?;
        let partitions = field(&pairs, "Partitions").and_then(as_u64);
        let keys = field(&pairs, "Partition keys");
        let is_partition_key = field(&pairs, "Partition").is_some();
        let (Some(partitions), Some(keys), false) = (partitions, keys, is_partition_key) else {
            return Ok(Some(Filter::plain(name)));
        };
        let seed = field(&pairs, "Routing seed")
            .and_then(as_u64)
            .ok_or_else(|| Error::Protocol("descriptor without a routing seed".into()))?;
        let keys: Vec<Vec<u8>> = match keys {
            Value::Array(a) => a.iter().filter_map(as_bytes).collect(),
            other => return Err(Error::Protocol(format!("Partition keys: {other:?}"))),
        };
        let partitions = u32::try_from(partitions)
            .ok()
            .filter(|p| (1..=MAX_PARTITIONS).contains(p))
            .ok_or_else(|| Error::Protocol(format!("{partitions} partitions")))?;
        if keys.len() != partitions as usize {
            return Err(Error::Inconsistent(format!(
                "{partitions} partitions but {} partition keys",
                keys.len()
            )));
        }
        let expected = partition_keys(name, partitions);
        if keys != expected {
            return Err(Error::Inconsistent(
                "the descriptor's partition keys are not the ones docs/partitions.md gives".into(),
            ));
        }
        Ok(Some(Filter {
            name: name.to_vec(),
            partitioning: Some(Partitioning {
                partitions,
                routing_seed: seed,
                keys,
            }),
        }))
    }

    /// The key holding partition `part`, or the name.
    fn key_of(&self, part: Option<u32>) -> &[u8] {
        match (part, &self.partitioning) {
            (Some(p), Some(routing)) => &routing.keys[p as usize],
            _ => &self.name,
        }
    }

    /// The slots [`Filter::add`] WAITs on: those of every key `batches` write to.
    fn write_slots(&self, batches: &Batches) -> Vec<u16> {
        let mut slots: Vec<u16> = batches.parts().map(|p| key_slot(self.key_of(p))).collect();
        slots.sort_unstable();
        slots.dedup();
        slots
    }

    /// Deletes the filter: the descriptor first (a descriptor implies its partitions), then the
    /// partitions. Answers how many keys were deleted.
    pub fn drop(&self, conn: &mut Connection) -> Result<u64> {
        block(self.drop_on(conn))
    }

    pub(crate) async fn drop_on(&self, conn: &mut impl Transport) -> Result<u64> {
        let mut dels: Vec<Cmd> = self.keys().iter().map(|k| key_cmd("DEL", k)).collect();
        let partitions = dels.split_off(1);
        let first = send_raw(conn, &dels[..], INFO_RETRY).await?;
        let rest = send_raw(conn, &partitions[..], INFO_RETRY).await?;
        Ok(first.iter().chain(&rest).filter_map(as_u64).sum())
    }
}
