//! Upgrade safety: an RDB file and a DUMP payload written by encoding version 100 are committed
//! under `tests/fixtures/`; every later build must load them and answer exactly as the build that
//! wrote them did (same members, same BF.INFO, same answers for non-members — so the same bits
//! and the same hashing).
//!
//! The fixtures were generated once, by Redis 7.0.15 with this module, with
//!
//! ```sh
//! cargo build --release && cargo test --test golden -- --ignored generate_golden_fixtures --nocapture
//! ```
//!
//! which writes `tests/fixtures/golden.rdb` and `tests/fixtures/golden-scaling.dump` and prints
//! the `EXPECTED` table below. Every filter has a fixed `SEED`, so the content is deterministic.
//! Do not regenerate them when the encoding changes: the point is that the old files keep
//! loading. (Only regenerate, and say so in the commit, if a file is lost.)
use std::path::PathBuf;

use redis::{Connection, Value};
use rustbloom_testkit::payload::seal;
use rustbloom_testkit::*;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

const BIN_KEY: &[u8] = b"golden:\x00bin\xff";

/// The complete filters in the RDB: key, (prefix, count) of their members, and what BF.INFO and
/// a probe of 10,000 non-members (`probe:0`..) answered when the files were written.
struct Expected {
    key: &'static [u8],
    members: (&'static str, usize),
    info: Info,
    probe_positives: i64,
}

fn members(prefix: &str, n: usize) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = items(prefix, n)
        .into_iter()
        .map(String::into_bytes)
        .collect();
    if prefix == "b" {
        v.extend([b"".to_vec(), b"\x00".to_vec(), b"\xff\xfe".to_vec()]);
    }
    v
}

/// Writes the filters the fixtures hold.
fn build_fixture_dataset(c: &mut Connection) {
    raw_ok(
        c,
        &[
            "BF.RESERVE",
            "golden:scaling",
            "0.01",
            "100",
            "EXPANSION",
            "2",
            "SEED",
            "42",
        ],
    );
    madd_all(c, "golden:scaling", &items("g", 1000));
    raw_ok(
        c,
        &[
            "BF.RESERVE",
            "golden:nonscaling",
            "0.001",
            "500",
            "NONSCALING",
            "SEED",
            "7",
        ],
    );
    madd_all(c, "golden:nonscaling", &items("n", 300));
    let mut args = vec![
        "BF.INSERT",
        "golden:exp1",
        "CAPACITY",
        "10",
        "ERROR",
        "0.05",
        "EXPANSION",
        "1",
        "SEED",
        "1",
        "ITEMS",
    ]
    .into_iter()
    .map(String::from)
    .collect::<Vec<_>>();
    args.extend(items("e", 55));
    raw_ok(c, &args);
    raw_ok(
        c,
        &[
            "BF.RESERVE",
            "golden:full",
            "0.01",
            "20",
            "NONSCALING",
            "SEED",
            "3",
        ],
    );
    let mut args = vec!["BF.MADD".to_string(), "golden:full".into()];
    args.extend(items("f", 40));
    let r = as_array(raw_ok(c, &args));
    assert!(
        matches!(r.last(), Some(Value::ServerError(_))),
        "golden:full must fill up"
    );
    rawb(
        c,
        &[
            b"BF.RESERVE",
            BIN_KEY,
            b"0.02",
            b"50",
            b"SEED",
            b"18446744073709551615",
        ],
    )
    .unwrap();
    let mut cmd = redis::cmd("BF.MADD");
    cmd.arg(BIN_KEY);
    for m in members("b", 10) {
        cmd.arg(m);
    }
    let _: Value = cmd.query(c).unwrap();
    // A load stopped after its header.
    let chunks = scandump(c, "golden:scaling");
    loadchunks(c, "golden:partial", &chunks[..1]);
    raw_ok(c, &["SET", "golden:string", "plain"]);
}

fn probe_positives(c: &mut Connection, key: &[u8]) -> i64 {
    let mut n = 0;
    for batch in items("probe", 10_000).chunks(1000) {
        let mut cmd = redis::cmd("BF.MEXISTS");
        cmd.arg(key);
        for i in batch {
            cmd.arg(i);
        }
        let r: Vec<i64> = cmd.query(c).unwrap();
        n += r.iter().sum::<i64>();
    }
    n
}

