//! `bfctl load --offline`: the items built on the client and merged into the live filter with
//! BF.MERGE through a temporary key. Nothing the filter held is lost, every item is present when
//! it returns, no temporary key stays, and the result answers every probe as the filter the
//! server fills itself with the same items (a union sets the same bits).

use std::path::Path;

use redis::Connection;
use rustbloom_testkit::*;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use crate::common::{bfctl_at, ok, BFCTL};

/// bfctl with `stdin` as its input and `tmpdir` as its TMPDIR.
fn bfctl_env(url: &str, args: &[&str], stdin: &[u8], tmpdir: &Path) -> Output {
    let mut child = Command::new(BFCTL)
        .arg("--url")
        .arg(url)
        .args(args)
        .env("TMPDIR", tmpdir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run bfctl");
    let mut input = child.stdin.take().expect("stdin");
    input.write_all(stdin).expect("write stdin");
    drop(input);
    child.wait_with_output().expect("bfctl output")
}

fn url(s: &Server) -> String {
    format!("redis+unix://{}", s.socket().display())
}

fn lines(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

fn write(dir: &Path, name: &str, items: &[String]) -> String {
    let path = dir.join(name);
    let mut text = items.join("\n");
    text.push('\n');
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn mexists(c: &mut Connection, key: &str, items: &[String]) -> Vec<i64> {
    items
        .chunks(1000)
        .flat_map(|batch| {
            let mut args = vec!["BF.MEXISTS", key];
            args.extend(batch.iter().map(String::as_str));
            as_ints(raw_ok(c, &args))
        })
        .collect()
}

fn keys(c: &mut Connection) -> Vec<String> {
    let mut k: Vec<String> = redis::cmd("KEYS").arg("*").query(c).unwrap();
    k.sort();
    k
}

#[test]
fn merges_into_a_live_filter_as_if_the_server_had_added_the_items() {
    let s = Server::start();
    raw_ok(&mut s.conn(), &["CONFIG", "SET", "bf.seed-mode", "fixed"]);
    let u = url(&s);
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = (lines("old-", 5000), lines("new-", 12000));
    let (old_file, new_file) = (
        write(dir.path(), "old", &old),
        write(dir.path(), "new", &new),
    );
    let mut c = s.conn();
    for key in ["live", "reference"] {
        let args = [
            "load",
            key,
            &old_file,
            "--capacity",
            "30000",
            "--error",
            "0.001",
        ];
        ok(&bfctl_at(&u, &args, b""));
    }
    ok(&bfctl_at(&u, &["load", "reference", &new_file], b""));
    let said = ok(&bfctl_at(
        &u,
        &["load", "live", &new_file, "--offline"],
        b"",
    ));
    assert!(said.contains("12000 items merged offline"), "{said}");
    assert_eq!(keys(&mut c), ["live", "reference"], "no temporary key left");
    // Nothing lost, everything present, and the same bits as the server's own filling.
    assert!(mexists(&mut c, "live", &old).iter().all(|&x| x == 1));
    assert!(mexists(&mut c, "live", &new).iter().all(|&x| x == 1));
    let probes = lines("probe-", 30000);
    assert_eq!(
        mexists(&mut c, "live", &probes),
        mexists(&mut c, "reference", &probes)
    );
    // The count after a union is estimated from the bits: close to the 17000 items.
    let card = as_int(&raw_ok(&mut c, &["BF.CARD", "live"]));
    assert!((16490..=17510).contains(&card), "BF.CARD {card}");

    // A missing filter is reserved from the options first, then merged into.
    let said = ok(&bfctl_at(
        &u,
        &[
            "load",
            "fresh",
            &new_file,
            "--offline",
            "--capacity",
            "12000",
        ],
        b"",
    ));
    assert!(said.contains("BF.CARD 0 -> "), "{said}");
    assert!(mexists(&mut c, "fresh", &new).iter().all(|&x| x == 1));
}

#[test]
fn a_partitioned_filter_is_merged_one_partition_at_a_time() {
    let s = Server::start();
    let u = url(&s);
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = (lines("old-", 4000), lines("new-", 9000));
    let (old_file, new_file) = (
        write(dir.path(), "old", &old),
        write(dir.path(), "new", &new),
    );
    let mut c = s.conn();
    ok(&bfctl_at(
        &u,
        &["reserve", "parts", "0.01", "20000", "--partitions", "3"],
        b"",
    ));
    ok(&bfctl_at(&u, &["load", "parts", &old_file], b""));
    let before = keys(&mut c);
    let said = ok(&bfctl_at(
        &u,
        &["load", "parts", &new_file, "--offline", "--jobs", "2"],
        b"",
    ));
    assert!(said.contains("into 3 partitions one at a time"), "{said}");
    assert_eq!(keys(&mut c), before, "no temporary key left");
    let exists = |items: &[String]| {
        let out = bfctl_at(
            &u,
            &["exists", "parts"],
            (items.join("\n") + "\n").as_bytes(),
        );
        ok(&out).lines().all(|l| l == "1")
    };
    assert!(exists(&old) && exists(&new));

    // From stdin too: split by partition into temporary files first, removed afterwards.
    let more = lines("more-", 3000);
    let tmp = tempfile::tempdir().unwrap();
    let out = bfctl_env(
        &u,
        &["load", "parts", "-", "--offline"],
        (more.join("\n") + "\n").as_bytes(),
        tmp.path(),
    );
    ok(&out);
    assert!(exists(&old) && exists(&new) && exists(&more));
    assert_eq!(keys(&mut c), before, "no temporary key left");
    assert_eq!(
        std::fs::read_dir(tmp.path()).unwrap().count(),
        0,
        "no temporary file left"
    );
}

#[test]
fn filters_that_do_not_merge_are_refused_and_left_alone() {
    let s = Server::start();
    let u = url(&s);
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "items", &lines("x", 100));
    let mut c = s.conn();
    raw_ok(
        &mut c,
        &["BF.RESERVE", "recent", "0.01", "1000", "WINDOW", "60000"],
    );
    raw_ok(&mut c, &["BF.ADD", "recent", "kept"]);
    let out = bfctl_at(&u, &["load", "recent", &file, "--offline"], b"");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("only rustbloom's own scalable filters merge"),
        "{err}"
    );
    assert_eq!(keys(&mut c), ["recent"]);
    assert_eq!(as_int(&raw_ok(&mut c, &["BF.EXISTS", "recent", "kept"])), 1);

    // A server without BF.MERGE is refused before anything is built or reserved.
    let plain = Server::start_without_module(&[]);
    let args = ["load", "f", &file, "--offline", "--capacity", "100"];
    let out = bfctl_at(&url(&plain), &args, b"");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("--offline needs BF.MERGE"), "{err}");
    assert!(keys(&mut plain.conn()).is_empty());

    let out = bfctl_at(&u, &["load", "missing", &file, "--offline"], b"");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("give --capacity"), "{err}");
    assert_eq!(keys(&mut c), ["recent"]);
}

