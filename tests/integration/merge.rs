//! BF.MERGE: the union of alike filters. Every item of every source answers 1 in the
//! destination; a missing destination is created from the first source; missing sources are
//! empty ones; unlike filters are refused by name with the destination untouched; the count of
//! a union is estimated from its bits; the merge reaches replicas and AOF replays (plain and
//! rewritten) bit for bit; the keys are declared so that a cluster refuses keys of two slots.
use std::time::Duration;

use redis::{Connection, Value};
use rustbloom_testkit::hostile::config_set;
use rustbloom_testkit::*;

/// BF.MEXISTS of `items` in batches, as 0/1.
fn answers(c: &mut Connection, key: &str, items: &[String]) -> Vec<i64> {
    items
        .chunks(1000)
        .flat_map(|batch| {
            let mut args = vec!["BF.MEXISTS".to_string(), key.to_string()];
            args.extend(batch.iter().cloned());
            as_ints(raw_ok(c, &args))
        })
        .collect()
}

fn card(c: &mut Connection, key: &str) -> i64 {
    as_int(&raw_ok(c, &["BF.CARD", key]))
}

fn merge(c: &mut Connection, keys: &[&str]) -> Result<Value, String> {
    let mut args = vec!["BF.MERGE"];
    args.extend_from_slice(keys);
    raw(c, &args)
}

fn reserve(c: &mut Connection, key: &str, args: &[&str]) {
    let mut all = vec!["BF.RESERVE", key];
    all.extend_from_slice(args);
    raw_ok(c, &all);
}

#[test]
fn a_union_holds_every_item_of_every_source() {
    let s = Server::start();
    let mut c = s.conn();
    let (a, b, far) = (items("a-", 500), items("b-", 500), items("far-", 4000));
    for key in ["a", "b", "far"] {
        reserve(&mut c, key, &["0.01", "1000", "SEED", "11"]);
    }
    madd_all(&mut c, "a", &a);
    madd_all(&mut c, "b", &b);
    // Enough items for two more layers than `a` has.
    madd_all(&mut c, "far", &far);
    assert_eq!(info(&mut c, "far").filters, 3);

    // A source that is missing adds nothing; one naming the destination adds nothing either.
    assert_eq!(
        merge(&mut c, &["a", "b", "missing", "a", "far"]),
        Ok(Value::Okay)
    );
    for batch in [&a, &b, &far] {
        assert!(answers(&mut c, "a", batch).iter().all(|&x| x == 1));
    }
    let merged = info(&mut c, "a");
    assert_eq!(merged.filters, 3, "grown with the source's layers");
    assert_eq!(merged.size, info(&mut c, "far").size, "their exact shapes");
    assert!(answers(&mut c, "b", &a).iter().filter(|&&x| x == 1).count() < 50);

    // A missing destination: a copy of the first source's filter, merged with the rest.
    assert_eq!(
        merge(&mut c, &["new", "nothing", "b", "far"]),
        Ok(Value::Okay)
    );
    for batch in [&b, &far] {
        assert!(answers(&mut c, "new", batch).iter().all(|&x| x == 1));
    }
    assert_eq!(info(&mut c, "new").capacity, info(&mut c, "far").capacity);
    // One source: an exact copy, the same value.
    assert_eq!(merge(&mut c, &["copy", "b"]), Ok(Value::Okay));
    assert_eq!(digest(&mut c, "copy"), digest(&mut c, "b"));
    // Only missing sources: nothing to take parameters from, nothing created.
    assert_eq!(merge(&mut c, &["none", "gone", "lost"]), Ok(Value::Okay));
    assert_no_key(&mut c, "none");
}

