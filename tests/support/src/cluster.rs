//! A Redis Cluster (or Valkey cluster) on loopback for tests: `masters` masters with `replicas`
//! replicas each, every node a [`Server`] of its own with the module loaded, created with
//! `redis-cli --cluster create`. Every node is stopped when the [`Cluster`] is dropped, whether
//! the test passed or not (each [`Server`] stops itself).
//!
//! Nodes run with `--cluster-node-timeout 2000`, so a killed master's replica is promoted within
//! a few seconds. Ports leave port + 10000 free for the cluster bus.

use std::process::Command;
use std::time::Duration;

use redis::Value;

use crate::keyspace::{info_field, info_section};
use crate::reply::{as_array, as_int};
use crate::server::{wait_until, Server};

/// Redis Cluster's slot count.
pub const SLOTS: usize = 16384;

/// How long the cluster may take to agree on its state after a change.
const SETTLE: Duration = Duration::from_secs(90);

pub struct Cluster {
    pub nodes: Vec<Server>,
}

/// Runs `redis-cli` with `args`: whether it succeeded, and its stdout and stderr.
pub fn redis_cli(args: &[String]) -> (bool, String) {
    match Command::new("redis-cli").args(args).output() {
        Ok(out) => (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        ),
        Err(e) => (false, format!("cannot run redis-cli: {e}")),
    }
}

