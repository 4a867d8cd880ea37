//! Replication durability: a primary and two replicas stay identical through every kind of BF.*
//! write (including refused ones and a non-scaling filter filling up half-way through a BF.MADD),
//! RESTORE/COPY/RENAME, MULTI and Lua, and a SCANDUMP→LOADCHUNK stream; a replica that joins
//! later (full sync, even in the middle of a LOADCHUNK stream) matches too; a promoted replica
//! serves and accepts writes and can itself be replicated.
//!
//! With the servers' default settings, a replica started after a workload of every BF.* command
//! matches its primary through a plain command stream, a full sync (disk and diskless), a big
//! filter's LOADCHUNK stream, and MULTI/EXEC and Lua.
//!
//! The replicas run with other defaults (error rate, capacity, expansion, seed mode) and a lower
//! `bf.max-filter-bytes` than the primary: whatever the primary admitted must land on them
//! unchanged.
use redis::{Connection, Value};
use rustbloom_testkit::*;

/// Replica settings that differ from the primary's.
fn odd_defaults(c: &mut Connection) {
    for (k, v) in [
        ("bf.error-rate", "0.2"),
        ("bf.initial-capacity", "7"),
        ("bf.expansion", "5"),
        ("bf.seed-mode", "fixed"),
        ("bf.max-filter-bytes", "1000000"),
    ] {
        raw_ok(c, &["CONFIG", "SET", k, v]);
    }
}

fn args(head: &[&str], tail: &[String]) -> Vec<String> {
    let mut v: Vec<String> = head.iter().map(|s| s.to_string()).collect();
    v.extend(tail.iter().cloned());
    v
}

/// The first `n` items `prefix:0`, `prefix:1`, ... that `key` answers absent for.
fn absent_items(c: &mut Connection, key: &str, prefix: &str, n: usize) -> Vec<String> {
    (0..)
        .map(|i| format!("{prefix}:{i}"))
        .filter(|item| as_int(&raw_ok(c, &["BF.EXISTS", key, item])) == 0)
        .take(n)
        .collect()
}

/// Items of the array reply of an add that ended with an error: (answers, error text).
fn split_reply(v: Value) -> (Vec<i64>, Option<String>) {
    let a = as_array(v);
    let mut ints = Vec::new();
    let mut err = None;
    for (i, x) in a.iter().enumerate() {
        match x {
            Value::ServerError(e) => {
                assert_eq!(i + 1, a.len(), "the error must end the reply: {a:?}");
                err = Some(server_err_text(e));
            }
            other => ints.push(as_int(other)),
        }
    }
    (ints, err)
}

/// Filters created and written inside MULTI/EXEC and a Lua script.
fn transaction_and_script(c: &mut Connection) {
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
        .cmd("BF.RESERVE")
        .arg("tx3")
        .arg("0.01")
        .arg("10")
        .arg("NONSCALING")
        .query(c)
        .unwrap();
    let _: Value = redis::cmd("EVAL")
        .arg("redis.call('BF.ADD', KEYS[1], 'a'); return redis.call('BF.MADD', KEYS[1], 'b', 'c')")
        .arg(1)
        .arg("lua")
        .query(c)
        .unwrap();
}

