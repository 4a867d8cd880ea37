//! Starts a cluster of the test harness ([`rustbloom_testkit::cluster::Cluster`]) for tests in
//! other languages: prints `redis://127.0.0.1:PORT` of every node, one per line (masters first),
//! then `ready`, and stops every node when its stdin closes.
//!
//! `rustbloom-cluster [MASTERS [REPLICAS]]` (default 3 masters, 1 replica each); the module and
//! the server come from `$RUSTBLOOM_MODULE` and `$RUSTBLOOM_SERVER` as for the Rust tests.

use std::io::{Read, Write};

use rustbloom_testkit::cluster::Cluster;

fn arg(n: usize, default: usize) -> usize {
    match std::env::args().nth(n) {
        None => default,
        Some(a) => match a.parse() {
            Ok(v) => v,
            Err(_) => {
                eprintln!("usage: rustbloom-cluster [MASTERS [REPLICAS]]");
                std::process::exit(2);
            }
        },
    }
}

fn main() {
    let masters = arg(1, 3);
    let replicas = arg(2, 1);
    let cluster = Cluster::start(masters, replicas);
    let owners = cluster.slot_owners(0);
    let masters = Cluster::masters(&owners);
    let replicas = (0..cluster.nodes.len()).filter(|i| !masters.contains(i));
    let order: Vec<usize> = masters.iter().copied().chain(replicas).collect();
    let mut out = std::io::stdout().lock();
    for i in order {
        let _ = writeln!(out, "{}", cluster.url(i));
    }
    let _ = writeln!(out, "ready");
    let _ = out.flush();
    drop(out);
    // Everything until EOF is ignored: the caller closes stdin (or exits) to stop the cluster.
    let _ = std::io::stdin().lock().read_to_end(&mut Vec::new());
}