impl Cluster {
    /// Starts `masters × (1 + replicas)` nodes, creates the cluster and waits until it is healthy.
    pub fn start(masters: usize, replicas: usize) -> Cluster {
        let nodes: Vec<Server> = (0..masters * (1 + replicas))
            .map(|_| Server::start_cluster_node(&["--cluster-node-timeout", "2000"]))
            .collect();
        let mut args: Vec<String> = vec!["--cluster".into(), "create".into()];
        args.extend(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port())));
        args.extend([
            "--cluster-replicas".to_string(),
            replicas.to_string(),
            "--cluster-yes".to_string(),
        ]);
        let cluster = Cluster { nodes };
        let (ok, out) = redis_cli(&args);
        assert!(ok, "redis-cli --cluster create failed:\n{out}");
        cluster.wait_healthy(&[]);
        cluster
    }

    /// `127.0.0.1:port` of node `i`.
    pub fn addr(&self, i: usize) -> String {
        format!("127.0.0.1:{}", self.nodes[i].port())
    }

    /// `redis://127.0.0.1:port` of node `i`, as clients take it.
    pub fn url(&self, i: usize) -> String {
        format!("redis://{}", self.addr(i))
    }

    /// The node id of node `i`.
    pub fn id(&self, i: usize) -> String {
        let mut c = self.nodes[i].conn();
        redis::cmd("CLUSTER")
            .arg("MYID")
            .query(&mut c)
            .expect("CLUSTER MYID")
    }

    pub fn index_of_port(&self, port: u16) -> Option<usize> {
        self.nodes.iter().position(|n| n.port() == port)
    }

    /// The owner (node index) of every slot, from CLUSTER SLOTS asked of node `via`.
    pub fn slot_owners(&self, via: usize) -> Vec<usize> {
        let mut c = self.nodes[via].conn();
        let v: Value = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query(&mut c)
            .expect("CLUSTER SLOTS");
        let mut owners = vec![usize::MAX; SLOTS];
        for range in as_array(v) {
            let r = as_array(range);
            let (lo, hi) = (as_int(&r[0]) as usize, as_int(&r[1]) as usize);
            let master = as_array(r[2].clone());
            let port = as_int(&master[1]) as u16;
            let idx = self
                .index_of_port(port)
                .unwrap_or_else(|| panic!("CLUSTER SLOTS names an unknown port {port}"));
            for o in &mut owners[lo..=hi] {
                *o = idx;
            }
        }
        assert!(owners.iter().all(|&o| o != usize::MAX), "uncovered slots");
        owners
    }

    /// The masters (node indexes, ascending) of a slot map.
    pub fn masters(owners: &[usize]) -> Vec<usize> {
        let mut m = owners.to_vec();
        m.sort_unstable();
        m.dedup();
        m
    }

    /// The replica of master `m` among the live nodes.
    pub fn replica_of(&self, m: usize, dead: &[usize]) -> usize {
        let port = self.nodes[m].port().to_string();
        (0..self.nodes.len())
            .filter(|i| *i != m && !dead.contains(i))
            .find(|&i| {
                let mut c = self.nodes[i].conn();
                let r = info_section(&mut c, "replication");
                r.contains("role:slave") && info_field(&r, "master_port").as_deref() == Some(&port)
            })
            .unwrap_or_else(|| panic!("no replica of node {m}"))
    }

    /// Waits until every live node (not in `dead`) says `cluster_state:ok` and `redis-cli
    /// --cluster check` finds every slot covered and agreed on.
    pub fn wait_healthy(&self, dead: &[usize]) {
        let live: Vec<usize> = (0..self.nodes.len())
            .filter(|i| !dead.contains(i))
            .collect();
        let mut last = String::new();
        let ok = wait_until(SETTLE, || {
            for &i in &live {
                let mut c = self.nodes[i].conn();
                let info: redis::RedisResult<String> =
                    redis::cmd("CLUSTER").arg("INFO").query(&mut c);
                match info {
                    Ok(info) if info.contains("cluster_state:ok") => {}
                    other => {
                        last = format!("node {i}: {other:?}");
                        return false;
                    }
                }
            }
            // A replica that never finished its first sync cannot take over its master (its
            // data counts as too old): healthy means every live replica's link is up.
            for &i in &live {
                let mut c = self.nodes[i].conn();
                let replication = info_section(&mut c, "replication");
                if replication.contains("role:slave")
                    && !replication.contains("master_link_status:up")
                {
                    last = format!("node {i}: replica not in sync yet");
                    return false;
                }
            }
            let (_, out) = redis_cli(&["--cluster".into(), "check".into(), self.addr(live[0])]);
            last = out.clone();
            out.contains("[OK] All nodes agree about slots configuration.")
                && out.contains("[OK] All 16384 slots covered.")
                && !out.contains("[ERR]")
                && warnings_on_primaries(&out) == 0
        });
        assert!(ok, "cluster not healthy:\n{last}");
    }

    /// Moves `slots` slots from master `from` to master `to` with `redis-cli --cluster reshard`
    /// (keys go by MIGRATE, which is DUMP/RESTORE); panics with redis-cli's output on failure.
    pub fn reshard(&self, from: usize, to: usize, slots: usize) {
        let (ok, out) = redis_cli(&[
            "--cluster".into(),
            "reshard".into(),
            self.addr(from),
            "--cluster-from".into(),
            self.id(from),
            "--cluster-to".into(),
            self.id(to),
            "--cluster-slots".into(),
            slots.to_string(),
            "--cluster-yes".into(),
        ]);
        assert!(ok && !out.contains("[ERR]"), "reshard failed:\n{out}");
    }

    /// Kills master `m` with SIGKILL and waits until its replica has taken over and the cluster
    /// is ok without it; answers the promoted replica.
    pub fn kill_master(&mut self, m: usize) -> usize {
        let r = self.replica_of(m, &[]);
        self.nodes[m].kill9();
        let ok = wait_until(SETTLE, || {
            let mut c = self.nodes[r].conn();
            info_section(&mut c, "replication").contains("role:master")
        });
        assert!(
            ok,
            "replica {r} not promoted after its master {m} was killed:\n{}",
            self.nodes[r].log_tail()
        );
        self.wait_healthy(&[m]);
        r
    }

    /// Waits until every master's replicas have everything it wrote (`WAIT` on each).
    pub fn wait_replicas(&self, owners: &[usize]) {
        for m in Cluster::masters(owners) {
            let mut c = self.nodes[m].conn();
            let n: i64 = redis::cmd("WAIT")
                .arg(1)
                .arg(30000)
                .query(&mut c)
                .expect("WAIT");
            assert!(n >= 1, "WAIT on master {m}: {n} replicas");
        }
    }

    /// Saves every node, stops them all, starts them all again on the same ports and data
    /// directories (RDB and nodes.conf), and waits until the cluster is healthy.
    pub fn restart_all(&mut self) {
        for n in &mut self.nodes {
            let mut c = n.conn();
            let _: () = redis::cmd("SAVE").query(&mut c).expect("SAVE");
        }
        for n in &mut self.nodes {
            n.stop();
        }
        for n in &mut self.nodes {
            n.start_again();
        }
        self.wait_healthy(&[]);
    }
}

/// The warnings of a `redis-cli --cluster check` output, but those about a replica's open slots:
/// Valkey 9 shows replicas the importing and migrating state of their primary's slots (and keeps
/// it for a while after a reshard), which redis-cli 7.0 reports as "[WARNING] Node <replica> has
/// slots in importing state", followed by the list of those open slots; a primary's open slot
/// is a real problem.
pub fn warnings_on_primaries(check: &str) -> usize {
    let replicas: Vec<&str> = check
        .lines()
        .filter_map(|line| line.strip_prefix("S: "))
        .filter_map(|rest| rest.split_whitespace().nth(1))
        .collect();
    let on_replica = |line: &str| {
        replicas
            .iter()
            .any(|addr| line.contains(&format!("Node {addr} has slots in")))
    };
    let warnings: Vec<&str> = check
        .lines()
        .filter(|line| line.contains("[WARNING]"))
        .collect();
    let node_warnings = warnings
        .iter()
        .filter(|line| line.contains("[WARNING] Node "));
    if node_warnings.clone().all(|line| on_replica(line)) {
        warnings
            .iter()
            .filter(|line| !line.contains("[WARNING] Node ") && !line.contains("slots are open"))
            .count()
    } else {
        warnings.len()
    }
}
