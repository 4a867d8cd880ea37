//! `bfctl build`: a filter built on the client from a file of items is, once restored, byte for
//! byte the filter the server builds from the same items with the same parameters and seed
//! (DEBUG DIGEST-VALUE, BF.INFO and the whole BF.SCANDUMP stream), plain and partitioned.

use std::path::Path;

use redis::{Connection, Value};
use rustbloom_testkit::*;

use crate::common::{bfctl_at, ok};

fn url(s: &Server) -> String {
    format!("redis+unix://{}", s.socket().display())
}

/// A server whose filters get seed 0 unless told otherwise (`bf.seed-mode fixed`).
fn fixed_seed_server() -> Server {
    let s = Server::start();
    raw_ok(&mut s.conn(), &["CONFIG", "SET", "bf.seed-mode", "fixed"]);
    s
}

/// Items with repeats and an empty line, as a file of lines.
fn items_file(dir: &Path, n: usize) -> String {
    let mut text = String::new();
    for i in 0..n {
        text.push_str(&format!("item-{}\n", i % (n - n / 10)));
    }
    text.push('\n');
    let path = dir.join("items.txt");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// The full SCANDUMP stream of a key.
fn stream(c: &mut Connection, key: &str) -> Vec<(i64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut it = 0i64;
    loop {
        let a = as_array(raw_ok(c, &["BF.SCANDUMP", key, &it.to_string()]));
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

#[track_caller]
fn assert_same(c: &mut Connection, server_built: &str, offline: &str) {
    assert_eq!(
        digest(c, server_built),
        digest(c, offline),
        "DEBUG DIGEST-VALUE of {server_built} and {offline}"
    );
    assert_eq!(
        raw_ok(c, &["BF.INFO", server_built]),
        raw_ok(c, &["BF.INFO", offline])
    );
    assert!(
        stream(c, server_built) == stream(c, offline),
        "SCANDUMP of {server_built} and {offline} differ"
    );
}

#[test]
fn a_filter_built_offline_is_the_one_the_server_builds() {
    let s = fixed_seed_server();
    let u = url(&s);
    let dir = tempfile::tempdir().unwrap();
    let items = items_file(dir.path(), 30_000);
    let mut c = s.conn();
    for (name, shape) in [
        ("layers", &["--capacity", "1000", "--error", "0.001"][..]),
        (
            "x4",
            &["--capacity", "500", "--error", "0.01", "--expansion", "4"][..],
        ),
        ("x1", &["--capacity", "3000", "--expansion", "1"][..]),
        (
            "flat",
            &["--capacity", "40000", "--error", "0.0001", "--nonscaling"][..],
        ),
    ] {
        let mut load = vec!["load", name, &items];
        load.extend_from_slice(shape);
        ok(&bfctl_at(&u, &load, b""));
        let out = dir.path().join(format!("{name}.bfd")).display().to_string();
        let mut build = vec!["build", &items, &out, "--seed", "0"];
        build.extend_from_slice(shape);
        let built = bfctl_at(&u, &build, b"");
        ok(&built);
        let said = String::from_utf8_lossy(&built.stderr);
        assert!(
            said.contains("30001 items") && said.contains("seed 0"),
            "{said}"
        );
        let copy = format!("{name}-offline");
        ok(&bfctl_at(&u, &["restore", &copy, &out], b""));
        assert_same(&mut c, name, &copy);
    }
    assert!(info(&mut c, "layers").filters >= 5);

    // From stdin, with another seed: the server's filter made with SEED s.
    raw_ok(
        &mut c,
        &["BF.RESERVE", "seeded", "0.01", "100", "SEED", "12345"],
    );
    let text = std::fs::read(&items).unwrap();
    ok(&bfctl_at(&u, &["load", "seeded", "-"], &text));
    let out = dir.path().join("seeded.bfd").display().to_string();
    let args = ["build", "-", &out, "--capacity", "100", "--seed", "12345"];
    ok(&bfctl_at(&u, &args, &text));
    ok(&bfctl_at(&u, &["restore", "seeded-offline", &out], b""));
    assert_same(&mut c, "seeded", "seeded-offline");
}

#[test]
fn partitions_are_built_and_routed_as_the_module_does() {
    let s = fixed_seed_server();
    let u = url(&s);
    let dir = tempfile::tempdir().unwrap();
    let items = items_file(dir.path(), 40_000);
    let mut c = s.conn();
    let shape = [
        "--capacity",
        "20000",
        "--error",
        "0.001",
        "--partitions",
        "5",
    ];
    let reserve = ["reserve", "parts", "0.001", "20000", "--partitions", "5"];
    ok(&bfctl_at(&u, &reserve, b""));
    ok(&bfctl_at(&u, &["load", "parts", &items], b""));
    let routing = info_field(&mut c, "parts", "Routing seed");
    // bf.seed-mode fixed: seed 0, or its complement where 0 is the routing seed.
    let seed = if routing == "0" { u64::MAX } else { 0 };
    let out = dir.path().join("parts.bfd").display().to_string();
    let mut build = vec!["build", &items, &out, "--routing-seed", &routing];
    let seed_text = seed.to_string();
    build.extend_from_slice(&["--seed", &seed_text]);
    build.extend_from_slice(&shape);
    ok(&bfctl_at(&u, &build, b""));
    ok(&bfctl_at(&u, &["restore", "copy", &out], b""));
    assert_eq!(
        info_field(&mut c, "copy", "Routing seed"),
        routing,
        "the descriptor's routing seed"
    );
    for i in 0..5 {
        let (a, b) = (partition_key("parts", i, 5), partition_key("copy", i, 5));
        assert_same(&mut c, &a, &b);
    }
}

#[test]
fn bad_parameters_and_full_filters_are_refused_without_output() {
    let dir = tempfile::tempdir().unwrap();
    let items = items_file(dir.path(), 1000);
    let out = dir.path().join("x.bfd");
    let out_text = out.display().to_string();
    for (args, says) in [
        (
            &["--capacity", "100", "--nonscaling"][..],
            "non-scaling filter is full",
        ),
        (&["--capacity", "100", "--error", "1"][..], "--error"),
        (&["--capacity", "0"][..], "--capacity"),
        (
            &[
                "--capacity",
                "100",
                "--partitions",
                "2",
                "--routing-seed",
                "7",
                "--seed",
                "7",
            ][..],
            "must differ from the routing seed",
        ),
    ] {
        let mut build = vec!["build", &items, &out_text];
        build.extend_from_slice(args);
        let run = bfctl_at("redis://127.0.0.1:1", &build, b"");
        let err = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!out.exists(), "{args:?}: a file was left");
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "no temporary file left"
    );
}

fn info_field(c: &mut Connection, key: &str, field: &str) -> String {
    let a = as_array(raw_ok(c, &["BF.INFO", key]));
    let at = a
        .iter()
        .position(|v| value_to_string(v) == field)
        .unwrap_or_else(|| panic!("BF.INFO {key} has no {field}: {a:?}"));
    value_to_string(&a[at + 1])
}

fn partition_key(name: &str, index: u32, count: u32) -> String {
    String::from_utf8(rustbloom_core::partition::partition_key(
        name.as_bytes(),
        index,
        count,
    ))
    .unwrap()
}