/// RESTOREs a committed DUMP payload under `key`.
fn restore(c: &mut Connection, key: &str, payload: Vec<u8>) {
    raw_ok(
        c,
        &[
            b"RESTORE".to_vec(),
            key.as_bytes().to_vec(),
            b"0".to_vec(),
            payload,
        ],
    );
}

fn assert_members(c: &mut Connection, key: &[u8], prefix: &str, n: usize) {
    for batch in members(prefix, n).chunks(1000) {
        let mut cmd = redis::cmd("BF.MEXISTS");
        cmd.arg(key);
        for m in batch {
            cmd.arg(m.as_slice());
        }
        let r: Vec<i64> = cmd.query(c).unwrap();
        assert!(
            r.iter().all(|&x| x == 1),
            "a member of {} is missing",
            String::from_utf8_lossy(key)
        );
    }
}

#[test]
#[ignore = "writes the committed fixtures; run by hand only (see the top of this file)"]
fn generate_golden_fixtures() {
    let s = Server::start();
    let mut c = s.conn();
    build_fixture_dataset(&mut c);
    raw_ok(&mut c, &["SAVE"]);
    std::fs::create_dir_all(fixtures()).unwrap();
    std::fs::copy(s.dir().join("dump.rdb"), fixtures().join("golden.rdb")).unwrap();
    let payload: Vec<u8> = redis::cmd("DUMP")
        .arg("golden:scaling")
        .query(&mut c)
        .unwrap();
    std::fs::write(fixtures().join("golden-scaling.dump"), payload).unwrap();
    println!("const EXPECTED: &[Expected] = &[");
    for (key, (prefix, n)) in [
        (b"golden:scaling".as_slice(), ("g", 1000)),
        (b"golden:nonscaling", ("n", 300)),
        (b"golden:exp1", ("e", 55)),
        (b"golden:full", ("f", 0)),
        (BIN_KEY, ("b", 10)),
    ] {
        let i = info(&mut c, key);
        let p = probe_positives(&mut c, key);
        println!(
            "    Expected {{ key: b{:?}, members: ({prefix:?}, {n}), info: Info {{ capacity: {}, size: {}, filters: {}, items: {}, expansion: {:?} }}, probe_positives: {p} }},",
            String::from_utf8_lossy(key).replace('\u{fffd}', "\\xff"),
            i.capacity, i.size, i.filters, i.items, i.expansion
        );
    }
    println!("];");
}

/// As printed by `generate_golden_fixtures` when the fixtures were written.
const EXPECTED: &[Expected] = &[
    Expected {
        key: b"golden:scaling",
        members: ("g", 1000),
        info: Info {
            capacity: 1500,
            size: 2984,
            filters: 4,
            items: 993,
            expansion: Some(2),
        },
        probe_positives: 99,
    },
    Expected {
        key: b"golden:nonscaling",
        members: ("n", 300),
        info: Info {
            capacity: 500,
            size: 1016,
            filters: 1,
            items: 300,
            expansion: None,
        },
        probe_positives: 2,
    },
    Expected {
        key: b"golden:exp1",
        members: ("e", 55),
        info: Info {
            capacity: 60,
            size: 528,
            filters: 6,
            items: 55,
            expansion: Some(1),
        },
        probe_positives: 172,
    },
    Expected {
        key: b"golden:full",
        members: ("f", 0),
        info: Info {
            capacity: 20,
            size: 128,
            filters: 1,
            items: 20,
            expansion: None,
        },
        probe_positives: 31,
    },
    Expected {
        key: BIN_KEY,
        members: ("b", 10),
        info: Info {
            capacity: 50,
            size: 160,
            filters: 1,
            items: 13,
            expansion: Some(2),
        },
        probe_positives: 0,
    },
];

/// BF.INFO against a recorded one: Size is the filter's own bytes, the same on every allocator.
#[track_caller]
fn assert_golden_info(c: &mut Connection, key: &[u8], expected: &Info, what: &str) {
    assert_info_eq(&info(c, key), expected, what);
}

