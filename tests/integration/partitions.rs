//! Partitioned filters (docs/partitions.md) on one server: partitions created by the key rule
//! and a descriptor, routed adds and lookups, misrouted items refused whole, the descriptor's
//! refusals and BF.INFO, and the partition identity kept by DUMP/RESTORE, SCANDUMP/LOADCHUNK,
//! COPY, SAVE, AOF rewrite and a replica.

use std::time::{Duration, Instant};

use redis::{Connection, Value};
use rustbloom_core::partition::{partition_capacity, partition_key, route};
use rustbloom_testkit::*;

const SEED: u64 = 0x1234_5678_9abc_def0;
const P: u32 = 4;

/// The P partition keys of `name`, as text.
fn keys(name: &str) -> Vec<String> {
    (0..P)
        .map(|i| String::from_utf8(partition_key(name.as_bytes(), i, P)).unwrap())
        .collect()
}

/// Creates `name`'s partitions and then its descriptor, for `n` items at 1e-3, with `options`
/// (growth or window) on every one.
fn create(c: &mut Connection, name: &str, n: u64, options: &[&str]) -> Vec<String> {
    let nonscaling = options.contains(&"NONSCALING");
    let capacity = partition_capacity(n, P, nonscaling).to_string();
    let keys = keys(name);
    for (i, key) in keys.iter().enumerate() {
        let mut args = vec!["BF.RESERVE", key, "0.001", &capacity];
        args.extend(options);
        let (i, p, seed) = (i.to_string(), P.to_string(), SEED.to_string());
        args.extend(["PARTITION", &i, &p, &seed]);
        assert_eq!(raw(c, &args), Ok(Value::Okay), "{args:?}");
    }
    let (n, p, seed) = (n.to_string(), P.to_string(), SEED.to_string());
    let mut args = vec!["BF.RESERVE", name, "0.001", &n, "PARTITIONS", &p, &seed];
    args.extend(options);
    assert_eq!(raw(c, &args), Ok(Value::Okay), "{args:?}");
    keys
}

/// `items` grouped by the partition each routes to.
fn routed(items: &[String]) -> Vec<Vec<String>> {
    let mut groups = vec![Vec::new(); P as usize];
    for item in items {
        groups[route(item.as_bytes(), P, SEED) as usize].push(item.clone());
    }
    groups
}

/// Adds every item to its partition.
fn add_routed(c: &mut Connection, keys: &[String], items: &[String]) {
    for (key, group) in keys.iter().zip(routed(items)) {
        madd_all(c, key, &group);
    }
}

/// Every item answers 1 in its partition.
fn assert_routed_present(c: &mut Connection, keys: &[String], items: &[String]) {
    for (key, group) in keys.iter().zip(routed(items)) {
        assert_all_exist(c, key, &group);
    }
}

/// How many of `items` their partitions answer present for.
fn routed_found(c: &mut Connection, keys: &[String], items: &[String]) -> usize {
    let mut found = 0;
    for (key, group) in keys.iter().zip(routed(items)) {
        let mut args = vec!["BF.MEXISTS", key.as_str()];
        args.extend(group.iter().map(String::as_str));
        found += as_ints(raw_ok(c, &args))
            .iter()
            .filter(|&&answer| answer == 1)
            .count();
    }
    found
}

/// An item of partition `home` other than partition `not`.
fn item_of(home: u32, tag: &str) -> String {
    (0..)
        .map(|i| format!("{tag}:{i}"))
        .find(|item| route(item.as_bytes(), P, SEED) == home)
        .unwrap()
}

fn misrouted_error(to: u32, at: u32) -> String {
    format!("ERR item routed to partition {to} of {P}, not {at}")
}

/// The key at `keys[0]` refuses an item of partition 1, for lookups and adds alike.
fn assert_refuses_misrouted(c: &mut Connection, keys: &[String]) {
    assert_refuses_misrouted_in(c, keys, &["BF.ADD", "BF.EXISTS", "BF.MADD", "BF.MEXISTS"]);
}

