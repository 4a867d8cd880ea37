//! A cluster's adds and lookups: each command goes to the master of its key's slot, every
//! master's commands packed into its own [`SingleConnection`] and all of them written before
//! any reply is read, so the masters work in parallel. A MOVED or ASK reply is followed at once
//! (ASK with ASKING first), a few times at most; one still redirected after that is left in
//! place for the caller, which retries it after a pause with a fresh slot map.

use std::collections::HashMap;

use redis::{ConnectionAddr, ConnectionInfo, RedisResult, Value};

use crate::error::server_error_text;
use crate::resp::Reply;
use crate::routing::Master;
use crate::single::{SingleConnection, CONNECT_TIMEOUT, RESPONSE_TIMEOUT};
use crate::transport::Commands;

/// Redirections followed within one call.
const MAX_REDIRECTS: usize = 5;

/// `ASKING`, packed.
const ASKING: &[u8] = b"*1\r\n$6\r\nASKING\r\n";

/// Where a command goes.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Target {
    addr: String,
    /// Sent after ASKING (an ASK redirection).
    asking: bool,
}

/// The connections to a cluster's masters, opened as commands need them.
pub(crate) struct Nodes {
    /// The URL's settings (credentials, database), for every node.
    info: ConnectionInfo,
    /// The slot map; `None` until first needed and after a MOVED.
    masters: Option<Vec<Master>>,
    conns: HashMap<String, SingleConnection>,
    /// The packed commands of the node being written to, kept for its capacity.
    packed: Vec<u8>,
}

impl Nodes {
    pub(crate) fn new(info: ConnectionInfo) -> Nodes {
        Nodes {
            info,
            masters: None,
            conns: HashMap::new(),
            packed: Vec::new(),
        }
    }

    /// Whether the slot map must be fetched before the next call.
    pub(crate) fn needs_slot_map(&self) -> bool {
        self.masters.is_none()
    }

    pub(crate) fn set_slot_map(&mut self, masters: Vec<Master>) {
        self.masters = Some(masters);
    }

    /// The master serving `slot` (the first master when the map has a hole, which then
    /// answers MOVED).
    fn master_of(&self, slot: u16) -> RedisResult<String> {
        let masters = self.masters.as_deref().unwrap_or_default();
        masters
            .iter()
            .find(|m| m.owns(slot))
            .or(masters.first())
            .map(|m| m.addr.clone())
            .ok_or_else(|| {
                redis::RedisError::from((
                    redis::ErrorKind::Server(redis::ServerErrorKind::ClusterDown),
                    "no master in the slot map",
                ))
            })
    }

    /// The connection to `addr`, opened when first needed.
    fn conn(&mut self, addr: &str) -> RedisResult<&mut SingleConnection> {
        if !self.conns.contains_key(addr) {
            let (host, port) = host_port(addr)?;
            let info = self
                .info
                .clone()
                .set_addr(ConnectionAddr::Tcp(self.known_host(host), port));
            let conn = SingleConnection::open(&info, CONNECT_TIMEOUT, RESPONSE_TIMEOUT)
                .map_err(|e| naming_node(e, addr))?;
            self.conns.insert(addr.to_string(), conn);
        }
        self.conns
            .get_mut(addr)
            .ok_or_else(|| redis::RedisError::from((redis::ErrorKind::Io, "no connection")))
    }

    /// `host`, or for an empty one the URL's: a node that never met another (a one-node
    /// cluster) names itself with an empty host in `CLUSTER SLOTS`.
    fn known_host(&self, host: String) -> String {
        match self.info.addr() {
            ConnectionAddr::Tcp(url_host, _) if host.is_empty() => url_host.clone(),
            _ => host,
        }
    }

    /// Commands `which` of `cmds` and their replies in order, error replies in place. A failed
    /// connection fails the call and closes every connection (their replies would be out of
    /// step).
    pub(crate) fn pipeline<C: Commands + ?Sized>(
        &mut self,
        cmds: &C,
        which: &[usize],
    ) -> RedisResult<Vec<Reply>> {
        let sent = self.send_and_follow(cmds, which);
        if sent.is_err() {
            self.conns.clear();
        }
        sent
    }

    /// `cmd` packed, to the master of `slot`: its reply.
    pub(crate) fn request_at_slot(&mut self, packed: &[u8], slot: u16) -> RedisResult<Value> {
        let addr = self.master_of(slot)?;
        let conn = self.conn(&addr)?;
        let reply = conn.send_packed(packed).and_then(|()| conn.recv());
        if reply.is_err() {
            self.conns.remove(&addr);
        }
        reply
    }

