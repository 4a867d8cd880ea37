//! `bfctl migrate` end to end: the built binary between real redis-servers, rustbloom to
//! rustbloom (exact copies), and from the real RedisBloom 2.8.2 when `RUSTBLOOM_REDISBLOOM_MODULE`
//! names it (`make test` sets it).

use std::process::{Command, Output};

use redis::{Connection, Value};
use rustbloom_testkit::redisbloom::*;
use rustbloom_testkit::*;

const BFCTL: &str = env!("CARGO_BIN_EXE_bfctl");

fn url(s: &Server) -> String {
    format!("redis+unix://{}", s.socket().display())
}

fn migrate(from: &str, to: &str, args: &[&str]) -> Output {
    Command::new(BFCTL)
        .args(["migrate", "--from", from, "--to", to])
        .args(args)
        .output()
        .expect("run bfctl")
}

#[track_caller]
fn ok(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "bfctl migrate failed ({}):\n{err}",
        out.status
    );
    err
}

#[track_caller]
fn fails(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(1),
        "bfctl migrate should have failed:\n{err}"
    );
    err
}

fn sorted_keys(c: &mut Connection) -> Vec<Vec<u8>> {
    let mut k: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(c).unwrap();
    k.sort();
    k
}

/// The full SCANDUMP stream of a (binary) key.
fn stream(c: &mut Connection, key: &[u8]) -> Vec<(i64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut it = 0i64;
    loop {
        let v = rawb(c, &[b"BF.SCANDUMP", key, it.to_string().as_bytes()])
            .unwrap_or_else(|e| panic!("BF.SCANDUMP {}: {e}", String::from_utf8_lossy(key)));
        let a = as_array(v);
        let next = as_int(&a[0]);
        if next == 0 {
            return out;
        }
        let Value::BulkString(d) = &a[1] else {
            panic!("SCANDUMP data {:?}", a[1])
        };
        out.push((next, d.clone()));
        it = next;
    }
}

/// Same BF.INFO and the same bytes, chunk for chunk (rustbloom to rustbloom copies are exact).
#[track_caller]
fn assert_same_filter(a: &mut Connection, b: &mut Connection, key: &[u8]) {
    let name = String::from_utf8_lossy(key).into_owned();
    assert_eq!(
        rawb(a, &[b"BF.INFO", key]),
        rawb(b, &[b"BF.INFO", key]),
        "BF.INFO of {name}"
    );
    assert!(
        stream(a, key) == stream(b, key),
        "SCANDUMP of {name} differs"
    );
}

fn madd(c: &mut Connection, key: &[u8], items: impl IntoIterator<Item = Vec<u8>>) {
    let items: Vec<Vec<u8>> = items.into_iter().collect();
    for batch in items.chunks(1000) {
        let mut args: Vec<&[u8]> = vec![b"BF.MADD", key];
        args.extend(batch.iter().map(|i| i.as_slice()));
        rawb(c, &args).unwrap();
    }
}

fn numbered(prefix: &str, n: usize) -> impl Iterator<Item = Vec<u8>> + '_ {
    (0..n).map(move |i| format!("{prefix}{i}").into_bytes())
}