fn assert_refuses_misrouted_in(c: &mut Connection, keys: &[String], commands: &[&str]) {
    let stray = item_of(1, "stray");
    let expected = misrouted_error(1, 0);
    for &command in commands {
        assert_err(c, &[command, &keys[0], &stray], &expected);
    }
}

fn info_map(c: &mut Connection, key: &str) -> Vec<(String, Value)> {
    info_pairs(raw(c, &["BF.INFO", key]).unwrap())
}

fn field<'a>(info: &'a [(String, Value)], name: &str) -> &'a Value {
    &info
        .iter()
        .find(|(field, _)| field == name)
        .unwrap_or_else(|| panic!("no {name} in {info:?}"))
        .1
}

/// BF.INFO of a partition key ends with its identity.
fn assert_identity(c: &mut Connection, key: &str, index: u32) {
    let info = info_map(c, key);
    let tail: Vec<String> = info[info.len() - 3..]
        .iter()
        .map(|(name, value)| format!("{name}={}", value_to_string(value)))
        .collect();
    assert_eq!(
        tail,
        [
            format!("Partition={index}"),
            format!("Partitions={P}"),
            format!("Routing seed={SEED}")
        ],
        "{key}"
    );
}

#[test]
fn routed_items_are_found_and_misrouted_ones_refused_whole() {
    let server = Server::start();
    let mut c = server.conn();
    let keys = create(&mut c, "clicks", 4000, &[]);
    let items = items("item", 2000);
    add_routed(&mut c, &keys, &items);
    assert_routed_present(&mut c, &keys, &items);
    assert_refuses_misrouted(&mut c, &keys);

    // A batch with one misrouted item changes nothing, even its routed items.
    let before = info_map(&mut c, &keys[0]);
    let fresh: Vec<String> = (0..5).map(|i| item_of(0, &format!("fresh{i}"))).collect();
    let stray = item_of(2, "stray");
    let mut madd = vec!["BF.MADD", keys[0].as_str()];
    madd.extend(fresh.iter().map(String::as_str));
    madd.push(&stray);
    assert_err(&mut c, &madd, &misrouted_error(2, 0));
    let mut insert = vec!["BF.INSERT", keys[0].as_str(), "NOCREATE", "ITEMS"];
    insert.extend(fresh.iter().map(String::as_str));
    insert.push(&stray);
    assert_err(&mut c, &insert, &misrouted_error(2, 0));
    assert_eq!(info_map(&mut c, &keys[0]), before);
    let mut mexists = vec!["BF.MEXISTS", keys[0].as_str()];
    mexists.extend(fresh.iter().map(String::as_str));
    assert_eq!(as_ints(raw(&mut c, &mexists).unwrap()), [0; 5]);

    // A partition of the same name whose filter seed is the routing seed is refused.
    let seed = SEED.to_string();
    assert_err(
        &mut c,
        &[
            "BF.RESERVE",
            "other",
            "0.01",
            "100",
            "SEED",
            &seed,
            "PARTITION",
            "0",
            "2",
            &seed,
        ],
        "ERR a partition's SEED must differ from its routing seed",
    );
    assert_err(
        &mut c,
        &[
            "BF.RESERVE",
            "other",
            "0.01",
            "100",
            "PARTITION",
            "2",
            "2",
            "1",
        ],
        "ERR partition index must be below the number of partitions",
    );
    assert_err(
        &mut c,
        &[
            "BF.RESERVE",
            "other",
            "0.01",
            "100",
            "PARTITIONS",
            "4097",
            "1",
        ],
        "ERR partitions must be in the range [1, 4096]",
    );
}

