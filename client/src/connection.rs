//! One connection to rustbloom, whether it is a single server or a Redis Cluster (or Valkey
//! cluster) reached through any of its nodes. A filter's adds and lookups (and the WAITs after
//! them) go out on this crate's own connections, packed straight from the items and read with
//! its reply reader: to the server, or to each master of a cluster ([`crate::nodes`], which
//! follows `MOVED` and `ASK`). Every other command of a cluster is routed by the `redis` crate
//! (feature `cluster`); this adds the detection, reconnection after a failure, and the slot map
//! that [`crate::filter`] groups partitions by.

use std::time::Duration;

use redis::cluster::{ClusterClient, ClusterConnection};
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{Cmd, ConnectionAddr, ConnectionInfo, ConnectionLike, RedisResult, Value};

use crate::error::{explain, server_error_text, server_text, Error, Result};
use crate::nodes::Nodes;
use crate::resp::Reply;
use crate::routing::Master;
use crate::single::SingleConnection;
pub(crate) use crate::single::{CONNECT_TIMEOUT, RESPONSE_TIMEOUT};
use crate::transport::{Commands, Transport};

/// `INFO cluster`, which tells a cluster node from a single server.
pub(crate) fn cluster_info_cmd() -> Cmd {
    let mut cmd = redis::cmd("INFO");
    cmd.arg("cluster");
    cmd
}

/// Whether `url`'s answer to [`cluster_info_cmd`] says it is a cluster node.
pub(crate) fn cluster_enabled(url: &str, reply: RedisResult<Value>) -> Result<bool> {
    let info = match reply {
        Ok(Value::BulkString(b)) => String::from_utf8_lossy(&b).into_owned(),
        Ok(Value::VerbatimString { text, .. }) => text,
        Ok(Value::ServerError(e)) => return Err(explain(server_error_text(&e))),
        Ok(other) => return Err(Error::Protocol(format!("INFO cluster answered {other:?}"))),
        Err(e) => {
            return Err(Error::Connect(format!(
                "{url} does not answer INFO: {}",
                server_text(&e)
            )))
        }
    };
    Ok(info.lines().any(|l| l.trim() == "cluster_enabled:1"))
}

/// The client of the server at `url`.
pub(crate) fn parse_url(url: &str) -> Result<redis::Client> {
    redis::Client::open(url).map_err(|e| Error::Connect(format!("invalid server URL {url:?}: {e}")))
}

/// The first connection to `url` failed.
pub(crate) fn unreachable_server(url: &str, e: &redis::RedisError) -> Error {
    Error::Connect(format!(
        "cannot connect to {url}: {e} (is redis-server running there?)"
    ))
}

/// `CLUSTER SLOTS`, whose nodes seed a cluster client beside the URL's own.
pub(crate) fn cluster_slots_cmd() -> Cmd {
    let mut cmd = redis::cmd("CLUSTER");
    cmd.arg("SLOTS");
    cmd
}

/// The cluster client of the cluster `url` is a node of, seeded by `seeds`.
pub(crate) fn cluster_client(url: &str, seeds: Vec<ConnectionInfo>) -> Result<ClusterClient> {
    ClusterClient::builder(seeds)
        .connection_timeout(CONNECT_TIMEOUT)
        .response_timeout(RESPONSE_TIMEOUT)
        .build()
        .map_err(|e| Error::Connect(format!("cluster client for {url}: {e}")))
}

/// A command's result with an error reply as [`Error::Server`].
pub(crate) fn checked(reply: RedisResult<Value>) -> Result<Value> {
    match reply {
        Ok(Value::ServerError(e)) => Err(explain(server_error_text(&e))),
        Ok(v) => Ok(v),
        Err(e) if e.code().is_some() => Err(explain(server_text(&e))),
        Err(e) => Err(Error::Connection(format!("connection error: {e}"))),
    }
}

