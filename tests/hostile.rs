//! Hostile input against ONE server (issue 4): memory bombs, weird numbers, thousands of random
//! commands, hundreds of mutated RESTORE payloads with a correct CRC64, mutated LOADCHUNK streams
//! and LOADCHUNK aimed at live filters, bad config values. Every bad request must get an error
//! reply, no failed command may leave a key behind, and afterwards the server answers PING, a
//! filter created before the barrage still has every member, the same BF.INFO and the same
//! `DEBUG DIGEST-VALUE`, `used_memory` stayed within bounds, and the log has no panic.
//!
//! Payloads are forged, not only mutated blindly: the filter header's xxh3-64 checksum, the
//! LOADCHUNK chunk checksum and the DUMP payload's CRC64 are recomputed here, so the mutations
//! reach the module's field validation instead of stopping at a checksum.
mod common;

use common::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use redis::{Connection, Value};
use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

const MIB: u64 = 1 << 20;
const LOADING: &str = "ERR filter is being loaded by BF.LOADCHUNK";
const BAD_DATA: &str = "ERR received bad data";
const BAD_OFFSET: &str = "ERR invalid offset - no link found";
const ITEM_EXISTS: &str = "ERR item exists";
const BAD_FORMAT: &str = "ERR Bad data format";
const DEFAULT_CAP: u64 = 1 << 30;

// ---------------------------------------------------------------------------------------------
// Checksums and encodings (layouts: src/bloom/encoding.rs, Redis' rdb.c / cluster.c / crc64.c)
// ---------------------------------------------------------------------------------------------

/// Overwrites the trailing 8 bytes of a filter header with the xxh3-64 of the bytes before them.
fn fix_xxh3(bytes: &mut [u8]) {
    let body = bytes.len() - 8;
    let sum = xxh3_64(&bytes[..body]);
    bytes[body..].copy_from_slice(&sum.to_le_bytes());
}

/// The checksum stored at the end of a (transfer) header: it seeds every chunk checksum.
fn header_sum(header: &[u8]) -> u64 {
    u64::from_le_bytes(header[header.len() - 8..].try_into().unwrap())
}

/// A LOADCHUNK data chunk: `bits` followed by xxh3-64(bits, seed = header checksum + offset).
fn forge_chunk(header: &[u8], offset: u64, bits: &[u8]) -> Vec<u8> {
    let sum = xxh3_64_with_seed(bits, header_sum(header).wrapping_add(offset));
    let mut c = bits.to_vec();
    c.extend_from_slice(&sum.to_le_bytes());
    c
}

/// Offsets of the header fields: (name, offset, size). Per-layer fields follow for each layer.
fn header_fields(layers: usize) -> Vec<(&'static str, usize, usize)> {
    let mut f = vec![
        ("magic", 0, 4),
        ("version", 4, 1),
        ("flags", 5, 1),
        ("reserved", 6, 2),
        ("seed", 8, 8),
        ("error_rate", 16, 8),
        ("capacity", 24, 8),
        ("expansion", 32, 4),
        ("layer_count", 36, 4),
        ("loaded", 40, 8),
    ];
    for i in 0..layers {
        let at = 48 + 24 * i;
        f.push(("layer.items", at, 8));
        f.push(("layer.bits", at + 8, 8));
        f.push(("layer.hashes", at + 16, 4));
        f.push(("layer.reserved", at + 20, 4));
    }
    f
}

fn put(bytes: &mut [u8], at: usize, size: usize, value: u64) {
    bytes[at..at + size].copy_from_slice(&value.to_le_bytes()[..size]);
}

fn get(bytes: &[u8], at: usize, size: usize) -> u64 {
    let mut b = [0u8; 8];
    b[..size].copy_from_slice(&bytes[at..at + size]);
    u64::from_le_bytes(b)
}

/// A header from scratch: one scaling (expansion > 0) or non-scaling filter, `layers` as
/// (items, bits, hashes), `loaded` bytes of bits valid. Checksum correct.
fn build_header(
    nonscaling: bool,
    seed: u64,
    rate: f64,
    capacity: u64,
    expansion: u32,
    loaded: u64,
    layers: &[(u64, u64, u32)],
) -> Vec<u8> {
    let mut h = Vec::new();
    h.extend_from_slice(b"RBLM");
    h.push(1);
    h.push(u8::from(nonscaling));
    h.extend_from_slice(&[0, 0]);
    h.extend_from_slice(&seed.to_le_bytes());
    h.extend_from_slice(&rate.to_le_bytes());
    h.extend_from_slice(&capacity.to_le_bytes());
    h.extend_from_slice(&expansion.to_le_bytes());
    h.extend_from_slice(&(layers.len() as u32).to_le_bytes());
    h.extend_from_slice(&loaded.to_le_bytes());
    for &(items, bits, hashes) in layers {
        h.extend_from_slice(&items.to_le_bytes());
        h.extend_from_slice(&bits.to_le_bytes());
        h.extend_from_slice(&hashes.to_le_bytes());
        h.extend_from_slice(&[0; 4]);
    }
    h.extend_from_slice(&[0; 8]);
    fix_xxh3(&mut h);
    h
}

/// RDB length encoding (rdbSaveLen).
fn rdb_len(n: u64) -> Vec<u8> {
    if n < 64 {
        vec![n as u8]
    } else if n < 16384 {
        vec![0x40 | (n >> 8) as u8, n as u8]
    } else if n <= u64::from(u32::MAX) {
        let mut v = vec![0x80];
        v.extend_from_slice(&(n as u32).to_be_bytes());
        v
    } else {
        let mut v = vec![0x81];
        v.extend_from_slice(&n.to_be_bytes());
        v
    }
}

/// Reads an RDB length at `at`; returns (value, bytes used).
fn read_rdb_len(b: &[u8], at: usize) -> (u64, usize) {
    match b[at] >> 6 {
        0 => (u64::from(b[at] & 0x3f), 1),
        1 => ((u64::from(b[at] & 0x3f) << 8) | u64::from(b[at + 1]), 2),
        _ if b[at] == 0x80 => (
            u64::from(u32::from_be_bytes(b[at + 1..at + 5].try_into().unwrap())),
            5,
        ),
        _ if b[at] == 0x81 => (u64::from_be_bytes(b[at + 1..at + 9].try_into().unwrap()), 9),
        _ => panic!(
            "unexpected RDB length byte {:#x} (compressed string?)",
            b[at]
        ),
    }
}

/// An uncompressed DUMP payload of a module value split into its parts.
#[derive(Clone, Debug)]
struct Dump {
    /// RDB type byte (7 = MODULE_2) and the module id, length-encoded.
    prefix: Vec<u8>,
    /// The module's strings in order: the header, then the bit pieces.
    strings: Vec<Vec<u8>>,
    /// RDB version, 2 bytes.
    version: [u8; 2],
}

const OPCODE_STRING: u8 = 5;
const OPCODE_EOF: u8 = 0;

impl Dump {
    fn parse(p: &[u8]) -> Dump {
        assert_eq!(p[0], 7, "not a MODULE_2 value");
        let (_, n) = read_rdb_len(p, 1);
        let prefix = p[..1 + n].to_vec();
        let mut at = 1 + n;
        let mut strings = Vec::new();
        loop {
            let op = p[at];
            at += 1;
            if op == OPCODE_EOF {
                break;
            }
            assert_eq!(op, OPCODE_STRING, "only strings expected in our type");
            let (len, n) = read_rdb_len(p, at);
            at += n;
            strings.push(p[at..at + len as usize].to_vec());
            at += len as usize;
        }
        let version = [p[at], p[at + 1]];
        assert_eq!(at + 10, p.len(), "trailing bytes after the CRC");
        Dump {
            prefix,
            strings,
            version,
        }
    }

    /// The value part: prefix, opcodes + strings, EOF.
    fn value(&self) -> Vec<u8> {
        let mut out = self.prefix.clone();
        for s in &self.strings {
            out.push(OPCODE_STRING);
            out.extend(rdb_len(s.len() as u64));
            out.extend_from_slice(s);
        }
        out.push(OPCODE_EOF);
        out
    }

    fn payload(&self) -> Vec<u8> {
        seal(self.value(), self.version)
    }
}

// ---------------------------------------------------------------------------------------------
// Reply checks
// ---------------------------------------------------------------------------------------------

/// Wrong answers that do not endanger the server are collected, so that one finding does not
/// hide the rest of the barrage; the test fails at the end with all of them.
static FINDINGS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