/// A scripted mix of every write command on the primary, the tests' one workload: every creating
/// command, options and awkward parameters, layers, a non-scaling filter filling up mid-MADD,
/// refusals (limits, maxmemory, bad input), SCANDUMP→LOADCHUNK (a full copy, and a load left at
/// its header), RESTORE/COPY/RENAME/DEL/PEXPIRE, MULTI/EXEC and Lua, another database, binary
/// keys. Returns the SCANDUMP chunks of "madd" taken when the header-only load "hdr-only" was
/// started.
fn workload(c: &mut Connection) -> Vec<(i64, Vec<u8>)> {
    // Auto-created from defaults and a random seed, by every creating command.
    raw_ok(c, &["BF.ADD", "add", "a"]);
    raw_ok(c, &["BF.ADD", "add", "b"]);
    assert_eq!(as_int(&raw_ok(c, &["BF.ADD", "add", "a"])), 0);
    raw_ok(c, &["BF.MADD", "madd", "a", "b", "c", "a"]);
    raw_ok(c, &["BF.INSERT", "ins", "ITEMS", "x", "y"]);
    raw_ok(
        c,
        &["BF.INSERT", "ins-nonscaling", "NONSCALING", "ITEMS", "x"],
    );
    // Explicit parameters, including awkward ones.
    raw_ok(
        c,
        &[
            "BF.RESERVE",
            "res-odd",
            "0.0123456789",
            "777",
            "EXPANSION",
            "3",
        ],
    );
    raw_ok(c, &["BF.RESERVE", "res-tiny", "1e-9", "100"]);
    raw_ok(c, &["BF.RESERVE", "res-ns", "0.01", "100", "NONSCALING"]);
    raw_ok(
        c,
        &[
            "BF.RESERVE",
            "res-seedmax",
            "0.01",
            "100",
            "SEED",
            "18446744073709551615",
        ],
    );
    raw_ok(c, &["bf.reserve", "res-exp1", "0.1", "5", "expansion", "1"]);
    madd_all(c, "res-exp1", &items("e1", 60));
    assert!(info(c, "res-exp1").filters >= 10);
    raw_ok(
        c,
        &args(
            &[
                "BF.INSERT",
                "ins-opts",
                "CAPACITY",
                "1000",
                "ERROR",
                "0.001",
                "EXPANSION",
                "4",
                "SEED",
                "5",
                "ITEMS",
            ],
            &items("io", 50),
        ),
    );
    // Bigger than the replicas' own bf.max-filter-bytes (1 MB): admitted by the primary.
    raw_ok(c, &["BF.RESERVE", "bigres", "0.001", "1000000"]);
    madd_all(c, "bigres", &items("br", 3000));
    assert!(info(c, "bigres").size > 1_000_000);
    // Scaling through several layers with BF.ADD and BF.MADD.
    raw_ok(c, &["BF.RESERVE", "scaled", "0.01", "50"]);
    for i in 0..300 {
        raw_ok(c, &["BF.ADD".to_string(), "scaled".into(), format!("s{i}")]);
    }
    madd_all(c, "scaled", &items("sm", 2000));
    assert!(info(c, "scaled").filters >= 4);
    madd_all(c, "auto-scaled", &items("as", 1000));

    // A non-scaling filter that fills up half-way through a BF.MADD.
    raw_ok(c, &["BF.RESERVE", "full", "0.001", "20", "NONSCALING"]);
    let (ok, err) = split_reply(raw_ok(c, &args(&["BF.MADD", "full"], &items("full", 40))));
    assert!(ok.len() >= 20 && ok.len() < 40, "{ok:?}");
    assert_eq!(err.as_deref(), Some("ERR non scaling filter is full"));
    // Items the full filter answers absent for: one it took for present (a false positive of the
    // random-seeded filter, about 4 times in 100,000 for these two adds) would answer 0 instead
    // of the refusal.
    let more = absent_items(c, "full", "more", 3);
    let (ok, err) = split_reply(raw_ok(
        c,
        &args(&["BF.INSERT", "full", "NOCREATE", "ITEMS"], &more),
    ));
    assert!(ok.is_empty());
    assert_eq!(err.as_deref(), Some("ERR non scaling filter is full"));
    let fresh = absent_items(c, "full", "zzz", 1);
    assert_err(
        c,
        &["BF.ADD", "full", &fresh[0]],
        "ERR non scaling filter is full",
    );
    // Created full in one BF.INSERT: creation and the items that fit replicate, not the rest.
    let (ok, err) = split_reply(raw_ok(
        c,
        &args(
            &["BF.INSERT", "full2", "CAPACITY", "5", "NONSCALING", "ITEMS"],
            &items("f2", 10),
        ),
    ));
    assert!(
        ok.len() >= 5 && ok.len() < 10 && err.is_some(),
        "{ok:?} {err:?}"
    );

    // Refused by the primary's limits: the per-filter cap when creating, and when growing
    // half-way through a BF.MADD (the items before the refusal stay, and replicate).
    raw_ok(c, &["CONFIG", "SET", "bf.max-filter-bytes", "10000"]);
    let e = raw_err(c, &["BF.RESERVE", "lim-big", "0.01", "100000"]);
    assert!(e.starts_with("ERR filter would use"), "{e}");
    let e = raw_err(
        c,
        &["BF.INSERT", "lim-auto", "CAPACITY", "100000", "ITEMS", "a"],
    );
    assert!(e.starts_with("ERR filter would use"), "{e}");
    raw_ok(c, &["BF.RESERVE", "lim", "0.01", "1000", "EXPANSION", "4"]);
    let (ok, err) = split_reply(raw_ok(c, &args(&["BF.MADD", "lim"], &items("lim", 6000))));
    assert!(ok.len() > 1000 && ok.len() < 6000, "{}", ok.len());
    assert!(
        err.as_deref()
            .unwrap_or("")
            .starts_with("ERR filter would use"),
        "{err:?}"
    );
    raw_ok(c, &["CONFIG", "SET", "bf.max-filter-bytes", "1073741824"]);
    // Refused by maxmemory.
    let used = used_memory(c);
    raw_ok(
        c,
        &[
            "CONFIG",
            "SET",
            "maxmemory",
            &(used + (1 << 20)).to_string(),
        ],
    );
    let e = raw_err(c, &["BF.RESERVE", "mm", "0.01", "5000000"]);
    assert!(e.starts_with("ERR filter needs"), "{e}");
    raw_ok(c, &["CONFIG", "SET", "maxmemory", "0"]);

    // Refused for bad input.
    assert_err(
        c,
        &["BF.RESERVE", "bad", "2", "100"],
        "ERR error rate must be in the range (0.000000, 1.000000)",
    );
    assert_err(
        c,
        &["BF.RESERVE", "bad", "0.01", "0"],
        "ERR capacity must be in the range [1, 1073741824]",
    );
    assert_err(c, &["BF.RESERVE", "add", "0.01", "100"], "ERR item exists");
    assert_err(
        c,
        &["BF.INSERT", "bad", "BOGUS", "1", "ITEMS", "a"],
        "ERR Unknown argument received",
    );
    assert_err(
        c,
        &["BF.INSERT", "nocreate", "NOCREATE", "ITEMS", "a"],
        "ERR not found",
    );
    raw_ok(c, &["SET", "str", "v"]);
    assert_err(
        c,
        &["BF.ADD", "str", "x"],
        "WRONGTYPE Operation against a key holding the wrong kind of value",
    );
    assert_err(
        c,
        &["BF.LOADCHUNK", "bad", "1", "garbage"],
        "ERR received bad data",
    );

    // SCANDUMP → LOADCHUNK: a full copy, and a load left at its header (completed later).
    let chunks = scandump(c, "scaled");
    loadchunks(c, "loaded", &chunks);
    assert_eq!(digest(c, "loaded"), digest(c, "scaled"));
    let madd_chunks = scandump(c, "madd");
    loadchunks(c, "hdr-only", &madd_chunks[..1]);
    assert_err(
        c,
        &["BF.EXISTS", "hdr-only", "a"],
        "ERR filter is being loaded by BF.LOADCHUNK",
    );
    // A data chunk that belongs to another filter / to no load.
    let e = raw_err(
        c,
        &[
            b"BF.LOADCHUNK".to_vec(),
            b"hdr-only".to_vec(),
            chunks[1].0.to_string().into_bytes(),
            chunks[1].1.clone(),
        ],
    );
    assert!(
        e == "ERR received bad data" || e.starts_with("ERR invalid"),
        "{e}"
    );
    let e = raw_err(
        c,
        &[
            b"BF.LOADCHUNK".to_vec(),
            b"scaled".to_vec(),
            chunks[1].0.to_string().into_bytes(),
            chunks[1].1.clone(),
        ],
    );
    assert_eq!(e, "ERR invalid offset - no link found");

    // Generic keyspace writes on filters.
    let payload: Vec<u8> = redis::cmd("DUMP").arg("scaled").query(c).unwrap();
    raw_ok(
        c,
        &[
            b"RESTORE".to_vec(),
            b"restored".to_vec(),
            b"0".to_vec(),
            payload.clone(),
        ],
    );
    raw_ok(
        c,
        &[
            b"RESTORE".to_vec(),
            b"add".to_vec(),
            b"0".to_vec(),
            payload,
            b"REPLACE".to_vec(),
        ],
    );
    raw_ok(c, &["COPY", "ins-opts", "copied"]);
    raw_ok(c, &["BF.ADD", "copied", "only-in-copy"]);
    raw_ok(c, &["RENAME", "copied", "renamed"]);
    raw_ok(c, &["DEL", "ins"]);
    raw_ok(c, &["PEXPIRE", "res-odd", "100000000"]);

    transaction_and_script(c);
    // Error rates whose decimal form is awkward: replicated as text, they must parse back to
    // the same f64 (an error reply here is fine too, as long as the replicas agree).
    for (i, e) in [
        "1e-15",
        "0.30000000000000004",
        "0.9999999999999999",
        "5e-7",
        "1e-300",
        "4.9e-324",
    ]
    .iter()
    .enumerate()
    {
        let _ = raw(c, &["BF.RESERVE", &format!("rate{i}"), e, "3"]);
        let _ = raw(
            c,
            &[
                "BF.INSERT",
                &format!("irate{i}"),
                "ERROR",
                e,
                "CAPACITY",
                "3",
                "ITEMS",
                "a",
            ],
        );
    }
    // Another database (DEBUG DIGEST covers every database).
    raw_ok(c, &["SELECT", "5"]);
    raw_ok(c, &["BF.MADD", "db5", "a", "b"]);
    raw_ok(c, &["BF.RESERVE", "db5-res", "0.01", "10", "SEED", "1"]);
    raw_ok(c, &["MOVE", "db5", "6"]);
    raw_ok(c, &["SELECT", "0"]);
    // Binary key and items.
    rawb(c, &[b"BF.MADD", b"bin\0\xff", b"", b"\0", b"\xff"]).unwrap();
    madd_chunks
}

