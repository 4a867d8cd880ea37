//! `bfctl load --timestamped`: lines `unix_ms<TAB>item` added to a window filter at their own
//! times (BF.ADDAT), plain and partitioned. The window is an hour and the times are hours apart,
//! so nothing waits: reads answer as of the server's clock, so an item timed five windows ago is
//! forgotten and one timed half a window ago is held. Malformed lines and lines that go back a
//! generation are refused with their line number. On a cluster too, partitions spread over the
//! masters.

use std::process::Output;

use crate::common::{bfctl_at, ok};
use rustbloom_testkit::cluster::Cluster;
use rustbloom_testkit::*;

const WINDOW_MS: u64 = 3_600_000;

/// Where bfctl is pointed: a server, or a cluster through one of its nodes.
struct Target {
    url: String,
    port: u16,
}

impl Target {
    fn server(server: &Server) -> Target {
        Target {
            url: format!("redis://127.0.0.1:{}", server.port()),
            port: server.port(),
        }
    }
}

fn failed(out: &Output) -> String {
    assert!(
        !out.status.success(),
        "bfctl succeeded: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The server's clock in Unix ms.
fn server_now_ms(server: &Target) -> u64 {
    let client = redis::Client::open(format!("redis://127.0.0.1:{}/", server.port)).expect("url");
    let mut conn = client.get_connection().expect("connect");
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(&mut conn).expect("TIME");
    secs * 1000 + micros / 1000
}

/// How many of `items` the filter answers 1 for.
fn present(server: &Target, name: &str, items: &[String]) -> usize {
    let input = items.join("\n") + "\n";
    let out = ok(&bfctl_at(&server.url, &["exists", name], input.as_bytes()));
    out.lines().filter(|l| *l == "1").count()
}

/// `n` items timed one second apart from `from_ms` on: the items and their lines.
fn timed(prefix: &str, n: usize, from_ms: u64) -> (Vec<String>, String) {
    let items: Vec<String> = (0..n).map(|i| format!("{prefix}-{i}")).collect();
    let lines = items
        .iter()
        .enumerate()
        .map(|(i, item)| format!("{}\t{item}\n", from_ms + i as u64 * 1000))
        .collect();
    (items, lines)
}

fn reserve_window(server: &Target, name: &str, extra: &[&str]) {
    let window = WINDOW_MS.to_string();
    let mut args = vec!["reserve", name, "1e-9", "10000", "--window", &window];
    args.extend_from_slice(extra);
    ok(&bfctl_at(&server.url, &args, b""));
}

/// Old items (five windows ago, spread over generations) and recent ones (half a window ago),
/// in one input and so in the same round trips: each run is sent at its own generation's time.
fn held_and_forgotten(server: &Target, name: &str) {
    let now = server_now_ms(server);
    let (old, old_lines) = timed("old", 1500, now - 5 * WINDOW_MS);
    let (recent, recent_lines) = timed("recent", 1500, now - WINDOW_MS / 2);
    let input = old_lines + &recent_lines;
    let out = ok(&bfctl_at(
        &server.url,
        &["load", name, "--timestamped"],
        input.as_bytes(),
    ));
    assert!(out.contains("3000 items, 3000 new"), "{out}");
    assert_eq!(present(server, name, &recent), recent.len(), "recent items");
    assert_eq!(
        present(server, name, &old),
        0,
        "items timed five windows ago"
    );
}

#[test]
fn timestamped_items_are_held_inside_their_window_and_forgotten_after() {
    let server = Server::start();
    let server = Target::server(&server);
    reserve_window(&server, "seen", &[]);
    held_and_forgotten(&server, "seen");
    reserve_window(&server, "seen-parts", &["--partitions", "4"]);
    held_and_forgotten(&server, "seen-parts");
}

#[test]
fn timestamped_load_on_a_cluster() {
    let cluster = Cluster::start(3, 0);
    let node = cluster.addr(1);
    let port = node
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("port");
    let target = Target {
        url: cluster.url(1),
        port,
    };
    reserve_window(&target, "seen", &["--partitions", "6"]);
    held_and_forgotten(&target, "seen");
}

#[test]
fn timestamped_load_refuses_bad_lines_by_number() {
    let server = Server::start();
    let server = Target::server(&server);
    reserve_window(&server, "seen", &[]);
    let now = server_now_ms(&server);
    let good = format!("{now}\tfirst\n{}\tsecond\n", now - 1);
    for (bad, expected) in [
        ("no-tab-here\n".to_string(), "line 3: no tab".to_string()),
        (
            "12x\titem\n".to_string(),
            "line 3: bad timestamp \"12x\"".to_string(),
        ),
        ("\titem\n".to_string(), "line 3: bad timestamp".to_string()),
        (
            format!("{}\titem\n", now - WINDOW_MS),
            "line 3: timestamp".to_string(),
        ),
        // Past the server's clock by more than a window: the server refuses the run, sent at
        // its latest time, whose line is named.
        (
            format!(
                "{}\tahead\n{}\tfurther\n",
                now + 3 * WINDOW_MS,
                now + 3 * WINDOW_MS + 5
            ),
            format!(
                "line 4: timestamp {} refused by the server: timestamp more than one window \
                 ahead",
                now + 3 * WINDOW_MS + 5
            ),
        ),
    ] {
        let err = failed(&bfctl_at(
            &server.url,
            &["load", "seen", "--timestamped"],
            (good.clone() + &bad).as_bytes(),
        ));
        assert!(err.contains(&expected), "{bad:?}: {err}");
        // The lines before the bad one were added (a decrease within a generation is fine).
        assert_eq!(
            present(&server, "seen", &["first".into(), "second".into()]),
            2
        );
    }
    let err = failed(&bfctl_at(
        &server.url,
        &["load", "seen", "--timestamped"],
        format!("{now}\ta\n{}\tb\n", now - WINDOW_MS).as_bytes(),
    ));
    assert!(err.contains("earlier than line 1's"), "{err}");
    assert_eq!(present(&server, "seen", &["b".into()]), 0);

    ok(&bfctl_at(
        &server.url,
        &["reserve", "plain", "0.01", "100"],
        b"",
    ));
    let err = failed(&bfctl_at(
        &server.url,
        &["load", "plain", "--timestamped"],
        format!("{now}\ta\n").as_bytes(),
    ));
    assert!(err.contains("plain is not a window filter"), "{err}");
    let err = failed(&bfctl_at(
        &server.url,
        &["load", "missing", "--timestamped"],
        format!("{now}\ta\n").as_bytes(),
    ));
    assert!(err.contains("missing does not exist"), "{err}");
}
