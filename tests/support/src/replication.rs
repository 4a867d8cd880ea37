//! Replication: attaching a replica, waiting for it to catch up, comparing datasets.

use std::time::Duration;

use redis::{Connection, Value};

use crate::keyspace::{all_keys, dataset_digest, info_field, info_section};
use crate::reply::{raw_ok, rawb};
use crate::server::{wait_until, Server};

/// `REPLICAOF 127.0.0.1 <primary port>` on `replica`, then wait until the link is up and the
/// primary sees it online.
#[track_caller]
pub fn replicate_from(primary: &Server, replica: &Server) {
    // Redis 7.0 defaults to diskless sync after a 5 s delay: start the sync at once.
    raw_ok(
        &mut primary.conn(),
        &["CONFIG", "SET", "repl-diskless-sync-delay", "0"],
    );
    let mut rc = replica.conn();
    let r = raw_ok(
        &mut rc,
        &[
            "REPLICAOF".to_string(),
            "127.0.0.1".into(),
            primary.port().to_string(),
        ],
    );
    assert_eq!(r, Value::Okay);
    let ok = wait_until(Duration::from_secs(60), || {
        info_section(&mut rc, "replication").contains("master_link_status:up")
    });
    assert!(
        ok,
        "replica link not up:\n{}\nreplica log:\n{}",
        info_section(&mut rc, "replication"),
        replica.log_tail()
    );
    let port = format!("port={},", replica.port());
    let mut pc = primary.conn();
    let ok = wait_until(Duration::from_secs(60), || {
        info_section(&mut pc, "replication")
            .lines()
            .any(|l| l.contains(&port) && l.contains("state=online"))
    });
    assert!(ok, "primary does not see the replica online");
}

/// `WAIT n` on the primary, then wait until every replica has applied everything (same offset).
#[track_caller]
pub fn wait_synced(pc: &mut Connection, replicas: &mut [&mut Connection]) {
    let n: i64 = redis::cmd("WAIT")
        .arg(replicas.len())
        .arg(30000)
        .query(pc)
        .unwrap();
    assert_eq!(
        n as usize,
        replicas.len(),
        "WAIT {} returned {n}",
        replicas.len()
    );
    for rc in replicas.iter_mut() {
        let ok = wait_until(Duration::from_secs(30), || {
            let po = info_field(&info_section(pc, "replication"), "master_repl_offset");
            let ro = info_field(&info_section(rc, "replication"), "master_repl_offset");
            po.is_some() && po == ro
        });
        assert!(ok, "replica offset did not catch up");
    }
}

/// What replicas must agree on: per key DEBUG DIGEST-VALUE, BF.INFO (or its error, e.g. for a
/// filter still being loaded) and TYPE; then DEBUG DIGEST.
pub fn dataset_view(c: &mut Connection) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for k in all_keys(c) {
        let name = String::from_utf8_lossy(&k).into_owned();
        let t: String = redis::cmd("TYPE").arg(k.as_slice()).query(c).unwrap();
        let d: Value = redis::cmd("DEBUG")
            .arg("DIGEST-VALUE")
            .arg(k.as_slice())
            .query(c)
            .unwrap();
        let i = if t == "MBbloom--" {
            format!("{:?}", rawb(c, &[b"BF.INFO", k.as_slice()]))
        } else {
            String::new()
        };
        out.push((name, format!("{t} {d:?} {i}")));
    }
    out.push(("<DEBUG DIGEST>".into(), dataset_digest(c)));
    out
}

/// Assert that every connection sees the same dataset as the first; reports every difference.
#[track_caller]
pub fn assert_same_dataset(conns: &mut [(&str, &mut Connection)]) {
    let (first_name, first) = &mut conns[0];
    let first_name = first_name.to_string();
    let want = dataset_view(first);
    assert!(want.len() > 1, "{first_name} holds no keys");
    for (name, c) in conns[1..].iter_mut() {
        let got = dataset_view(c);
        let mut diffs = Vec::new();
        let wk: Vec<&String> = want.iter().map(|x| &x.0).collect();
        let gk: Vec<&String> = got.iter().map(|x| &x.0).collect();
        if wk != gk {
            diffs.push(format!("keys: {first_name} {wk:?}\n  vs {name} {gk:?}"));
        }
        for (k, v) in &want {
            if let Some((_, g)) = got.iter().find(|(gk, _)| gk == k) {
                if g != v {
                    diffs.push(format!("{k}: {first_name} {v}\n  vs {name} {g}"));
                }
            }
        }
        assert!(
            diffs.is_empty(),
            "{name} differs from {first_name}:\n{}",
            diffs.join("\n")
        );
    }
}