#[test]
fn primary_and_two_replicas_stay_identical() {
    let p = Server::start();
    let r1 = Server::start();
    let r2 = Server::start();
    let mut pc = p.conn();
    let mut c1 = r1.conn();
    let mut c2 = r2.conn();
    odd_defaults(&mut c1);
    odd_defaults(&mut c2);
    replicate_from(&p, &r1);
    replicate_from(&p, &r2);

    let madd_chunks = workload(&mut pc);
    wait_synced(&mut pc, &mut [&mut c1, &mut c2]);
    assert_same_dataset(&mut [
        ("primary", &mut pc),
        ("replica1", &mut c1),
        ("replica2", &mut c2),
    ]);

    // A replica that joins now gets everything by full sync (RDB), including the half-loaded
    // filter, then follows the stream.
    let r3 = Server::start();
    let mut c3 = r3.conn();
    odd_defaults(&mut c3);
    replicate_from(&p, &r3);
    madd_all(&mut pc, "scaled", &items("post-sync", 1000));
    raw_ok(&mut pc, &["BF.ADD", "post-sync-auto", "x"]);
    wait_synced(&mut pc, &mut [&mut c1, &mut c2, &mut c3]);
    assert_same_dataset(&mut [
        ("primary", &mut pc),
        ("replica1", &mut c1),
        ("replica2", &mut c2),
        ("late replica", &mut c3),
    ]);
    // Replicas refuse writes.
    let e = raw_err(&mut c1, &["BF.ADD", "add", "zzz"]);
    assert!(e.starts_with("READONLY"), "{e}");

    // Promote replica 1: it serves what it holds and takes writes of every kind.
    raw_ok(&mut c1, &["REPLICAOF", "NO", "ONE"]);
    assert!(info_section(&mut c1, "replication").contains("role:master"));
    assert_all_exist(&mut c1, "scaled", &items("sm", 2000));
    assert_all_exist(&mut c1, "bigres", &items("br", 3000));
    // A write is taken (the new item can be a false positive of the random-seeded filter: then
    // it answers 0 and is not counted).
    let card = as_int(&raw_ok(&mut c1, &["BF.CARD", "scaled"]));
    let added = as_int(&raw_ok(&mut c1, &["BF.ADD", "scaled", "after-promotion"]));
    assert_eq!(
        as_int(&raw_ok(&mut c1, &["BF.CARD", "scaled"])),
        card + added
    );
    assert_eq!(
        as_int(&raw_ok(
            &mut c1,
            &["BF.EXISTS", "scaled", "after-promotion"]
        )),
        1
    );
    raw_ok(&mut c1, &["BF.MADD", "new-on-promoted", "a", "b"]);
    // Its own (odd) defaults now apply to filters it creates.
    let i = info(&mut c1, "new-on-promoted");
    assert_eq!((i.capacity, i.expansion), (7, Some(5)));
    raw_ok(&mut c1, &["BF.RESERVE", "res-on-promoted", "0.01", "100"]);
    // It finishes the load the old primary started.
    loadchunks(&mut c1, "hdr-only", &madd_chunks[1..]);
    assert_eq!(digest(&mut c1, "hdr-only"), digest(&mut c1, "madd"));
    // Its limits apply again: the replicas' 1 MB cap refuses a new big filter.
    let e = raw_err(&mut c1, &["BF.RESERVE", "too-big", "0.001", "1000000"]);
    assert!(e.starts_with("ERR filter would use"), "{e}");

    // Replica 2 follows the promoted node, and stays identical to it.
    replicate_from(&r1, &r2);
    madd_all(&mut c1, "scaled", &items("chained", 500));
    raw_ok(
        &mut c1,
        &["BF.INSERT", "chained-new", "CAPACITY", "10", "ITEMS", "a"],
    );
    wait_synced(&mut c1, &mut [&mut c2]);
    assert_same_dataset(&mut [("promoted replica1", &mut c1), ("replica2", &mut c2)]);
    // The old primary and the late replica never saw those writes, and are still identical.
    wait_synced(&mut pc, &mut [&mut c3]);
    assert_same_dataset(&mut [("primary", &mut pc), ("late replica", &mut c3)]);
}

