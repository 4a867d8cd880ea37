//! Redis Cluster: 3 masters + 3 replicas on loopback (`redis-cli --cluster create`), one filter in
//! every one of the 16384 slots. The server routes BF.* by their key specs (MOVED for another
//! node's slot; COMMAND GETKEYS / COMMAND INFO name the key, which is what cluster clients use);
//! `redis-cli --cluster reshard` (MIGRATE, i.e. DUMP/RESTORE of every key) moves filters with every
//! member and an identical `DEBUG DIGEST-VALUE`; a coordinated `CLUSTER FAILOVER` and a master
//! killed with SIGKILL both leave the promoted replica with the same filters.
//!
//! The redis crate's `cluster` feature is not enabled, so the tests route by themselves: the
//! core's key slot rule (checked against CLUSTER KEYSLOT) and the slot map from CLUSTER SLOTS.
use std::collections::HashMap;
use std::time::Duration;

use redis::{Connection, Value};
use rustbloom_core::partition::slot_tag;
use rustbloom_testkit::cluster::{Cluster, SLOTS};
use rustbloom_testkit::*;

/// Slot of a key, honouring `{hash tags}`.
fn key_slot(key: &str) -> usize {
    usize::from(rustbloom_core::partition::key_slot(key.as_bytes()))
}

/// One key name per slot: `keys[slot]`.
fn key_per_slot() -> Vec<String> {
    let mut keys: Vec<Option<String>> = vec![None; SLOTS];
    let mut left = SLOTS;
    let mut i = 0u64;
    while left > 0 {
        let k = format!("f{i}");
        let s = key_slot(&k);
        if keys[s].is_none() {
            keys[s] = Some(k);
            left -= 1;
        }
        i += 1;
    }
    keys.into_iter().map(|k| k.unwrap()).collect()
}

/// A hash tag whose keys land in `slot`.
fn tag_for_slot(slot: usize) -> String {
    let slot = u16::try_from(slot).expect("a slot below 16384");
    slot_tag(slot).to_string()
}

/// Run `cmds` (each a full command) on node connection `c` as one pipeline.
fn pipeline(c: &mut Connection, cmds: &[Vec<Vec<u8>>]) -> Vec<Value> {
    let mut p = redis::pipe();
    for cmd in cmds {
        let mut k = redis::cmd(std::str::from_utf8(&cmd[0]).unwrap());
        for a in &cmd[1..] {
            k.arg(a.as_slice());
        }
        p.add_command(k);
    }
    p.query(c)
        .unwrap_or_else(|e| panic!("pipeline: {}", err_text(&e)))
}

/// Create one filter in every slot (keys[slot], item `m:<slot>`), on the owning masters.
fn populate(cl: &Cluster, keys: &[String], owners: &[usize]) {
    for m in Cluster::masters(owners) {
        let mut c = cl.nodes[m].conn();
        let mine: Vec<usize> = (0..SLOTS).filter(|&s| owners[s] == m).collect();
        for batch in mine.chunks(1000) {
            let cmds: Vec<Vec<Vec<u8>>> = batch
                .iter()
                .map(|&s| {
                    vec![
                        b"BF.ADD".to_vec(),
                        keys[s].clone().into_bytes(),
                        format!("m:{s}").into_bytes(),
                    ]
                })
                .collect();
            for r in pipeline(&mut c, &cmds) {
                assert_eq!(r, Value::Int(1));
            }
        }
    }
}

/// DEBUG DIGEST-VALUE of each key on `node` (batched).
fn digests(c: &mut Connection, keys: &[&String]) -> Vec<String> {
    let mut out = Vec::new();
    for batch in keys.chunks(1000) {
        let cmds: Vec<Vec<Vec<u8>>> = batch
            .iter()
            .map(|k| {
                vec![
                    b"DEBUG".to_vec(),
                    b"DIGEST-VALUE".to_vec(),
                    k.as_bytes().to_vec(),
                ]
            })
            .collect();
        for v in pipeline(c, &cmds) {
            match v {
                Value::Array(a) => out.push(value_to_string(&a[0])),
                other => out.push(value_to_string(&other)),
            }
        }
    }
    out
}

