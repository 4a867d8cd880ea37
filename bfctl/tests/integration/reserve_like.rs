//! `bfctl reserve NEW --like OLD` on a 3-master cluster, where partition i of two names and two
//! plain names sit on different slots (`BF.RESERVE … LIKE` would be CROSSSLOT): filters reserved
//! apart with random seeds, and their twins reserved like them, merge with `bfctl merge` into one
//! that finds every item of both; the twin starts empty; an empty twin is byte for byte its
//! empty model (every kind made here: scaling with its expansion and tightening, non-scaling,
//! window, partitioned); a taken name is `item exists` with nothing left behind; filters kept in
//! RedisBloom's or valkey-bloom's format, missing models and other parameters beside --like are
//! refused, nothing created.

use std::path::Path;

use redis::Value;
use rustbloom_client::filter::scandump;
use rustbloom_client::routing::{key_slot, partition_keys};
use rustbloom_client::{Client, Connection, Filter};
use rustbloom_core::redisbloom::RbFilter;
use rustbloom_core::transfer::scandump_step;
use rustbloom_core::{Filter as CoreFilter, Unlimited};
use rustbloom_testkit::cluster::Cluster;

use crate::common::{bfctl_at, ok};

fn items(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

fn load(url: &str, dir: &Path, name: &str, items: &[String]) {
    let path = dir.join(format!("{name}.txt"));
    let mut text = items.join("\n");
    text.push('\n');
    std::fs::write(&path, text).expect("write items");
    ok(&bfctl_at(
        url,
        &["load", name, &path.display().to_string()],
        b"",
    ));
}

/// `bfctl exists` over `items`: how many answered 1.
fn count_present(url: &str, name: &str, items: &[String]) -> usize {
    let mut input = items.join("\n");
    input.push('\n');
    let out = ok(&bfctl_at(url, &["exists", name], input.as_bytes()));
    assert_eq!(out.lines().count(), items.len(), "one answer per line");
    out.lines().filter(|a| *a == "1").count()
}

fn refused(url: &str, args: &[&str]) -> String {
    let out = bfctl_at(url, args, b"");
    assert!(!out.status.success(), "{args:?} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn connect(url: &str) -> Connection {
    Client::open(url)
        .and_then(|c| c.connect())
        .expect("connect")
}

fn query(conn: &mut Connection, args: &[&[u8]]) -> Value {
    let mut cmd = redis::Cmd::new();
    for a in args {
        cmd.arg(*a);
    }
    conn.query(&cmd)
        .unwrap_or_else(|e| panic!("{:?}: {e}", text_args(args)))
}

fn text_args(args: &[&[u8]]) -> Vec<String> {
    args.iter()
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

fn exists(conn: &mut Connection, key: &[u8]) -> bool {
    query(conn, &[b"EXISTS", key]) == Value::Int(1)
}

/// Every BF.SCANDUMP step of `key`: its header and chunks, bits and checksums.
fn stream(conn: &mut Connection, key: &[u8]) -> Vec<(u64, Vec<u8>)> {
    let mut steps = Vec::new();
    let mut it = 0;
    loop {
        let (next, data) = scandump(conn, key, it).expect("BF.SCANDUMP");
        if next == 0 {
            return steps;
        }
        steps.push((next, data));
        it = next;
    }
}

/// The keys of `name` (the name, then its partitions, for a partitioned filter).
fn keys_of(conn: &mut Connection, name: &str) -> Vec<Vec<u8>> {
    Filter::discover(conn, name.as_bytes())
        .expect("discover")
        .unwrap_or_else(|| panic!("{name} exists"))
        .keys()
}

#[test]
fn filters_reserved_like_others_merge_with_them_across_slots() {
    let cl = Cluster::start(3, 0);
    let url = cl.url(0);
    let dir = tempfile::tempdir().expect("a scratch directory");
    let mut conn = connect(&url);

    // Monday's filter, reserved with a random routing seed (and random filter seeds, the
    // server's default seed mode); Tuesday's, reserved like it on other slots.
    ok(&bfctl_at(
        &url,
        &["reserve", "mon", "0.0001", "40000", "--partitions", "4"],
        b"",
    ));
    let (monday, tuesday) = (items("monday", 6000), items("tuesday", 6000));
    load(&url, dir.path(), "mon", &monday);
    let mon = Filter::discover(&mut conn, b"mon")
        .expect("discover")
        .expect("mon exists");
    let routing_seed = mon.partitioning().expect("partitioned").routing_seed;
    let said = ok(&bfctl_at(&url, &["reserve", "tue", "--like", "mon"], b""));
    assert_eq!(
        said,
        format!("tue: reserved like mon: 4 partitions (routing seed {routing_seed})\n")
    );
    // Empty: no partition holds an item.
    for key in &keys_of(&mut conn, "tue")[1..] {
        assert_eq!(query(&mut conn, &[b"BF.CARD", key]), Value::Int(0));
    }
    load(&url, dir.path(), "tue", &tuesday);
    let said = ok(&bfctl_at(&url, &["merge", "week", "mon", "tue"], b""));
    assert!(
        said.starts_with("week: merged 2 filters into 4 partitions (created); 8 keys copied"),
        "{said}"
    );
    assert_eq!(count_present(&url, "week", &monday), monday.len());
    assert_eq!(count_present(&url, "week", &tuesday), tuesday.len());

    // A taken name: `item exists`, the filter there untouched; a name of which one partition
    // key is taken: nothing left behind.
    let state = |conn: &mut Connection| {
        let keys = keys_of(conn, "tue");
        let partitions: Vec<_> = keys[1..].iter().map(|key| stream(conn, key)).collect();
        (query(conn, &[b"BF.INFO", b"tue"]), partitions)
    };
    let before = state(&mut conn);
    let err = refused(&url, &["reserve", "tue", "--like", "mon"]);
    assert!(err.contains("tue: item exists"), "{err}");
    assert!(state(&mut conn) == before, "tue changed");
    // (a filter there is `item exists`; another type, the server's WRONGTYPE).
    let taken = partition_keys(b"taken", 4);
    query(&mut conn, &[b"BF.RESERVE", &taken[2], b"0.01", b"100"]);
    let err = refused(&url, &["reserve", "taken", "--like", "mon"]);
    assert!(err.contains("taken: item exists"), "{err}");
    let left_behind = |conn: &mut Connection| {
        let mut keys: Vec<bool> = taken.iter().map(|key| exists(conn, key)).collect();
        keys.push(exists(conn, b"taken"));
        keys
    };
    assert_eq!(left_behind(&mut conn), [false, false, true, false, false]);
    query(&mut conn, &[b"DEL", &taken[2]]);
    query(&mut conn, &[b"SET", &taken[2], b"mine"]);
    let err = refused(&url, &["reserve", "taken", "--like", "mon"]);
    assert!(err.contains("WRONGTYPE"), "{err}");
    assert_eq!(left_behind(&mut conn), [false, false, true, false, false]);

    // Other parameters beside --like, and a model that does not exist.
    for args in [
        &["reserve", "x", "--like", "mon", "--partitions", "2"][..],
        &["reserve", "x", "0.01", "100", "--like", "mon"],
        &["reserve", "x", "--like", "mon", "--nonscaling"],
    ] {
        let err = refused(&url, args);
        assert!(
            err.contains("--like takes every parameter"),
            "{args:?}: {err}"
        );
    }
    let err = refused(&url, &["reserve", "x", "--like", "nosuch"]);
    assert!(err.contains("nosuch: not found"), "{err}");
    assert!(!exists(&mut conn, b"x"));

    // Plain filters: across slots (every parameter explicit), and in one slot (`LIKE`).
    assert_ne!(key_slot(b"left"), key_slot(b"right"));
    for (name, twin) in [("left", "right"), ("{t}a", "{t}b")] {
        query(
            &mut conn,
            &[
                b"BF.RESERVE",
                name.as_bytes(),
                b"0.001",
                b"2000",
                b"EXPANSION",
                b"3",
                b"TIGHTENING",
                b"0.7",
            ],
        );
        let (mine, theirs) = (items(name, 5000), items(twin, 5000));
        load(&url, dir.path(), name, &mine);
        let said = ok(&bfctl_at(&url, &["reserve", twin, "--like", name], b""));
        assert_eq!(said, format!("{twin}: reserved like {name}\n"));
        assert_eq!(
            query(&mut conn, &[b"BF.CARD", twin.as_bytes()]),
            Value::Int(0)
        );
        load(&url, dir.path(), twin, &theirs);
        ok(&bfctl_at(&url, &["merge", name, twin], b""));
        assert_eq!(count_present(&url, name, &mine), mine.len());
        assert_eq!(count_present(&url, name, &theirs), theirs.len());
    }
}

#[test]
fn empty_twins_are_their_models_byte_for_byte_and_foreign_kinds_are_refused() {
    let cl = Cluster::start(3, 0);
    let url = cl.url(0);
    let mut conn = connect(&url);

    // Every kind made here, empty: the twin's BF.SCANDUMP (header, chunks, checksums) is the
    // model's, key for key, on other slots.
    let models: [&[&str]; 4] = [
        &["0.001", "1000", "EXPANSION", "3", "TIGHTENING", "0.6"],
        &["0.01", "500", "NONSCALING"],
        &["0.001", "1000", "SEED", "9"],
        &["0.01", "1000", "WINDOW", "60000"],
    ];
    for (n, params) in models.iter().enumerate() {
        let (model, twin) = (format!("model{n}"), format!("twin{n}"));
        assert_ne!(key_slot(model.as_bytes()), key_slot(twin.as_bytes()));
        let mut args: Vec<&[u8]> = vec![b"BF.RESERVE", model.as_bytes()];
        args.extend(params.iter().map(|p| p.as_bytes()));
        query(&mut conn, &args);
        ok(&bfctl_at(&url, &["reserve", &twin, "--like", &model], b""));
        let (a, b) = (
            stream(&mut conn, model.as_bytes()),
            stream(&mut conn, twin.as_bytes()),
        );
        assert!(a == b, "{params:?}: the twin differs");
    }
    ok(&bfctl_at(
        &url,
        &[
            "reserve",
            "pwin",
            "0.01",
            "3000",
            "--partitions",
            "3",
            "--window",
            "60000",
        ],
        b"",
    ));
    ok(&bfctl_at(
        &url,
        &["reserve", "pwin2", "--like", "pwin"],
        b"",
    ));
    let (models, twins) = (keys_of(&mut conn, "pwin"), keys_of(&mut conn, "pwin2"));
    for (model, twin) in models[1..].iter().zip(&twins[1..]) {
        assert_ne!(key_slot(model), key_slot(twin));
        assert!(stream(&mut conn, model) == stream(&mut conn, twin));
    }
    let info = ok(&bfctl_at(&url, &["info", "pwin2"], b""));
    assert!(info.contains("all 3 partitions exist"), "{info}");

    // valkey-bloom's kind (its 32-byte seed) and RedisBloom's (loaded from its SCANDUMP):
    // refused in one slot by the server, across slots by bfctl, in the same words.
    query(
        &mut conn,
        &[
            b"BF.INSERT",
            b"{k}valkey",
            b"CAPACITY",
            b"100",
            b"ERROR",
            b"0.01",
            b"SEED",
            b"0123456789abcdef0123456789abcdef",
            b"ITEMS",
            b"a",
        ],
    );
    let redisbloom = RbFilter::new(1000, 0.01, Some(2), &mut Unlimited)
        .expect("within no limit")
        .expect("a RedisBloom filter");
    let redisbloom = CoreFilter::RedisBloom(redisbloom);
    let mut it = 0;
    loop {
        let (next, data) = scandump_step(&redisbloom, it);
        if next == 0 {
            break;
        }
        let next_text = next.to_string();
        query(
            &mut conn,
            &[
                b"BF.LOADCHUNK",
                b"{k}redisbloom",
                next_text.as_bytes(),
                &data,
            ],
        );
        it = next;
    }
    for model in ["{k}valkey", "{k}redisbloom"] {
        for twin in ["{k}twin", "elsewhere"] {
            let err = refused(&url, &["reserve", twin, "--like", model]);
            assert!(
                err.contains("LIKE takes a filter made here, not one kept in RedisBloom's"),
                "{model} -> {twin}: {err}"
            );
            assert!(!exists(&mut conn, twin.as_bytes()));
        }
    }
    assert_ne!(key_slot(b"elsewhere"), key_slot(b"{k}twin"));
}