#[test]
fn replica_joining_mid_loadchunk_stream_matches() {
    let p = Server::start();
    let r1 = Server::start();
    let r2 = Server::start_with(&["--repl-diskless-load", "swapdb"]);
    let mut pc = p.conn();
    let mut c1 = r1.conn();
    let mut c2 = r2.conn();
    replicate_from(&p, &r1);
    // ~20 MB: a header and two data chunks.
    raw_ok(&mut pc, &["BF.RESERVE", "big", "0.01", "15000000"]);
    madd_all(&mut pc, "big", &items("b", 5000));
    let chunks = scandump(&mut pc, "big");
    assert_eq!(chunks.len(), 3);
    loadchunks(&mut pc, "copy", &chunks[..2]);
    // Full sync now carries "copy" half-loaded.
    raw_ok(&mut pc, &["CONFIG", "SET", "repl-diskless-sync", "yes"]);
    raw_ok(&mut pc, &["CONFIG", "SET", "repl-diskless-sync-delay", "0"]);
    replicate_from(&p, &r2);
    wait_synced(&mut pc, &mut [&mut c1, &mut c2]);
    assert_same_dataset(&mut [
        ("primary", &mut pc),
        ("replica1", &mut c1),
        ("replica2", &mut c2),
    ]);
    assert_err(
        &mut c2,
        &["BF.EXISTS", "copy", "b:1"],
        "ERR filter is being loaded by BF.LOADCHUNK",
    );
    // The rest of the stream completes it everywhere.
    loadchunks(&mut pc, "copy", &chunks[2..]);
    wait_synced(&mut pc, &mut [&mut c1, &mut c2]);
    assert_same_dataset(&mut [
        ("primary", &mut pc),
        ("replica1", &mut c1),
        ("replica2", &mut c2),
    ]);
    let d = digest(&mut pc, "big");
    for c in [&mut pc, &mut c1, &mut c2] {
        assert_eq!(digest(c, "copy"), d);
        assert_all_exist(c, "copy", &items("b", 5000));
    }
}