/// A pipeline's result with every error reply in its place as `Value::ServerError`: a
/// pipeline that failed on error replies gives the errors only (the `redis` crate drops the
/// other replies), so the commands without an error ran, but their replies are `None`.
pub(crate) fn errors_in_place(
    sent: RedisResult<Vec<Value>>,
    n: usize,
) -> RedisResult<Vec<Option<Value>>> {
    match sent {
        Ok(replies) => Ok(replies.into_iter().map(Some).collect()),
        Err(e) => {
            let Some(errors) = e.clone().into_server_errors() else {
                return Err(e);
            };
            let mut replies: Vec<Option<Value>> = vec![None; n];
            for (i, error) in errors.iter() {
                match replies.get_mut(*i) {
                    Some(slot) => *slot = Some(Value::ServerError(error.clone())),
                    None => return Err(e),
                }
            }
            Ok(replies)
        }
    }
}

/// A single server as the one master holding every slot.
pub(crate) fn single_master(url: &str) -> Vec<Master> {
    vec![Master {
        addr: url.to_string(),
        ranges: vec![(0, crate::routing::SLOTS - 1)],
    }]
}

/// Where to connect: a single server, or a cluster whose nodes were found from one of them.
#[derive(Clone)]
pub struct Client {
    pub(crate) url: String,
    pub(crate) kind: Kind,
}

#[derive(Clone)]
pub(crate) enum Kind {
    Single(redis::Client),
    Cluster(Box<ClusterClient>),
}

/// Where a cluster connection looks for the slot map: the URL's node first, then every node
/// `CLUSTER SLOTS` names, with the URL's settings (credentials, database). A reconnect after the
/// URL's own node died (a failover of that master) then asks another node instead of failing
/// until that node is back.
fn cluster_seeds(single: &redis::Client, slots: RedisResult<Value>) -> Vec<ConnectionInfo> {
    let first = single.get_connection_info().clone();
    let mut seeds = vec![first.clone()];
    let ConnectionAddr::Tcp(..) = first.addr() else {
        return seeds;
    };
    let Ok(Value::Array(ranges)) = slots else {
        return seeds;
    };
    for range in &ranges {
        let Value::Array(fields) = range else {
            continue;
        };
        for node in fields.iter().skip(2) {
            let Value::Array(node) = node else { continue };
            let host = match node.first() {
                Some(Value::BulkString(h)) => String::from_utf8_lossy(h).into_owned(),
                Some(Value::SimpleString(h)) => h.clone(),
                _ => continue,
            };
            let Some(Value::Int(port)) = node.get(1) else {
                continue;
            };
            let (Ok(port), false) = (u16::try_from(*port), host.is_empty() || host == "?") else {
                continue;
            };
            let addr = ConnectionAddr::Tcp(host, port);
            if seeds.iter().all(|s| *s.addr() != addr) {
                seeds.push(first.clone().set_addr(addr));
            }
        }
    }
    seeds
}

impl Client {
    /// Opens `url` (`redis://[user:password@]host:port[/db]`, `redis+unix:///path`): asks the
    /// server whether it is a cluster node (`INFO cluster`) and, if so, connects to the whole
    /// cluster through it.
    pub fn open(url: &str) -> Result<Client> {
        let single = parse_url(url)?;
        let mut c = single
            .get_connection_with_timeout(CONNECT_TIMEOUT)
            .map_err(|e| unreachable_server(url, &e))?;
        let clustered = cluster_enabled(url, c.req_command(&cluster_info_cmd()))?;
        let slots = clustered.then(|| c.req_command(&cluster_slots_cmd()));
        Client::new(url, single, slots)
    }

    /// The client of `url` (`single`), for its whole cluster when it answered `CLUSTER SLOTS`
    /// (`cluster_slots`: that answer, for a cluster node).
    pub(crate) fn new(
        url: &str,
        single: redis::Client,
        cluster_slots: Option<RedisResult<Value>>,
    ) -> Result<Client> {
        let kind = if let Some(slots) = cluster_slots {
            Kind::Cluster(Box::new(cluster_client(
                url,
                cluster_seeds(&single, slots),
            )?))
        } else {
            Kind::Single(single)
        };
        Ok(Client {
            url: url.to_string(),
            kind,
        })
    }

    /// True when the URL named a cluster node.
    pub fn is_cluster(&self) -> bool {
        matches!(self.kind, Kind::Cluster(_))
    }

    /// The URL this client was opened with.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A new connection (for a cluster: to every master it needs, with a fresh slot map).
    pub fn connect(&self) -> Result<Connection> {
        let conn = self.open_conn()?;
        Ok(Connection {
            client: self.clone(),
            conn,
        })
    }