    fn send_and_follow<C: Commands + ?Sized>(
        &mut self,
        cmds: &C,
        which: &[usize],
    ) -> RedisResult<Vec<Reply>> {
        let mut replies: Vec<Option<Reply>> = vec![None; which.len()];
        let mut routes: Vec<(usize, Target)> = Vec::with_capacity(which.len());
        for (k, &i) in which.iter().enumerate() {
            let addr = self.master_of(cmds.slot(i))?;
            routes.push((
                k,
                Target {
                    addr,
                    asking: false,
                },
            ));
        }
        for round in 0..=MAX_REDIRECTS {
            let groups = by_target(routes);
            for (target, ks) in &groups {
                self.send(cmds, which, target, ks)?;
            }
            routes = Vec::new();
            let mut moved = false;
            for (target, ks) in groups {
                let conn = self.conn(&target.addr)?;
                for k in ks {
                    if target.asking {
                        // ASKING's own +OK; a refusal shows in the command's reply.
                        conn.recv()?;
                    }
                    let reply = conn.recv_answers()?;
                    match redirection(&reply, &target.addr) {
                        Some(next) if round < MAX_REDIRECTS => {
                            moved |= !next.asking;
                            routes.push((k, next));
                        }
                        _ => replies[k] = Some(reply),
                    }
                }
            }
            if moved {
                self.masters = None;
            }
            if routes.is_empty() {
                break;
            }
        }
        Ok(replies
            .into_iter()
            .map(|r| r.unwrap_or(Reply::Value(Value::Nil)))
            .collect())
    }

    /// Writes the commands at positions `ks` of `which` to `target`, packed at once.
    fn send<C: Commands + ?Sized>(
        &mut self,
        cmds: &C,
        which: &[usize],
        target: &Target,
        ks: &[usize],
    ) -> RedisResult<()> {
        let mut packed = std::mem::take(&mut self.packed);
        packed.clear();
        for &k in ks {
            if target.asking {
                packed.extend_from_slice(ASKING);
            }
            cmds.pack(which[k], &mut packed);
        }
        let sent = self
            .conn(&target.addr)
            .and_then(|conn| conn.send_packed(&packed));
        self.packed = packed;
        sent
    }
}

/// A connection error that says which node it was (a failover's stall is otherwise a bare
/// "Connection refused"); still an I/O error, which a retry may cure.
fn naming_node(e: redis::RedisError, addr: &str) -> redis::RedisError {
    if !e.is_io_error() {
        return e;
    }
    std::io::Error::other(format!("cannot connect to {addr}: {e}")).into()
}

/// The positions of `routes` grouped by target, in order within each.
fn by_target(routes: Vec<(usize, Target)>) -> Vec<(Target, Vec<usize>)> {
    let mut groups: Vec<(Target, Vec<usize>)> = Vec::new();
    for (k, target) in routes {
        match groups.iter_mut().find(|(t, _)| *t == target) {
            Some((_, ks)) => ks.push(k),
            None => groups.push((target, vec![k])),
        }
    }
    groups
}

/// Where a `MOVED slot host:port` or `ASK slot host:port` reply (from the node at `from`)
/// sends its command; an empty host is `from`'s.
fn redirection(reply: &Reply, from: &str) -> Option<Target> {
    let e = reply.server_error()?;
    let text = server_error_text(e);
    let mut words = text.split(' ');
    let asking = match words.next()? {
        "MOVED" => false,
        "ASK" => true,
        _ => return None,
    };
    let addr = words.nth(1)?;
    let addr = match addr.strip_prefix(':') {
        Some(port) => format!("{}:{port}", host_port(from).ok()?.0),
        None => addr.to_string(),
    };
    Some(Target { addr, asking })
}

/// `host:port` split at its last colon.
fn host_port(addr: &str) -> RedisResult<(String, u16)> {
    addr.rsplit_once(':')
        .and_then(|(host, port)| Some((host.to_string(), port.parse().ok()?)))
        .ok_or_else(|| {
            redis::RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "a node address without a port",
                addr.to_string(),
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> Reply {
        let value = redis::parse_redis_value(format!("-{text}\r\n").as_bytes());
        Reply::Value(value.expect("an error reply"))
    }

    #[test]
    fn redirections_name_their_node() {
        let moved = Target {
            addr: "10.0.0.2:7001".into(),
            asking: false,
        };
        assert_eq!(
            redirection(&error("MOVED 866 10.0.0.2:7001"), "10.0.0.1:7000"),
            Some(moved)
        );
        let ask = Target {
            addr: "10.0.0.1:7002".into(),
            asking: true,
        };
        assert_eq!(
            redirection(&error("ASK 866 :7002"), "10.0.0.1:7000"),
            Some(ask)
        );
        for other in [
            error("CLUSTERDOWN The cluster is down"),
            error("ERR not found"),
            Reply::Answers(vec![true]),
        ] {
            assert_eq!(redirection(&other, "10.0.0.1:7000"), None);
        }
        assert_eq!(
            host_port("::1:7000").expect("an address"),
            ("::1".to_string(), 7000)
        );
        assert!(host_port("nohost").is_err());
    }
}