/// A RESTORE the primary accepted (here: a filter bigger than the replicas' own
/// `bf.max-filter-bytes`, or arriving while a replica's used memory is above its own maxmemory)
/// must land on the replicas too: docs/configuration.md says what the primary admitted is not
/// limited again. The replica must not answer the replicated RESTORE with "Bad data format".
#[test]
fn replicated_restore_ignores_replica_limits() {
    let p = Server::start();
    let r1 = Server::start();
    let r2 = Server::start();
    let mut pc = p.conn();
    let mut c1 = r1.conn();
    let mut c2 = r2.conn();
    raw_ok(&mut c1, &["CONFIG", "SET", "bf.max-filter-bytes", "100000"]);
    replicate_from(&p, &r1);
    replicate_from(&p, &r2);
    // 2.4 MB, over replica 1's cap: BF.RESERVE is replicated as a command and is admitted.
    raw_ok(&mut pc, &["BF.RESERVE", "big", "0.01", "200000"]);
    raw_ok(&mut pc, &["BF.ADD", "big", "x"]);
    wait_synced(&mut pc, &mut [&mut c1, &mut c2]);
    // Replica 2's maxmemory is now below what it holds (replicas ignore maxmemory for writes
    // from their primary).
    let used = used_memory(&mut c2);
    raw_ok(
        &mut c2,
        &["CONFIG", "SET", "maxmemory", &(used + 100_000).to_string()],
    );
    let payload: Vec<u8> = redis::cmd("DUMP").arg("big").query(&mut pc).unwrap();
    raw_ok(
        &mut pc,
        &[
            b"RESTORE".to_vec(),
            b"restored".to_vec(),
            b"0".to_vec(),
            payload,
        ],
    );
    wait_synced(&mut pc, &mut [&mut c1, &mut c2]);
    let want = dataset_view(&mut pc);
    let v1 = dataset_view(&mut c1);
    let v2 = dataset_view(&mut c2);
    assert!(
        v1 == want && v2 == want,
        "replicated RESTORE diverged:\nprimary: {want:?}\nreplica1 (low bf.max-filter-bytes): \
         {v1:?}\nreplica2 (low maxmemory): {v2:?}"
    );
}