/// Every slot's filter is on its owner, with its member and the recorded digest.
fn verify_all(cl: &Cluster, keys: &[String], owners: &[usize], want: &HashMap<String, String>) {
    for m in Cluster::masters(owners) {
        let mut c = cl.nodes[m].conn();
        let mine: Vec<usize> = (0..SLOTS).filter(|&s| owners[s] == m).collect();
        let names: Vec<&String> = mine.iter().map(|&s| &keys[s]).collect();
        let got = digests(&mut c, &names);
        for (k, d) in names.iter().zip(&got) {
            assert_eq!(
                Some(d),
                want.get(*k),
                "filter {k} on node {m}: digest differs (or key missing)"
            );
        }
        for batch in mine.chunks(1000) {
            let cmds: Vec<Vec<Vec<u8>>> = batch
                .iter()
                .map(|&s| {
                    vec![
                        b"BF.EXISTS".to_vec(),
                        keys[s].clone().into_bytes(),
                        format!("m:{s}").into_bytes(),
                    ]
                })
                .collect();
            for (r, &s) in pipeline(&mut c, &cmds).iter().zip(batch) {
                assert_eq!(
                    *r,
                    Value::Int(1),
                    "member of {} missing on node {m}",
                    keys[s]
                );
            }
        }
        // Nothing else lives there (no stray copies left behind by a migration).
        let n: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
        let extra = want
            .keys()
            .filter(|k| !k.starts_with('f'))
            .filter(|k| owners[key_slot(k)] == m)
            .count();
        assert_eq!(n as usize, mine.len() + extra, "DBSIZE of node {m}");
    }
}

/// Digest of every key, read from its owner.
fn record(
    cl: &Cluster,
    keys: &[String],
    extra: &[String],
    owners: &[usize],
) -> HashMap<String, String> {
    let mut want = HashMap::new();
    for m in Cluster::masters(owners) {
        let mut c = cl.nodes[m].conn();
        let names: Vec<&String> = keys
            .iter()
            .chain(extra)
            .filter(|k| owners[key_slot(k)] == m)
            .collect();
        for (k, d) in names.iter().zip(digests(&mut c, &names)) {
            assert_ne!(d, "0000000000000000000000000000000000000000", "{k} missing");
            want.insert((*k).clone(), d);
        }
    }
    want
}

#[test]
fn key_slot_matches_cluster_keyslot() {
    let s = Server::start_cluster_node(&[]);
    let mut c = s.conn();
    for k in [
        "f0",
        "f123",
        "foo",
        "{user1000}.following",
        "a{}b",
        "{t7}x",
        "bf:key:\u{e9}",
    ] {
        let slot: i64 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(k)
            .query(&mut c)
            .unwrap();
        assert_eq!(slot as usize, key_slot(k), "{k}");
    }
}

