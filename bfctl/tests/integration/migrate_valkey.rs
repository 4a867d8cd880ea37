//! `bfctl migrate` of valkey-bloom objects (type `bloomfltr`): copied whole by DUMP / RESTORE
//! (valkey-bloom has no BF.SCANDUMP), checked as every copy is, and answering every item as
//! valkey-bloom does. The objects are made by the real `bloomfilter` crate by valkey-bloom's own
//! rule (tests/support/src/valkeybloom.rs) and restored on a rustbloom source, which keeps and
//! DUMPs them in valkey-bloom's encoding, as valkey-bloom does (no valkey-bloom build runs here).

use std::process::{Command, Output};

use redis::{Connection, Value};
use rustbloom_testkit::payload::rdb_version;
use rustbloom_testkit::valkeybloom::VbObject;
use rustbloom_testkit::*;

const BFCTL: &str = env!("CARGO_BIN_EXE_bfctl");

fn url(s: &Server) -> String {
    format!("redis+unix://{}", s.socket().display())
}

fn migrate(from: &Server, to: &Server, args: &[&str]) -> Output {
    Command::new(BFCTL)
        .args(["migrate", "--from", &url(from), "--to", &url(to)])
        .args(args)
        .output()
        .expect("run bfctl")
}

fn items(prefix: &str, count: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|i| format!("{prefix}{i}").into_bytes())
        .collect()
}

fn mexists(c: &mut Connection, key: &str, items: &[Vec<u8>]) -> Vec<i64> {
    items
        .chunks(1000)
        .flat_map(|batch| {
            let mut args: Vec<&[u8]> = vec![b"BF.MEXISTS", key.as_bytes()];
            args.extend(batch.iter().map(Vec::as_slice));
            as_ints(rawb(c, &args).unwrap())
        })
        .collect()
}

fn dump(c: &mut Connection, key: &str) -> Vec<u8> {
    match raw(c, &["DUMP", key]).unwrap() {
        Value::BulkString(bytes) => bytes,
        other => panic!("DUMP {key}: {other:?}"),
    }
}

/// valkey-bloom objects of several shapes with their members: (key, object, members).
fn objects() -> Vec<(&'static str, VbObject, Vec<Vec<u8>>)> {
    let shapes = [
        (
            "vb:scaling",
            100u64,
            0.01,
            2u32,
            0.5,
            Some([7u8; 32]),
            700usize,
        ),
        ("vb:fixed", 1000, 0.001, 1, 0.5, None, 2500),
        ("vb:nonscaling", 500, 0.01, 0, 0.5, None, 500),
    ];
    shapes
        .into_iter()
        .map(|(key, capacity, fp, expansion, tightening, seed, count)| {
            let mut object = VbObject::new(capacity, fp, expansion, tightening, seed);
            let members = items(&format!("{key}-"), count);
            for item in &members {
                assert!(object.add(item).is_some(), "{key}: the model refused");
            }
            (key, object, members)
        })
        .collect()
}

#[test]
fn valkey_bloom_objects_are_copied_whole_and_answer_as_before() {
    let src = Server::start();
    let dst = Server::start();
    let mut sc = src.conn();
    let mut dc = dst.conn();
    let version = rdb_version(&mut sc);
    let objects = objects();
    for (key, object, _) in &objects {
        let payload = object.restore_payload(version);
        rawb(&mut sc, &[b"RESTORE", key.as_bytes(), b"0", &payload]).unwrap();
        assert_eq!(key_type(&mut sc, key), "bloomfltr");
    }
    raw_ok(&mut sc, &["PEXPIRE", "vb:fixed", "600000"]);
    // A filter of rustbloom's own type beside them goes the usual way (SCANDUMP).
    raw_ok(&mut sc, &["BF.ADD", "vb:own", "x"]);

    let out = migrate(&src, &dst, &["vb:*", "--sample", "3000"]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    assert!(err.contains("4 of 4 filters copied and checked"), "{err}");
    assert_eq!(err.matches("by DUMP/RESTORE").count(), 3, "{err}");
    assert!(err.contains("3000 random probes answered alike"), "{err}");

    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut dc).unwrap();
    keys.sort();
    assert_eq!(
        keys,
        ["vb:fixed", "vb:nonscaling", "vb:own", "vb:scaling"],
        "exactly the filters, no temporary key left"
    );
    let probes = items("probe-", 20000);
    for (key, object, members) in &objects {
        // Still valkey-bloom's object: its type, its encoding byte for byte, its answers.
        assert_eq!(key_type(&mut dc, key), "bloomfltr");
        assert_eq!(dump(&mut dc, key), dump(&mut sc, key), "{key}: DUMP");
        assert!(mexists(&mut dc, key, members).iter().all(|&x| x == 1));
        let want: Vec<i64> = probes.iter().map(|p| i64::from(object.check(p))).collect();
        assert_eq!(mexists(&mut dc, key, &probes), want, "{key}: non-members");
        assert_eq!(
            as_int(&raw_ok(&mut dc, &["BF.CARD", key])) as u64,
            object.items(),
            "{key}: BF.CARD"
        );
    }
    let ttl = as_int(&raw_ok(&mut dc, &["PTTL", "vb:fixed"]));
    assert!(ttl > 0 && ttl <= 600000, "PTTL {ttl}");
    assert_eq!(as_int(&raw_ok(&mut dc, &["BF.EXISTS", "vb:own", "x"])), 1);

    // Named, not matched: the type is recognised too; and a second run refuses to overwrite.
    let out = migrate(&src, &dst, &["vb:scaling"]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("vb:scaling (bloomfltr)"), "{err}");
    let out = migrate(&src, &dst, &["vb:scaling", "--replace"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_destination_that_cannot_restore_the_object_fails_it_alone() {
    let src = Server::start();
    let dst = Server::start();
    let mut sc = src.conn();
    let (key, object, _) = objects().swap_remove(0);
    let payload = object.restore_payload(rdb_version(&mut sc));
    rawb(&mut sc, &[b"RESTORE", key.as_bytes(), b"0", &payload]).unwrap();
    raw_ok(&mut sc, &["BF.ADD", "own", "x"]);
    // The destination's ACL forbids RESTORE: that object fails, the other filter is copied.
    let mut dc = dst.conn();
    raw_ok(&mut dc, &["ACL", "SETUSER", "default", "-restore"]);
    let out = migrate(&src, &dst, &[]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("1 of 2 filters copied"), "{err}");
    assert!(
        err.contains("vb:scaling: FAILED") && err.contains("RESTORE"),
        "{err}"
    );
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut dc).unwrap();
    assert_eq!(keys, ["own"], "no temporary key left");
}