#[test]
fn copies_every_filter_exactly_with_its_ttl() {
    let src = Server::start();
    let dst = Server::start();
    let mut sc = src.conn();
    let mut dc = dst.conn();
    // Two 16 MiB chunks and more: streamed, not held whole.
    raw_ok(&mut sc, &["BF.RESERVE", "big", "0.001", "15000000"]);
    madd(&mut sc, b"big", numbered("big", 5000));
    raw_ok(&mut sc, &["BF.RESERVE", "layers", "0.01", "2"]);
    madd(&mut sc, b"layers", numbered("l", 3000));
    raw_ok(&mut sc, &["BF.RESERVE", "ns", "0.001", "100", "NONSCALING"]);
    madd(&mut sc, b"ns", numbered("n", 60));
    raw_ok(&mut sc, &["BF.RESERVE", "empty", "0.01", "1000"]);
    let bin: &[u8] = b"bin\x00\xff key";
    madd(&mut sc, bin, [Vec::new(), vec![0u8], vec![0xff, 0xfe]]);
    raw_ok(&mut sc, &["BF.ADD", "ttl", "x"]);
    raw_ok(&mut sc, &["PEXPIRE", "ttl", "600000"]);
    raw_ok(&mut sc, &["SET", "plain", "not a filter"]);
    raw_ok(&mut sc, &["HSET", "hash", "f", "v"]);

    let err = ok(&migrate(&url(&src), &url(&dst), &["-q"]));
    assert!(err.contains("6 of 6 filters copied and checked"), "{err}");
    assert!(err.contains("[1/6]") && err.contains("TTL"), "{err}");

    let mut want: Vec<Vec<u8>> = ["big", "layers", "ns", "empty", "ttl"]
        .iter()
        .map(|k| k.as_bytes().to_vec())
        .collect();
    want.push(bin.to_vec());
    want.sort();
    assert_eq!(
        sorted_keys(&mut dc),
        want,
        "exactly the filters, no temporary key left"
    );
    for k in &want {
        assert_same_filter(&mut sc, &mut dc, k);
    }
    let layers = info(&mut dc, "layers");
    assert!(layers.filters >= 10, "{layers:?}");
    let ttl = as_int(&raw_ok(&mut dc, &["PTTL", "ttl"]));
    assert!(ttl > 0 && ttl <= 600000, "PTTL {ttl}");
    assert_eq!(as_int(&raw_ok(&mut dc, &["PTTL", "big"])), -1);
    // The copies work on their own: the items are there, adds grow them alike.
    let members: Vec<String> = (0..3000).map(|i| format!("l{i}")).collect();
    assert_all_exist(&mut dc, "layers", &members);
    for c in [&mut sc, &mut dc] {
        madd(c, b"layers", numbered("more", 500));
    }
    assert_same_filter(&mut sc, &mut dc, b"layers");
}

#[test]
fn existing_destination_keys_are_refused_unless_replace() {
    let src = Server::start();
    let dst = Server::start();
    let mut sc = src.conn();
    let mut dc = dst.conn();
    madd(&mut sc, b"a", numbered("a", 100));
    madd(&mut sc, b"b", numbered("b", 100));
    raw_ok(&mut dc, &["BF.ADD", "b", "mine"]);
    raw_ok(&mut dc, &["SET", "s", "x"]);
    raw_ok(&mut sc, &["BF.ADD", "s", "y"]);

    let err = fails(&migrate(&url(&src), &url(&dst), &[]));
    assert!(err.contains("nothing copied"), "{err}");
    assert!(
        err.contains("b (MBbloom--)") && err.contains("s (string)"),
        "{err}"
    );
    assert!(err.contains("--replace"), "{err}");
    // Nothing at all was copied, and the destination's own keys are untouched.
    assert_eq!(sorted_keys(&mut dc), vec![b"b".to_vec(), b"s".to_vec()]);
    assert_eq!(as_int(&raw_ok(&mut dc, &["BF.CARD", "b"])), 1);
    assert_eq!(as_int(&raw_ok(&mut dc, &["BF.EXISTS", "b", "mine"])), 1);

    // Only the keys asked for are checked.
    ok(&migrate(&url(&src), &url(&dst), &["a"]));
    assert_same_filter(&mut sc, &mut dc, b"a");

    let err = ok(&migrate(&url(&src), &url(&dst), &["--replace"]));
    assert!(err.contains("3 of 3 filters copied"), "{err}");
    for k in [&b"a"[..], b"b", b"s"] {
        assert_same_filter(&mut sc, &mut dc, k);
    }
}