    fn open_conn(&self) -> Result<Conn> {
        match &self.kind {
            Kind::Single(c) => {
                let conn = SingleConnection::open(
                    c.get_connection_info(),
                    CONNECT_TIMEOUT,
                    RESPONSE_TIMEOUT,
                )
                .map_err(|e| Error::Connect(format!("cannot connect to {}: {e}", self.url)))?;
                Ok(Conn::Single(Box::new(conn)))
            }
            Kind::Cluster(c) => {
                let routed = c.get_connection().map_err(|e| {
                    Error::Connect(format!(
                        "cannot connect to the cluster of {}: {e}",
                        self.url
                    ))
                })?;
                let node_settings = parse_url(&self.url)?.get_connection_info().clone();
                Ok(Conn::Cluster(Box::new(ClusterConn {
                    routed,
                    nodes: Nodes::new(node_settings),
                })))
            }
        }
    }
}

enum Conn {
    Single(Box<SingleConnection>),
    Cluster(Box<ClusterConn>),
}

/// A cluster: the `redis` crate's connection routes single commands and other pipelines;
/// adds, lookups and the WAITs after them go to the masters through [`Nodes`], the WAIT on the
/// connection that wrote (a WAIT counts the writes of its own connection).
struct ClusterConn {
    routed: ClusterConnection,
    nodes: Nodes,
}

impl ClusterConn {
    /// Fetches the slot map for [`Nodes`] when it has none.
    fn slot_map_for_nodes(&mut self) -> RedisResult<()> {
        if self.nodes.needs_slot_map() {
            let reply = self.routed.req_command(&cluster_slots_cmd())?;
            let masters = parse_cluster_slots(reply).map_err(|e| {
                redis::RedisError::from((redis::ErrorKind::Parse, "CLUSTER SLOTS", e.to_string()))
            })?;
            self.nodes.set_slot_map(masters);
        }
        Ok(())
    }
}

/// A connection from [`Client::connect`].
pub struct Connection {
    client: Client,
    conn: Conn,
}

impl Connection {
    pub fn is_cluster(&self) -> bool {
        self.client.is_cluster()
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Drops the connection and opens a new one (for a cluster, this fetches the slot map
    /// again): after a failover or a lost connection.
    pub fn reconnect(&mut self) -> Result<()> {
        self.conn = self.client.open_conn()?;
        Ok(())
    }

    /// The single server's connection, for a caller that streams its own packed commands
    /// (`send_packed` / `recv`, several in flight); `None` on a cluster.
    pub fn single(&mut self) -> Option<&mut SingleConnection> {
        match &mut self.conn {
            Conn::Single(c) => Some(c),
            Conn::Cluster(_) => None,
        }
    }

    /// Sends one command (routed by its key on a cluster) and returns the raw result.
    pub fn raw(&mut self, cmd: &Cmd) -> RedisResult<Value> {
        match &mut self.conn {
            Conn::Single(c) => c.request(cmd),
            Conn::Cluster(c) => c.routed.req_command(cmd),
        }
    }

    /// Sends one command; an error reply becomes [`Error::Server`].
    pub fn query(&mut self, cmd: &Cmd) -> Result<Value> {
        checked(self.raw(cmd))
    }

    /// Sends `cmds` as pipelines (on a cluster, one per node, all written before any reply is
    /// read, so the nodes work in parallel) and returns the replies in order. Error replies come
    /// back as `Value::ServerError` on a single server; on a cluster the first one fails the call
    /// ([`Connection::pipeline_replies`] keeps what is known).
    pub fn pipeline(&mut self, cmds: &[Cmd]) -> RedisResult<Vec<Value>> {
        match &mut self.conn {
            // Packed straight from the commands into one reused buffer (a pipeline object would
            // copy each first).
            Conn::Single(c) => c.pipeline(cmds),
            Conn::Cluster(c) => {
                let mut p = redis::cluster::cluster_pipe();
                for cmd in cmds {
                    p.add_command(cmd.clone());
                }
                p.query(&mut c.routed)
            }
        }
    }

    /// [`Connection::pipeline`] with every error reply in its place as `Value::ServerError`.
    /// On a cluster a pipeline with an error reply gives the errors only (the `redis` crate
    /// drops the other replies): the commands without an error then ran, but their replies are
    /// `None`.
    pub fn pipeline_replies(&mut self, cmds: &[Cmd]) -> RedisResult<Vec<Option<Value>>> {
        errors_in_place(self.pipeline(cmds), cmds.len())
    }

    /// Sends `cmd` to the master of `slot` (a cluster), or to the server.
    pub fn to_slot(&mut self, cmd: &Cmd, slot: u16) -> RedisResult<Value> {
        match &mut self.conn {
            Conn::Single(c) => c.request(cmd),
            Conn::Cluster(c) => c.routed.route_command(
                cmd,
                RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::new(
                    slot,
                    SlotAddr::Master,
                ))),
            ),
        }
    }