/// On a 3+3 cluster: each partition's temporary key lands on its partition's master (same
/// slot), the merge succeeds there, and a filter built offline restores across the masters.
#[test]
fn offline_loads_and_builds_work_on_a_cluster() {
    let cl = rustbloom_testkit::cluster::Cluster::start(3, 1);
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = (lines("old-", 3000), lines("new-", 6000));
    let (old_file, new_file) = (
        write(dir.path(), "old", &old),
        write(dir.path(), "new", &new),
    );
    let (u0, u1) = (cl.url(0), cl.url(1));
    ok(&bfctl_at(
        &u0,
        &["reserve", "clicks", "0.001", "20000", "--partitions", "6"],
        b"",
    ));
    ok(&bfctl_at(&u0, &["load", "clicks", &old_file], b""));
    let said = ok(&bfctl_at(
        &u1,
        &["load", "clicks", &new_file, "--offline"],
        b"",
    ));
    assert!(said.contains("into 6 partitions one at a time"), "{said}");
    let answers = |name: &str, items: &[String]| {
        let out = bfctl_at(&u0, &["exists", name], (items.join("\n") + "\n").as_bytes());
        ok(&out).lines().filter(|l| *l == "1").count()
    };
    assert_eq!(answers("clicks", &old), old.len());
    assert_eq!(answers("clicks", &new), new.len());
    assert!(answers("clicks", &lines("never-", 5000)) < 50);

    let out = dir.path().join("built.bfd").display().to_string();
    let args = [
        "build",
        &new_file,
        &out,
        "--capacity",
        "20000",
        "--partitions",
        "6",
    ];
    ok(&bfctl_at(&u0, &args, b""));
    ok(&bfctl_at(&u1, &["restore", "built", &out], b""));
    assert_eq!(answers("built", &new), new.len());
    // No temporary key on any master.
    for (i, node) in cl.nodes.iter().enumerate() {
        let mut c = node.conn();
        let keys: Vec<String> = redis::cmd("KEYS").arg("*tmp*").query(&mut c).unwrap();
        assert!(keys.is_empty(), "node {i}: {keys:?}");
    }
}