#[test]
fn cluster_routes_reshards_and_keeps_every_filter() {
    let cl = Cluster::start(3, 1);
    let keys = key_per_slot();
    let owners = cl.slot_owners(0);
    assert_eq!(Cluster::masters(&owners).len(), 3);

    // Key specs: the key is argument 1 of every BF.* command.
    let mut c0 = cl.nodes[0].conn();
    for cmd in [
        vec!["BF.RESERVE", "k1", "0.01", "100"],
        vec!["BF.ADD", "k1", "x"],
        vec!["BF.MADD", "k1", "x", "y"],
        vec!["BF.INSERT", "k1", "CAPACITY", "10", "ITEMS", "x", "y"],
        vec!["BF.EXISTS", "k1", "x"],
        vec!["BF.MEXISTS", "k1", "x", "y"],
        vec!["BF.INFO", "k1"],
        vec!["BF.CARD", "k1"],
        vec!["BF.SCANDUMP", "k1", "0"],
        vec!["BF.LOADCHUNK", "k1", "1", "data"],
    ] {
        let mut args = vec!["COMMAND", "GETKEYS"];
        args.extend(&cmd);
        let v = raw_ok(&mut c0, &args);
        assert_eq!(
            v,
            Value::Array(vec![Value::BulkString(b"k1".to_vec())]),
            "{cmd:?}"
        );
        let info = as_array(raw_ok(&mut c0, &["COMMAND", "INFO", cmd[0]]));
        let entry = as_array(info[0].clone());
        assert_eq!(
            (as_int(&entry[3]), as_int(&entry[4]), as_int(&entry[5])),
            (1, 1, 1),
            "COMMAND INFO {}: first key, last key, step",
            cmd[0]
        );
    }
    // A node that does not own the key's slot redirects.
    let slot = key_slot(&keys[0]);
    let other = (0..cl.nodes.len())
        .find(|&i| owners[slot] != i && Cluster::masters(&owners).contains(&i))
        .unwrap();
    let e = raw_err(
        &mut cl.nodes[other].conn(),
        &["BF.ADD", keys[0].as_str(), "x"],
    );
    assert_eq!(
        e,
        format!("MOVED {slot} {}", cl.addr(owners[slot])),
        "BF.ADD on a node that does not own the slot"
    );

    populate(&cl, &keys, &owners);

    // The source of the reshard and the slots it will give away: redis-cli moves a source's
    // lowest slots. Put bigger filters of every shape into the lowest of them.
    let src = owners[0];
    let dst = Cluster::masters(&owners)
        .into_iter()
        .find(|&m| m != src)
        .unwrap();
    let first = (0..SLOTS).find(|&s| owners[s] == src).unwrap();
    let tag = tag_for_slot(first);
    let mut sc = cl.nodes[src].conn();
    let big = format!("{{{tag}}}big");
    let layered = format!("{{{tag}}}layered");
    let ns = format!("{{{tag}}}ns");
    let half = format!("{{{tag}}}half");
    raw_ok(&mut sc, &["BF.RESERVE", big.as_str(), "0.001", "1000000"]);
    madd_all(&mut sc, &big, &items("big", 5000));
    raw_ok(
        &mut sc,
        &[
            "BF.RESERVE",
            layered.as_str(),
            "0.01",
            "50",
            "EXPANSION",
            "2",
        ],
    );
    madd_all(&mut sc, &layered, &items("lay", 3000));
    assert!(info(&mut sc, &layered).filters >= 5);
    raw_ok(
        &mut sc,
        &["BF.RESERVE", ns.as_str(), "0.01", "10", "NONSCALING"],
    );
    let mut args = vec!["BF.MADD".to_string(), ns.clone()];
    args.extend(items("ns", 20));
    raw_ok(&mut sc, &args);
    let chunks = scandump(&mut sc, &layered);
    loadchunks(&mut sc, &half, &chunks[..1]);
    let extra = vec![big.clone(), layered.clone(), ns.clone(), half.clone()];
    let want = record(&cl, &keys, &extra, &owners);

    let moving = 500;
    cl.reshard(src, dst, moving);
    cl.wait_healthy(&[]);
    let after = cl.slot_owners(0);
    let moved: Vec<usize> = (0..SLOTS).filter(|&s| owners[s] != after[s]).collect();
    assert_eq!(moved.len(), moving, "slots moved");
    assert!(moved.iter().all(|&s| owners[s] == src && after[s] == dst));
    assert_eq!(after[first], dst, "the slot holding the big filters moved");
    // Every filter — the 500 moved ones included — is whole on its (new) owner.
    verify_all(&cl, &keys, &after, &want);
    let mut dc = cl.nodes[dst].conn();
    assert_all_exist(&mut dc, &big, &items("big", 5000));
    assert_all_exist(&mut dc, &layered, &items("lay", 3000));
    // A full filter answers 0 for an item it mistakes for one it holds (a false positive, ~1%
    // with a random seed): the refusal is asked of an item it answers absent for.
    let fresh = (0..100)
        .map(|i| format!("new-{i}"))
        .find(|item| as_int(&raw_ok(&mut dc, &["BF.EXISTS", ns.as_str(), item.as_str()])) == 0)
        .expect("an item the full filter answers absent for");
    assert_err(
        &mut dc,
        &["BF.ADD", ns.as_str(), fresh.as_str()],
        "ERR non scaling filter is full",
    );
    // The half-loaded filter moved half-loaded; its load completes on the new owner.
    assert_err(
        &mut dc,
        &["BF.EXISTS", half.as_str(), "x"],
        "ERR filter is being loaded by BF.LOADCHUNK",
    );
    loadchunks(&mut dc, &half, &chunks[1..]);
    assert_eq!(digest(&mut dc, &half), digest(&mut dc, &layered));
    // The old owner redirects for the moved filters, the new one takes writes.
    let e = raw_err(&mut sc, &["BF.ADD", big.as_str(), "x"]);
    assert!(e.starts_with(&format!("MOVED {first} ")), "{e}");
    assert_eq!(
        as_int(&raw_ok(&mut dc, &["BF.ADD", big.as_str(), "after-reshard"])),
        1
    );
}

