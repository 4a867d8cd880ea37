//! A load given the URL of a master that dies mid-run (kill -9; its replica takes over) goes on
//! through the other nodes: bfctl learned every node of the cluster when it started, so its
//! reconnect finds the new slot map without the node it was pointed at.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rustbloom_client::{Client, Filter};
use rustbloom_testkit::cluster::Cluster;

const BFCTL: &str = env!("CARGO_BIN_EXE_bfctl");

fn items(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

fn lines(items: &[String]) -> String {
    items.join("\n") + "\n"
}

/// How many of `items` the filter `name` answers 1 for, asked through `url`.
fn count_present(url: &str, name: &str, items: &[String]) -> usize {
    let mut conn = Client::open(url).unwrap().connect().unwrap();
    let filter = Filter::discover(&mut conn, name.as_bytes())
        .unwrap()
        .expect("filter exists");
    let refs: Vec<&[u8]> = items.iter().map(|s| s.as_bytes()).collect();
    let answers = filter.exists(&mut conn, &refs, 1000).unwrap();
    answers.into_iter().filter(|&a| a).count()
}

#[test]
fn load_goes_on_when_the_node_of_its_url_dies() {
    let mut cl = Cluster::start(3, 1);
    let owners = cl.slot_owners(0);
    let masters = Cluster::masters(&owners);
    let (victim, other) = (masters[0], masters[1]);
    let (url, other_url) = (cl.url(victim), cl.url(other));
    let reserve = Command::new(BFCTL)
        .args([
            "--url",
            &url,
            "reserve",
            "events",
            "0.001",
            "20000",
            "--partitions",
            "6",
        ])
        .output()
        .expect("run bfctl");
    assert!(reserve.status.success(), "{reserve:?}");
    let all = items("event", 20_000);
    let (first, second) = all.split_at(10_000);

    let mut child = Command::new(BFCTL)
        .args([
            "--url",
            &url,
            "load",
            "events",
            "--batch",
            "100",
            "--pipeline",
            "1",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run bfctl");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(lines(first).as_bytes()).unwrap();
    stdin.flush().unwrap();
    // The first half is in the filter before its URL's node dies.
    let deadline = Instant::now() + Duration::from_secs(60);
    while count_present(&other_url, "events", first) < first.len() {
        assert!(Instant::now() < deadline, "the first half was not loaded");
        std::thread::sleep(Duration::from_millis(100));
    }
    cl.kill_master(victim);
    stdin.write_all(lines(second).as_bytes()).unwrap();
    drop(stdin);
    let out = child.wait_with_output().expect("bfctl output");
    assert!(
        out.status.success(),
        "load failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(count_present(&other_url, "events", &all), all.len());
}