#[test]
fn unlike_filters_are_refused_by_name_and_leave_the_destination_untouched() {
    let s = Server::start();
    let mut c = s.conn();
    reserve(&mut c, "dest", &["0.01", "1000", "SEED", "5"]);
    madd_all(&mut c, "dest", &items("d-", 100));
    let before = digest(&mut c, "dest");
    let cases: [(&str, &[&str], &str); 7] = [
        (
            "tight",
            &["0.01", "1000", "TIGHTENING", "0.7", "SEED", "5"],
            "tightening",
        ),
        ("rate", &["0.02", "1000", "SEED", "5"], "error rate"),
        ("cap", &["0.01", "2000", "SEED", "5"], "capacity"),
        (
            "exp",
            &["0.01", "1000", "EXPANSION", "4", "SEED", "5"],
            "expansion",
        ),
        (
            "ns",
            &["0.01", "1000", "NONSCALING", "SEED", "5"],
            "expansion",
        ),
        ("seed", &["0.01", "1000", "SEED", "6"], "seed"),
        (
            "win",
            &["0.01", "1000", "WINDOW", "60000", "SEED", "5"],
            "kind",
        ),
    ];
    for (key, args, difference) in cases {
        reserve(&mut c, key, args);
        madd_all(&mut c, key, &items("x-", 10));
        assert_eq!(
            merge(&mut c, &["dest", key]),
            Err(format!("ERR filters differ: {difference}")),
            "{key}"
        );
        assert_eq!(digest(&mut c, "dest"), before, "{key}");
    }
    // A first layer of another shape under the same parameters (SHAPE, as a replica receives
    // it): refused even after an alike source, which must not have been merged either.
    let layer = value_to_string(&as_array(raw_ok(&mut c, &["BF.DEBUG", "dest"]))[1]);
    let field = |name: &str| -> u64 {
        let value = layer.split(' ').find_map(|f| f.strip_prefix(name));
        value.unwrap().parse().unwrap()
    };
    let bits = (field("bits:") + 64).to_string();
    let hashes = field("hashes:").to_string();
    let shaped = ["0.01", "1000", "SEED", "5", "SHAPE", &bits, &hashes, "0"];
    reserve(&mut c, "odd", &shaped);
    reserve(&mut c, "good", &["0.01", "1000", "SEED", "5"]);
    madd_all(&mut c, "good", &items("g-", 10));
    assert_eq!(
        merge(&mut c, &["dest", "good", "odd"]),
        Err("ERR filters differ: layout".to_string())
    );
    assert_eq!(digest(&mut c, "dest"), before);
    // A partitioned filter's descriptor is refused (windows: see merge_window.rs).
    reserve(&mut c, "desc", &["0.01", "1000", "PARTITIONS", "4", "99"]);
    let refused = merge(&mut c, &["dest", "desc"]).unwrap_err();
    assert!(refused.contains("partitioned filter"), "{refused}");
    // Another type, as the destination or a source; and the arity.
    raw_ok(&mut c, &["SET", "text", "v"]);
    for keys in [["dest", "text"], ["text", "dest"]] {
        let refused = merge(&mut c, &keys).unwrap_err();
        assert!(refused.starts_with("WRONGTYPE"), "{refused}");
    }
    let refused = merge(&mut c, &["dest"]).unwrap_err();
    assert!(refused.contains("wrong number of arguments"), "{refused}");
    assert_eq!(digest(&mut c, "dest"), before);
    assert_eq!(
        raw_ok(&mut c, &["GET", "text"]),
        Value::BulkString(b"v".to_vec())
    );
}

#[test]
fn the_count_of_a_union_is_estimated_from_its_bits() {
    let s = Server::start();
    let mut c = s.conn();
    // 90,000 items over two filters overlapping by half, at 0.1%: classic layers (100k) and
    // layers in cache lines (1M).
    for capacity in ["100000", "1000000"] {
        let (a, b) = (format!("a{capacity}"), format!("b{capacity}"));
        reserve(&mut c, &a, &["0.001", capacity, "SEED", "3"]);
        reserve(&mut c, &b, &["0.001", capacity, "SEED", "3"]);
        let all = items("i-", 90_000);
        madd_all(&mut c, &a, &all[..60_000]);
        madd_all(&mut c, &b, &all[30_000..]);
        assert_eq!(merge(&mut c, &[&a, &b]), Ok(Value::Okay));
        let estimate = card(&mut c, &a) as f64;
        assert!(
            (estimate - 90_000.0).abs() < 0.03 * 90_000.0,
            "capacity {capacity}: BF.CARD {estimate}"
        );
        assert_eq!(info(&mut c, &a).items as f64, estimate);
        assert!(answers(&mut c, &a, &all).iter().all(|&x| x == 1));
    }
}

