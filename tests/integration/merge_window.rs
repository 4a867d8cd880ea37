//! BF.MERGE of window filters, and of a destination in a foreign format with no source.
//!
//! Windows made alike (`BF.RESERVE new LIKE old`, or the same parameters and `SEED`) merge slot
//! by slot: the union answers 1 for every item of every input still inside the window, its
//! time is the latest write of its inputs (never the server's clock, so replicas and AOF
//! replays reach the same bits at any later time), and an input not written for a while is
//! rotated first. Windows that do not line up are refused by name, the destination untouched.
//!
//! Writes go through BF.ADDAT at times relative to the test's clock, on one-hour windows
//! (generations of 20 minutes): everything these tests expect inside the window stays inside it
//! for at least 40 minutes, whatever the machine's speed.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::{Connection, Value};
use rustbloom_testkit::valkeybloom::FIXED_SEED;
use rustbloom_testkit::*;

const HOUR_MS: u64 = 3_600_000;
/// The generation of a one-hour window.
const G: u64 = HOUR_MS / 3;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as u64
}

/// The start of the current one-hour window's generation: a time in the past from which the
/// tests' timestamps count.
fn generation_start() -> u64 {
    now_ms() / G * G
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

/// BF.ADDAT of `items` at `at_ms`.
fn add_at(c: &mut Connection, key: &str, at_ms: u64, items: &[String]) {
    let at = at_ms.to_string();
    let mut args = vec!["BF.ADDAT", key, &at];
    args.extend(items.iter().map(String::as_str));
    raw_ok(c, &args);
}

/// How many of `items` answer 1.
fn present(c: &mut Connection, key: &str, items: &[String]) -> usize {
    let mut args = vec!["BF.MEXISTS", key];
    args.extend(items.iter().map(String::as_str));
    as_ints(raw_ok(c, &args))
        .into_iter()
        .filter(|&x| x == 1)
        .count()
}

fn card(c: &mut Connection, key: &str) -> i64 {
    as_int(&raw_ok(c, &["BF.CARD", key]))
}

/// BF.INFO's `Last write (ms)`: the filter's time.
fn last_write(c: &mut Connection, key: &str) -> u64 {
    let reply = raw_ok(c, &["BF.INFO", key]);
    let fields = info_pairs(reply);
    let (_, value) = fields
        .iter()
        .find(|(name, _)| name == "Last write (ms)")
        .expect("a window filter's time");
    as_int(value) as u64
}

#[test]
fn alike_windows_merge_into_the_union_of_what_they_still_hold() {
    let s = Server::start();
    let mut c = s.conn();
    let base = generation_start();
    // SEED 1: the counts below are exact only when no added item reads as present by chance, which
    // with a random seed failed about twice in 10,000; seed 1 holds with the base in any of the
    // ring's four slots (checked for each, since the clock picks it).
    reserve(
        &mut c,
        "w1",
        &["0.01", "1000", "WINDOW", "3600000", "SEED", "1"],
    );
    for key in ["w2", "old"] {
        raw_ok(&mut c, &["BF.RESERVE", key, "LIKE", "w1"]);
    }
    let (early, late, other) = (items("e-", 100), items("l-", 50), items("o-", 80));
    let expired = items("x-", 100);
    // w1: two generations back and now; w2: one generation back only (it lags behind w1);
    // old: four generations back, out of the window since `base`.
    add_at(&mut c, "w1", base - 2 * G, &early);
    add_at(&mut c, "w1", base, &late);
    add_at(&mut c, "w2", base - G, &other);
    add_at(&mut c, "old", base - 4 * G, &expired);
    assert_eq!(present(&mut c, "old", &expired), 0, "forgotten already");

    // Into a created destination, either way round: the lagging w2 is rotated to w1's time.
    assert_eq!(merge(&mut c, &["ab", "w1", "w2"]), Ok(Value::Okay));
    assert_eq!(merge(&mut c, &["ba", "w2", "w1"]), Ok(Value::Okay));
    assert_eq!(digest(&mut c, "ab"), digest(&mut c, "ba"));
    for batch in [&early, &late, &other] {
        assert_eq!(present(&mut c, "ab", batch), batch.len());
    }
    // Each generation came from one input: the counts are exact.
    assert_eq!(card(&mut c, "ab"), 230);
    assert_eq!(
        last_write(&mut c, "ab"),
        base,
        "the latest write of its inputs"
    );

    // An input whose items left the window adds none of them, nor any count, nor its time.
    let before = raw_ok(&mut c, &["BF.INFO", "ab"]);
    assert_eq!(merge(&mut c, &["ab", "old"]), Ok(Value::Okay));
    assert!(present(&mut c, "ab", &expired) <= 5, "false positives only");
    assert_eq!(card(&mut c, "ab"), 230);
    assert_eq!(last_write(&mut c, "ab"), base);
    assert_eq!(raw_ok(&mut c, &["BF.INFO", "ab"]), before);

    // Into an existing window, missing sources and the destination itself adding nothing;
    // then written to as any window.
    assert_eq!(
        merge(&mut c, &["w2", "missing", "w2", "w1"]),
        Ok(Value::Okay)
    );
    assert_eq!(digest(&mut c, "w2"), digest(&mut c, "ab"));
    let after = items("a-", 10);
    add_at(&mut c, "w2", base + 1, &after);
    assert_eq!(present(&mut c, "w2", &after), 10);
    assert_eq!(card(&mut c, "w2"), 240);

    // The same parameters and SEED line up as well as LIKE does.
    let window_args = ["0.01", "1000", "WINDOW", "3600000", "SEED", "9"];
    reserve(&mut c, "s1", &window_args);
    reserve(&mut c, "s2", &window_args);
    add_at(&mut c, "s1", base, &early);
    add_at(&mut c, "s2", base, &other);
    assert_eq!(merge(&mut c, &["s1", "s2"]), Ok(Value::Okay));
    assert_eq!(
        present(&mut c, "s1", &early) + present(&mut c, "s1", &other),
        180
    );
}

#[test]
fn windows_that_do_not_line_up_are_refused_by_name() {
    let s = Server::start();
    let mut c = s.conn();
    let base = generation_start();
    reserve(
        &mut c,
        "dest",
        &["0.01", "1000", "WINDOW", "60000", "SEED", "5"],
    );
    add_at(&mut c, "dest", base, &items("d-", 20));
    let before = digest(&mut c, "dest");
    let cases: [(&str, &[&str], &str); 5] = [
        (
            "win",
            &["0.01", "1000", "WINDOW", "60003", "SEED", "5"],
            "window",
        ),
        (
            "rate",
            &["0.02", "1000", "WINDOW", "60000", "SEED", "5"],
            "error rate",
        ),
        (
            "cap",
            &["0.01", "2000", "WINDOW", "60000", "SEED", "5"],
            "capacity",
        ),
        (
            "seed",
            &["0.01", "1000", "WINDOW", "60000", "SEED", "6"],
            "seed",
        ),
        ("plain", &["0.01", "1000", "SEED", "5"], "kind"),
    ];
    for (key, args, difference) in cases {
        reserve(&mut c, key, args);
        raw_ok(&mut c, &["BF.ADD", key, "x"]);
        let want = Err(format!("ERR filters differ: {difference}"));
        assert_eq!(merge(&mut c, &["dest", key]), want, "{key}");
        assert_eq!(digest(&mut c, "dest"), before, "{key}");
        // Nothing created either.
        assert_eq!(merge(&mut c, &["made", "dest", key]), want, "{key}");
        assert_no_key(&mut c, "made");
    }
    // A window source into a plain filter.
    assert_eq!(
        merge(&mut c, &["plain", "dest"]),
        Err("ERR filters differ: kind".to_string())
    );
    // Slots of another shape under the same parameters (SHAPE, as a replica receives it),
    // after an alike source that must not have been merged either.
    let slot = value_to_string(&as_array(raw_ok(&mut c, &["BF.DEBUG", "dest"]))[1]);
    let field = |name: &str| -> u64 {
        let value = slot.split(' ').find_map(|f| f.strip_prefix(name));
        value.unwrap().parse().unwrap()
    };
    let bits = (field("bits:") + 512).to_string();
    let hashes = field("hashes:").to_string();
    let shaped = [
        "0.01", "1000", "WINDOW", "60000", "SEED", "5", "SHAPE", &bits, &hashes, "0",
    ];
    reserve(&mut c, "odd", &shaped);
    raw_ok(&mut c, &["BF.RESERVE", "good", "LIKE", "dest"]);
    add_at(&mut c, "good", base, &items("g-", 20));
    assert_eq!(
        merge(&mut c, &["dest", "good", "odd"]),
        Err("ERR filters differ: layout".to_string())
    );
    assert_eq!(digest(&mut c, "dest"), before);
}

/// Window merges of every kind: into an existing window, from a lagging one, creating one.
fn window_merges(c: &mut Connection, base: u64) {
    reserve(c, "w1", &["0.01", "500", "WINDOW", "3600000", "SEED", "3"]);
    raw_ok(c, &["BF.RESERVE", "w2", "LIKE", "w1"]);
    raw_ok(c, &["BF.RESERVE", "w3", "LIKE", "w1"]);
    add_at(c, "w1", base - G, &items("one-", 300));
    add_at(c, "w2", base, &items("two-", 300));
    add_at(c, "w3", base - 2 * G, &items("three-", 300));
    // Overlapping items in one generation: an estimated count.
    add_at(c, "w3", base, &items("two-", 150));
    assert_eq!(merge(c, &["w1", "w2"]), Ok(Value::Okay));
    assert_eq!(merge(c, &["w3", "w1"]), Ok(Value::Okay));
    assert_eq!(merge(c, &["made", "w2", "w3"]), Ok(Value::Okay));
    // Windows of 300 ms, written and merged at the server's clock: replayed later, a merge that
    // rotated to the clock would hold another time.
    reserve(c, "short1", &["0.01", "100", "WINDOW", "300", "SEED", "4"]);
    raw_ok(c, &["BF.RESERVE", "short2", "LIKE", "short1"]);
    madd_all(c, "short1", &items("s-", 20));
    std::thread::sleep(Duration::from_millis(150));
    madd_all(c, "short2", &items("t-", 20));
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(merge(c, &["short1", "short2"]), Ok(Value::Okay));
}

#[test]
fn a_window_merge_reaches_replicas_and_aof_replays_bit_for_bit() {
    let mut primary = Server::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let replica = Server::start();
    replicate_from(&primary, &replica);
    let mut pc = primary.conn();
    let mut rc = replica.conn();
    let base = generation_start();
    window_merges(&mut pc, base);
    wait_synced(&mut pc, &mut [&mut rc]);
    let keys = ["w1", "w3", "made", "short1"];
    let digests: Vec<String> = keys.iter().map(|key| digest(&mut pc, key)).collect();
    for key in keys {
        assert_same_digest(&mut pc, key, &mut rc, key);
    }
    assert!(present(&mut pc, "made", &items("three-", 300)) == 300);
    // The AOF as written (BF.MERGE replayed, later, on another clock), then rewritten.
    drop(pc);
    std::thread::sleep(Duration::from_millis(400));
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
    for prefix in ["one-", "two-", "three-"] {
        assert_eq!(present(&mut pc, "w3", &items(prefix, 300)), 300, "{prefix}");
    }
}

/// BF.INSERT of a valkey-bloom object (its 32-byte seed), kept in valkey-bloom's format.
fn valkey_bloom_object(c: &mut Connection, key: &str, item: &str) {
    let args: [&[u8]; 9] = [
        b"BF.INSERT",
        key.as_bytes(),
        b"CAPACITY",
        b"100",
        b"ERROR",
        b"0.01",
        b"SEED",
        &FIXED_SEED,
        b"ITEMS",
    ];
    let mut args = args.to_vec();
    args.push(item.as_bytes());
    rawb(c, &args).unwrap();
}

#[test]
fn a_foreign_destination_with_no_source_is_left_as_it_is() {
    let primary = Server::start();
    let replica = Server::start();
    replicate_from(&primary, &replica);
    let mut pc = primary.conn();
    let mut rc = replica.conn();
    valkey_bloom_object(&mut pc, "vb", "x");
    valkey_bloom_object(&mut pc, "vb2", "y");
    let before = digest(&mut pc, "vb");
    // Missing sources, or only the destination itself: OK, as for a native destination.
    for keys in [
        &["vb", "gone"][..],
        &["vb", "vb"],
        &["vb", "gone", "vb", "lost"],
    ] {
        assert_eq!(merge(&mut pc, keys), Ok(Value::Okay), "{keys:?}");
        assert_eq!(digest(&mut pc, "vb"), before, "{keys:?}");
    }
    // One source into a missing destination: a copy, in the source's format.
    assert_eq!(merge(&mut pc, &["copy", "vb"]), Ok(Value::Okay));
    assert_eq!(digest(&mut pc, "copy"), before);
    assert_eq!(key_type(&mut pc, "copy"), key_type(&mut pc, "vb"));
    // Two of them are still not merged.
    let refused = merge(&mut pc, &["vb", "vb2"]).unwrap_err();
    assert!(refused.contains("valkey-bloom's format"), "{refused}");
    assert_eq!(digest(&mut pc, "vb"), before);
    wait_synced(&mut pc, &mut [&mut rc]);
    for key in ["vb", "copy"] {
        assert_same_digest(&mut pc, key, &mut rc, key);
    }
}
