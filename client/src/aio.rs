//! The async API (cargo feature `async`, on tokio): the operations of [`Filter`] as `*_async`
//! methods over an async [`Connection`] to a single server (the `redis` crate's multiplexed
//! connection) or a Redis Cluster (its async cluster connection), from
//! [`Client::open_async`](crate::Client::open_async) and
//! [`Client::connect_async`](crate::Client::connect_async). The operations, and so their
//! errors, are the synchronous API's: only the sending differs.
//!
//! A [`Connection`] is cheap to clone, and its clones share the sockets: several adds in flight
//! at once (one per task) are pipelined together on each node.
//!
//! ```no_run
//! use rustbloom_client::{Client, Filter, Growth, ReserveOptions, WriteOptions};
//! # async fn run() -> rustbloom_client::Result<()> {
//! let mut conn = Client::open_async("redis://127.0.0.1:40705").await?.connect_async().await?;
//! let opts = ReserveOptions { error_rate: 1e-9, capacity: 1_000_000_000,
//!                             growth: Growth::NonScaling, partitions: Some(16) };
//! let clicks = Filter::reserve_async(&mut conn, b"clicks", &opts).await?;   // once
//! let clicks = Filter::discover_async(&mut conn, b"clicks").await?.expect("reserved"); // elsewhere
//! clicks.add_async(&mut conn, &[b"click-1".as_slice(), b"click-2"], &WriteOptions::default()).await?;
//! clicks.exists_async(&mut conn, &[b"click-1".as_slice(), b"nope"], 1000).await?;  // [true, false]
//! # Ok(())
//! # }
//! ```

use std::time::Duration;

use futures_util::future::try_join_all;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{AsyncConnectionConfig, Cmd, RedisResult, Value};

use crate::connection::{
    checked, cluster_enabled, cluster_info_cmd, cluster_slots_cmd, errors_in_place,
    parse_cluster_slots, parse_url, single_master, unreachable_server, Kind, CONNECT_TIMEOUT,
    RESPONSE_TIMEOUT,
};
use crate::error::{Error, Result};
use crate::filter::{
    Filter, FilterInfo, Head, MergeReport, ReadOptions, ReserveOptions, WriteOptions,
};
use crate::resp::Reply;
use crate::routing::Master;
use crate::transport::{Commands, Transport};
use crate::Client;

fn config() -> AsyncConnectionConfig {
    AsyncConnectionConfig::new()
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
        .set_response_timeout(Some(RESPONSE_TIMEOUT))
}

impl Client {
    /// [`Client::open`], async.
    pub async fn open_async(url: &str) -> Result<Client> {
        let single = parse_url(url)?;
        let mut c = single
            .get_multiplexed_async_connection_with_config(&config())
            .await
            .map_err(|e| unreachable_server(url, &e))?;
        let clustered = cluster_enabled(url, c.req_packed_command(&cluster_info_cmd()).await)?;
        let slots = if clustered {
            Some(c.req_packed_command(&cluster_slots_cmd()).await)
        } else {
            None
        };
        Client::new(url, single, slots)
    }

    /// A new async connection (for a cluster: to its masters, with a fresh slot map).
    pub async fn connect_async(&self) -> Result<Connection> {
        let conn = self.open_async_conn().await?;
        Ok(Connection {
            conn,
            client: self.clone(),
        })
    }

    async fn open_async_conn(&self) -> Result<Conn> {
        match &self.kind {
            Kind::Single(c) => c
                .get_multiplexed_async_connection_with_config(&config())
                .await
                .map(Conn::Single)
                .map_err(|e| Error::Connect(format!("cannot connect to {}: {e}", self.url))),
            Kind::Cluster(c) => c
                .get_async_connection()
                .await
                .map(Conn::Cluster)
                .map_err(|e| {
                    Error::Connect(format!(
                        "cannot connect to the cluster of {}: {e}",
                        self.url
                    ))
                }),
        }
    }
}

#[derive(Clone)]
enum Conn {
    Single(MultiplexedConnection),
    Cluster(ClusterConnection),
}

/// A connection from [`Client::connect_async`]; its clones share its sockets.
#[derive(Clone)]
pub struct Connection {
    conn: Conn,
    client: Client,
}