/// The replica has applied everything the primary wrote, and holds the primary's dataset.
#[track_caller]
fn assert_replica_caught_up(pc: &mut Connection, rc: &mut Connection) {
    wait_synced(pc, &mut [&mut *rc]);
    assert_same_dataset(&mut [("primary", pc), ("replica", rc)]);
}

#[test]
fn replica_matches_primary_command_stream() {
    let p = Server::start();
    let r = Server::start();
    replicate_from(&p, &r);
    let mut pc = p.conn();
    let mut rc = r.conn();
    workload(&mut pc);
    assert_replica_caught_up(&mut pc, &mut rc);
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
    raw_ok(&mut pc, &["DEL", "ins-nonscaling"]);
    assert_replica_caught_up(&mut pc, &mut rc);
}

#[test]
fn replica_full_sync_from_existing_data() {
    // Data written before the replica attaches arrives through the RDB of a full sync.
    let p = Server::start();
    let r = Server::start();
    let mut pc = p.conn();
    workload(&mut pc);
    replicate_from(&p, &r);
    let mut rc = r.conn();
    assert_replica_caught_up(&mut pc, &mut rc);
    // Then the command stream.
    madd_all(&mut pc, "scaled", &items("post", 3000));
    raw_ok(&mut pc, &["BF.ADD", "post-sync", "x"]);
    assert_replica_caught_up(&mut pc, &mut rc);
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
    assert_replica_caught_up(&mut pc, &mut rc);
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
    assert_replica_caught_up(&mut pc, &mut rc);
}

#[test]
fn replica_in_multi_exec_and_lua() {
    let p = Server::start();
    let r = Server::start();
    replicate_from(&p, &r);
    let mut pc = p.conn();
    let mut rc = r.conn();
    transaction_and_script(&mut pc);
    assert_replica_caught_up(&mut pc, &mut rc);
}
