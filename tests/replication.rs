//! Replication: replicas must end up identical to the primary (DEBUG DIGEST-VALUE, BF.INFO).
use redis::{Connection, Value};
use rustbloom_testkit::*;

fn keys(c: &mut Connection) -> Vec<Vec<u8>> {
    let mut k: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(c).unwrap();
    k.sort();
    k
}

/// Every key: same DEBUG DIGEST-VALUE, same BF.INFO; whole dataset digest equal. Reports every
/// difference at once.
fn assert_identical(pc: &mut Connection, rc: &mut Connection) {
    let pk = keys(pc);
    let rk = keys(rc);
    assert_eq!(pk, rk, "key sets differ");
    let mut diffs = Vec::new();
    for k in &pk {
        let name = String::from_utf8_lossy(k).into_owned();
        let dp: Value = redis::cmd("DEBUG")
            .arg("DIGEST-VALUE")
            .arg(k.as_slice())
            .query(pc)
            .unwrap();
        let dr: Value = redis::cmd("DEBUG")
            .arg("DIGEST-VALUE")
            .arg(k.as_slice())
            .query(rc)
            .unwrap();
        if dp != dr {
            diffs.push(format!(
                "DEBUG DIGEST-VALUE differs for {name:?}: primary {dp:?} replica {dr:?}"
            ));
        }
        let ip = rawb(pc, &[b"BF.INFO", k]);
        let ir = rawb(rc, &[b"BF.INFO", k]);
        if ip != ir {
            diffs.push(format!(
                "BF.INFO differs for {name:?}:\n  primary {ip:?}\n  replica {ir:?}"
            ));
        }
    }
    let (a, b) = (dataset_digest(pc), dataset_digest(rc));
    if a != b {
        diffs.push(format!("DEBUG DIGEST differs: {a} vs {b}"));
    }
    assert!(
        diffs.is_empty(),
        "replica differs from primary:\n{}",
        diffs.join("\n")
    );
}

fn workload(c: &mut Connection) {
    // Auto-created (random seed) via every creating command.
    raw_ok(c, &["BF.ADD", "add", "a"]);
    raw_ok(c, &["BF.ADD", "add", "b"]);
    raw_ok(c, &["BF.ADD", "add", "a"]);
    raw_ok(c, &["BF.MADD", "madd", "a", "b", "c", "a"]);
    raw_ok(c, &["BF.INSERT", "ins", "ITEMS", "x", "y"]);
    raw_ok(
        c,
        &[
            "BF.INSERT",
            "ins-opts",
            "CAPACITY",
            "1000",
            "ERROR",
            "0.001",
            "EXPANSION",
            "4",
            "ITEMS",
            "x",
        ],
    );
    raw_ok(
        c,
        &[
            "BF.INSERT",
            "ins-ns",
            "CAPACITY",
            "10",
            "NONSCALING",
            "ITEMS",
            "x",
        ],
    );
    raw_ok(
        c,
        &["BF.INSERT", "ins-nonscaling", "NONSCALING", "ITEMS", "x"],
    );
    // RESERVE with options.
    raw_ok(c, &["BF.RESERVE", "res", "0.01", "100"]);
    raw_ok(
        c,
        &["BF.RESERVE", "res-exp", "0.02", "50", "EXPANSION", "3"],
    );
    raw_ok(c, &["BF.RESERVE", "res-ns", "0.01", "100", "NONSCALING"]);
    raw_ok(
        c,
        &["BF.RESERVE", "res-seed", "0.01", "100", "SEED", "12345"],
    );
    raw_ok(
        c,
        &["bf.reserve", "res-lower", "0.01", "100", "expansion", "5"],
    );
    // Scale a filter to several layers, with a mix of BF.ADD and BF.MADD.
    raw_ok(c, &["BF.RESERVE", "scaled", "0.01", "50"]);
    for i in 0..300 {
        raw_ok(c, &["BF.ADD".to_string(), "scaled".into(), format!("s{i}")]);
    }
    madd_all(c, "scaled", &items("sm", 2000));
    assert!(info(c, "scaled").filters >= 4);
    // Auto-created filter scaled by adds.
    madd_all(c, "auto-scaled", &items("as", 1000));
    // A non-scaling filter that fills in the middle of a MADD / INSERT.
    raw_ok(c, &["BF.RESERVE", "full", "0.001", "20", "NONSCALING"]);
    let mut args: Vec<String> = vec!["BF.MADD".into(), "full".into()];
    args.extend(items("full", 40));
    let r = as_array(raw_ok(c, &args));
    assert!(
        r.len() < 40 && matches!(r.last(), Some(Value::ServerError(_))),
        "{r:?}"
    );
    let mut args: Vec<String> = vec![
        "BF.INSERT".into(),
        "full2".into(),
        "CAPACITY".into(),
        "5".into(),
        "NONSCALING".into(),
        "ITEMS".into(),
    ];
    args.extend(items("full2", 10));
    let r = as_array(raw_ok(c, &args));
    assert!(r.len() < 10, "{r:?}");
    // Binary key and items.
    rawb(c, &[b"BF.MADD", b"bin\0\xff", b"", b"\0", b"\xff"]).unwrap();
    // Failing commands must not replicate anything harmful.
    let _ = raw(c, &["BF.RESERVE", "res", "0.01", "100"]);
    let _ = raw(c, &["BF.RESERVE", "bad", "2", "100"]);
    let _ = raw(c, &["BF.INSERT", "nocreate", "NOCREATE", "ITEMS", "a"]);
    let _ = raw(c, &["BF.ADD", "full", "definitely-new-item-xyz"]);
}