#[test]
fn the_descriptor_refuses_items_and_describes_the_partitions() {
    let server = Server::start();
    let mut c = server.conn();
    let keys = create(&mut c, "user{42}:seen", 100_000, &["NONSCALING"]);
    let expected = "ERR user{42}:seen is a partitioned filter: send each item to its partition \
                    (BF.INFO user{42}:seen lists them)";
    for args in [
        vec!["BF.ADD", "user{42}:seen", "a"],
        vec!["BF.EXISTS", "user{42}:seen", "a"],
        vec!["BF.MADD", "user{42}:seen", "a", "b"],
        vec!["BF.MEXISTS", "user{42}:seen", "a", "b"],
        vec!["BF.INSERT", "user{42}:seen", "ITEMS", "a"],
    ] {
        assert_err(&mut c, &args, expected);
    }
    assert!(raw(&mut c, &["BF.CARD", "user{42}:seen"]).is_err());

    let described = info_map(&mut c, "user{42}:seen");
    let text: Vec<(String, String)> = described
        .iter()
        .filter(|(name, _)| name != "Partition keys" && name != "Error rate")
        .map(|(name, value)| (name.clone(), value_to_string(value)))
        .collect();
    let pairs = |list: &[(&str, &str)]| -> Vec<(String, String)> {
        list.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    let seed = SEED.to_string();
    let capacity = partition_capacity(100_000, P, true).to_string();
    assert_eq!(
        text,
        pairs(&[
            ("Partitions", "4"),
            ("Routing seed", &seed),
            ("Capacity", "100000"),
            ("Partition capacity", &capacity),
            ("Expansion rate", &value_to_string(&Value::Nil)),
            ("Window (ms)", &value_to_string(&Value::Nil)),
        ])
    );
    let error_rate: f64 = value_to_string(field(&described, "Error rate"))
        .parse()
        .unwrap();
    assert_eq!(error_rate, 0.001);
    let listed: Vec<String> = as_array(field(&described, "Partition keys").clone())
        .iter()
        .map(value_to_string)
        .collect();
    assert_eq!(listed, keys);
    assert_eq!(listed[0], "{42}user{42}:seen/0");
    for (i, key) in keys.iter().enumerate() {
        assert_identity(&mut c, key, i as u32);
        let info = info_map(&mut c, key);
        assert_eq!(value_to_string(field(&info, "Capacity")), capacity);
    }
    assert_err(
        &mut c,
        &[
            "BF.RESERVE",
            "user{42}:seen",
            "0.01",
            "10",
            "PARTITIONS",
            "2",
            "1",
        ],
        "ERR item exists",
    );
}

/// What must hold of a copy of the partition `keys[0]`, the descriptor and their items.
fn assert_kept(c: &mut Connection, partition: &str, descriptor: &str, items: &[String]) {
    assert_identity(c, partition, 0);
    let copy = [partition.to_string()];
    assert_refuses_misrouted(c, &copy);
    assert_all_exist(c, partition, &routed(items)[0]);
    let info = info_map(c, descriptor);
    assert_eq!(value_to_string(field(&info, "Partitions")), P.to_string());
}

#[test]
fn dump_restore_scandump_loadchunk_and_copy_keep_the_identity() {
    let server = Server::start();
    let mut c = server.conn();
    let mut other = server.conn();
    let keys = create(&mut c, "clicks", 4000, &[]);
    let items = items("item", 1000);
    add_routed(&mut c, &keys, &items);

    for (from, to) in [(keys[0].as_str(), "restored"), ("clicks", "restored-name")] {
        let payload = hostile::dump(&mut c, from);
        let restored = rawb(&mut c, &[b"RESTORE", to.as_bytes(), b"0", &payload]);
        assert_eq!(restored, Ok(Value::Okay));
        assert_same_digest(&mut other, from, &mut c, to);
    }
    assert_kept(&mut c, "restored", "restored-name", &items);

    let chunks = scandump(&mut c, &keys[0]);
    loadchunks(&mut c, "loaded", &chunks);
    assert_kept(&mut c, "loaded", "clicks", &items);
    assert!(raw(&mut c, &["BF.SCANDUMP", "clicks", "0"]).is_err());

    raw_ok(&mut c, &["COPY", &keys[0], "copied"]);
    raw_ok(&mut c, &["COPY", "clicks", "copied-name"]);
    assert_kept(&mut c, "copied", "copied-name", &items);
}

#[test]
fn save_restart_and_aof_rewrite_keep_the_identity() {
    let args = ["--appendonly", "yes", "--aof-use-rdb-preamble", "no"];
    let mut server = Server::start_with(&args);
    let mut c = server.conn();
    wait_rewrite_done(&mut c);
    let keys = create(&mut c, "clicks", 4000, &["EXPANSION", "4"]);
    let items = items("item", 1000);
    add_routed(&mut c, &keys, &items);
    // A descriptor of each growth: its BF.RESERVE in the rewritten AOF has 6 or 7 arguments.
    let fixed = create(&mut c, "views", 4000, &["NONSCALING"]);
    add_routed(&mut c, &fixed, &items);
    let before = dataset_digest(&mut c);
    raw_ok(&mut c, &["BGREWRITEAOF"]);
    wait_rewrite_done(&mut c);
    drop(c);
    server.restart();
    let mut c = server.conn();
    assert_eq!(dataset_digest(&mut c), before, "AOF rewrite + restart");
    assert_kept(&mut c, &keys[0], "clicks", &items);
    assert_eq!(
        value_to_string(field(&info_map(&mut c, "clicks"), "Expansion rate")),
        "4"
    );
    assert_kept(&mut c, &fixed[0], "views", &items);

    raw_ok(&mut c, &["SAVE"]);
    drop(c);
    server.restart_with(&["--appendonly", "no"]);
    let mut c = server.conn();
    assert_eq!(dataset_digest(&mut c), before, "SAVE + restart");
    assert_kept(&mut c, &keys[0], "clicks", &items);
}

#[test]
fn a_replica_keeps_the_identity() {
    let primary = Server::start();
    let replica = Server::start();
    replicate_from(&primary, &replica);
    let mut pc = primary.conn();
    let mut rc = replica.conn();
    let keys = create(&mut pc, "clicks", 4000, &[]);
    let items = items("item", 1000);
    add_routed(&mut pc, &keys, &items);
    wait_synced(&mut pc, &mut [&mut rc]);
    assert_same_dataset(&mut [("primary", &mut pc), ("replica", &mut rc)]);
    assert_identity(&mut rc, &keys[0], 0);
    // A replica is read-only: its lookups are checked.
    assert_refuses_misrouted_in(&mut rc, &keys, &["BF.EXISTS", "BF.MEXISTS"]);
    assert_routed_present(&mut rc, &keys, &items);
}

#[test]
fn window_partitions_forget_like_plain_ones() {
    const WINDOW_MS: u64 = 2000;
    let server = Server::start();
    let mut c = server.conn();
    let window = WINDOW_MS.to_string();
    let old = items("old", 200);
    // An item answers present through its window: the check counts when it ended within a window
    // of the moment before the add, so the window cannot have passed; on a machine stalled longer
    // than that it says nothing, and the scenario is retried on new keys rather than failed.
    let keys = (0..3)
        .find_map(|attempt| {
            let name = format!("recent{attempt}");
            let keys = create(&mut c, &name, 4000, &["WINDOW", &window]);
            let info = info_map(&mut c, &name);
            assert_eq!(value_to_string(field(&info, "Window (ms)")), window);
            let added = Instant::now();
            add_routed(&mut c, &keys, &old);
            let found = routed_found(&mut c, &keys, &old);
            (added.elapsed() < Duration::from_millis(WINDOW_MS)).then(|| {
                assert_eq!(found, old.len(), "old items inside their window");
                keys
            })
        })
        .expect("three attempts whose check ended after the window (machine too slow?)");
    // Forgotten at most two windows after it was added.
    std::thread::sleep(Duration::from_millis(2 * WINDOW_MS + 200));
    let new = items("new", 200);
    add_routed(&mut c, &keys, &new);
    let remembered = routed_found(&mut c, &keys, &old);
    assert!(
        remembered <= 2,
        "{remembered} of 200 old items still present"
    );
    assert_routed_present(&mut c, &keys, &new);
    assert_refuses_misrouted(&mut c, &keys);
}