fn check_expected(c: &mut Connection, what: &str) {
    assert!(!EXPECTED.is_empty());
    for e in EXPECTED {
        let name = String::from_utf8_lossy(e.key);
        assert_golden_info(c, e.key, &e.info, &format!("{name} ({what})"));
        assert_eq!(
            as_int(&rawb(c, &[b"BF.CARD", e.key]).unwrap()),
            e.info.items,
            "BF.CARD {name} ({what})"
        );
        assert_members(c, e.key, e.members.0, e.members.1);
        assert_eq!(
            probe_positives(c, e.key),
            e.probe_positives,
            "{name} ({what}): answers for non-members changed — bits or hashing differ"
        );
    }
    // golden:full filled up at its capacity: its first 20 answers were members.
    assert_members(c, b"golden:full", "f", 20);
    assert_err(
        c,
        &["BF.ADD", "golden:full", "new"],
        "ERR non scaling filter is full",
    );
    // The load stopped at its header is still waiting for its chunks.
    assert_err(
        c,
        &["BF.EXISTS", "golden:partial", "g:1"],
        "ERR filter is being loaded by BF.LOADCHUNK",
    );
    assert_eq!(
        raw_ok(c, &["GET", "golden:string"]),
        Value::BulkString(b"plain".to_vec())
    );
}

#[test]
fn golden_rdb_loads() {
    let rdb = std::fs::read(fixtures().join("golden.rdb")).expect("tests/fixtures/golden.rdb");
    let mut s = Server::start_with_files(&[], &[("dump.rdb", &rdb)]);
    assert!(s.log().contains("keys loaded: 7"), "{}", s.log_tail());
    let mut c = s.conn();
    check_expected(&mut c, "loaded from golden.rdb");
    // Written again by this build and read back: unchanged.
    let before: Vec<String> = EXPECTED
        .iter()
        .map(|e| format!("{:?}", rawb(&mut c, &[b"DEBUG", b"DIGEST-VALUE", e.key])))
        .collect();
    raw_ok(&mut c, &["SAVE"]);
    drop(c);
    s.restart();
    let mut c = s.conn();
    check_expected(&mut c, "after SAVE by this build + restart");
    let after: Vec<String> = EXPECTED
        .iter()
        .map(|e| format!("{:?}", rawb(&mut c, &[b"DEBUG", b"DIGEST-VALUE", e.key])))
        .collect();
    assert_eq!(before, after);
    // Old filters take writes.
    assert_eq!(
        as_int(&raw_ok(&mut c, &["BF.ADD", "golden:scaling", "new-item"])),
        1
    );
    assert_eq!(
        as_int(&raw_ok(&mut c, &["BF.CARD", "golden:scaling"])),
        EXPECTED[0].info.items + 1
    );
}

#[test]
fn golden_dump_payload_restores() {
    let payload = std::fs::read(fixtures().join("golden-scaling.dump"))
        .expect("tests/fixtures/golden-scaling.dump");
    let rdb = std::fs::read(fixtures().join("golden.rdb")).unwrap();
    let s = Server::start_with_files(&[], &[("dump.rdb", &rdb)]);
    let mut c = s.conn();
    restore(&mut c, "restored", payload);
    let e = &EXPECTED[0];
    assert_eq!(e.key, b"golden:scaling");
    assert_golden_info(
        &mut c,
        b"restored",
        &e.info,
        "restored from golden-scaling.dump",
    );
    assert_members(&mut c, b"restored", "g", 1000);
    assert_eq!(probe_positives(&mut c, b"restored"), e.probe_positives);
    assert_same_digest(&mut c, "restored", &mut s.conn(), "golden:scaling");
    assert_eq!(as_int(&raw_ok(&mut c, &["BF.ADD", "restored", "g:0"])), 0);
}

/// A filter whose layer uses the blocked layout (layers of 8 MiB and more): pins that layout's
/// hashing and encoding the way `golden-scaling.dump` pins the classic one. Written by
/// `generate_golden_blocked_fixture`; compressed by DUMP to ~160 KB since it is mostly zeros.
const BLOCKED_INFO: Info = Info {
    capacity: 7_000_000,
    // The layer's bits plus RedisBloom's bookkeeping (32 + 64), as BF.INFO counts Size.
    size: 10_066_656,
    filters: 1,
    items: 2000,
    expansion: Some(2),
};
const BLOCKED_PROBE_POSITIVES: i64 = 0;

