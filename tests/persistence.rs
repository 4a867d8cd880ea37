//! RDB, AOF, DUMP/RESTORE, COPY, MEMORY USAGE.
use redis::{Connection, Value};
use rustbloom_testkit::*;

struct Fixture {
    keys: Vec<&'static str>,
    members: Vec<(&'static str, Vec<String>)>,
}

/// A varied set of filters: defaults, options, several layers, non-scaling full, binary key, empty.
fn populate(c: &mut Connection) -> Fixture {
    let mut members = Vec::new();
    let a = items("auto", 50);
    madd_all(c, "auto", &a);
    members.push(("auto", a));

    raw_ok(
        c,
        &["BF.RESERVE", "scaled", "0.01", "100", "EXPANSION", "3"],
    );
    let sc = items("sc", 2500);
    madd_all(c, "scaled", &sc);
    members.push(("scaled", sc));

    raw_ok(
        c,
        &[
            "BF.RESERVE",
            "ns",
            "0.001",
            "30",
            "NONSCALING",
            "SEED",
            "77",
        ],
    );
    let mut args: Vec<String> = vec!["BF.MADD".into(), "ns".into()];
    args.extend(items("ns", 60));
    let _ = raw(c, &args); // fills up, last element is an error
    members.push(("ns", vec![]));

    raw_ok(
        c,
        &[
            "BF.INSERT",
            "ins",
            "CAPACITY",
            "1000",
            "ERROR",
            "0.0001",
            "EXPANSION",
            "1",
            "ITEMS",
            "x",
            "y",
            "z",
        ],
    );
    members.push(("ins", vec!["x".into(), "y".into(), "z".into()]));

    // Many layers grown one add at a time (7 layers: 10, 20, ..., 640).
    raw_ok(c, &["BF.RESERVE", "deep", "0.01", "10"]);
    let dp = items("deep", 1000);
    for it in &dp {
        raw_ok(c, &["BF.ADD", "deep", it.as_str()]);
    }
    members.push(("deep", dp));

    raw_ok(c, &["BF.RESERVE", "empty", "0.05", "10"]);
    members.push(("empty", vec![]));

    rawb(c, &[b"BF.ADD", b"bin\0\xffkey", b"\0\xff"]).unwrap();

    Fixture {
        keys: vec!["auto", "scaled", "ns", "ins", "empty", "bin\0\u{ff}key"],
        members,
    }
}

struct Snapshot {
    digests: Vec<String>,
    infos: Vec<Info>,
    dataset: String,
}

fn snapshot(c: &mut Connection, f: &Fixture) -> Snapshot {
    let mut digests = Vec::new();
    let mut infos = Vec::new();
    for k in ["auto", "scaled", "ns", "ins", "empty", "deep"] {
        digests.push(digest(c, k));
        infos.push(info(c, k));
    }
    let v: Value = redis::cmd("DEBUG")
        .arg("DIGEST-VALUE")
        .arg(b"bin\0\xffkey".as_slice())
        .query(c)
        .unwrap();
    digests.push(format!("{v:?}"));
    let _ = &f.keys;
    Snapshot {
        digests,
        infos,
        dataset: dataset_digest(c),
    }
}

#[track_caller]
fn check_same(c: &mut Connection, f: &Fixture, before: &Snapshot, what: &str) {
    let after = snapshot(c, f);
    assert_eq!(
        before.digests, after.digests,
        "DEBUG DIGEST-VALUE differs after {what}"
    );
    assert_eq!(
        before.dataset, after.dataset,
        "DEBUG DIGEST differs after {what}"
    );
    for (k, m) in &f.members {
        assert_all_exist(c, k, m);
    }
    assert_eq!(
        rawb(c, &[b"BF.EXISTS", b"bin\0\xffkey", b"\0\xff"]).unwrap(),
        Value::Int(1)
    );
    for (a, b) in before.infos.iter().zip(after.infos.iter()) {
        assert_info_eq(a, b, what);
    }
    assert_eq!(key_type(c, "scaled"), "MBbloom--");
}

#[test]
fn debug_reload_keeps_filters() {
    let s = Server::start();
    let mut c = s.conn();
    let f = populate(&mut c);
    let before = snapshot(&mut c, &f);
    assert_eq!(raw_ok(&mut c, &["DEBUG", "RELOAD"]), Value::Okay);
    check_same(&mut c, &f, &before, "DEBUG RELOAD");
    // Filters stay writable and keep behaving the same.
    assert_eq!(raw_ok(&mut c, &["BF.ADD", "auto", "auto:1"]), Value::Int(0));
    assert_eq!(
        raw_ok(&mut c, &["BF.ADD", "auto", "brand-new"]),
        Value::Int(1)
    );
}

#[test]
fn save_and_restart_keeps_filters() {
    let mut s = Server::start();
    let mut c = s.conn();
    let f = populate(&mut c);
    let before = snapshot(&mut c, &f);
    assert_eq!(raw_ok(&mut c, &["SAVE"]), Value::Okay);
    drop(c);
    s.restart();
    let mut c = s.conn();
    check_same(&mut c, &f, &before, "SAVE + restart");
}

#[test]
fn big_filter_survives_save_restart() {
    let mut s = Server::start();
    let mut c = s.conn();
    raw_ok(&mut c, &["BF.RESERVE", "big", "0.001", "10000000"]);
    let its = items("b", 3000);
    madd_all(&mut c, "big", &its);
    let d = digest(&mut c, "big");
    let i = info(&mut c, "big");
    raw_ok(&mut c, &["SAVE"]);
    drop(c);
    s.restart();
    let mut c = s.conn();
    assert_eq!(d, digest(&mut c, "big"));
    assert_eq!(i, info(&mut c, "big"));
    assert_all_exist(&mut c, "big", &its);
}

fn aof_roundtrip(preamble: &str, rewrite: bool) {
    let args = [
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--aof-use-rdb-preamble",
        preamble,
    ];
    let mut s = Server::start_with(&args);
    let mut c = s.conn();
    // Wait for the initial AOF base to be written (Redis 7 creates it at start).
    wait_rewrite_done(&mut c);
    let f = populate(&mut c);
    let before = snapshot(&mut c, &f);
    if rewrite {
        raw_ok(&mut c, &["BGREWRITEAOF"]);
        wait_rewrite_done(&mut c);
    }
    drop(c);
    s.restart();
    let mut c = s.conn();
    check_same(
        &mut c,
        &f,
        &before,
        &format!("AOF restart (preamble {preamble}, rewrite {rewrite})"),
    );
}

#[test]
fn aof_restart_keeps_filters() {
    aof_roundtrip("no", false);
}

#[test]
fn aof_rewrite_without_rdb_preamble_then_restart() {
    // With the preamble off the rewrite uses the module's AOF rewrite callback.
    aof_roundtrip("no", true);
}

#[test]
fn aof_rewrite_with_rdb_preamble_then_restart() {
    aof_roundtrip("yes", true);
}

#[test]
fn aof_rewrite_big_filter_in_pieces() {
    let args = [
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--aof-use-rdb-preamble",
        "no",
    ];
    let mut s = Server::start_with(&args);
    let mut c = s.conn();
    wait_rewrite_done(&mut c);
    raw_ok(
        &mut c,
        &["BF.RESERVE", "big", "0.001", "10000000", "EXPANSION", "2"],
    );
    let its = items("b", 3000);
    madd_all(&mut c, "big", &its);
    let d = digest(&mut c, "big");
    raw_ok(&mut c, &["BGREWRITEAOF"]);
    wait_rewrite_done(&mut c);
    drop(c);
    s.restart();
    let mut c = s.conn();
    assert_eq!(d, digest(&mut c, "big"));
    assert_all_exist(&mut c, "big", &its);
    // Writes after the rewrite are appended and replayed too.
    raw_ok(&mut c, &["BF.ADD", "big", "after-rewrite"]);
    let d2 = digest(&mut c, "big");
    drop(c);
    s.restart();
    let mut c = s.conn();
    assert_eq!(d2, digest(&mut c, "big"));
}

#[test]
fn aof_replays_commands_identically() {
    // Without rewrite, the AOF holds the commands as propagated: a random-seed auto-created filter
    // must come back identical (so creation must be logged with an explicit seed).
    let args = ["--appendonly", "yes", "--appendfsync", "always"];
    let mut s = Server::start_with(&args);
    let mut c = s.conn();
    wait_rewrite_done(&mut c);
    raw_ok(&mut c, &["BF.ADD", "a", "1"]);
    raw_ok(
        &mut c,
        &["BF.INSERT", "b", "CAPACITY", "20", "ITEMS", "1", "2"],
    );
    raw_ok(&mut c, &["BF.RESERVE", "c", "0.01", "10"]);
    madd_all(&mut c, "c", &items("c", 200));
    let da = digest(&mut c, "a");
    let db = digest(&mut c, "b");
    let dc = digest(&mut c, "c");
    drop(c);
    s.restart();
    let mut c = s.conn();
    assert_eq!(da, digest(&mut c, "a"));
    assert_eq!(db, digest(&mut c, "b"));
    assert_eq!(dc, digest(&mut c, "c"));
}

#[test]
fn dump_restore_same_and_other_server() {
    let a = Server::start();
    let b = Server::start();
    let mut ca = a.conn();
    let mut cb = b.conn();
    let f = populate(&mut ca);
    let mut size_diffs: Vec<String> = Vec::new();
    for k in ["auto", "scaled", "ns", "ins", "empty", "deep"] {
        let dump: Vec<u8> = redis::cmd("DUMP").arg(k).query(&mut ca).unwrap();
        assert!(!dump.is_empty());
        let copy = format!("{k}-copy");
        let r: Value = redis::cmd("RESTORE")
            .arg(&copy)
            .arg(0)
            .arg(dump.as_slice())
            .query(&mut ca)
            .unwrap();
        assert_eq!(r, Value::Okay);
        let r: Value = redis::cmd("RESTORE")
            .arg(k)
            .arg(0)
            .arg(dump.as_slice())
            .query(&mut cb)
            .unwrap();
        assert_eq!(r, Value::Okay);
        assert_eq!(digest(&mut ca, k), digest(&mut ca, &copy), "{k}");
        assert_same_digest(&mut ca, k, &mut cb, k);
        let (ia, ib, ic) = (info(&mut ca, k), info(&mut cb, k), info(&mut ca, &copy));
        let strip = |i: &Info| Info {
            size: 0,
            ..i.clone()
        };
        assert_eq!(
            strip(&ia),
            strip(&ib),
            "{k}: BF.INFO differs on the other server"
        );
        assert_eq!(
            strip(&ia),
            strip(&ic),
            "{k}: BF.INFO differs for the restored copy"
        );
        if ia.size != ib.size || ia.size != ic.size {
            size_diffs.push(format!(
                "{k}: Size {} (orig) vs {} (other server) vs {} (copy)",
                ia.size, ib.size, ic.size
            ));
        }
    }
    for (k, m) in &f.members {
        assert_all_exist(&mut cb, k, m);
    }
    // RESTORE ... REPLACE over an existing filter.
    let dump: Vec<u8> = redis::cmd("DUMP").arg("scaled").query(&mut ca).unwrap();
    let r: Value = redis::cmd("RESTORE")
        .arg("auto")
        .arg(0)
        .arg(dump.as_slice())
        .arg("REPLACE")
        .query(&mut cb)
        .unwrap();
    assert_eq!(r, Value::Okay);
    assert_same_digest(&mut ca, "scaled", &mut cb, "auto");
    // A corrupted payload is refused by RESTORE (Redis checks the CRC).
    let mut bad = dump.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0xff;
    let r: redis::RedisResult<Value> = redis::cmd("RESTORE")
        .arg("corrupt")
        .arg(0)
        .arg(bad.as_slice())
        .query(&mut cb);
    assert!(r.is_err());
    assert_no_key(&mut cb, "corrupt");
    assert!(
        size_diffs.is_empty(),
        "BF.INFO Size differs after DUMP/RESTORE:\n{}",
        size_diffs.join("\n")
    );
}

#[test]
fn copy_is_deep() {
    let s = Server::start();
    let mut c = s.conn();
    raw_ok(&mut c, &["BF.RESERVE", "orig", "0.01", "100"]);
    let its = items("o", 300);
    madd_all(&mut c, "orig", &its);
    let d = digest(&mut c, "orig");
    let i = info(&mut c, "orig");
    let n: i64 = redis::cmd("COPY")
        .arg("orig")
        .arg("copy")
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 1);
    assert_eq!(d, digest(&mut c, "copy"));
    let info_copy = info(&mut c, "copy");
    assert_eq!(
        Info {
            size: 0,
            ..i.clone()
        },
        Info {
            size: 0,
            ..info_copy.clone()
        }
    );
    let more = items("copy-only", 500);
    madd_all(&mut c, "copy", &more);
    assert_ne!(d, digest(&mut c, "copy"));
    assert_eq!(
        d,
        digest(&mut c, "orig"),
        "adding to the copy changed the original"
    );
    assert_eq!(
        i,
        info(&mut c, "orig"),
        "adding to the copy changed the original's BF.INFO"
    );
    assert_all_exist(&mut c, "copy", &its);
    assert_all_exist(&mut c, "copy", &more);
    // And the other way round.
    raw_ok(&mut c, &["BF.ADD", "orig", "orig-only"]);
    let dc = digest(&mut c, "copy");
    madd_all(&mut c, "orig", &items("orig-more", 100));
    assert_eq!(dc, digest(&mut c, "copy"));
    // COPY to another db, then DEL the original.
    let n: i64 = redis::cmd("COPY")
        .arg("orig")
        .arg("orig")
        .arg("DB")
        .arg(1)
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 1);
    let d_orig = digest(&mut c, "orig");
    let _: i64 = redis::cmd("DEL").arg("orig").query(&mut c).unwrap();
    let _: Value = redis::cmd("SELECT").arg(1).query(&mut c).unwrap();
    assert_eq!(d_orig, digest(&mut c, "orig"));
    assert_all_exist(&mut c, "orig", &its);
    assert_eq!(
        i.size, info_copy.size,
        "BF.INFO Size of the COPY differs from the original: {i:?} vs {info_copy:?}"
    );
}