impl Connection {
    /// Opens a new connection in place of this one (for a cluster, with the slot map fetched
    /// again): after a failover or a lost connection. Its clones keep the old one.
    pub async fn reconnect(&mut self) -> Result<()> {
        self.conn = self.client.open_async_conn().await?;
        Ok(())
    }

    /// The client this connection came from (a single server or a cluster).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Sends one command (routed by its key on a cluster) and returns the raw result.
    pub async fn raw(&mut self, cmd: &Cmd) -> RedisResult<Value> {
        match &mut self.conn {
            Conn::Single(c) => c.req_packed_command(cmd).await,
            Conn::Cluster(c) => c.req_packed_command(cmd).await,
        }
    }

    /// Sends one command; an error reply becomes [`Error::Server`].
    pub async fn query(&mut self, cmd: &Cmd) -> Result<Value> {
        checked(self.raw(cmd).await)
    }

    /// Sends `cmds` and returns the replies in order, error replies in their place as
    /// `Value::ServerError`. A single server gets one pipeline; a cluster one per slot, all in
    /// flight at once.
    pub async fn pipeline(&mut self, cmds: &[Cmd]) -> RedisResult<Vec<Value>> {
        match &mut self.conn {
            Conn::Single(c) => c.req_packed_commands(&pipe(cmds), 0, cmds.len()).await,
            Conn::Cluster(c) => {
                let groups = by_slot(cmds);
                let sent = groups.iter().map(|(slot, positions)| {
                    let mut c = c.clone();
                    // One command (a partition's usual share of a round) goes alone: a pipeline
                    // would copy it once more.
                    async move {
                        match positions.as_slice() {
                            [one] => {
                                let route = RoutingInfo::SingleNode(master_of(*slot));
                                let reply = c.route_command(cmds[*one].clone(), route).await;
                                reply.map(|v| vec![v])
                            }
                            _ => {
                                let p = pipe(positions.iter().map(|&i| &cmds[i]));
                                c.route_pipeline(p, 0, positions.len(), master_of(*slot))
                                    .await
                            }
                        }
                    }
                });
                let answers = try_join_all(sent).await?;
                let mut replies = vec![Value::Nil; cmds.len()];
                for ((_, positions), answer) in groups.iter().zip(answers) {
                    for (&i, reply) in positions.iter().zip(answer) {
                        replies[i] = reply;
                    }
                }
                Ok(replies)
            }
        }
    }

    /// Sends `cmd` to the master of `slot` (a cluster), or to the server.
    pub async fn to_slot(&mut self, cmd: &Cmd, slot: u16) -> RedisResult<Value> {
        match &mut self.conn {
            Conn::Single(c) => c.req_packed_command(cmd).await,
            Conn::Cluster(c) => {
                let route = RoutingInfo::SingleNode(master_of(slot));
                c.route_command(cmd.clone(), route).await
            }
        }
    }

    /// The masters and their slots (`CLUSTER SLOTS`); a single server is one master holding
    /// every slot.
    pub async fn masters(&mut self) -> Result<Vec<Master>> {
        if let Conn::Single(_) = self.conn {
            return Ok(single_master(&self.client.url));
        }
        let reply = self.query(redis::cmd("CLUSTER").arg("SLOTS")).await?;
        parse_cluster_slots(reply)
    }
}

/// The master serving `slot`.
fn master_of(slot: u16) -> SingleNodeRoutingInfo {
    SingleNodeRoutingInfo::SpecificNode(Route::new(slot, SlotAddr::Master))
}

fn pipe<'a>(cmds: impl IntoIterator<Item = &'a Cmd>) -> redis::Pipeline {
    let mut p = redis::pipe();
    for cmd in cmds {
        p.add_command(cmd.clone());
    }
    p
}

/// The positions of `cmds` grouped by the slot of their key (every command this crate sends
/// names its key first), in order within each group.
fn by_slot(cmds: &[Cmd]) -> Vec<(u16, Vec<usize>)> {
    let mut groups: Vec<(u16, Vec<usize>)> = Vec::new();
    for i in 0..cmds.len() {
        let slot = cmds.slot(i);
        match groups.iter_mut().find(|(s, _)| *s == slot) {
            Some((_, positions)) => positions.push(i),
            None => groups.push((slot, vec![i])),
        }
    }
    groups
}

