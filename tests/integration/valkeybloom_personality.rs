//! The valkey-bloom personality (`loadmodule librustbloom.so personality valkey-bloom`): what a
//! user switching from valkey-bloom notices — its replies, names, arities, default capacity,
//! type and error texts — while the filters it creates are valkey-bloom objects that a server
//! without the personality (or valkey-bloom) takes over unchanged; and that without it nothing
//! differs from RedisBloom's behaviour.
use redis::{Connection, Value};
use rustbloom_testkit::replication::{replicate_from, wait_synced};
use rustbloom_testkit::*;

fn start_valkey_bloom(extra: &[&str]) -> Server {
    let module = module_path();
    let mut args = vec![
        "--loadmodule",
        module.to_str().unwrap(),
        "personality",
        "valkey-bloom",
    ];
    args.extend_from_slice(extra);
    Server::start_without_module(&args)
}

fn config_get(c: &mut Connection, name: &str) -> String {
    let pair: Vec<String> = redis::cmd("CONFIG").arg("GET").arg(name).query(c).unwrap();
    assert_eq!(pair.len(), 2, "CONFIG GET {name}: {pair:?}");
    pair[1].clone()
}

fn key_type(c: &mut Connection, key: &str) -> String {
    value_to_string(&raw_ok(c, &["TYPE", key]))
}

/// The arity `COMMAND INFO name` declares.
fn arity(c: &mut Connection, name: &str) -> i64 {
    let info = as_array(raw_ok(c, &["COMMAND", "INFO", name]));
    let Some(Value::Array(entry)) = info.into_iter().next() else {
        panic!("COMMAND INFO {name}: no entry");
    };
    as_int(&entry[1])
}

fn commandstats(c: &mut Connection) -> String {
    redis::cmd("INFO").arg("commandstats").query(c).unwrap()
}

#[test]
fn default_stays_redisbloom() {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(config_get(&mut c, "bf.personality"), "redisbloom");
    assert_eq!(as_int(&raw_ok(&mut c, &["BF.ADD", "k", "a"])), 1);
    assert_eq!(key_type(&mut c, "k"), "MBbloom--");
    assert_eq!(
        as_ints(raw_ok(&mut c, &["BF.INFO", "k", "CAPACITY"])),
        vec![100]
    );
    assert_eq!(arity(&mut c, "bf.add"), 3);
    assert!(commandstats(&mut c).contains("cmdstat_bf.add:"));
    assert_eq!(
        raw_err(&mut c, &["BF.INFO", "k", "item"]),
        "ERR Invalid information value"
    );
}

#[test]
fn replies_as_valkey_bloom() {
    let s = start_valkey_bloom(&[]);
    let mut c = s.conn();
    assert_eq!(config_get(&mut c, "bf.personality"), "valkey-bloom");
    assert!(raw(&mut c, &["CONFIG", "SET", "bf.personality", "redisbloom"]).is_err());
    assert_eq!(config_get(&mut c, "bf.initial-capacity"), "100000");

    assert_eq!(as_int(&raw_ok(&mut c, &["BF.ADD", "k", "a"])), 1);
    assert_eq!(key_type(&mut c, "k"), "bloomfltr");
    assert_eq!(
        as_int(&raw_ok(&mut c, &["BF.INFO", "k", "CAPACITY"])),
        100_000
    );
    assert_eq!(as_int(&raw_ok(&mut c, &["BF.INFO", "k", "ITEMS"])), 1);
    raw_ok(&mut c, &["BF.RESERVE", "n", "0.01", "1000", "NONSCALING"]);
    assert_eq!(key_type(&mut c, "n"), "bloomfltr");
    assert_eq!(raw_ok(&mut c, &["BF.INFO", "n", "EXPANSION"]), Value::Nil);

    for name in [
        "BF.ADD",
        "BF.EXISTS",
        "BF.MADD",
        "BF.MEXISTS",
        "BF.CARD",
        "BF.RESERVE",
    ] {
        assert_eq!(arity(&mut c, name), -1, "{name}");
    }
    for name in ["BF.INFO", "BF.INSERT", "BF.LOAD"] {
        assert_eq!(arity(&mut c, name), -1, "{name}");
    }
    let stats = commandstats(&mut c);
    assert!(stats.contains("cmdstat_BF.ADD:"), "{stats}");
    assert!(stats.contains("cmdstat_BF.RESERVE:"), "{stats}");

    // valkey-bloom's texts, and the argument counts checked by the commands themselves.
    let cases: [(&[&str], &str); 10] = [
        (
            &["BF.ADD", "k"],
            "ERR wrong number of arguments for 'BF.ADD' command",
        ),
        (
            &["BF.INFO", "k", "CAPACITY", "SIZE"],
            "ERR wrong number of arguments for 'BF.INFO' command",
        ),
        (&["BF.INFO", "k", "item"], "ERR invalid information value"),
        (
            &["BF.INSERT", "k", "HELLO", "WORLD"],
            "ERR unknown argument received",
        ),
        (
            &["BF.INSERT", "k", "ERROR", "2", "ITEMS", "a"],
            "ERR (0 < error rate range < 1)",
        ),
        (
            &["BF.INSERT", "k2", "CAPACITY", "0", "ITEMS", "a"],
            "ERR (capacity should be larger than 0)",
        ),
        (
            &["BF.INSERT", "k2", "EXPANSION", "11", "ITEMS", "a"],
            "ERR bad expansion",
        ),
        (
            &["BF.INSERT", "k2", "EXPANSION", "2", "EXPANSION"],
            "ERR wrong number of arguments for 'BF.INSERT' command",
        ),
        (&["BF.RESERVE", "k2", "0.01", "-1"], "ERR bad capacity"),
        (
            &[
                "BF.RESERVE",
                "k2",
                "0.01",
                "1",
                "NONSCALING",
                "EXPANSION",
                "1",
            ],
            "ERR wrong number of arguments for 'BF.RESERVE' command",
        ),
    ];
    for (args, want) in cases {
        assert_eq!(raw_err(&mut c, args), want, "{args:?}");
    }
    raw_ok(
        &mut c,
        &["CONFIG", "SET", "bf.bloom-memory-usage-limit", "4096"],
    );
    assert_eq!(
        raw_err(&mut c, &["BF.RESERVE", "big", "0.001", "100000"]),
        "ERR operation exceeds bloom object memory limit"
    );
    raw_ok(
        &mut c,
        &["CONFIG", "SET", "bf.bloom-memory-usage-limit", "1073741824"],
    );
    // Filled until an add is refused (an item the full filter answers for as a false positive
    // is answered 0, as valkey-bloom answers it, so the refusal is whichever new item comes).
    let refused = (0..2000)
        .find_map(|i| raw(&mut c, &["BF.ADD", "n", &format!("i{i}")]).err())
        .expect("a non-scaling filter of 1000 took 2000 items");
    assert_eq!(refused, "ERR non scaling filter is full");
}