#[test]
fn memory_usage_counts_bits() {
    let s = Server::start();
    let mut c = s.conn();
    raw_ok(&mut c, &["BF.RESERVE", "k", "0.01", "1000000"]);
    let mu: i64 = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg("k")
        .query(&mut c)
        .unwrap();
    assert!(mu >= 1_100_000, "MEMORY USAGE {mu} < 1.1 MB");
    assert!(mu < 10_000_000, "MEMORY USAGE {mu} implausibly large");
    let size = info(&mut c, "k").size;
    assert!(size >= 1_100_000, "BF.INFO Size {size} < 1.1 MB");
    // Grows with layers.
    raw_ok(&mut c, &["BF.RESERVE", "small", "0.01", "100"]);
    let m1: i64 = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg("small")
        .query(&mut c)
        .unwrap();
    madd_all(&mut c, "small", &items("s", 3000));
    let m2: i64 = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg("small")
        .query(&mut c)
        .unwrap();
    assert!(
        m2 > m1 * 10,
        "MEMORY USAGE did not grow with layers: {m1} -> {m2}"
    );
    // used_memory accounts for filter allocations (module allocator).
    let before = used_memory(&mut c);
    raw_ok(&mut c, &["BF.RESERVE", "m", "0.001", "2000000"]);
    let after = used_memory(&mut c);
    assert!(
        after - before >= 3_000_000,
        "used_memory grew by only {} bytes",
        after - before
    );
}