fn finding(what: String) {
    eprintln!("FINDING: {what}");
    FINDINGS.lock().unwrap().push(what);
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
fn call(c: &mut Connection, args: &[&[u8]]) -> Result<Value, String> {
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
fn must_err(c: &mut Connection, args: &[&[u8]]) -> String {
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

#[track_caller]
fn must_errs(c: &mut Connection, args: &[&str]) -> String {
    let b: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    must_err(c, &b)
}

/// The command must fail with exactly `expected`.
#[track_caller]
fn must_err_eq(c: &mut Connection, args: &[&[u8]], expected: &str) {
    let e = must_err(c, args);
    assert_eq!(e, expected, "wrong error for {}", show(args));
}

fn show(args: &[&[u8]]) -> String {
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

fn used_memory(c: &mut Connection) -> u64 {
    let text = info_section(c, "memory");
    text.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory in INFO memory")
}

fn config_set(c: &mut Connection, name: &str, value: &str) {
    raw_ok(c, &["CONFIG", "SET", name, value]);
}

fn config_get(c: &mut Connection, name: &str) -> String {
    let v = raw_ok(c, &["CONFIG", "GET", name]);
    let a = as_array(v);
    value_to_string(&a[1])
}

fn scandump_raw(c: &mut Connection, key: &str) -> (Vec<u8>, Vec<(i64, Vec<u8>)>) {
    let mut chunks = scandump(c, key);
    let (_, header) = chunks.remove(0);
    (header, chunks)
}

fn dump(c: &mut Connection, key: &str) -> Vec<u8> {
    redis::cmd("DUMP").arg(key).query(c).unwrap()
}

fn loadchunk(c: &mut Connection, key: &str, it: i64, data: &[u8]) -> Result<Value, String> {
    let its = it.to_string();
    call(c, &[b"BF.LOADCHUNK", key.as_bytes(), its.as_bytes(), data])
}

/// A filter that is complete must answer consistently; one still loading must refuse queries.
/// Returns false for a filter still loading. Leaves the key in place.
#[track_caller]
fn check_consistent(c: &mut Connection, key: &str, what: &str) -> bool {
    assert_eq!(key_type(c, key), "MBbloom--", "{what}: wrong type");
    let k = key.as_bytes();
    match call(c, &[b"BF.INFO", k]) {
        Err(e) => {
            assert_eq!(e, LOADING, "{what}: BF.INFO of a restored filter");
            must_err_eq(c, &[b"BF.ADD", k, b"x"], LOADING);
            must_err_eq(c, &[b"BF.EXISTS", k, b"x"], LOADING);
            must_err_eq(c, &[b"BF.SCANDUMP", k, b"0"], LOADING);
            // It survives DUMP/RESTORE as the same incomplete load.
            let d = dump(c, key);
            let copy = format!("{key}:copy");
            call(c, &[b"RESTORE", copy.as_bytes(), b"0", &d]).unwrap();
            assert_eq!(
                digest(c, key),
                digest(c, &copy),
                "{what}: DUMP/RESTORE copy"
            );
            call(c, &[b"DEL", copy.as_bytes()]).unwrap();
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
            let d = dump(c, key);
            call(c, &[b"RESTORE", copy.as_bytes(), b"0", &d]).unwrap();
            assert_eq!(
                digest(c, key),
                digest(c, &copy),
                "{what}: DUMP/RESTORE copy"
            );
            call(c, &[b"DEL", copy.as_bytes()]).unwrap();
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
// The suite
// ---------------------------------------------------------------------------------------------

struct Ctx {
    s: Server,
    c: Connection,
    /// used_memory after the pre-barrage filters were created.
    baseline: u64,
    /// The pre-barrage scaling filter's members.
    members: Vec<String>,
}

#[test]
fn hostile_barrage() {
    let s = Server::start();
    let mut c = s.conn();

    // DUMP payloads are parsed here: keep RDB strings uncompressed (the default LZF would hide
    // the header). One phase below mutates compressed payloads too.
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

    let mut cx = Ctx {
        s,
        c,
        baseline,
        members,
    };

    crc_and_framing_self_check(&mut cx);
    memory_bombs(&mut cx);
    weird_numbers(&mut cx);
    bad_configs(&mut cx);
    random_commands(&mut cx);
    mutated_restores(&mut cx);
    mutated_compressed_restores(&mut cx);
    forged_loadchunk_headers(&mut cx);
    mutated_loadchunk_streams(&mut cx);
    loadchunk_at_live_filters(&mut cx);

    // ---- After the barrage ----
    let c = &mut cx.c;
    let pong: String = redis::cmd("PING").query(c).unwrap();
    assert_eq!(pong, "PONG");
    assert_info_eq(&info(c, "keep"), &keep_info, "keep after the barrage");
    assert_eq!(digest(c, "keep"), keep_digest, "keep's digest changed");
    assert_all_exist(c, "keep", &cx.members);
    assert_info_eq(&info(c, "keep-ns"), &ns_info, "keep-ns after the barrage");
    assert_eq!(digest(c, "keep-ns"), ns_digest, "keep-ns's digest changed");
    assert_all_exist(c, "keep-ns", &ns_members);

    // Memory: with every barrage key deleted, used_memory must come back near the baseline.
    // 16 MiB covers what Redis itself keeps (a grown keyspace dict, client buffers after 16 MiB
    // arguments, allocator rounding); one leaked refused filter (they are ≥ 64 MiB in the bomb
    // phase) or a steady leak per mutated payload (hundreds) would exceed it.
    delete_barrage_keys(c);
    let after = used_memory(c);
    assert!(
        after <= cx.baseline + 16 * MIB,
        "used_memory {after} after the barrage vs baseline {} (+{} bytes)",
        cx.baseline,
        after.saturating_sub(cx.baseline)
    );

    let served = info_section(c, "stats");
    eprintln!(
        "barrage: {}",
        served
            .lines()
            .find(|l| l.starts_with("total_commands_processed"))
            .unwrap_or("?")
    );

    // Refusals by limits were counted.
    let stats = info_section(c, "bf");
    assert!(
        stats.contains("bf_refused_by_limits:") && !stats.contains("bf_refused_by_limits:0\r"),
        "bf_refused_by_limits not counted:\n{stats}"
    );

    let log = cx.s.log();
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
            cx.s.log_tail()
        );
    }
    let findings = FINDINGS.lock().unwrap().clone();
    assert!(
        findings.is_empty(),
        "{} wrong answers from the module:\n{}",
        findings.len(),
        findings.join("\n")
    );
}

/// Deletes every key but the pre-barrage filters.
fn delete_barrage_keys(c: &mut Connection) {
    let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(c).unwrap();
    for k in keys {
        if k != b"keep" && k != b"keep-ns" {
            let _: i64 = redis::cmd("DEL").arg(&k).query(c).unwrap();
        }
    }
}

/// Bound during the barrage: no phase may hold more than `extra` bytes over the baseline.
#[track_caller]
fn assert_memory_within(cx: &mut Ctx, extra: u64, phase: &str) {
    let used = used_memory(&mut cx.c);
    assert!(
        used <= cx.baseline + extra,
        "{phase}: used_memory {used} exceeds baseline {} + {extra}",
        cx.baseline
    );
}

/// The CRC64 and the DUMP framing implemented here match Redis: a rebuilt payload of a real DUMP
/// is byte-identical, and RESTORE accepts it.
fn crc_and_framing_self_check(cx: &mut Ctx) {
    assert_eq!(
        crc64(b"123456789"),
        0xe9c6_d914_c4b8_d9ca,
        "crc64 check value"
    );
    let c = &mut cx.c;
    for key in ["keep", "keep-ns"] {
        let real = dump(c, key);
        let parsed = Dump::parse(&real);
        assert_eq!(parsed.payload(), real, "rebuilt DUMP of {key} differs");
        assert_eq!(parsed.strings.len(), 2, "header + one piece of bits");
        let (header, _) = scandump_raw(c, key);
        assert_eq!(
            &parsed.strings[0][..40],
            &header[..40],
            "RDB header and SCANDUMP header agree on the fixed fields"
        );
    }
    // And the forged chunk checksum matches the module's.
    let (header, chunks) = scandump_raw(c, "keep");
    let (it, data) = &chunks[0];
    let bits = &data[..data.len() - 8];
    assert_eq!(
        &forge_chunk(&header, 0, bits),
        data,
        "forged chunk checksum"
    );
    assert_eq!(*it as usize, 1 + bits.len());
}

// ---- Memory bombs ---------------------------------------------------------------------------

fn assert_limit_error(e: &str, what: &str) {
    assert!(
        e.starts_with("ERR filter would use ") || e.starts_with("ERR filter needs "),
        "{what}: not a limit error: {e}"
    );
    if e.starts_with("ERR filter would use ") {
        assert!(
            e.contains("bf.max-filter-bytes"),
            "{what}: says how to raise: {e}"
        );
    } else {
        assert!(e.contains("maxmemory"), "{what}: names maxmemory: {e}");
    }
}

/// Adds distinct items in batches until a reply carries an error; returns it.
fn add_until_error(c: &mut Connection, key: &str, prefix: &str, max: usize) -> String {
    let mut n = 0;
    while n < max {
        let mut args: Vec<Vec<u8>> = vec![b"BF.MADD".to_vec(), key.as_bytes().to_vec()];
        for i in n..n + 1000 {
            args.push(format!("{prefix}:{i}").into_bytes());
        }
        n += 1000;
        let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        let v = call(c, &refs).unwrap_or_else(|e| panic!("BF.MADD {key}: {e}"));
        for x in as_array(v) {
            if let Value::ServerError(e) = x {
                return server_err_text(&e);
            }
        }
    }
    panic!("{key}: no error after {max} items");
}

fn memory_bombs(cx: &mut Ctx) {
    let c = &mut cx.c;
    assert_eq!(
        config_get(c, "bf.max-filter-bytes"),
        DEFAULT_CAP.to_string()
    );
    assert_eq!(config_get(c, "maxmemory"), "0");

    // Creations far over the default per-filter cap (1 GiB): 6.6 GB, 45 GB, 1.3 GB.
    let bombs: &[&[&str]] = &[
        &["BF.RESERVE", "bomb", "1e-10", "1073741824"],
        &["BF.RESERVE", "bomb", "1e-70", "1073741824"],
        &["BF.RESERVE", "bomb", "0.01", "1073741824"],
        &["BF.RESERVE", "bomb", "1e-10", "1073741824", "NONSCALING"],
        &[
            "BF.RESERVE",
            "bomb",
            "1e-10",
            "1073741824",
            "EXPANSION",
            "32768",
        ],
        &[
            "BF.INSERT",
            "bomb",
            "CAPACITY",
            "1073741824",
            "ERROR",
            "1e-10",
            "ITEMS",
            "x",
        ],
        &[
            "BF.INSERT",
            "bomb",
            "ERROR",
            "1e-12",
            "CAPACITY",
            "1000000000",
            "ITEMS",
            "a",
            "b",
        ],
    ];
    for b in bombs {
        let e = must_errs(c, b);
        assert_limit_error(&e, &b.join(" "));
        assert_no_key(c, "bomb");
    }
    // Error rates too small to size at all.
    for rate in [
        "1e-300",
        "4.9e-324",
        "2.2250738585072014e-308",
        "1e-100",
        "1e-77",
    ] {
        for cap in ["1", "1000", "1073741824"] {
            let e = must_errs(c, &["BF.RESERVE", "bomb", rate, cap]);
            assert!(
                e == "ERR error rate too small for a Bloom filter"
                    || e.starts_with("ERR filter would use"),
                "RESERVE {rate} {cap}: {e}"
            );
            assert_no_key(c, "bomb");
            must_errs(
                c,
                &[
                    "BF.INSERT",
                    "bomb",
                    "ERROR",
                    rate,
                    "CAPACITY",
                    cap,
                    "ITEMS",
                    "x",
                ],
            );
            assert_no_key(c, "bomb");
        }
    }
    cx_mem(c, cx.baseline, 4 * MIB, "after creation bombs");

    // Growth bombs: a full first layer whose successor (32768× its capacity) breaks the cap.
    raw_ok(
        c,
        &["BF.RESERVE", "grow", "0.01", "50000", "EXPANSION", "32768"],
    );
    let e = add_until_error(c, "grow", "g", 60_000);
    assert_limit_error(&e, "EXPANSION 32768 growth");
    let i = info(c, "grow");
    assert_eq!(
        (i.filters, i.items, i.capacity),
        (1, 50_000, 50_000),
        "grow after refusal"
    );
    // The refused add is refused again, and the filter still answers.
    let e = must_errs(c, &["BF.ADD", "grow", "one-more"]);
    assert_limit_error(&e, "BF.ADD on a full grow");
    assert_eq!(info(c, "grow"), i);
    call(c, &[b"DEL", b"grow"]).unwrap();

    // Expansion 1 runs into the layer limit (64) instead.
    raw_ok(c, &["BF.RESERVE", "thin", "0.5", "1", "EXPANSION", "1"]);
    let e = add_until_error(c, "thin", "t", 20_000);
    assert!(e.starts_with("ERR filter cannot grow any further"), "{e}");
    assert_eq!(info(c, "thin").filters, 64);
    call(c, &[b"DEL", b"thin"]).unwrap();

    // LOADCHUNK headers that claim huge sizes, with a correct checksum. Start from the real
    // header of a one-layer filter and rewrite its fields.
    raw_ok(c, &["BF.RESERVE", "one", "0.01", "1000", "SEED", "1"]);
    let (real, _) = scandump_raw(c, "one");
    call(c, &[b"DEL", b"one"]).unwrap();
    let claim = |bytes: u64, items: u64| {
        let mut h = real.clone();
        put(&mut h, 48 + 8, 8, bytes * 8); // layer 0 bits
        put(&mut h, 48, 8, items);
        put(&mut h, 40, 8, bytes); // loaded = total: a complete filter's transfer header
        fix_xxh3(&mut h);
        h
    };
    let two_gib = claim(2 << 30, 0);
    let pib = claim(1 << 50, 0);
    let near_max = claim((u64::MAX - 63) / 8, 0);
    let cap_plus_one = claim(DEFAULT_CAP + 8, 0);
    // Many layers whose sizes add past 2^64: corrupt, never an overflow.
    let overflow = build_header(
        false,
        1,
        0.01,
        1,
        1,
        0,
        &(0..16)
            .map(|i| (if i == 15 { 0 } else { 1 }, u64::MAX - 63, 1))
            .collect::<Vec<_>>(),
    );

    let limit_only = |c: &mut Connection, h: &[u8], what: &str| {
        let e = must_err(c, &[b"BF.LOADCHUNK", b"bomb", b"1", h]);
        assert_limit_error(&e, what);
        assert_no_key(c, "bomb");
    };
    // maxmemory unset, default cap.
    for (h, what) in [
        (&two_gib, "2 GiB"),
        (&pib, "1 PiB"),
        (&near_max, "2^61"),
        (&cap_plus_one, "cap+8"),
    ] {
        limit_only(c, h, what);
    }
    must_err_eq(c, &[b"BF.LOADCHUNK", b"bomb", b"1", &overflow], BAD_DATA);
    assert_no_key(c, "bomb");
    // Cap raised to the maximum, maxmemory unset: only the machine's memory limits; 1 PiB and
    // more can never be available.
    config_set(c, "bf.max-filter-bytes", &i64::MAX.to_string());
    for (h, what) in [(&pib, "1 PiB, no cap"), (&near_max, "2^61, no cap")] {
        let e = must_err(c, &[b"BF.LOADCHUNK", b"bomb", b"1", h]);
        assert!(e.starts_with("ERR filter needs "), "{what}: {e}");
        assert_no_key(c, "bomb");
    }
    let e = must_errs(c, &["BF.RESERVE", "bomb", "1e-76", "1073741824"]);
    assert!(
        e.starts_with("ERR filter needs ") || e.starts_with("ERR error rate too small"),
        "{e}"
    );
    assert_no_key(c, "bomb");
    // maxmemory set a little above what is used: everything bigger than the headroom is refused
    // with the maxmemory message, whatever the cap says.
    let used = used_memory(c);
    config_set(c, "maxmemory", &(used + 64 * MIB).to_string());
    for (h, what) in [
        (&two_gib, "2 GiB, maxmemory"),
        (&pib, "1 PiB, maxmemory"),
        (&near_max, "2^61, maxmemory"),
    ] {
        let e = must_err(c, &[b"BF.LOADCHUNK", b"bomb", b"1", h]);
        assert!(e.starts_with("ERR filter needs "), "{what}: {e}");
        assert!(e.contains("maxmemory"), "{what}: {e}");
        assert_no_key(c, "bomb");
    }
    let e = must_err(c, &[b"BF.LOADCHUNK", b"bomb", b"1", &claim(128 * MIB, 0)]);
    assert!(
        e.starts_with("ERR filter needs "),
        "128 MiB under 64 MiB headroom: {e}"
    );
    assert_no_key(c, "bomb");
    for b in [
        &["BF.RESERVE", "bomb", "1e-10", "1073741824"][..],
        &["BF.RESERVE", "bomb", "0.001", "100000000"],
        &["BF.INSERT", "bomb", "CAPACITY", "100000000", "ITEMS", "x"],
    ] {
        let e = must_errs(c, b);
        assert!(
            e.starts_with("ERR filter needs ") || e.starts_with("OOM"),
            "{b:?}: {e}"
        );
        assert_no_key(c, "bomb");
    }
    // Under the headroom: admitted, and it really takes the memory it claims.
    raw_ok(c, &["BF.RESERVE", "fits", "0.01", "1000000"]);
    // Growth refused by maxmemory: the second layer (65.5M items at 0.25%, ~100 MB) is under
    // the raised cap but over the headroom (~60 MiB).
    raw_ok(
        c,
        &["BF.RESERVE", "grow2", "0.01", "2000", "EXPANSION", "32768"],
    );
    let e = add_until_error(c, "grow2", "h", 3_000);
    assert!(
        e.starts_with("ERR filter needs "),
        "growth under maxmemory: {e}"
    );
    assert_eq!(info(c, "grow2").filters, 1);
    // Over maxmemory altogether: Redis refuses deny-oom commands itself.
    let half = used_memory(c) / 2;
    config_set(c, "maxmemory", &half.to_string());
    let e = call(c, &[b"BF.ADD", b"fits", b"x"]).unwrap_err();
    assert!(e.starts_with("OOM "), "{e}");
    let e = call(c, &[b"BF.LOADCHUNK", b"bomb", b"1", &real]).unwrap_err();
    assert!(e.starts_with("OOM "), "{e}");
    assert_no_key(c, "bomb");
    config_set(c, "maxmemory", "0");
    call(c, &[b"DEL", b"fits", b"grow2"]).unwrap();
    config_set(c, "bf.max-filter-bytes", &DEFAULT_CAP.to_string());
    cx_mem(c, cx.baseline, 4 * MIB, "after memory bombs");
}

#[track_caller]
fn cx_mem(c: &mut Connection, baseline: u64, extra: u64, phase: &str) {
    let used = used_memory(c);
    assert!(
        used <= baseline + extra,
        "{phase}: used_memory {used} exceeds baseline {baseline} + {extra}"
    );
}

// ---- Weird numbers --------------------------------------------------------------------------

fn weird_numbers(cx: &mut Ctx) {
    let c = &mut cx.c;
    let mut n = 0;
    let mut fresh = || {
        n += 1;
        format!("w:{n}")
    };
    let float_junk: &[&str] = &[
        "nan",
        "NaN",
        "-nan",
        "inf",
        "-inf",
        "+inf",
        "infinity",
        "Infinity",
        "1e309",
        "-1e309",
        "",
        " ",
        " 0.01",
        "0.01 ",
        "\t0.01",
        "0.01\n",
        "0x0.1",
        "0x1p-4",
        "0.01\0",
        "1,5",
        "0,01",
        "abc",
        "0.01abc",
        "--0.01",
        "0..01",
        "e-3",
        "\u{0660}.\u{0661}",
        "½",
    ];
    let rate_range: &[&str] = &[
        "0", "-0", "1", "1.0", "-0.01", "1.5", "1e-400", "2", "1e308",
    ];
    let int_junk: &[&str] = &[
        "",
        " ",
        " 5",
        "5 ",
        "5\n",
        "0x10",
        "0X10",
        "1e6",
        "1E3",
        "1.0",
        "5.",
        ".5",
        "-",
        "+",
        "--5",
        "nan",
        "inf",
        "99999999999999999999",
        "18446744073709551616",
        "-9223372036854775809",
        "9223372036854775808",
        "١٠",
        "5\0",
        "five",
    ];
    let cap_range: &[&str] = &[
        "0",
        "-0",
        "-1",
        "-9223372036854775808",
        "1073741825",
        "9223372036854775807",
    ];
    let exp_range: &[&str] = &[
        "-1",
        "32769",
        "4294967297",
        "9223372036854775807",
        "-9223372036854775808",
    ];
    let seed_junk: &[&str] = &[
        "-1",
        "18446744073709551616",
        "",
        " 1",
        "1 ",
        "0x1",
        "1.5",
        "1e3",
        "nan",
        "-0x1",
        "99999999999999999999999",
    ];

    let expect = |c: &mut Connection, args: Vec<String>, key: &str| {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        must_errs(c, &a);
        assert_no_key(c, key);
    };

    for v in float_junk.iter().chain(rate_range) {
        let k = fresh();
        expect(
            c,
            vec!["BF.RESERVE".into(), k.clone(), v.to_string(), "100".into()],
            &k,
        );
        expect(c, svec(&["BF.INSERT", &k, "ERROR", v, "ITEMS", "x"]), &k);
        expect(
            c,
            svec(&["BF.INSERT", &k, "CAPACITY", "10", "ERROR", v, "ITEMS", "x"]),
            &k,
        );
    }
    for v in int_junk.iter().chain(cap_range) {
        let k = fresh();
        expect(c, svec(&["BF.RESERVE", &k, "0.01", v]), &k);
        expect(c, svec(&["BF.INSERT", &k, "CAPACITY", v, "ITEMS", "x"]), &k);
    }
    for v in int_junk.iter().chain(exp_range).chain(&["0"]) {
        let k = fresh();
        expect(
            c,
            svec(&["BF.RESERVE", &k, "0.01", "100", "EXPANSION", v]),
            &k,
        );
        if *v != "0" {
            expect(
                c,
                svec(&["BF.INSERT", &k, "EXPANSION", v, "ITEMS", "x"]),
                &k,
            );
        }
    }
    for v in seed_junk {
        let k = fresh();
        expect(c, svec(&["BF.RESERVE", &k, "0.01", "100", "SEED", v]), &k);
        expect(c, svec(&["BF.INSERT", &k, "SEED", v, "ITEMS", "x"]), &k);
    }
    // Duplicate options, options without values, unknown options, contradictions, arity.
    let k = fresh();
    let shapes: Vec<Vec<&str>> = vec![
        vec![
            "BF.RESERVE",
            &k,
            "0.01",
            "100",
            "EXPANSION",
            "2",
            "EXPANSION",
            "2",
        ],
        vec!["BF.RESERVE", &k, "0.01", "100", "NONSCALING", "NONSCALING"],
        vec!["BF.RESERVE", &k, "0.01", "100", "SEED", "1", "SEED", "1"],
        vec![
            "BF.RESERVE",
            &k,
            "0.01",
            "100",
            "EXPANSION",
            "2",
            "NONSCALING",
        ],
        vec![
            "BF.RESERVE",
            &k,
            "0.01",
            "100",
            "NONSCALING",
            "EXPANSION",
            "2",
        ],
        vec!["BF.RESERVE", &k, "0.01", "100", "EXPANSION"],
        vec!["BF.RESERVE", &k, "0.01", "100", "SEED"],
        vec!["BF.RESERVE", &k, "0.01", "100", "FOO"],
        vec!["BF.RESERVE", &k, "0.01", "100", "EXPANSIONS", "2"],
        vec!["BF.RESERVE", &k, "0.01", "100", ""],
        vec!["BF.RESERVE", &k, "0.01", "100", "ITEMS", "x"],
        vec!["BF.RESERVE", &k, "0.01", "100", "CAPACITY", "5"],
        vec!["BF.RESERVE", &k, "0.01", "100", "2"],
        vec!["BF.RESERVE", &k, "0.01"],
        vec!["BF.RESERVE", &k],
        vec!["BF.RESERVE"],
        vec![
            "BF.INSERT",
            &k,
            "CAPACITY",
            "100",
            "CAPACITY",
            "100",
            "ITEMS",
            "x",
        ],
        vec![
            "BF.INSERT",
            &k,
            "ERROR",
            "0.1",
            "ERROR",
            "0.1",
            "ITEMS",
            "x",
        ],
        vec!["BF.INSERT", &k, "NOCREATE", "NOCREATE", "ITEMS", "x"],
        vec![
            "BF.INSERT",
            &k,
            "EXPANSION",
            "2",
            "EXPANSION",
            "3",
            "ITEMS",
            "x",
        ],
        vec!["BF.INSERT", &k, "SEED", "1", "SEED", "2", "ITEMS", "x"],
        vec![
            "BF.INSERT",
            &k,
            "EXPANSION",
            "2",
            "NONSCALING",
            "ITEMS",
            "x",
        ],
        vec!["BF.INSERT", &k, "CAPACITY", "ITEMS", "x"],
        vec!["BF.INSERT", &k, "ERROR", "ITEMS", "x"],
        vec!["BF.INSERT", &k, "CAPACITY"],
        vec!["BF.INSERT", &k, "ITEMS"],
        vec!["BF.INSERT", &k, "x"],
        vec!["BF.INSERT", &k],
        vec!["BF.INSERT", &k, "FOO", "ITEMS", "x"],
        vec!["BF.INSERT", &k, "", "ITEMS", "x"],
        vec!["BF.INSERT", &k, "ITEM", "x"],
        vec!["BF.INSERT", &k, "NOCREATE", "ITEMS", "x"],
        vec!["BF.ADD", &k],
        vec!["BF.ADD", &k, "a", "b"],
        vec!["BF.MADD", &k],
        vec!["BF.EXISTS", &k],
        vec!["BF.MEXISTS", &k],
        vec!["BF.CARD"],
        vec!["BF.INFO", &k],
        vec!["BF.INFO", &k, "CAPACITY", "SIZE"],
        vec!["BF.SCANDUMP", &k, "0"],
        vec!["BF.SCANDUMP", &k],
        vec!["BF.LOADCHUNK", &k, "1"],
        vec!["BF.LOADCHUNK", &k, "2", "xxxxxxxxxxxxxxxxxxxx"],
        vec!["BF.LOADCHUNK", &k, "1", "RBLM"],
        vec!["BF.LOADCHUNK", &k, "1", ""],
    ];
    for shape in &shapes {
        must_errs(c, shape);
        assert_no_key(c, &k);
    }
    // Iterators and BF.INFO fields on the live filter: errors, and nothing changes.
    let before = digest(c, "keep");
    for it in [
        "-1",
        "nan",
        "",
        " 1",
        "1 ",
        "1e3",
        "0x1",
        "18446744073709551616",
        "-9223372036854775808",
        "1.0",
    ] {
        must_errs(c, &["BF.SCANDUMP", "keep", it]);
        must_errs(c, &["BF.LOADCHUNK", "keep", it, "data"]);
        must_errs(c, &["BF.LOADCHUNK", "nokey", it, "data"]);
        assert_no_key(c, "nokey");
    }
    for field in ["", "capacityx", "ITEMS ", "0", "EXPANSIONS"] {
        must_errs(c, &["BF.INFO", "keep", field]);
    }
    for shape in [
        vec!["BF.RESERVE", "keep", "0.01", "100"],
        vec!["BF.RESERVE", "keep", "nan", "100"],
        vec!["BF.INSERT", "keep", "CAPACITY", "0", "ITEMS", "x"],
        vec!["BF.INSERT", "keep", "ERROR", "2", "ITEMS", "x"],
        vec!["BF.INSERT", "keep", "SEED", "-1", "ITEMS", "x"],
    ] {
        must_errs(c, &shape);
    }
    assert_eq!(digest(c, "keep"), before, "bad arguments changed keep");
    // Nothing named w:* exists.
    let left: Vec<String> = redis::cmd("KEYS").arg("w:*").query(c).unwrap();
    assert!(left.is_empty(), "keys left by failed commands: {left:?}");
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn svec(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// Config setters refuse bad values and keep the old one.
fn bad_configs(cx: &mut Ctx) {
    let c = &mut cx.c;
    let cases: &[(&str, &[&str])] = &[
        (
            "bf.error-rate",
            &[
                "0", "1", "-0.1", "nan", "inf", "1e309", "", " 0.1", "abc", "2",
            ],
        ),
        (
            "bf.initial-capacity",
            &[
                "0",
                "-1",
                "1073741825",
                "nan",
                "",
                "1e3",
                "0x10",
                "99999999999999999999",
            ],
        ),
        ("bf.expansion", &["0", "-1", "32769", "", "2.5", "x"]),
        (
            "bf.max-filter-bytes",
            &["0", "-1", "63", "", "x", "1.5", "99999999999999999999"],
        ),
        ("bf.seed-mode", &["", "bogus", "0", "randomx"]),
    ];
    for (name, values) in cases {
        let before = config_get(c, name);
        for v in *values {
            let e = call(c, &[b"CONFIG", b"SET", name.as_bytes(), v.as_bytes()]);
            assert!(e.is_err(), "CONFIG SET {name} {v:?} accepted");
            assert_eq!(
                config_get(c, name),
                before,
                "CONFIG SET {name} {v:?} changed it"
            );
        }
    }
    // The defaults still create a usable filter.
    raw_ok(c, &["BF.ADD", "cfg-probe", "x"]);
    check_consistent(c, "cfg-probe", "after bad configs");
    call(c, &[b"DEL", b"cfg-probe"]).unwrap();
}

// ---- Random commands ------------------------------------------------------------------------

fn random_commands(cx: &mut Ctx) {
    // A small cap bounds what random creations may take: 6 pool keys × 16 MiB.
    const CAP: u64 = 16 * MIB;
    config_set(&mut cx.c, "bf.max-filter-bytes", &CAP.to_string());
    let c = &mut cx.c;
    raw_ok(c, &["SET", "str", "a string"]);
    let mut rng = ChaCha8Rng::seed_from_u64(0x5eed_4057_11e5);
    let (keep_header, keep_chunks) = scandump_raw(c, "keep");
    let (ns_header, ns_chunks) = scandump_raw(c, "keep-ns");
    let names: &[&str] = &[
        "BF.RESERVE",
        "BF.ADD",
        "BF.MADD",
        "BF.INSERT",
        "BF.EXISTS",
        "BF.MEXISTS",
        "BF.INFO",
        "BF.CARD",
        "BF.SCANDUMP",
        "BF.LOADCHUNK",
        "bf.add",
        "Bf.Insert",
        "bf.loadchunk",
        "bf.reserve",
        "BF.DEBUG",
        "BF.RESERVEX",
        "BF.",
    ];
    let read_only: &[&str] = &[
        "BF.EXISTS",
        "BF.MEXISTS",
        "BF.INFO",
        "BF.CARD",
        "BF.SCANDUMP",
        "BF.LOADCHUNK",
        "BF.RESERVE",
    ];
    let words: &[&str] = &[
        "0.01",
        "0.5",
        "1e-5",
        "0.99999",
        "100",
        "1",
        "0",
        "2",
        "1000000",
        "1073741824",
        "32768",
        "ITEMS",
        "items",
        "CAPACITY",
        "ERROR",
        "EXPANSION",
        "NONSCALING",
        "NOCREATE",
        "SEED",
        "SIZE",
        "FILTERS",
        "nan",
        "inf",
        "-1",
        "",
        " ",
        "1e309",
        "18446744073709551615",
        "9223372036854775807",
        "-9223372036854775808",
        "0x10",
        "\0",
        "RBLM",
    ];
    let mut errors = 0usize;
    let mut oks = 0usize;
    for round in 0..6000 {
        let name = names[rng.random_range(0..names.len())];
        let key: Vec<u8> = match rng.random_range(0..20) {
            0 => b"str".to_vec(),
            1 if read_only.contains(&name) => b"keep".to_vec(),
            2 => b"missing".to_vec(),
            3 => vec![],
            _ => format!("r{}", rng.random_range(0..6)).into_bytes(),
        };
        let mut args: Vec<Vec<u8>> = vec![name.as_bytes().to_vec()];
        if rng.random_range(0..30) != 0 {
            args.push(key.clone());
        }
        let nargs = rng.random_range(0..9);
        let is_loadchunk = name.eq_ignore_ascii_case("BF.LOADCHUNK");
        for j in 0..nargs {
            let a: Vec<u8> = if is_loadchunk && j == 1 && rng.random_bool(0.7) {
                // Plausible LOADCHUNK data: real headers and chunks, sometimes damaged.
                let mut d = match rng.random_range(0..4) {
                    0 => keep_header.clone(),
                    1 => ns_header.clone(),
                    2 => keep_chunks[0].1.clone(),
                    _ => ns_chunks[0].1.clone(),
                };
                if rng.random_bool(0.3) && !d.is_empty() {
                    let at = rng.random_range(0..d.len());
                    d[at] ^= 1 << rng.random_range(0..8);
                }
                d
            } else if is_loadchunk && j == 0 && rng.random_bool(0.7) {
                let it = match rng.random_range(0..4) {
                    0 => 1,
                    1 => keep_chunks[0].0,
                    2 => ns_chunks[0].0,
                    _ => rng.random_range(-5i64..100_000),
                };
                it.to_string().into_bytes()
            } else {
                match rng.random_range(0..10) {
                    0..=4 => words[rng.random_range(0..words.len())].as_bytes().to_vec(),
                    5 => rng.random::<u64>().to_string().into_bytes(),
                    6 => rng.random::<i64>().to_string().into_bytes(),
                    7 => format!(
                        "{}",
                        rng.random::<f64>() * 10f64.powi(rng.random_range(-30..30))
                    )
                    .into_bytes(),
                    8 => (0..rng.random_range(0..40))
                        .map(|_| rng.random::<u8>())
                        .collect(),
                    _ => format!("item{}", rng.random_range(0..3000)).into_bytes(),
                }
            };
            args.push(a);
        }
        if !names[..14].contains(&name) {
            // Redis echoes the arguments of an unknown command in its error, and the client
            // cannot parse an error that is not UTF-8: keep those arguments printable.
            for a in &mut args {
                a.retain(|b| b.is_ascii_graphic());
            }
        }
        let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        match call(c, &refs) {
            Ok(_) => oks += 1,
            Err(e) => {
                errors += 1;
                assert!(
                    e.starts_with("ERR ") || e.starts_with("WRONGTYPE "),
                    "unexpected error kind for {}: {e}",
                    show(&refs)
                );
            }
        }
        if round % 500 == 499 {
            let pong: String = redis::cmd("PING").query(c).unwrap();
            assert_eq!(pong, "PONG");
        }
    }
    assert!(
        oks > 100 && errors > 100,
        "random phase too one-sided: {oks} ok, {errors} errors"
    );
    // Every pool key that exists is a consistent filter (or an incomplete load), never garbage.
    for i in 0..6 {
        let k = format!("r{i}");
        if exists(c, &k) {
            check_consistent(c, &k, &format!("random pool key {k}"));
        }
    }
    assert_eq!(key_type(c, "str"), "string");
    assert_memory_within(cx, 6 * CAP + 32 * MIB, "random commands");
    let c = &mut cx.c;
    delete_barrage_keys(c);
    config_set(c, "bf.max-filter-bytes", &DEFAULT_CAP.to_string());
}

// ---- Mutated RESTORE payloads ---------------------------------------------------------------

/// Interesting values for a little-endian field of `size` bytes.
fn interesting(rng: &mut ChaCha8Rng, size: usize, old: u64) -> u64 {
    let max = if size == 8 {
        u64::MAX
    } else {
        (1u64 << (8 * size)) - 1
    };
    let floats = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -0.0,
        0.0,
        1.0,
        0.5,
        1e-300,
        5e-324,
        1e-10,
        0.999_999_999_999,
        -0.01,
    ];
    match rng.random_range(0..12) {
        0 => 0,
        1 => 1,
        2 => max,
        3 => max - 1,
        4 => rng.random::<u64>() & max,
        5 => old ^ (1 << rng.random_range(0..8 * size)),
        6 => old.wrapping_add(1) & max,
        7 => old.wrapping_sub(1) & max,
        8 => (1u64 << rng.random_range(0..8 * size as u32)) & max,
        9 => old.wrapping_mul(2) & max,
        10 if size == 8 => floats[rng.random_range(0..floats.len())].to_bits(),
        _ => (old.wrapping_add(64)) & max,
    }
}

/// Mutates a header's fields (checksum then fixed). Sometimes adds or drops a layer record.
fn mutate_header(rng: &mut ChaCha8Rng, header: &[u8]) -> Vec<u8> {
    let mut h = header.to_vec();
    let layers = (h.len() - 56) / 24;
    match rng.random_range(0..10) {
        0 if layers > 1 => {
            // Drop the last layer record, with or without fixing the count.
            h.drain(h.len() - 8 - 24..h.len() - 8);
            if rng.random_bool(0.7) {
                put(&mut h, 36, 4, (layers - 1) as u64);
            }
        }
        1 => {
            // Append a layer record copied from the last one, maybe with new values.
            let last = h[h.len() - 8 - 24..h.len() - 8].to_vec();
            let at = h.len() - 8;
            h.splice(at..at, last);
            if rng.random_bool(0.7) {
                put(&mut h, 36, 4, (layers + 1) as u64);
            }
        }
        _ => {}
    }
    let layers_now = (h.len().saturating_sub(56)) / 24;
    let fields = header_fields(layers_now);
    for _ in 0..rng.random_range(1..4) {
        let (_, at, size) = fields[rng.random_range(0..fields.len())];
        if at + size > h.len() - 8 {
            continue;
        }
        let old = get(&h, at, size);
        let new = interesting(rng, size, old);
        put(&mut h, at, size, new);
    }
    fix_xxh3(&mut h);
    h
}

fn restore(c: &mut Connection, key: &str, payload: &[u8]) -> Result<Value, String> {
    call(c, &[b"RESTORE", key.as_bytes(), b"0", payload])
}

/// RESTORE must refuse with `ERR Bad data format` (and create nothing) or give a consistent
/// filter. Returns true when accepted.
#[track_caller]
fn restore_checked(c: &mut Connection, key: &str, payload: &[u8], what: &str) -> bool {
    match restore(c, key, payload) {
        Err(e) => {
            assert_eq!(e, BAD_FORMAT, "{what}: RESTORE error");
            assert_no_key(c, key);
            false
        }
        Ok(v) => {
            assert_eq!(v, Value::Okay, "{what}");
            check_consistent(c, key, what);
            call(c, &[b"DEL", key.as_bytes()]).unwrap();
            true
        }
    }
}

fn mutated_restores(cx: &mut Ctx) {
    // A small cap: a mutated header may claim any size up to it, and RESTORE allocates the
    // filter before it reads the bits.
    config_set(&mut cx.c, "bf.max-filter-bytes", &(4 * MIB).to_string());
    let c = &mut cx.c;
    let mut rng = ChaCha8Rng::seed_from_u64(0xd00d_5eed);
    raw_ok(
        c,
        &[
            "BF.RESERVE",
            "small",
            "0.05",
            "50",
            "EXPANSION",
            "2",
            "SEED",
            "9",
        ],
    );
    madd_all(c, "small", &items("s", 120));
    let bases: Vec<Dump> = ["keep", "keep-ns", "small"]
        .iter()
        .map(|k| Dump::parse(&dump(c, k)))
        .collect();
    call(c, &[b"DEL", b"small"]).unwrap();
    // The unmutated payloads restore to the same value.
    for (k, d) in ["keep", "keep-ns"].iter().zip(&bases) {
        let copy = format!("rs:orig:{k}");
        restore(c, &copy, &d.payload()).unwrap();
        assert_eq!(digest(c, &copy), digest(c, k));
        call(c, &[b"DEL", copy.as_bytes()]).unwrap();
    }

    // Hand-made: header fields at their extremes with the checksums right (RDB path).
    let ns = &bases[1];
    for (i, (field, value)) in [
        (24usize, u64::MAX), // capacity: nothing bounds it above
        (24, 1 << 63),
        (24, 1 << 30),
        (8, u64::MAX),             // seed
        (16, 5e-324f64.to_bits()), // error rate: smallest subnormal
        (40, 0),                   // loaded = 0: an incomplete filter
    ]
    .into_iter()
    .enumerate()
    {
        let mut d = ns.clone();
        put(&mut d.strings[0], field, 8, value);
        fix_xxh3(&mut d.strings[0]);
        let payload = d.payload();
        let what = format!("RESTORE rh:{i} 0 <hex {}>", hex(&payload));
        restore_checked(c, &format!("rh:{i}"), &payload, &what);
    }

    let mut accepted = [0usize; 5];
    let mut refused = [0usize; 5];
    for i in 0..1200 {
        let base = &bases[rng.random_range(0..bases.len())];
        let kind = i % 5;
        let payload = match kind {
            // A: blind byte flips in the value part (module id, opcodes, lengths, strings).
            0 => {
                let mut v = base.value();
                let start = 1; // not the type byte: another type is not our business
                for _ in 0..rng.random_range(1..5) {
                    let at = rng.random_range(start..v.len());
                    v[at] = match rng.random_range(0..3) {
                        0 => v[at] ^ (1 << rng.random_range(0..8)),
                        1 => rng.random(),
                        _ => [0u8, 0xff, 0x40, 0x80, 0x81, 5, 0][rng.random_range(0..7)],
                    };
                }
                seal(v, base.version)
            }
            // B: header fields rewritten with a correct xxh3.
            1 | 2 => {
                let mut d = base.clone();
                d.strings[0] = mutate_header(&mut rng, &d.strings[0]);
                d.payload()
            }
            // C: framing: strings dropped, added, resized, with the header possibly fixed.
            3 => {
                let mut d = base.clone();
                match rng.random_range(0..7) {
                    0 => {
                        d.strings.pop();
                    }
                    1 => d.strings.push(d.strings[1].clone()),
                    2 => {
                        let s = &mut d.strings[1];
                        let n = rng.random_range(0..s.len());
                        s.truncate(n);
                    }
                    3 => d.strings[1].extend(std::iter::repeat_n(0u8, rng.random_range(1..100))),
                    4 => d.strings.swap(0, 1),
                    5 => d.strings[0] = vec![],
                    _ => {
                        // The header says the bits are smaller or bigger, the piece follows the
                        // header: sizes disagree.
                        let mut h = d.strings[0].clone();
                        let at = 48 + 8;
                        let bits = get(&h, at, 8);
                        put(
                            &mut h,
                            at,
                            8,
                            if rng.random_bool(0.5) {
                                bits + 64
                            } else {
                                bits.saturating_sub(64)
                            },
                        );
                        fix_xxh3(&mut h);
                        d.strings[0] = h;
                    }
                }
                d.payload()
            }
            // D: raw value truncated, or lengths rewritten to huge claims.
            _ => {
                let mut v = base.value();
                if rng.random_bool(0.5) {
                    let n = rng.random_range(1..v.len());
                    v.truncate(n);
                } else {
                    // The header string's length field: right after prefix + opcode.
                    let at = base.prefix.len() + 1;
                    let claims: [&[u8]; 5] = [
                        &[0x80, 0xff, 0xff, 0xff, 0xf0],
                        &[0x81, 0, 0, 0, 1, 0, 0, 0, 0],
                        &[0x81, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xf0],
                        &[0x7f, 0xff],
                        &[0x00],
                    ];
                    let (_, n) = read_rdb_len(&v, at);
                    v.splice(
                        at..at + n,
                        claims[rng.random_range(0..claims.len())].iter().copied(),
                    );
                }
                seal(v, base.version)
            }
        };
        let key = format!("rs:{i}");
        if restore_checked(c, &key, &payload, &format!("mutation {i} (kind {kind})")) {
            accepted[kind] += 1;
        } else {
            refused[kind] += 1;
        }
    }
    eprintln!("mutated RESTORE: accepted {accepted:?}, refused {refused:?}");
    assert!(
        refused.iter().all(|&r| r > 0),
        "every kind must hit refusals"
    );
    assert!(
        accepted.iter().sum::<usize>() > 0,
        "some header mutations are valid filters"
    );

    // Bits-only changes are valid filters with other bits: accepted.
    for i in 0..50 {
        let mut d = bases[rng.random_range(0..bases.len())].clone();
        let s = &mut d.strings[1];
        let at = rng.random_range(0..s.len());
        s[at] = rng.random();
        assert!(restore_checked(
            c,
            &format!("rb:{i}"),
            &d.payload(),
            "bits-only mutation"
        ));
    }
    assert_memory_within(cx, 8 * MIB, "mutated RESTOREs");
    config_set(&mut cx.c, "bf.max-filter-bytes", &DEFAULT_CAP.to_string());
}

/// Mutations of LZF-compressed payloads (the default `rdbcompression yes`): Redis decompresses,
/// then the module validates.
fn mutated_compressed_restores(cx: &mut Ctx) {
    let c = &mut cx.c;
    config_set(c, "rdbcompression", "yes");
    let real = dump(c, "keep");
    config_set(c, "rdbcompression", "no");
    let body = &real[..real.len() - 10];
    let version = [real[real.len() - 10], real[real.len() - 9]];
    let mut rng = ChaCha8Rng::seed_from_u64(0x12f);
    for i in 0..300 {
        let mut v = body.to_vec();
        for _ in 0..rng.random_range(1..4) {
            let at = rng.random_range(1..v.len());
            v[at] ^= 1 << rng.random_range(0..8);
        }
        restore_checked(
            c,
            &format!("rc:{i}"),
            &seal(v, version),
            "compressed mutation",
        );
    }
}

// ---- LOADCHUNK ------------------------------------------------------------------------------

/// Headers with a correct checksum and odd but decodable fields: BF.LOADCHUNK either refuses or
/// starts a load; completing the load gives a consistent filter.
fn forged_loadchunk_headers(cx: &mut Ctx) {
    // Mutated headers may claim any size up to the cap, which we then fill chunk by chunk.
    config_set(&mut cx.c, "bf.max-filter-bytes", &(4 * MIB).to_string());
    let c = &mut cx.c;
    let (real, _) = scandump_raw(c, "keep");
    let mut rng = ChaCha8Rng::seed_from_u64(0x10ad);
    let mut started = 0;
    for i in 0..400 {
        let h = if i < 10 {
            // Hand-made edge cases.
            match i {
                0 => build_header(false, 0, 0.01, 1u64 << 62, 2, 64, &[(0, 512, 1)]),
                1 => build_header(false, 0, 0.01, u64::MAX, 2, 64, &[(0, 512, 1)]),
                2 => build_header(false, 0, 0.01, u64::MAX / 2 + 1, 2, 64, &[(3, 512, 255)]),
                3 => build_header(false, 0, 1e-300, 1, 1, 8, &[(1, 64, 255)]),
                4 => build_header(true, 7, 0.999, 1, 0, 8, &[(1, 64, 1)]),
                5 => build_header(false, 0, 0.5, 1, 32768, 16, &[(1, 64, 1), (0, 64, 1)]),
                6 => build_header(false, 0, 0.01, 1 << 40, 32768, 8, &[(1 << 40, 64, 1)]),
                7 => build_header(false, u64::MAX, 5e-324, 1, 1, 8, &[(0, 64, 1)]),
                // Items beyond i64: BF.CARD / BF.INFO items.
                8 => build_header(true, 0, 0.01, u64::MAX, 0, 8, &[(u64::MAX, 64, 1)]),
                _ => build_header(
                    false,
                    0,
                    0.01,
                    1 << 62,
                    4,
                    16,
                    &[(1 << 62, 64, 1), (1 << 63, 64, 1)],
                ),
            }
        } else {
            mutate_header(&mut rng, &real)
        };
        let key = format!("fh:{i}");
        match loadchunk(c, &key, 1, &h) {
            Err(e) => {
                assert!(e.starts_with("ERR "), "{e}");
                assert_no_key(c, &key);
            }
            Ok(_) => {
                started += 1;
                // A started load refuses queries until complete.
                must_err_eq(c, &[b"BF.EXISTS", key.as_bytes(), b"x"], LOADING);
                must_err_eq(c, &[b"BF.CARD", key.as_bytes()], LOADING);
                // Complete it with forged chunks of random bits.
                let total: u64 = (0..get(&h, 36, 4) as usize)
                    .map(|l| get(&h, 48 + 24 * l + 8, 8) / 8)
                    .sum();
                assert!(
                    total <= 4 * MIB,
                    "admitted {total} bytes over the 4 MiB cap"
                );
                let mut offset = 0u64;
                while offset < total {
                    let len = (total - offset).min(rng.random_range(1..(total / 4).max(4096)));
                    let bits: Vec<u8> = (0..len).map(|_| rng.random()).collect();
                    let chunk = forge_chunk(&h, offset, &bits);
                    loadchunk(c, &key, (1 + offset + len) as i64, &chunk)
                        .unwrap_or_else(|e| panic!("header {i}: chunk at {offset}: {e}"));
                    offset += len;
                }
                let what = if i < 10 {
                    format!("BF.LOADCHUNK {key} 1 <hex {}> + chunks", hex(&h))
                } else {
                    format!("forged header {i}")
                };
                check_consistent(c, &key, &what);
                call(c, &[b"DEL", key.as_bytes()]).unwrap();
            }
        }
    }
    eprintln!("forged LOADCHUNK headers: {started} of 400 started a load");
    assert!(started >= 5, "the hand-made valid headers must load");
    config_set(c, "bf.max-filter-bytes", &DEFAULT_CAP.to_string());
}

/// Broken chunk streams into a key being loaded: every broken chunk is refused without effect,
/// so finishing with the correct chunks still gives the source filter exactly.
fn mutated_loadchunk_streams(cx: &mut Ctx) {
    let c = &mut cx.c;
    let keep_digest = digest(c, "keep");
    let (header, real_chunks) = scandump_raw(c, "keep");
    assert_eq!(real_chunks.len(), 1);
    let bits = real_chunks[0].1[..real_chunks[0].1.len() - 8].to_vec();
    let (other_header, other_chunks) = scandump_raw(c, "keep-ns");
    let mut rng = ChaCha8Rng::seed_from_u64(0x57_4ea4);

    for round in 0..200 {
        let key = format!("ls:{round}");
        // Split the bits into 1..8 pieces at random cut points; forge correct chunks for them.
        let pieces = rng.random_range(1..9usize);
        let mut cuts: Vec<usize> = (0..pieces - 1)
            .map(|_| rng.random_range(1..bits.len()))
            .collect();
        cuts.push(0);
        cuts.push(bits.len());
        cuts.sort();
        cuts.dedup();
        let chunks: Vec<(i64, Vec<u8>)> = cuts
            .windows(2)
            .map(|w| {
                (
                    (1 + w[1]) as i64,
                    forge_chunk(&header, w[0] as u64, &bits[w[0]..w[1]]),
                )
            })
            .collect();

        // A data chunk before any header: no such load.
        must_err_eq(
            c,
            &[
                b"BF.LOADCHUNK",
                key.as_bytes(),
                chunks[0].0.to_string().as_bytes(),
                &chunks[0].1,
            ],
            BAD_OFFSET,
        );
        assert_no_key(c, &key);
        // Broken headers first.
        for _ in 0..rng.random_range(0..3) {
            let mut h = header.clone();
            let at = rng.random_range(0..h.len());
            h[at] ^= 1 << rng.random_range(0..8);
            must_err_eq(c, &[b"BF.LOADCHUNK", key.as_bytes(), b"1", &h], BAD_DATA);
            assert_no_key(c, &key);
            let n = rng.random_range(0..header.len());
            must_err_eq(
                c,
                &[b"BF.LOADCHUNK", key.as_bytes(), b"1", &header[..n]],
                BAD_DATA,
            );
            assert_no_key(c, &key);
        }
        loadchunk(c, &key, 1, &header).unwrap();
        let mut next = 0;
        while next < chunks.len() {
            let (it, data) = &chunks[next];
            // Send some broken chunks before the right one.
            for _ in 0..rng.random_range(0..4) {
                let (bad_it, bad): (i64, Vec<u8>) = match rng.random_range(0..10) {
                    0 => {
                        let mut d = data.clone();
                        let at = rng.random_range(0..d.len());
                        d[at] ^= 1 << rng.random_range(0..8);
                        (*it, d)
                    }
                    1 => {
                        let n = rng.random_range(0..data.len());
                        (*it, data[..n].to_vec())
                    }
                    2 => (
                        *it + [1i64, -1, 7, -7][rng.random_range(0..4)],
                        data.clone(),
                    ),
                    3 if next + 1 < chunks.len() => chunks[next + 1].clone(), // reordered
                    4 if next > 0 => chunks[next - 1].clone(),                // replayed
                    5 => (1, header.clone()),                                 // header again
                    6 => (other_chunks[0].0, other_chunks[0].1.clone()),      // another filter's
                    7 => (0, data.clone()),
                    8 => (i64::MAX, data.clone()),
                    _ => {
                        // Correct checksum, wrong place: a chunk forged for an offset past the
                        // expected one, or reaching past the end.
                        let off = rng.random_range(0..bits.len() as u64 + 100);
                        let len = rng.random_range(1..64u64);
                        let b: Vec<u8> = (0..len).map(|_| rng.random()).collect();
                        let expected = cuts[next] as u64;
                        if off == expected && off + len <= bits.len() as u64 {
                            continue; // that one would be right
                        }
                        ((1 + off + len) as i64, forge_chunk(&header, off, &b))
                    }
                };
                let e = loadchunk(c, &key, bad_it, &bad).err().unwrap_or_else(|| {
                    panic!("round {round}: broken chunk accepted at iterator {bad_it}")
                });
                assert!(
                    [
                        BAD_DATA,
                        BAD_OFFSET,
                        ITEM_EXISTS,
                        "ERR invalid chunk - Too big for current filter"
                    ]
                    .contains(&e.as_str()),
                    "round {round}: {e}"
                );
                if next < chunks.len() {
                    must_err_eq(c, &[b"BF.EXISTS", key.as_bytes(), b"x"], LOADING);
                }
            }
            loadchunk(c, &key, *it, data)
                .unwrap_or_else(|e| panic!("round {round}: chunk {next}: {e}"));
            next += 1;
        }
        assert_eq!(
            digest(c, &key),
            keep_digest,
            "round {round}: loaded filter differs"
        );
        // After completion, any further chunk (even a correct one) is refused.
        let last = chunks.last().unwrap();
        must_err_eq(
            c,
            &[
                b"BF.LOADCHUNK",
                key.as_bytes(),
                last.0.to_string().as_bytes(),
                &last.1,
            ],
            BAD_OFFSET,
        );
        assert_eq!(digest(c, &key), keep_digest);
        call(c, &[b"DEL", key.as_bytes()]).unwrap();
    }
    // A load abandoned half way stays an incomplete filter that refuses queries, survives
    // DUMP/RESTORE, and can be deleted.
    let key = "ls:abandoned";
    loadchunk(c, key, 1, &other_header).unwrap();
    assert!(!check_consistent(c, key, "abandoned load"));
    call(c, &[b"DEL", key.as_bytes()]).unwrap();
    assert_memory_within(cx, 8 * MIB, "LOADCHUNK streams");
}

/// LOADCHUNK aimed at live (complete) filters and at other types: always refused, never a change.
fn loadchunk_at_live_filters(cx: &mut Ctx) {
    let c = &mut cx.c;
    let (header, chunks) = scandump_raw(c, "keep");
    let (ns_header, ns_chunks) = scandump_raw(c, "keep-ns");
    let before = (digest(c, "keep"), digest(c, "keep-ns"));
    let bits = &chunks[0].1[..chunks[0].1.len() - 8];
    let zeros = vec![0u8; bits.len()];
    let ones = vec![0xffu8; bits.len()];
    for key in ["keep", "keep-ns"] {
        // Headers: the key exists.
        for h in [&header, &ns_header] {
            must_err_eq(c, &[b"BF.LOADCHUNK", key.as_bytes(), b"1", h], ITEM_EXISTS);
        }
        // Real and forged chunks (correct checksum for this very filter): not being loaded.
        let mut attempts: Vec<(i64, Vec<u8>)> = vec![chunks[0].clone(), ns_chunks[0].clone()];
        for (h, b) in [(&header, &zeros), (&header, &ones), (&ns_header, &zeros)] {
            attempts.push(((1 + b.len()) as i64, forge_chunk(h, 0, b)));
            attempts.push(((1 + 8 + 64) as i64, forge_chunk(h, 8, &b[..64])));
        }
        attempts.push((2, forge_chunk(&header, 0, &[0xff])));
        for (it, data) in &attempts {
            let e = loadchunk(c, key, *it, data).unwrap_err();
            assert_eq!(e, BAD_OFFSET, "LOADCHUNK {key} {it}");
        }
    }
    assert_eq!(
        (digest(c, "keep"), digest(c, "keep-ns")),
        before,
        "live filters changed"
    );
    // Other types.
    raw_ok(c, &["SET", "str2", "x"]);
    for (it, data) in [(1i64, header.clone()), (chunks[0].0, chunks[0].1.clone())] {
        let e = loadchunk(c, "str2", it, &data).unwrap_err();
        assert!(e.starts_with("WRONGTYPE"), "{e}");
    }
    assert_eq!(key_type(c, "str2"), "string");
    call(c, &[b"DEL", b"str2"]).unwrap();
}