impl Transport for Connection {
    async fn send_one(&mut self, cmd: &Cmd) -> Result<Value> {
        self.query(cmd).await
    }

    async fn send_replies<C: Commands + ?Sized>(
        &mut self,
        cmds: &C,
        which: &[usize],
    ) -> RedisResult<Vec<Option<Reply>>> {
        let replies = errors_in_place(self.pipeline(&cmds.cmds(which)).await, which.len())?;
        Ok(replies.into_iter().map(|r| r.map(Reply::Value)).collect())
    }

    async fn send_to_slot(&mut self, cmd: &Cmd, slot: u16) -> RedisResult<Value> {
        self.to_slot(cmd, slot).await
    }

    async fn slot_map(&mut self) -> Result<Vec<Master>> {
        self.masters().await
    }

    async fn pause_then_reconnect(&mut self, pause: Duration) {
        tokio::time::sleep(pause).await;
        let _ = self.reconnect().await;
    }
}

impl Filter {
    /// [`Filter::discover`], async.
    pub async fn discover_async(conn: &mut Connection, name: &[u8]) -> Result<Option<Filter>> {
        Filter::discover_on(conn, name).await
    }

    /// [`Filter::reserve`], async.
    pub async fn reserve_async(
        conn: &mut Connection,
        name: &[u8],
        opts: &ReserveOptions,
    ) -> Result<Filter> {
        Filter::reserve_on(conn, name, opts).await
    }

    /// [`Filter::reserve_like`], async.
    pub async fn reserve_like_async(
        conn: &mut Connection,
        name: &[u8],
        model: &[u8],
    ) -> Result<Filter> {
        let cluster = conn.client().is_cluster();
        Filter::reserve_like_on(conn, name, model, cluster).await
    }

    /// [`Filter::add`], async: `BF.INSERT … NOCREATE`; a key that no longer exists is
    /// [`Error::Vanished`]; lost replies are resent as `opts.resend_lost_replies` says.
    pub async fn add_async(
        &self,
        conn: &mut Connection,
        items: &[&[u8]],
        opts: &WriteOptions,
    ) -> Result<Vec<bool>> {
        self.add_on(conn, items, opts, Head::Insert).await
    }

    /// [`Filter::create_with_defaults`], async.
    pub async fn create_with_defaults_async(
        conn: &mut Connection,
        name: &[u8],
        first: &[u8],
        opts: &WriteOptions,
    ) -> Result<(Filter, bool)> {
        Filter::create_with_defaults_on(conn, name, first, opts).await
    }

    /// [`Filter::exists`], async: a missing partition is [`Error::MissingPartition`].
    pub async fn exists_async(
        &self,
        conn: &mut Connection,
        items: &[&[u8]],
        batch: usize,
    ) -> Result<Vec<bool>> {
        let opts = ReadOptions {
            batch,
            ..ReadOptions::default()
        };
        self.exists_on(conn, items, &opts).await
    }

    /// [`Filter::exists_with`], async: the batch and the deadline of `opts`.
    pub async fn exists_with_async(
        &self,
        conn: &mut Connection,
        items: &[&[u8]],
        opts: &ReadOptions,
    ) -> Result<Vec<bool>> {
        self.exists_on(conn, items, opts).await
    }

    /// [`Filter::info`], async.
    pub async fn info_async(&self, conn: &mut Connection) -> Result<FilterInfo> {
        self.info_on(conn).await
    }

    /// [`Filter::merge`], async.
    pub async fn merge_async(
        conn: &mut Connection,
        dest: &[u8],
        sources: &[&[u8]],
    ) -> Result<MergeReport> {
        let cluster = conn.client().is_cluster();
        Filter::merge_on(conn, dest, sources, cluster).await
    }

    /// [`Filter::drop`], async.
    pub async fn drop_async(&self, conn: &mut Connection) -> Result<u64> {
        self.drop_on(conn).await
    }
}