#[test]
fn patterns_select_bloom_keys_and_explicit_keys_must_be_filters() {
    let src = Server::start();
    let dst = Server::start();
    let mut sc = src.conn();
    let mut dc = dst.conn();
    for k in ["user:1", "user:2", "item:1", "other"] {
        raw_ok(&mut sc, &["BF.ADD", k, k]);
    }
    raw_ok(&mut sc, &["SET", "user:s", "x"]);

    let err = ok(&migrate(
        &url(&src),
        &url(&dst),
        &["user:*", "other", "user:1"],
    ));
    assert!(err.contains("3 of 3 filters copied"), "{err}");
    assert_eq!(
        sorted_keys(&mut dc),
        vec![b"other".to_vec(), b"user:1".to_vec(), b"user:2".to_vec()]
    );

    let err = fails(&migrate(
        &url(&src),
        &url(&dst),
        &["item:1", "nokey", "user:s"],
    ));
    assert!(err.contains("nokey: no such key on the source"), "{err}");
    assert!(
        err.contains("user:s: a string on the source, not a Bloom filter"),
        "{err}"
    );
    assert_eq!(sorted_keys(&mut dc).len(), 3, "nothing copied");

    let err = ok(&migrate(&url(&src), &url(&dst), &["zzz*"]));
    assert!(err.contains("nothing to copy"), "{err}");
}

#[test]
fn same_database_is_refused_other_database_is_fine() {
    let s = Server::start();
    let mut c = s.conn();
    raw_ok(&mut c, &["BF.ADD", "f", "x"]);
    let err = fails(&migrate(&url(&s), &url(&s), &[]));
    assert!(err.contains("same server and database"), "{err}");
    ok(&migrate(&url(&s), &format!("{}?db=3", url(&s)), &[]));
    raw_ok(&mut c, &["SELECT", "3"]);
    assert_eq!(as_int(&raw_ok(&mut c, &["BF.EXISTS", "f", "x"])), 1);
    assert_eq!(sorted_keys(&mut c), vec![b"f".to_vec()]);
}

#[test]
fn failures_are_reported_and_leave_the_destination_alone() {
    let src = Server::start();
    let plain = Server::start_without_module(&[]);
    // A server without the module echoes the arguments of the unknown command, the key
    // included: a key that is not UTF-8 made that error unreadable, and the connection with it.
    rawb(&mut src.conn(), &[b"BF.ADD", b"f\xff", b"x"]).unwrap();
    raw_ok(&mut src.conn(), &["BF.ADD", "g", "y"]);
    let out = migrate(&url(&src), &url(&plain), &[]);
    let err = fails(&out);
    assert!(
        err.contains("nothing copied") && err.contains("module is not loaded"),
        "{err}"
    );
    assert!(!err.contains("utf-8"), "{err}");
    assert!(sorted_keys(&mut plain.conn()).is_empty());

    let err = fails(&migrate("redis://127.0.0.1:1", &url(&src), &[]));
    assert!(
        err.contains("cannot connect") && err.contains("source"),
        "{err}"
    );
}

/// From the real RedisBloom: every corpus filter copied by bfctl answers as RedisBloom did, and
/// grows as it does. Needs rustbloom to read RedisBloom's SCANDUMP stream.
#[test]
fn migrates_from_redisbloom() {
    let Some(module) = redisbloom_module("migrates_from_redisbloom") else {
        return;
    };
    let corpus = corpus(&module);
    let rb = start_redisbloom(&module, &[("dump.rdb", &corpus.rdb)]);
    let dst = Server::start();
    let err = ok(&migrate(&url(&rb), &url(&dst), &["--sample", "2000"]));
    let n = corpus.cases.len();
    assert!(err.contains(&format!("{n} of {n} filters copied")), "{err}");
    let mut c = dst.conn();
    assert_no_diffs(
        "bfctl migrate from RedisBloom",
        &compare(&mut c, corpus, Phase::Before),
    );
    assert_no_diffs("growth after bfctl migrate", &grow(&mut c, corpus));
    assert_no_diffs("after growth", &compare(&mut c, corpus, Phase::After));
}

#[test]
fn a_window_filter_is_described_as_one() {
    let src = Server::start();
    let dst = Server::start();
    let mut c = src.conn();
    raw_ok(
        &mut c,
        &["BF.RESERVE", "recent", "0.01", "1000", "WINDOW", "60000"],
    );
    raw_ok(&mut c, &["BF.ADD", "recent", "x"]);
    let err = ok(&migrate(&url(&src), &url(&dst), &[]));
    assert!(err.contains("window filter of 60000 ms"), "{err}");
    assert!(!err.contains("non-scaling"), "{err}");
}