fn scandump_stream(c: &mut Connection) {
    raw_ok(
        c,
        &["BF.RESERVE", "dumpsrc", "0.01", "100", "EXPANSION", "2"],
    );
    madd_all(c, "dumpsrc", &items("d", 1500));
    let chunks = scandump(c, "dumpsrc");
    loadchunks(c, "loaded", &chunks);
    assert_eq!(digest(c, "dumpsrc"), digest(c, "loaded"));
}

#[test]
fn replica_matches_primary_command_stream() {
    let p = Server::start();
    let r = Server::start();
    replicate_from(&p, &r);
    let mut pc = p.conn();
    let mut rc = r.conn();
    workload(&mut pc);
    scandump_stream(&mut pc);
    wait_synced(&mut pc, &mut [&mut rc]);
    assert_identical(&mut pc, &mut rc);
    // Replica answers reads identically.
    let probe = items("sm", 2000);
    let mut args: Vec<String> = vec!["BF.MEXISTS".into(), "scaled".into()];
    args.extend(probe.iter().take(500).cloned());
    assert_eq!(raw_ok(&mut pc, &args), raw_ok(&mut rc, &args));
    // Replicas are read-only for BF writes.
    let e = raw_err(&mut rc, &["BF.ADD", "add", "zzz"]);
    assert!(e.starts_with("READONLY"), "write on replica: {e}");
    // Further writes after the first comparison keep them identical.
    madd_all(&mut pc, "add", &items("later", 500));
    raw_ok(&mut pc, &["DEL", "ins"]);
    wait_synced(&mut pc, &mut [&mut rc]);
    assert_identical(&mut pc, &mut rc);
}

#[test]
fn replica_full_sync_from_existing_data() {
    // Data written before the replica attaches arrives through the RDB of a full sync.
    let p = Server::start();
    let r = Server::start();
    let mut pc = p.conn();
    workload(&mut pc);
    scandump_stream(&mut pc);
    replicate_from(&p, &r);
    let mut rc = r.conn();
    wait_synced(&mut pc, &mut [&mut rc]);
    assert_identical(&mut pc, &mut rc);
    // Then the command stream.
    madd_all(&mut pc, "scaled", &items("post", 3000));
    raw_ok(&mut pc, &["BF.ADD", "post-sync", "x"]);
    wait_synced(&mut pc, &mut [&mut rc]);
    assert_identical(&mut pc, &mut rc);
}

#[test]
fn replica_full_sync_diskless() {
    let p = Server::start_with(&[
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
    ]);
    let r = Server::start_with(&["--repl-diskless-load", "swapdb"]);
    let mut pc = p.conn();
    workload(&mut pc);
    replicate_from(&p, &r);
    let mut rc = r.conn();
    wait_synced(&mut pc, &mut [&mut rc]);
    assert_identical(&mut pc, &mut rc);
}

#[test]
fn replica_big_filter_via_loadchunk() {
    let p = Server::start();
    let r = Server::start();
    replicate_from(&p, &r);
    let mut pc = p.conn();
    let mut rc = r.conn();
    raw_ok(&mut pc, &["BF.RESERVE", "big", "0.001", "10000000"]);
    madd_all(&mut pc, "big", &items("b", 2000));
    let chunks = scandump(&mut pc, "big");
    loadchunks(&mut pc, "big-copy", &chunks);
    wait_synced(&mut pc, &mut [&mut rc]);
    assert_identical(&mut pc, &mut rc);
}

#[test]
fn replica_in_multi_exec_and_lua() {
    let p = Server::start();
    let r = Server::start();
    replicate_from(&p, &r);
    let mut pc = p.conn();
    let mut rc = r.conn();
    let _: Value = redis::pipe()
        .atomic()
        .cmd("BF.ADD")
        .arg("tx")
        .arg("a")
        .cmd("BF.MADD")
        .arg("tx")
        .arg("b")
        .arg("c")
        .cmd("BF.INSERT")
        .arg("tx2")
        .arg("ITEMS")
        .arg("x")
        .query(&mut pc)
        .unwrap();
    let _: Value = redis::cmd("EVAL")
        .arg("redis.call('BF.ADD', KEYS[1], 'a'); return redis.call('BF.MADD', KEYS[1], 'b', 'c')")
        .arg(1)
        .arg("lua")
        .query(&mut pc)
        .unwrap();
    wait_synced(&mut pc, &mut [&mut rc]);
    assert_identical(&mut pc, &mut rc);
}
