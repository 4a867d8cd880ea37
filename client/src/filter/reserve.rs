//! Reserving a filter: one BF.RESERVE, or the partitions and then their descriptor.

use redis::Cmd;

use super::send::{send_raw, INFO_RETRY};
use super::{key_cmd, Filter, Growth, Partitioning, ReserveOptions};
use crate::connection::Connection;
use crate::error::{explain, server_error_text, to_error, Error, Result};
use crate::resp::Reply;
use crate::routing::{partition_capacity, partition_keys, MAX_PARTITIONS};
use crate::transport::{block, Transport};

fn growth_args(cmd: &mut Cmd, growth: Growth) {
    match growth {
        Growth::Scaling { expansion: Some(x) } => {
            cmd.arg("EXPANSION").arg(x);
        }
        Growth::Scaling { expansion: None } => {}
        Growth::NonScaling => {
            cmd.arg("NONSCALING");
        }
        Growth::Window { ms } => {
            cmd.arg("WINDOW").arg(ms);
        }
    }
}

/// The commands of [`Filter::reserve`], for any transport.
enum ReservePlan {
    Plain(Cmd),
    Partitioned(PartitionedReserve),
}

/// A partitioned filter's reservation: the partitions first, then the descriptor (also made
/// from another filter's by [`Filter::reserve_like`]).
pub(super) struct PartitionedReserve {
    pub(super) partitions: Vec<Cmd>,
    pub(super) descriptor: Cmd,
    /// The filter once reserved.
    pub(super) filter: Filter,
}

impl ReservePlan {
    /// Checks `opts` and builds the commands, with a new random routing seed.
    fn new(name: &[u8], opts: &ReserveOptions) -> Result<ReservePlan> {
        if !(opts.error_rate > 0.0 && opts.error_rate < 1.0) {
            return Err(Error::Usage(
                "the error rate must be strictly between 0 and 1".into(),
            ));
        }
        if opts.capacity == 0 {
            return Err(Error::Usage("the capacity must be at least 1".into()));
        }
        let error_rate = opts.error_rate.to_string();
        let Some(partitions) = opts.partitions else {
            let mut cmd = redis::cmd("BF.RESERVE");
            cmd.arg(name).arg(&error_rate).arg(opts.capacity);
            growth_args(&mut cmd, opts.growth);
            return Ok(ReservePlan::Plain(cmd));
        };
        if !(1..=MAX_PARTITIONS).contains(&partitions) {
            return Err(Error::Usage(format!(
                "partitions must be in [1, {MAX_PARTITIONS}]"
            )));
        }
        let seed: u64 = rand::random();
        let keys = partition_keys(name, partitions);
        let capacity =
            partition_capacity(opts.capacity, partitions, opts.growth == Growth::NonScaling);
        let cmds: Vec<Cmd> = keys
            .iter()
            .enumerate()
            .map(|(i, key)| {
                let mut cmd = redis::cmd("BF.RESERVE");
                cmd.arg(key.as_slice()).arg(&error_rate).arg(capacity);
                growth_args(&mut cmd, opts.growth);
                cmd.arg("PARTITION")
                    .arg(i)
                    .arg(partitions)
                    .arg(seed.to_string());
                cmd
            })
            .collect();
        let mut descriptor = redis::cmd("BF.RESERVE");
        descriptor
            .arg(name)
            .arg(&error_rate)
            .arg(opts.capacity)
            .arg("PARTITIONS")
            .arg(partitions)
            .arg(seed.to_string());
        growth_args(&mut descriptor, opts.growth);
        Ok(ReservePlan::Partitioned(PartitionedReserve {
            partitions: cmds,
            descriptor,
            filter: Filter {
                name: name.to_vec(),
                partitioning: Some(Partitioning {
                    partitions,
                    routing_seed: seed,
                    keys,
                }),
            },
        }))
    }
}

impl PartitionedReserve {
    /// Which partitions the BF.RESERVEs created, from their replies (every reply in its place,
    /// so that a refusal of some cannot hide the others: an existing name must leave nothing
    /// behind). A reply a cluster hid beside an error reply (`None`) belongs to a command that
    /// ran without error: created. A lost connection leaves it unknown which ran: nothing is
    /// counted as created, and the error is the connection's.
    fn created(&self, sent: redis::RedisResult<Vec<Option<Reply>>>) -> Vec<Result<()>> {
        match sent {
            Ok(replies) => replies
                .iter()
                .map(|r| match r.as_ref().and_then(Reply::server_error) {
                    Some(e) => Err(explain(server_error_text(e))),
                    None => Ok(()),
                })
                .collect(),
            Err(e) => vec![Err(to_error(&e))],
        }
    }

    /// The DELs of the partitions this reservation created, after it failed: a key that
    /// already existed made its BF.RESERVE fail, and stays.
    fn undo(&self, created: &[Result<()>]) -> Vec<Cmd> {
        let keys = self.filter.keys();
        let partitions = &keys[1..];
        if created.len() != partitions.len() {
            return Vec::new();
        }
        partitions
            .iter()
            .zip(created)
            .filter(|(_, r)| r.is_ok())
            .map(|(k, _)| key_cmd("DEL", k))
            .collect()
    }
}

impl Filter {
    /// Creates the filter: a plain BF.RESERVE, or every partition and then the descriptor (so
    /// that a descriptor always has its partitions). On failure the partitions it created are
    /// deleted again.
    pub fn reserve(conn: &mut Connection, name: &[u8], opts: &ReserveOptions) -> Result<Filter> {
        block(Filter::reserve_on(conn, name, opts))
    }

    pub(crate) async fn reserve_on(
        conn: &mut impl Transport,
        name: &[u8],
        opts: &ReserveOptions,
    ) -> Result<Filter> {
        match ReservePlan::new(name, opts)? {
            ReservePlan::Plain(cmd) => {
                conn.send_one(&cmd).await?;
                Ok(Filter::plain(name))
            }
            ReservePlan::Partitioned(plan) => plan.run(conn).await,
        }
    }
}

impl PartitionedReserve {
    /// Sends the partitions' BF.RESERVEs, then, when every one created its key, the
    /// descriptor's; on failure deletes the partitions it created.
    pub(super) async fn run(self, conn: &mut impl Transport) -> Result<Filter> {
        let every: Vec<usize> = (0..self.partitions.len()).collect();
        let sent = conn.send_replies(&self.partitions[..], &every).await;
        let created = self.created(sent);
        let undo = self.undo(&created);
        // The first refusal stops the reservation before its descriptor: the server's own
        // words (`item exists` when a partition key is taken), as for a plain filter.
        let result = match created.into_iter().find_map(Result::err) {
            Some(e) => Err(e),
            None => conn.send_one(&self.descriptor).await.map(|_| ()),
        };
        if result.is_err() && !undo.is_empty() {
            // Best effort: the refusal is the error to report; a DEL that fails leaves empty
            // partitions without a descriptor, which a new reserve of the name meets as
            // `item exists`.
            let _ = send_raw(conn, &undo[..], INFO_RETRY).await;
        }
        result.map(|()| self.filter)
    }
}