/// What a personality server creates is a valkey-bloom object in valkey-bloom's encodings: a
/// server without the personality restores its DUMP (byte for byte the same when dumped again)
/// and follows it as a replica, every item answering the same.
#[test]
fn new_filters_move_to_a_server_without_the_personality() {
    let primary = start_valkey_bloom(&[]);
    let plain = Server::start();
    let mut pc = primary.conn();
    let mut rc = plain.conn();
    replicate_from(&primary, &plain);

    let items: Vec<String> = (0..3000).map(|i| format!("item-{i}")).collect();
    raw_ok(&mut pc, &["BF.RESERVE", "grown", "0.01", "1000"]);
    for chunk in items.chunks(500) {
        let mut args = vec!["BF.MADD", "grown"];
        args.extend(chunk.iter().map(String::as_str));
        raw_ok(&mut pc, &args);
    }
    assert_eq!(as_int(&raw_ok(&mut pc, &["BF.ADD", "added", "x"])), 1);
    raw_ok(&mut pc, &["BF.INSERT", "inserted", "ITEMS", "a", "b"]);
    wait_synced(&mut pc, &mut [&mut rc]);

    let probes: Vec<String> = (0..3000).map(|i| format!("probe-{i}")).collect();
    for key in ["grown", "added", "inserted"] {
        assert_eq!(key_type(&mut rc, key), "bloomfltr", "{key}");
        let digest = |c: &mut Connection| raw_ok(c, &["DEBUG", "DIGEST-VALUE", key]);
        assert_eq!(digest(&mut pc), digest(&mut rc), "{key}");
        for batch in [&items, &probes] {
            let mut args = vec!["BF.MEXISTS", key];
            args.extend(batch.iter().map(String::as_str));
            assert_eq!(raw_ok(&mut pc, &args), raw_ok(&mut rc, &args), "{key}");
        }
    }
    assert_eq!(
        raw_ok(&mut rc, &["BF.CARD", "grown"]),
        raw_ok(&mut pc, &["BF.CARD", "grown"])
    );
    // As valkey-bloom 1.0's primaries replicate: each creation one BF.INSERT with every property
    // (and the items the creating command added), later adds as they were sent; no bitmap in the
    // stream.
    let stats = commandstats(&mut rc);
    assert!(stats.contains("cmdstat_bf.insert:calls=3,"), "{stats}");
    assert!(stats.contains("cmdstat_bf.madd:calls=6,"), "{stats}");
    assert!(!stats.contains("cmdstat_bf.load"), "{stats}");

    // DUMP from the personality, RESTORE where it is off: the same value, the same bytes.
    let dump = raw_ok(&mut pc, &["DUMP", "grown"]);
    let Value::BulkString(payload) = dump else {
        panic!("DUMP: {dump:?}");
    };
    let other = Server::start();
    let mut oc = other.conn();
    rawb(&mut oc, &[b"RESTORE", b"copy", b"0", &payload]).unwrap();
    assert_eq!(key_type(&mut oc, "copy"), "bloomfltr");
    assert_eq!(
        raw_ok(&mut oc, &["DUMP", "copy"]),
        Value::BulkString(payload)
    );
    let mut args = vec!["BF.MEXISTS", "copy"];
    args.extend(items.iter().map(String::as_str));
    assert!(as_ints(raw_ok(&mut oc, &args))
        .iter()
        .all(|&found| found == 1));
}