fn build_blocked(c: &mut Connection) {
    raw_ok(
        c,
        &[
            "BF.RESERVE",
            "golden:blocked",
            "0.01",
            "7000000",
            "SEED",
            "99",
        ],
    );
    for batch in items("k", 2000).chunks(500) {
        let mut args = vec!["BF.MADD".to_string(), "golden:blocked".to_string()];
        args.extend(batch.iter().cloned());
        raw_ok(c, &args);
    }
}

#[test]
#[ignore = "writes the committed fixture; run by hand only (see the top of this file)"]
fn generate_golden_blocked_fixture() {
    let s = Server::start();
    let mut c = s.conn();
    build_blocked(&mut c);
    let payload: Vec<u8> = redis::cmd("DUMP")
        .arg("golden:blocked")
        .query(&mut c)
        .unwrap();
    std::fs::write(fixtures().join("golden-blocked.dump"), payload).unwrap();
    println!("{:?}", info(&mut c, b"golden:blocked"));
    println!(
        "probe positives: {}",
        probe_positives(&mut c, b"golden:blocked")
    );
}

#[test]
fn golden_blocked_payload_restores() {
    let payload = std::fs::read(fixtures().join("golden-blocked.dump"))
        .expect("tests/fixtures/golden-blocked.dump");
    let s = Server::start();
    let mut c = s.conn();
    restore(&mut c, "restored", payload);
    assert_golden_info(&mut c, b"restored", &BLOCKED_INFO, "golden-blocked.dump");
    assert_members(&mut c, b"restored", "k", 2000);
    assert_eq!(
        probe_positives(&mut c, b"restored"),
        BLOCKED_PROBE_POSITIVES
    );
    // The same commands on this build give the same filter, bit for bit.
    build_blocked(&mut c);
    assert_same_digest(&mut c, "restored", &mut s.conn(), "golden:blocked");
}

/// A value labelled with another encoding version than the one its fields follow is refused,
/// never misread: our fields labelled as RedisBloom's versions 0 and 4 (which load as
/// RedisBloom values, see tests/redisbloom_compat.rs), and a version from a newer rustbloom.
#[test]
fn mislabelled_encoding_versions_are_refused() {
    let s = Server::start();
    let mut c = s.conn();
    raw_ok(&mut c, &["BF.ADD", "k", "x"]);
    let dump: Vec<u8> = redis::cmd("DUMP").arg("k").query(&mut c).unwrap();
    // A module value: RDB_TYPE_MODULE_2, then the 64-bit module id as a length (0x81 + 8 bytes,
    // big-endian) whose low 10 bits are the encoding version.
    assert_eq!(&dump[..2], &[7, 0x81]);
    let id = u64::from_be_bytes(dump[2..10].try_into().unwrap());
    assert_eq!(id & 0x3ff, 100, "our encoding version");
    for (version, logged) in [
        (0u64, "refused a Bloom filter payload"),
        (4, "refused a Bloom filter payload"),
        (
            101,
            "cannot read MBbloom-- encoding version 101 (written by a newer rustbloom)",
        ),
    ] {
        let mut value = dump[..dump.len() - 10].to_vec();
        value[2..10].copy_from_slice(&((id & !0x3ff) | version).to_be_bytes());
        let rdb_version: [u8; 2] = dump[dump.len() - 10..dump.len() - 8].try_into().unwrap();
        let payload = seal(value, rdb_version);
        let err = raw(
            &mut c,
            &[b"RESTORE".to_vec(), b"old".to_vec(), b"0".to_vec(), payload],
        )
        .expect_err("a mislabelled encoding must be refused");
        assert_eq!(err, "ERR Bad data format");
        assert_no_key(&mut c, "old");
        assert!(
            s.log().contains(logged),
            "log lacks {logged:?}:\n{}",
            s.log_tail()
        );
    }
    raw_ok(&mut c, &["PING"]);
}