fn used_memory(c: &mut Connection) -> i64 {
    let s = info_section(c, "memory");
    s.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn rdb_with_partial_loadchunk_filter() {
    // A key in the middle of a LOADCHUNK load must survive save/reload without crashing, either
    // still loading or gone; it must never come back as a complete filter with garbage bits.
    let s = Server::start();
    let mut c = s.conn();
    madd_all(&mut c, "src", &items("a", 50));
    let chunks = scandump(&mut c, "src");
    let r = redis::cmd("BF.LOADCHUNK")
        .arg("partial")
        .arg(chunks[0].0)
        .arg(chunks[0].1.as_slice())
        .query::<Value>(&mut c);
    assert_eq!(r.unwrap(), Value::Okay);
    assert_eq!(raw_ok(&mut c, &["DEBUG", "RELOAD"]), Value::Okay);
    if exists(&mut c, "partial") {
        assert_eq!(
            raw_err(&mut c, &["BF.EXISTS", "partial", "a:1"]),
            "ERR filter is being loaded by BF.LOADCHUNK"
        );
        loadchunks(&mut c, "partial", &chunks[1..]);
        assert_eq!(digest(&mut c, "src"), digest(&mut c, "partial"));
    }
    assert!(raw(&mut c, &["PING"]).is_ok());
}
