//! The hostile-input harness (tests/hostile_*.rs): a [`Barrage`] is one server holding two
//! filters that every hostile test must leave untouched, strict reply checks that fail on a dead
//! connection or an internal error, and the checks every hostile test ends with
//! ([`Barrage::finish`]): the server answers PING, the pre-existing filters have every member, the
//! same BF.INFO and the same `DEBUG DIGEST-VALUE`, `used_memory` is back near the baseline once
//! the test's keys are deleted, the log has no panic, and no wrong answer was collected.

use std::cell::RefCell;

use redis::{Connection, Value};

use crate::bloom::{
    assert_all_exist, assert_info_eq, info, items, loadchunks, madd_all, scandump, Info,
};
use crate::keyspace::{digest, info_section, key_type, used_memory};
use crate::reply::{as_array, as_int, raw, raw_ok, value_to_string};
use crate::server::Server;

pub const MIB: u64 = 1 << 20;
/// The default `bf.max-filter-bytes`.
pub const DEFAULT_CAP: u64 = 1 << 30;

// The module's error replies.
pub const LOADING: &str = "ERR filter is being loaded by BF.LOADCHUNK";
pub const BAD_DATA: &str = "ERR received bad data";
pub const BAD_OFFSET: &str = "ERR invalid offset - no link found";
pub const ITEM_EXISTS: &str = "ERR item exists";
pub const NOT_FOUND: &str = "ERR not found";
pub const BAD_FORMAT: &str = "ERR Bad data format";

// ---------------------------------------------------------------------------------------------
// Reply checks
// ---------------------------------------------------------------------------------------------

thread_local! {
    /// Wrong answers that do not endanger the server are collected, so that one finding does
    /// not hide the rest of the test; [`Barrage::finish`] fails with all of them. Per thread:
    /// each test runs on its own thread, and [`Barrage::start`] clears what an earlier test on
    /// the same thread may have left.
    static FINDINGS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// Records a wrong answer; the test fails with it in [`Barrage::finish`].
pub fn finding(what: String) {
    eprintln!("FINDING: {what}");
    FINDINGS.with(|f| f.borrow_mut().push(what));
}

macro_rules! soft_assert {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            finding(format!($($fmt)+));
        }
    };
}

/// Panics on a dead connection or an internal error; returns the reply or the error text.
#[track_caller]
pub fn call(c: &mut Connection, args: &[&[u8]]) -> Result<Value, String> {
    let r = raw(c, args);
    if let Err(e) = &r {
        assert!(
            !e.starts_with("<non-server error"),
            "connection failed (server crashed?) on {}: {e}",
            show(args)
        );
        assert!(
            !e.contains("internal error"),
            "internal error on {}: {e}",
            show(args)
        );
    }
    if let Ok(v) = &r {
        assert!(
            !format!("{v:?}").contains("internal error"),
            "internal error nested in the reply to {}: {v:?}",
            show(args)
        );
    }
    r
}

/// The command must fail with an `ERR ...` reply.
#[track_caller]
pub fn must_err(c: &mut Connection, args: &[&[u8]]) -> String {
    match call(c, args) {
        Err(e) => {
            assert!(
                e.starts_with("ERR "),
                "{}: not an ERR reply: {e}",
                show(args)
            );
            e
        }
        Ok(v) => panic!("{} should fail, got {v:?}", show(args)),
    }
}

/// [`must_err`] with string arguments.
#[track_caller]
pub fn must_errs(c: &mut Connection, args: &[&str]) -> String {
    let b: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    must_err(c, &b)
}

/// The command must fail with exactly `expected`.
#[track_caller]
pub fn must_err_eq(c: &mut Connection, args: &[&[u8]], expected: &str) {
    let e = must_err(c, args);
    assert_eq!(e, expected, "wrong error for {}", show(args));
}