/// valkey-bloom admits a filter larger than maxmemory under an evicting policy and lets the
/// server evict; by default the module refuses what no eviction can make room for.
#[test]
fn reservation_over_maxmemory_admitted_under_eviction() {
    let two_mb = (2 * 1024 * 1024).to_string();
    let reserve = ["BF.RESERVE", "big", "0.001", "10000000"];
    let s = start_valkey_bloom(&[]);
    let mut c = s.conn();
    raw_ok(
        &mut c,
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"],
    );
    raw_ok(&mut c, &["CONFIG", "SET", "maxmemory", &two_mb]);
    assert_eq!(raw_ok(&mut c, &reserve), Value::Okay);

    let d = Server::start();
    let mut dc = d.conn();
    raw_ok(
        &mut dc,
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"],
    );
    raw_ok(&mut dc, &["CONFIG", "SET", "maxmemory", &two_mb]);
    assert!(raw_err(&mut dc, &reserve).contains("more than maxmemory"));
}

/// A personality server's AOF (BF.INSERT ... SEED for each new object, then the adds) replays on a server
/// without the personality to the same values, and back.
#[test]
fn aof_replays_with_or_without_the_personality() {
    let mut s = start_valkey_bloom(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = s.conn();
    let items: Vec<String> = (0..2500).map(|i| format!("item-{i}")).collect();
    raw_ok(
        &mut c,
        &["BF.RESERVE", "grown", "0.001", "500", "EXPANSION", "3"],
    );
    for chunk in items.chunks(250) {
        let mut args = vec!["BF.MADD", "grown"];
        args.extend(chunk.iter().map(String::as_str));
        raw_ok(&mut c, &args);
    }
    raw_ok(&mut c, &["BF.ADD", "added", "x"]);
    raw_ok(
        &mut c,
        &[
            "BF.INSERT",
            "full",
            "CAPACITY",
            "5",
            "NONSCALING",
            "ITEMS",
            "a",
        ],
    );
    let keys = ["grown", "added", "full"];
    let digests = |c: &mut Connection| -> Vec<Value> {
        keys.iter()
            .map(|key| raw_ok(c, &["DEBUG", "DIGEST-VALUE", key]))
            .collect()
    };
    let before = digests(&mut c);
    drop(c);

    let module = module_path();
    let module = module.to_str().unwrap();
    s.restart_with(&["--loadmodule", module, "--appendonly", "yes"]);
    let mut c = s.conn();
    assert_eq!(config_get(&mut c, "bf.personality"), "redisbloom");
    assert_eq!(digests(&mut c), before);
    for key in keys {
        assert_eq!(key_type(&mut c, key), "bloomfltr", "{key}");
    }
    let mut args = vec!["BF.MEXISTS", "grown"];
    args.extend(items.iter().map(String::as_str));
    assert!(as_ints(raw_ok(&mut c, &args))
        .iter()
        .all(|&found| found == 1));
    drop(c);

    s.restart_with(&[
        "--loadmodule",
        module,
        "personality",
        "valkey-bloom",
        "--appendonly",
        "yes",
    ]);
    let mut c = s.conn();
    assert_eq!(digests(&mut c), before);
}

/// With arity -1 every command reaches the module however few its arguments: each answers
/// valkey-bloom's wrong-arity error and the server stays up, on a cluster node too, where
/// BF.RESERVE is asked where its keys are before it runs (a bare `BF.RESERVE` once crashed the
/// server there, the keys position request answered as a call).
#[test]
fn every_command_without_arguments_is_a_wrong_arity_error() {
    for cluster in [&[][..], &["--cluster-enabled", "yes"]] {
        let s = start_valkey_bloom(cluster);
        let mut c = s.conn();
        for name in [
            "BF.RESERVE",
            "BF.ADD",
            "BF.MADD",
            "BF.INSERT",
            "BF.EXISTS",
            "BF.MEXISTS",
            "BF.INFO",
            "BF.CARD",
            "BF.DEBUG",
            "BF.SCANDUMP",
            "BF.LOADCHUNK",
            "BF.LOAD",
            "BF.GROW",
            "BF.ADDAT",
            "BF.MERGE",
        ] {
            let error = raw_err(&mut c, &[name]);
            assert!(
                error.starts_with("ERR wrong number of arguments"),
                "{name}: {error}"
            );
        }
        for short in [
            &["BF.RESERVE", "k"][..],
            &[
                "BF.RESERVE",
                "k",
                "0.01",
                "1",
                "NONSCALING",
                "EXPANSION",
                "1",
            ],
        ] {
            assert!(raw(&mut c, short).is_err(), "{short:?}");
        }
        assert_eq!(value_to_string(&raw_ok(&mut c, &["PING"])), "PONG");
    }
}