    /// The masters and their slots (`CLUSTER SLOTS`); a single server is one master holding
    /// every slot.
    pub fn masters(&mut self) -> Result<Vec<Master>> {
        if !self.is_cluster() {
            return Ok(single_master(&self.client.url));
        }
        let reply = self.query(redis::cmd("CLUSTER").arg("SLOTS"))?;
        parse_cluster_slots(reply)
    }
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

/// `CLUSTER SLOTS`: `[[lo, hi, [host, port, id, ...], replicas...], ...]`, merged by master.
pub(crate) fn parse_cluster_slots(reply: Value) -> Result<Vec<Master>> {
    let bad = |what: &str| Error::Protocol(format!("CLUSTER SLOTS: {what}"));
    let Value::Array(ranges) = reply else {
        return Err(bad("not an array"));
    };
    let mut masters: Vec<Master> = Vec::new();
    for range in ranges {
        let Value::Array(r) = range else {
            return Err(bad("range not an array"));
        };
        let (Some(lo), Some(hi), Some(Value::Array(node))) =
            (r.first().and_then(int), r.get(1).and_then(int), r.get(2))
        else {
            return Err(bad("range without bounds and master"));
        };
        let (Some(host), Some(port)) = (node.first().and_then(text), node.get(1).and_then(int))
        else {
            return Err(bad("master without host and port"));
        };
        let (Ok(lo), Ok(hi)) = (u16::try_from(lo), u16::try_from(hi)) else {
            return Err(bad("slot out of range"));
        };
        let addr = format!("{host}:{port}");
        match masters.iter_mut().find(|m| m.addr == addr) {
            Some(m) => m.ranges.push((lo, hi)),
            None => masters.push(Master {
                addr,
                ranges: vec![(lo, hi)],
            }),
        }
    }
    masters.sort_by(|a, b| a.ranges.first().cmp(&b.ranges.first()));
    Ok(masters)
}

impl Transport for Connection {
    async fn send_one(&mut self, cmd: &Cmd) -> Result<Value> {
        self.query(cmd)
    }

    async fn send_replies<C: Commands + ?Sized>(
        &mut self,
        cmds: &C,
        which: &[usize],
    ) -> RedisResult<Vec<Option<Reply>>> {
        // Packed straight into the connections' buffers, never built as a `Cmd`; every reply
        // comes back in its place.
        let replies = match &mut self.conn {
            Conn::Single(c) => {
                c.send_commands(cmds, which.iter().copied(), SingleConnection::recv_answers)?
            }
            Conn::Cluster(c) => {
                c.slot_map_for_nodes()?;
                c.nodes.pipeline(cmds, which)?
            }
        };
        Ok(replies.into_iter().map(Some).collect())
    }

    /// On a cluster, through the connection [`Transport::send_replies`] wrote on.
    async fn send_to_slot(&mut self, cmd: &Cmd, slot: u16) -> RedisResult<Value> {
        match &mut self.conn {
            Conn::Single(c) => c.request(cmd),
            Conn::Cluster(c) => {
                c.slot_map_for_nodes()?;
                c.nodes.request_at_slot(&cmd.get_packed_command(), slot)
            }
        }
    }

    async fn slot_map(&mut self) -> Result<Vec<Master>> {
        self.masters()
    }

    async fn pause_then_reconnect(&mut self, pause: Duration) {
        std::thread::sleep(pause);
        let _ = self.reconnect();
    }
}