/// The arguments for a message, long ones as their length.
pub fn show(args: &[&[u8]]) -> String {
    args.iter()
        .map(|a| {
            if a.len() > 48 {
                format!("<{} bytes>", a.len())
            } else {
                format!("{:?}", String::from_utf8_lossy(a))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `CONFIG SET name value`, which must succeed.
pub fn config_set(c: &mut Connection, name: &str, value: &str) {
    raw_ok(c, &["CONFIG", "SET", name, value]);
}

/// `CONFIG GET name`: the value.
pub fn config_get(c: &mut Connection, name: &str) -> String {
    let v = raw_ok(c, &["CONFIG", "GET", name]);
    let a = as_array(v);
    value_to_string(&a[1])
}

/// A full SCANDUMP split into the header and the data chunks.
pub fn scandump_raw(c: &mut Connection, key: &str) -> (Vec<u8>, Vec<(i64, Vec<u8>)>) {
    let mut chunks = scandump(c, key);
    let (_, header) = chunks.remove(0);
    (header, chunks)
}

/// `DUMP key`.
pub fn dump(c: &mut Connection, key: &str) -> Vec<u8> {
    redis::cmd("DUMP").arg(key).query(c).unwrap()
}

/// DUMP `key` and RESTORE it as `<key>:copy`: the copy has the key's digest; it is deleted again.
#[track_caller]
fn assert_dump_restore_copy(c: &mut Connection, key: &str, what: &str) {
    let d = dump(c, key);
    let copy = format!("{key}:copy");
    call(c, &[b"RESTORE", copy.as_bytes(), b"0", &d]).unwrap();
    assert_eq!(
        digest(c, key),
        digest(c, &copy),
        "{what}: DUMP/RESTORE copy"
    );
    call(c, &[b"DEL", copy.as_bytes()]).unwrap();
}

/// A filter that is complete must answer consistently; one still loading must refuse queries.
/// Returns false for a filter still loading. Leaves the key in place.
#[track_caller]
pub fn check_consistent(c: &mut Connection, key: &str, what: &str) -> bool {
    assert_eq!(key_type(c, key), "MBbloom--", "{what}: wrong type");
    let k = key.as_bytes();
    match call(c, &[b"BF.INFO", k]) {
        Err(e) => {
            assert_eq!(e, LOADING, "{what}: BF.INFO of a restored filter");
            must_err_eq(c, &[b"BF.ADD", k, b"x"], LOADING);
            must_err_eq(c, &[b"BF.EXISTS", k, b"x"], LOADING);
            must_err_eq(c, &[b"BF.SCANDUMP", k, b"0"], LOADING);
            // It survives DUMP/RESTORE as the same incomplete load.
            assert_dump_restore_copy(c, key, what);
            false
        }
        Ok(_) => {
            let i = info(c, key);
            soft_assert!(
                i.capacity >= 1,
                "{what}: BF.INFO Capacity out of range: {i:?}"
            );
            soft_assert!(i.items >= 0, "{what}: BF.INFO items out of range: {i:?}");
            assert!(i.size > 0 && i.filters >= 1, "{what}: {i:?}");
            soft_assert!(
                i.capacity < 1 || i.items <= i.capacity,
                "{what}: more items than capacity {i:?}"
            );
            let card = as_int(&call(c, &[b"BF.CARD", k]).unwrap());
            assert_eq!(card, i.items, "{what}: BF.CARD vs BF.INFO");
            // Full round trips through SCANDUMP/LOADCHUNK and DUMP/RESTORE give the same value.
            let chunks = scandump(c, key);
            let copy = format!("{key}:copy");
            loadchunks(c, &copy, &chunks);
            assert_eq!(digest(c, key), digest(c, &copy), "{what}: SCANDUMP copy");
            call(c, &[b"DEL", copy.as_bytes()]).unwrap();
            assert_dump_restore_copy(c, key, what);
            // Lookups and adds work (an add may be refused by a limit or a full filter).
            call(c, &[b"BF.EXISTS", k, b"probe"]).unwrap();
            call(c, &[b"BF.MEXISTS", k, b"a", b"b", b""]).unwrap();
            match call(c, &[b"BF.ADD", k, b"hostile-probe-item"]) {
                Ok(_) => {
                    let e = as_int(&call(c, &[b"BF.EXISTS", k, b"hostile-probe-item"]).unwrap());
                    assert_eq!(e, 1, "{what}: false negative right after BF.ADD");
                }
                Err(e) => assert!(e.starts_with("ERR "), "{what}: {e}"),
            }
            true
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The server every hostile test runs against, and the checks it ends with
// ---------------------------------------------------------------------------------------------

/// One server with the filters that must survive: `keep` (scaling, several layers) and
/// `keep-ns` (non-scaling), and what they looked like before the test.
pub struct Barrage {
    pub s: Server,
    pub c: Connection,
    /// used_memory after the pre-barrage filters were created.
    pub baseline: u64,
    /// The pre-barrage scaling filter's members.
    pub members: Vec<String>,
    ns_members: Vec<String>,
    keep_info: Info,
    keep_digest: String,
    ns_info: Info,
    ns_digest: String,
}

/// Starts a [`Barrage`], runs `phase` on it, then [`Barrage::finish`].
pub fn run(phase: fn(&mut Barrage)) {
    let mut cx = Barrage::start();
    phase(&mut cx);
    cx.finish();
}

impl Barrage {
    pub fn start() -> Barrage {
        FINDINGS.with(|f| f.borrow_mut().clear());
        let s = Server::start();
        let mut c = s.conn();

        // DUMP payloads are parsed here: keep RDB strings uncompressed (the default LZF would
        // hide the header). One test mutates compressed payloads too.
        config_set(&mut c, "rdbcompression", "no");

        // The filters that must survive: several layers, and a non-scaling one.
        raw_ok(
            &mut c,
            &["BF.RESERVE", "keep", "0.001", "1000", "EXPANSION", "3"],
        );
        let members = items("member", 6000);
        madd_all(&mut c, "keep", &members);
        raw_ok(
            &mut c,
            &["BF.RESERVE", "keep-ns", "0.01", "500", "NONSCALING"],
        );
        let ns_members = items("ns", 400);
        madd_all(&mut c, "keep-ns", &ns_members);
        let keep_info = info(&mut c, "keep");
        assert!(keep_info.filters >= 3, "{keep_info:?}");
        let keep_digest = digest(&mut c, "keep");
        let ns_info = info(&mut c, "keep-ns");
        let ns_digest = digest(&mut c, "keep-ns");
        let baseline = used_memory(&mut c);
        Barrage {
            s,
            c,
            baseline,
            members,
            ns_members,
            keep_info,
            keep_digest,
            ns_info,
            ns_digest,
        }
    }

    /// The end-of-barrage checks; every hostile test ends with them.
    pub fn finish(mut self) {
        let c = &mut self.c;
        let pong: String = redis::cmd("PING").query(c).unwrap();
        assert_eq!(pong, "PONG");
        assert_info_eq(&info(c, "keep"), &self.keep_info, "keep after the barrage");
        assert_eq!(digest(c, "keep"), self.keep_digest, "keep's digest changed");
        assert_all_exist(c, "keep", &self.members);
        assert_info_eq(
            &info(c, "keep-ns"),
            &self.ns_info,
            "keep-ns after the barrage",
        );
        assert_eq!(
            digest(c, "keep-ns"),
            self.ns_digest,
            "keep-ns's digest changed"
        );
        assert_all_exist(c, "keep-ns", &self.ns_members);

        // Memory: with every barrage key deleted, used_memory must come back near the baseline.
        // 16 MiB covers what Redis itself keeps (a grown keyspace dict, client buffers after
        // 16 MiB arguments, allocator rounding); one leaked refused filter (they are ≥ 64 MiB in
        // the bomb test) or a steady leak per mutated payload (hundreds) would exceed it.
        delete_barrage_keys(c);
        let after = used_memory(c);
        assert!(
            after <= self.baseline + 16 * MIB,
            "used_memory {after} after the barrage vs baseline {} (+{} bytes)",
            self.baseline,
            after.saturating_sub(self.baseline)
        );

        let served = info_section(c, "stats");
        eprintln!(
            "barrage: {}",
            served
                .lines()
                .find(|l| l.starts_with("total_commands_processed"))
                .unwrap_or("?")
        );

        let log = self.s.log();
        for bad in [
            "internal error in rustbloom",
            "internal error in",
            "failed internally",
            "panicked",
            "Guru Meditation",
            "crashed by signal",
            "ASSERTION FAILED",
        ] {
            assert!(
                !log.contains(bad),
                "server log contains {bad:?}:\n{}",
                self.s.log_tail()
            );
        }
        let findings = FINDINGS.with(|f| f.take());
        assert!(
            findings.is_empty(),
            "{} wrong answers from the module:\n{}",
            findings.len(),
            findings.join("\n")
        );
    }
}

/// Deletes every key but the pre-barrage filters.
pub fn delete_barrage_keys(c: &mut Connection) {
    let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(c).unwrap();
    for k in keys {
        if k != b"keep" && k != b"keep-ns" {
            let _: i64 = redis::cmd("DEL").arg(&k).query(c).unwrap();
        }
    }
}

/// Bound during the barrage: no phase may hold more than `extra` bytes over the baseline.
#[track_caller]
pub fn assert_memory_within(cx: &mut Barrage, extra: u64, phase: &str) {
    let used = used_memory(&mut cx.c);
    assert!(
        used <= cx.baseline + extra,
        "{phase}: used_memory {used} exceeds baseline {} + {extra}",
        cx.baseline
    );
}

/// Bytes as lower-case hex, for messages that must let a failure be replayed.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