/// Merges of every kind the command does: into an existing filter, growing it, and creating one.
fn merges(c: &mut Connection) {
    for key in ["m1", "m2", "m3"] {
        reserve(c, key, &["0.01", "200", "SEED", "21"]);
    }
    madd_all(c, "m1", &items("one-", 150));
    madd_all(c, "m2", &items("two-", 150));
    madd_all(c, "m3", &items("three-", 900));
    assert_eq!(merge(c, &["m1", "m2"]), Ok(Value::Okay));
    assert_eq!(merge(c, &["m1", "m3"]), Ok(Value::Okay));
    assert_eq!(merge(c, &["made", "m2", "m3"]), Ok(Value::Okay));
    // A filter made like one with a random seed, merged into it.
    raw_ok(c, &["BF.RESERVE", "random", "0.01", "300"]);
    raw_ok(c, &["BF.RESERVE", "like", "LIKE", "random"]);
    madd_all(c, "like", &items("like-", 100));
    assert_eq!(merge(c, &["random", "like"]), Ok(Value::Okay));
    // Written to after the merge: adds count on from the estimate.
    madd_all(c, "m1", &items("after-", 300));
}

#[test]
fn a_merge_reaches_replicas_and_aof_replays_bit_for_bit() {
    let mut primary = Server::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let replica = Server::start();
    replicate_from(&primary, &replica);
    let mut pc = primary.conn();
    let mut rc = replica.conn();
    merges(&mut pc);
    wait_synced(&mut pc, &mut [&mut rc]);
    let keys = ["m1", "made", "like", "random"];
    let digests: Vec<String> = keys.iter().map(|key| digest(&mut pc, key)).collect();
    for key in keys {
        assert_same_digest(&mut pc, key, &mut rc, key);
    }
    // The AOF as written (BF.MERGE replayed), then rewritten (the values themselves).
    drop(pc);
    primary.restart();
    let mut pc = primary.conn();
    let replayed: Vec<String> = keys.iter().map(|key| digest(&mut pc, key)).collect();
    assert_eq!(replayed, digests, "after replaying the AOF");
    raw_ok(&mut pc, &["BGREWRITEAOF"]);
    wait_rewrite_done(&mut pc);
    drop(pc);
    primary.restart();
    let mut pc = primary.conn();
    let rewritten: Vec<String> = keys.iter().map(|key| digest(&mut pc, key)).collect();
    assert_eq!(rewritten, digests, "after an AOF rewrite");
    assert!(answers(&mut pc, "m1", &items("three-", 900))
        .iter()
        .all(|&x| x == 1));
    // The RDB: saved, then loaded without the AOF.
    raw_ok(&mut pc, &["SAVE"]);
    drop(pc);
    primary.restart_with(&[]);
    let mut pc = primary.conn();
    let loaded: Vec<String> = keys.iter().map(|key| digest(&mut pc, key)).collect();
    assert_eq!(loaded, digests, "after an RDB restart");
}

/// Everything the AOF of `server` holds, as text.
fn aof_text(server: &Server) -> String {
    let dir = server.dir().join("appendonlydir");
    let mut text = String::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        text.push_str(&String::from_utf8_lossy(&bytes));
    }
    text
}

#[test]
fn a_refused_merge_writes_nothing_anywhere() {
    let primary = Server::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let replica = Server::start();
    replicate_from(&primary, &replica);
    let mut pc = primary.conn();
    let mut rc = replica.conn();
    reserve(&mut pc, "d", &["0.01", "100", "SEED", "1"]);
    reserve(&mut pc, "alike", &["0.01", "100", "SEED", "1"]);
    reserve(&mut pc, "other", &["0.01", "100", "SEED", "2"]);
    raw_ok(&mut pc, &["BF.ADD", "alike", "x"]);
    raw_ok(&mut pc, &["SET", "text", "v"]);
    // Refused: another seed, another type (destination or source), and a missing destination
    // whose sources differ (nothing created).
    for keys in [
        &["d", "other"][..],
        &["d", "text"],
        &["text", "d"],
        &["made", "d", "other"],
    ] {
        assert!(merge(&mut pc, keys).is_err(), "{keys:?}");
    }
    assert_no_key(&mut pc, "made");
    assert_eq!(merge(&mut pc, &["d", "alike"]), Ok(Value::Okay));
    wait_synced(&mut pc, &mut [&mut rc]);
    assert_same_digest(&mut pc, "d", &mut rc, "d");
    // The replica and the AOF saw the one merge that was made.
    let stats = info_section(&mut rc, "commandstats");
    assert!(stats.contains("cmdstat_bf.merge:calls=1,"), "{stats}");
    assert_eq!(aof_text(&primary).matches("BF.MERGE").count(), 1);
}

