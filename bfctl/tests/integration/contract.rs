//! bfctl keeping the clients' contract on a cluster (docs/partitions.md, "One contract"): a
//! reserve over a name that is taken is refused in the other clients' words (`item exists`,
//! naming the filter) with nothing left behind, and a load that waits for a stopped node says
//! so on stderr when stderr is not a terminal, and nothing while all is well.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use rustbloom_client::routing::{key_slot, partition_keys};
use rustbloom_testkit::cluster::Cluster;
use rustbloom_testkit::{all_keys, dataset_digest};

use crate::common::{bfctl_at, ok, BFCTL};

fn lines(prefix: &str, n: usize) -> String {
    (0..n).map(|i| format!("{prefix}-{i}\n")).collect()
}

/// Every node's keys and dataset digest: any key created, deleted or changed shows.
fn snapshot(cluster: &Cluster) -> Vec<(Vec<Vec<u8>>, String)> {
    cluster
        .nodes
        .iter()
        .map(|node| {
            let mut c = node.conn();
            (all_keys(&mut c), dataset_digest(&mut c))
        })
        .collect()
}

#[test]
fn a_reserve_over_a_taken_name_is_refused_naming_it_and_leaves_nothing_behind() {
    let cluster = Cluster::start(3, 0);
    let url = cluster.url(0);
    ok(&bfctl_at(&url, &["reserve", "taken", "0.01", "10000"], b""));
    ok(&bfctl_at(
        &url,
        &["reserve", "split", "0.01", "10000", "--partitions", "8"],
        b"",
    ));
    for name in ["taken", "split"] {
        ok(&bfctl_at(
            &url,
            &["load", name],
            lines("item", 500).as_bytes(),
        ));
    }
    let before = snapshot(&cluster);
    for (name, partitions) in [
        ("taken", Some("8")),
        ("taken", None),
        ("split", Some("8")),
        ("split", Some("5")),
        ("split", Some("16")),
        ("split", None),
    ] {
        let mut args = vec!["reserve", name, "0.01", "10000"];
        args.extend(partitions.iter().flat_map(|p| ["--partitions", p]));
        let out = bfctl_at(&url, &args, b"");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert!(
            err.starts_with(&format!("bfctl: {name}: item exists (")) && err.lines().count() == 1,
            "{args:?}: {err}"
        );
        assert_eq!(snapshot(&cluster), before, "{args:?} changed the cluster");
    }
}

#[test]
fn a_load_waiting_for_a_stopped_node_says_so_on_stderr() {
    let mut cluster = Cluster::start(3, 0);
    let reserve = ["reserve", "waits", "0.01", "100000", "--partitions", "6"];
    ok(&bfctl_at(&cluster.url(0), &reserve, b""));
    // The node of a partition is stopped, not the descriptor's (which bfctl reads first);
    // bfctl is given another one.
    let owners = cluster.slot_owners(0);
    let owner = |key: &[u8]| owners[usize::from(key_slot(key))];
    let down = partition_keys(b"waits", 6)
        .iter()
        .map(|k| owner(k))
        .find(|&o| o != owner(b"waits"))
        .expect("partitions on two masters");
    let url = cluster.url(owner(b"waits"));

    // All is well: nothing on stderr.
    let healthy = bfctl_at(&url, &["load", "waits"], lines("first", 3000).as_bytes());
    ok(&healthy);
    assert!(healthy.stderr.is_empty(), "{healthy:?}");

    // Saved first, so that it comes back with its partitions.
    let _: () = redis::cmd("SAVE")
        .query(&mut cluster.nodes[down].conn())
        .expect("SAVE");
    cluster.nodes[down].stop();
    let mut load = Command::new(BFCTL)
        .args(["--url", &url, "load", "waits"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run bfctl");
    let mut input = load.stdin.take().expect("stdin");
    input
        .write_all(lines("second", 3000).as_bytes())
        .expect("write the items");
    drop(input);
    // Read as bfctl writes: the first line comes while the node is still down.
    let mut stderr = BufReader::new(load.stderr.take().expect("stderr")).lines();
    let first = stderr
        .next()
        .expect("a line while the node is down")
        .expect("stderr");
    let port = format!(":{}", cluster.nodes[down].port());
    assert!(
        first.starts_with("bfctl: waiting for partition")
            && first.contains(" of waits")
            && (first.contains(&port) || first.contains("CLUSTERDOWN"))
            && first.contains("; retrying for up to "),
        "{first}"
    );
    cluster.nodes[down].start_again();
    let rest: Vec<String> = stderr.map(|l| l.expect("stderr")).collect();
    let out = load.wait_with_output().expect("bfctl output");
    assert!(out.status.success(), "{first}\n{rest:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("3000 items"), "{stdout}");
    // Later lines only say that it is still waiting.
    assert!(
        rest.iter()
            .all(|l| l.starts_with("bfctl: still waiting for partition")),
        "{rest:?}"
    );
    let present = ok(&bfctl_at(
        &url,
        &["exists", "waits"],
        format!("{}{}", lines("first", 3000), lines("second", 3000)).as_bytes(),
    ));
    assert_eq!(present.lines().filter(|l| *l == "1").count(), 6000);
}

#[test]
fn counts_are_taken_in_scientific_notation_when_whole() {
    let no_server = "redis://127.0.0.1:1";
    let plan = |items: &str| {
        ok(&bfctl_at(
            no_server,
            &["plan", "--items", items, "--error", "1e-6"],
            b"",
        ))
    };
    let plain = plan("2500000");
    assert_eq!(plan("2.5e6"), plain);
    assert_eq!(plan("25E5"), plain);
    for (args, says) in [
        (
            &["reserve", "f", "0.01", "2.5e-1"][..],
            "not a whole number",
        ),
        (&["reserve", "f", "0.01", "1e20"][..], "out of range"),
        (
            &["plan", "--items", "1.5", "--error", "0.01"][..],
            "not a whole number",
        ),
        (&["load", "f", "--capacity", "ten"][..], "not a count"),
        (
            &["load", "f", "--batch", "0"][..],
            "out of range: must be at least 1",
        ),
        (
            &["reserve", "f", "0.01", "1e6", "--partitions", "1e4"][..],
            "must be from 1 to 4096",
        ),
    ] {
        let out = bfctl_at(no_server, args, b"");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