#[test]
fn cluster_failover_keeps_every_filter() {
    let mut cl = Cluster::start(3, 1);
    let keys = key_per_slot();
    let owners = cl.slot_owners(0);
    populate(&cl, &keys, &owners);
    // A bigger multi-layer filter on every master.
    let mut extra = Vec::new();
    for m in Cluster::masters(&owners) {
        let slot = (0..SLOTS).find(|&s| owners[s] == m).unwrap();
        let k = format!("{{{}}}layered", tag_for_slot(slot));
        let mut c = cl.nodes[m].conn();
        raw_ok(&mut c, &["BF.RESERVE", k.as_str(), "0.01", "100"]);
        madd_all(&mut c, &k, &items(&k, 4000));
        extra.push(k);
    }
    let want = record(&cl, &keys, &extra, &owners);
    cl.wait_replicas(&owners);

    // Coordinated failover: CLUSTER FAILOVER on a master's replica.
    let masters = Cluster::masters(&owners);
    let (a, b) = (masters[0], masters[1]);
    let ra = cl.replica_of(a, &[]);
    raw_ok(&mut cl.nodes[ra].conn(), &["CLUSTER", "FAILOVER"]);
    let ok = wait_until(Duration::from_secs(60), || {
        let mut c = cl.nodes[ra].conn();
        info_section(&mut c, "replication").contains("role:master")
    });
    assert!(
        ok,
        "replica {ra} was not promoted:\n{}",
        cl.nodes[ra].log_tail()
    );
    cl.wait_healthy(&[]);
    let owners2 = cl.slot_owners(ra);
    assert!((0..SLOTS).all(|s| (owners[s] == a) == (owners2[s] == ra)));
    verify_all(&cl, &keys, &owners2, &want);
    for k in &extra {
        let m = owners2[key_slot(k)];
        assert_all_exist(&mut cl.nodes[m].conn(), k, &items(k, 4000));
    }
    // The promoted node takes writes, and its new replica (the old master) follows.
    let mut rc = cl.nodes[ra].conn();
    let slot = (0..SLOTS).find(|&s| owners2[s] == ra).unwrap();
    assert_eq!(
        as_int(&raw_ok(
            &mut rc,
            &["BF.ADD", keys[slot].as_str(), "after-failover"]
        )),
        1
    );
    let n: i64 = redis::cmd("WAIT").arg(1).arg(30000).query(&mut rc).unwrap();
    assert_eq!(n, 1);
    let mut ac = cl.nodes[a].conn();
    raw_ok(&mut ac, &["READONLY"]);
    let ok = wait_until(Duration::from_secs(10), || {
        digest(&mut ac, &keys[slot]) == digest(&mut rc, &keys[slot])
    });
    assert!(ok, "old master (now replica) did not follow");

    // Unplanned failover: SIGKILL a master; its replica takes over with everything it had.
    let mut want = want;
    want.insert(keys[slot].clone(), digest(&mut rc, &keys[slot]));
    cl.wait_replicas(&owners2);
    // Only the killed node is missing: its replica is promoted and the cluster is healthy again
    // without it.
    let rb = cl.kill_master(b);
    let owners3 = cl.slot_owners(rb);
    assert!((0..SLOTS).all(|s| (owners2[s] == b) == (owners3[s] == rb)));
    verify_all(&cl, &keys, &owners3, &want);
    for k in &extra {
        let m = owners3[key_slot(k)];
        assert_all_exist(&mut cl.nodes[m].conn(), k, &items(k, 4000));
    }
}