#[test]
fn the_keys_are_declared_and_a_cluster_refuses_two_slots() {
    let s = Server::start();
    let mut c = s.conn();
    let keys = as_array(raw_ok(
        &mut c,
        &["COMMAND", "GETKEYS", "BF.MERGE", "d", "s1", "s2"],
    ));
    let keys: Vec<String> = keys.iter().map(value_to_string).collect();
    assert_eq!(keys, ["d", "s1", "s2"]);

    let node = Server::start_cluster_node(&[]);
    let mut c = node.conn();
    raw_ok(&mut c, &["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]);
    let up = wait_until(Duration::from_secs(30), || {
        info_section(&mut c, "cluster").contains("cluster_enabled:1")
            && value_to_string(&raw_ok(&mut c, &["CLUSTER", "INFO"])).contains("cluster_state:ok")
    });
    assert!(up, "the one-node cluster did not come up");
    reserve(&mut c, "{t}a", &["0.01", "100", "SEED", "1"]);
    reserve(&mut c, "{t}b", &["0.01", "100", "SEED", "1"]);
    reserve(&mut c, "{u}c", &["0.01", "100", "SEED", "1"]);
    raw_ok(&mut c, &["BF.ADD", "{t}b", "x"]);
    let refused = merge(&mut c, &["{t}a", "{t}b", "{u}c"]).unwrap_err();
    assert!(refused.starts_with("CROSSSLOT"), "{refused}");
    let refused = raw(&mut c, &["BF.RESERVE", "{t}like", "LIKE", "{u}c"]).unwrap_err();
    assert!(refused.starts_with("CROSSSLOT"), "{refused}");
    raw_ok(&mut c, &["BF.RESERVE", "{t}like", "LIKE", "{t}a"]);
    assert_eq!(merge(&mut c, &["{t}a", "{t}b"]), Ok(Value::Okay));
    assert_eq!(as_int(&raw_ok(&mut c, &["BF.EXISTS", "{t}a", "x"])), 1);
}

#[test]
fn memory_limits_apply_to_a_created_or_grown_destination() {
    let s = Server::start();
    let mut c = s.conn();
    for key in ["small", "grown"] {
        reserve(&mut c, key, &["0.01", "1000", "SEED", "4"]);
    }
    // Three layers: seven times the first one's capacity, more bytes than twice `small`.
    madd_all(&mut c, "grown", &items("g-", 4000));
    assert_eq!(info(&mut c, "grown").filters, 3);
    let before = digest(&mut c, "small");
    let cap = 2 * info(&mut c, "small").size;
    config_set(&mut c, "bf.max-filter-bytes", &cap.to_string());
    for keys in [["small", "grown"], ["copy", "grown"]] {
        let refused = merge(&mut c, &keys).unwrap_err();
        assert!(
            refused.contains("bf.max-filter-bytes"),
            "{keys:?}: {refused}"
        );
    }
    assert_eq!(digest(&mut c, "small"), before);
    assert_no_key(&mut c, "copy");
    assert_eq!(merge(&mut c, &["copy", "small"]), Ok(Value::Okay));
    config_set(&mut c, "bf.max-filter-bytes", "1073741824");

    // maxmemory: a copy of a 12 MB filter with 4 MiB of room.
    reserve(&mut c, "big", &["0.01", "10000000", "SEED", "4"]);
    let used = used_memory(&mut c);
    config_set(&mut c, "maxmemory", &(used + (4 << 20)).to_string());
    let refused = merge(&mut c, &["big-copy", "big"]).unwrap_err();
    assert!(refused.contains("maxmemory"), "{refused}");
    assert_no_key(&mut c, "big-copy");
    config_set(&mut c, "maxmemory", "0");
    assert_eq!(merge(&mut c, &["big-copy", "big"]), Ok(Value::Okay));
    assert_eq!(digest(&mut c, "big-copy"), digest(&mut c, "big"));
}

#[test]
fn a_filter_made_like_another_merges_with_it() {
    let s = Server::start();
    let mut c = s.conn();
    // Random seeds: two filters reserved alike still differ.
    reserve(&mut c, "today", &["0.01", "1000", "EXPANSION", "4"]);
    reserve(&mut c, "stranger", &["0.01", "1000", "EXPANSION", "4"]);
    assert_eq!(
        merge(&mut c, &["today", "stranger"]),
        Err("ERR filters differ: seed".to_string())
    );
    let (old, new) = (items("old-", 800), items("new-", 800));
    madd_all(&mut c, "today", &old);
    raw_ok(&mut c, &["BF.RESERVE", "tomorrow", "like", "today"]);
    let made = info(&mut c, "tomorrow");
    assert_eq!((made.items, made.filters), (0, 1), "empty");
    assert_eq!(made.capacity, 1000);
    madd_all(&mut c, "tomorrow", &new);
    assert_eq!(merge(&mut c, &["today", "tomorrow"]), Ok(Value::Okay));
    for batch in [&old, &new] {
        assert!(answers(&mut c, "today", batch).iter().all(|&x| x == 1));
    }
    // Its tightening ratio too.
    reserve(&mut c, "tight", &["0.01", "100", "TIGHTENING", "0.7"]);
    raw_ok(&mut c, &["BF.RESERVE", "tight-twin", "LIKE", "tight"]);
    madd_all(&mut c, "tight-twin", &items("t-", 300));
    assert_eq!(merge(&mut c, &["tight", "tight-twin"]), Ok(Value::Okay));
    // A window filter's twin and a partition's (its identity too).
    reserve(&mut c, "win", &["0.01", "1000", "WINDOW", "60000"]);
    raw_ok(&mut c, &["BF.RESERVE", "win-twin", "LIKE", "win"]);
    assert_eq!(
        raw_ok(&mut c, &["BF.INFO", "win-twin"]),
        raw_ok(&mut c, &["BF.INFO", "win"])
    );
    reserve(
        &mut c,
        "{p}part",
        &["0.01", "1000", "PARTITION", "1", "4", "99"],
    );
    // The items that route to partition 1, added to each.
    let routed = |c: &mut Connection, key: &str, prefix: &str| -> Vec<String> {
        (0..64)
            .map(|i| format!("{prefix}{i}"))
            .filter(|item| raw(c, &["BF.ADD", key, item]).is_ok())
            .collect()
    };
    let in_part = routed(&mut c, "{p}part", "x");
    raw_ok(&mut c, &["BF.RESERVE", "{p}twin", "LIKE", "{p}part"]);
    let in_twin = routed(&mut c, "{p}twin", "y");
    assert!(!in_part.is_empty() && !in_twin.is_empty());
    assert_eq!(merge(&mut c, &["{p}part", "{p}twin"]), Ok(Value::Okay));
    for batch in [&in_part, &in_twin] {
        assert!(answers(&mut c, "{p}part", batch).iter().all(|&x| x == 1));
    }
    // Refusals, nothing created.
    reserve(&mut c, "desc", &["0.01", "1000", "PARTITIONS", "4", "99"]);
    raw_ok(&mut c, &["SET", "text", "v"]);
    for (model, error) in [
        ("missing", "ERR not found"),
        ("twin", "ERR not found"),
        ("text", "WRONGTYPE"),
        ("desc", "ERR key is a partitioned filter"),
    ] {
        let refused = raw(&mut c, &["BF.RESERVE", "twin", "LIKE", model]).unwrap_err();
        assert!(refused.starts_with(error), "{model}: {refused}");
        assert_no_key(&mut c, "twin");
    }
    let refused = raw(&mut c, &["BF.RESERVE", "today", "LIKE", "tomorrow"]).unwrap_err();
    assert_eq!(refused, "ERR item exists");
    // The model is a key of the command: COMMAND GETKEYS names it.
    for (args, want) in [
        (&["new", "LIKE", "old"][..], &["new", "old"][..]),
        (&["new", "0.01", "100", "SEED", "1"], &["new"]),
    ] {
        let mut all = vec!["COMMAND", "GETKEYS", "BF.RESERVE"];
        all.extend_from_slice(args);
        let keys: Vec<String> = as_array(raw_ok(&mut c, &all))
            .iter()
            .map(value_to_string)
            .collect();
        assert_eq!(keys, want);
    }
}
