//! bfctl and the rustbloom-client crate against a real cluster on loopback: 3 masters and 3
//! replicas ([`Cluster`]), given any node's URL. Plain filters, partitioned filters
//! (docs/partitions.md) spread over the masters, lookups without false negatives and at the
//! reserved error rate, refusals of misrouted commands, a load that goes on through a reshard
//! and a master's failover, and partitions that keep their identity through DUMP/RESTORE,
//! SCANDUMP/LOADCHUNK and a restart of the whole cluster.

use redis::Value;
use rustbloom_client::routing::{key_slot, partition_of};
use rustbloom_client::{Client, Filter};

use crate::common::{bfctl_at, ok};
use rustbloom_testkit::cluster::Cluster;
use rustbloom_testkit::*;

fn items(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

fn lines(items: &[String]) -> String {
    let mut s = items.join("\n");
    s.push('\n');
    s
}

/// `bfctl exists` over `items`: how many answered 1, checking one answer per line.
fn count_present(url: &str, name: &str, items: &[String]) -> usize {
    let out = ok(&bfctl_at(url, &["exists", name], lines(items).as_bytes()));
    let answers: Vec<&str> = out.lines().collect();
    assert_eq!(answers.len(), items.len(), "one answer per line");
    assert!(answers.iter().all(|a| *a == "0" || *a == "1"));
    answers.iter().filter(|a| **a == "1").count()
}

#[test]
fn plain_filters_work_through_any_node() {
    let cl = Cluster::start(3, 1);
    let want = items("plain", 3000);
    // Loaded through one node, asked through another: the key lives on its slot's master.
    ok(&bfctl_at(
        &cl.url(0),
        &["reserve", "plainf", "0.01", "5000"],
        b"",
    ));
    let out = ok(&bfctl_at(
        &cl.url(1),
        &["load", "plainf"],
        lines(&want).as_bytes(),
    ));
    assert!(out.contains("3000 items"), "{out}");
    assert_eq!(count_present(&cl.url(2), "plainf", &want), 3000);
    let strangers = items("stranger", 3000);
    assert!(count_present(&cl.url(3), "plainf", &strangers) < 100);
    // The library answers in input order.
    let mut conn = Client::open(&cl.url(4)).unwrap().connect().unwrap();
    assert!(conn.is_cluster());
    let f = Filter::discover(&mut conn, b"plainf").unwrap().unwrap();
    assert!(f.partitioning().is_none());
    let asked: Vec<&[u8]> = vec![want[0].as_bytes(), b"never-added-x", want[1].as_bytes()];
    let got = f.exists(&mut conn, &asked, 100).unwrap();
    assert_eq!((got[0], got[2]), (true, true));
    let out = ok(&bfctl_at(&cl.url(5), &["drop", "plainf"], b""));
    assert!(out.contains("deleted 1 keys"), "{out}");
    assert!(Filter::discover(&mut conn, b"plainf").unwrap().is_none());
}

#[test]
fn partitioned_filter_spreads_over_masters_and_keeps_its_identity() {
    let mut cl = Cluster::start(3, 1);
    let url = cl.url(4);
    let p = 12u32;
    let n = 60_000usize;
    let eps = 0.01;
    ok(&bfctl_at(
        &url,
        &["reserve", "clicks", "0.01", "60000", "--partitions", "12"],
        b"",
    ));
    let mut conn = Client::open(&url).unwrap().connect().unwrap();
    let f = Filter::discover(&mut conn, b"clicks").unwrap().unwrap();
    let routing = f.partitioning().unwrap().clone();
    assert_eq!(routing.partitions, p);

    // Partitions on evenly spaced slots: each of the 3 masters (equal contiguous ranges) holds
    // P/3 of them, give or take one.
    let owners = cl.slot_owners(0);
    for m in Cluster::masters(&owners) {
        let here = routing
            .keys
            .iter()
            .filter(|k| owners[usize::from(key_slot(k))] == m)
            .count();
        assert!(
            (3..=5).contains(&here),
            "master {m} holds {here} partitions"
        );
    }

    let members = items("member", n);
    let out = ok(&bfctl_at(
        &url,
        &["load", "clicks", "--batch", "500"],
        lines(&members).as_bytes(),
    ));
    assert!(out.contains("60000 items"), "{out}");
    assert_eq!(
        count_present(&url, "clicks", &members),
        n,
        "a member is missing"
    );
    let strangers = items("stranger", 4 * n);
    let fp = count_present(&url, "clicks", &strangers);
    let rate = fp as f64 / strangers.len() as f64;
    assert!(rate < 1.5 * eps, "false-positive rate {rate} for ε = {eps}");

    let info = f.info(&mut conn).unwrap();
    assert!(info.problems.is_empty(), "{:?}", info.problems);
    // Items are counted when they changed bits: a member taken for present while the filter
    // filled (a false positive at add time) is not.
    let counted = info.totals().items as usize;
    assert!(
        counted <= n && counted as f64 >= n as f64 * (1.0 - eps),
        "{counted} items counted of {n}"
    );
    assert_eq!(info.per_master().len(), 3);

    // The module checks the routing: an item sent to another partition is refused, and the
    // logical name refuses plain BF.* commands.
    let item = members[0].as_bytes();
    let right = partition_of(item, routing.routing_seed, p);
    let wrong = (right + 1) % p;
    let owner = owners[usize::from(key_slot(&routing.keys[wrong as usize]))];
    let mut c = cl.nodes[owner].conn();
    let e = redis::cmd("BF.ADD")
        .arg(routing.keys[wrong as usize].as_slice())
        .arg(item)
        .query::<Value>(&mut c)
        .unwrap_err();
    assert!(
        err_text(&e).contains(&format!("item routed to partition {right} of {p}")),
        "{}",
        err_text(&e)
    );
    let name_owner = owners[usize::from(key_slot(b"clicks"))];
    let mut c = cl.nodes[name_owner].conn();
    let e = redis::cmd("BF.EXISTS")
        .arg("clicks")
        .arg(item)
        .query::<Value>(&mut c)
        .unwrap_err();
    assert!(
        err_text(&e).contains("is a partitioned filter"),
        "{}",
        err_text(&e)
    );

    // DUMP/RESTORE and SCANDUMP/LOADCHUNK of a partition keep its identity: the copy still
    // refuses the items of other partitions and answers for its own.
    let key = routing.keys[right as usize].clone();
    let owner = owners[usize::from(key_slot(&key))];
    let mut c = cl.nodes[owner].conn();
    let dumped: Vec<u8> = redis::cmd("DUMP")
        .arg(key.as_slice())
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("DEL").arg(key.as_slice()).query(&mut c).unwrap();
    let _: () = redis::cmd("RESTORE")
        .arg(key.as_slice())
        .arg(0)
        .arg(dumped)
        .query(&mut c)
        .unwrap();
    let chunks = scandump(&mut c, std::str::from_utf8(&key).unwrap());
    let _: () = redis::cmd("DEL").arg(key.as_slice()).query(&mut c).unwrap();
    loadchunks(&mut c, std::str::from_utf8(&key).unwrap(), &chunks);
    let e = redis::cmd("BF.ADD")
        .arg(routing.keys[wrong as usize].as_slice())
        .arg(item)
        .query::<Value>(
            &mut cl.nodes[owners[usize::from(key_slot(&routing.keys[wrong as usize]))]].conn(),
        )
        .unwrap_err();
    assert!(err_text(&e).contains("item routed to partition"));
    assert!(f.info(&mut conn).unwrap().problems.is_empty());

    // A whole-cluster restart (RDB) keeps every partition and its identity.
    cl.restart_all();
    let mut conn = Client::open(&cl.url(1)).unwrap().connect().unwrap();
    let again = Filter::discover(&mut conn, b"clicks").unwrap().unwrap();
    assert_eq!(again.partitioning(), Some(&routing));
    let info = again.info(&mut conn).unwrap();
    assert!(info.problems.is_empty(), "{:?}", info.problems);
    assert_eq!(count_present(&cl.url(1), "clicks", &members), n);

    // A missing partition is an error, never a row of zeros.
    let owner = owners[usize::from(key_slot(&key))];
    let _: () = redis::cmd("DEL")
        .arg(key.as_slice())
        .query(&mut cl.nodes[owner].conn())
        .unwrap();
    let out = bfctl_at(
        &cl.url(1),
        &["exists", "clicks"],
        lines(&members).as_bytes(),
    );
    assert!(!out.status.success());
    // The contract's sentence (docs/partitions.md, "One contract").
    let err = String::from_utf8_lossy(&out.stderr);
    let missing = format!(
        "of \"clicks\" is missing (key \"{}\"): restore it or recreate the filter",
        String::from_utf8_lossy(&key)
    );
    assert!(err.contains(&missing), "{err}");
}

#[test]
fn partitioned_window_filters_load_and_forget() {
    let cl = Cluster::start(3, 1);
    let url = cl.url(0);
    let first = items("first", 3000);
    // The items answer present through their window (3 s): the check counts when it ended within
    // a window of the moment before the load, so the window cannot have passed. On a machine
    // slower than that (six servers and bfctl on shared cores) it says nothing, and the load is
    // tried again on a new filter rather than failed.
    let name = (0..3)
        .find_map(|attempt| {
            let name = format!("recent{attempt}");
            ok(&bfctl_at(
                &url,
                &[
                    "reserve",
                    &name,
                    "0.01",
                    "3000",
                    "--partitions",
                    "6",
                    "--window",
                    "3000",
                ],
                b"",
            ));
            let loading = std::time::Instant::now();
            ok(&bfctl_at(&url, &["load", &name], lines(&first).as_bytes()));
            let present = count_present(&url, &name, &first);
            (loading.elapsed() < std::time::Duration::from_millis(3000)).then(|| {
                assert_eq!(present, 3000);
                name
            })
        })
        .expect("three loads whose check ended after the window (machine too slow?)");
    // Two windows later, with fresh items coming in, the first ones are forgotten.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut left = 3000;
    let mut round = 0;
    while left > 100 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(500));
        ok(&bfctl_at(
            &url,
            &["load", &name],
            lines(&items(&format!("later{round}"), 500)).as_bytes(),
        ));
        round += 1;
        left = count_present(&url, &name, &first);
    }
    assert!(left <= 100, "{left} of 3000 old items still present");
}

#[test]
fn load_goes_on_through_a_reshard_and_a_failover() {
    let mut cl = Cluster::start(3, 1);
    let url = cl.url(0);
    ok(&bfctl_at(
        &url,
        &["reserve", "events", "0.01", "40000", "--partitions", "12"],
        b"",
    ));
    let owners = cl.slot_owners(0);
    let masters = Cluster::masters(&owners);
    let (src, dst, victim) = (masters[0], masters[1], masters[2]);
    let all = items("event", 40_000);
    let (first, second) = all.split_at(20_000);

    // A load while redis-cli moves a master's slots (and the partitions in them) away.
    let loader = {
        let url = url.clone();
        let input = lines(first);
        std::thread::spawn(move || {
            bfctl_at(
                &url,
                &["load", "events", "--batch", "200", "--pipeline", "2"],
                input.as_bytes(),
            )
        })
    };
    cl.reshard(src, dst, 2000);
    ok(&loader.join().expect("loader thread"));
    cl.wait_healthy(&[]);

    // A load with --wait 1 while a master is killed: its replica takes over with every
    // acknowledged batch, and the lost ones are sent again.
    let loader = {
        let url = cl.url(dst);
        let input = lines(second);
        std::thread::spawn(move || {
            bfctl_at(
                &url,
                &[
                    "load",
                    "events",
                    "--batch",
                    "200",
                    "--pipeline",
                    "2",
                    "--wait",
                    "1",
                ],
                input.as_bytes(),
            )
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(300));
    cl.kill_master(victim);
    ok(&loader.join().expect("loader thread"));
    assert_eq!(count_present(&cl.url(dst), "events", &all), all.len());
}

/// `bfctl info NAME` of a partitioned filter: the numbers of its "total" row (partitions,
/// capacity, items).
fn info_totals(url: &str, name: &str) -> (u64, u64, u64) {
    let out = ok(&bfctl_at(url, &["info", name], b""));
    let row = out
        .lines()
        .find(|l| l.starts_with("total "))
        .unwrap_or_else(|| panic!("no total row in {out}"));
    let n: Vec<u64> = row
        .split_whitespace()
        .skip(1)
        .take(3)
        .map(|x| x.parse().unwrap())
        .collect();
    assert!(
        out.contains("all 6 partitions exist and agree with the descriptor"),
        "{out}"
    );
    (n[0], n[1], n[2])
}

#[test]
fn info_dedup_dump_restore_and_migrate_on_clusters() {
    let cl = Cluster::start(3, 0);
    let url = cl.url(1);
    // ε low enough that no new line of this test is a false positive.
    ok(&bfctl_at(
        &url,
        &["reserve", "clicks", "1e-9", "6000", "--partitions", "6"],
        b"",
    ));
    let members = items("member", 3000);
    ok(&bfctl_at(
        &url,
        &["load", "clicks"],
        lines(&members).as_bytes(),
    ));

    // info: one row per partition, per master, totals, and the check.
    let (parts, capacity, held) = info_totals(&cl.url(0), "clicks");
    assert_eq!((parts, capacity, held), (6, 6000, 3000));
    let out = ok(&bfctl_at(&url, &["info", "clicks"], b""));
    assert!(out.contains("error rate:        0.000000001\n"), "{out}");
    let owners = cl.slot_owners(0);
    for m in Cluster::masters(&owners) {
        let addr = cl.addr(m);
        let row = out
            .lines()
            .find(|l| l.starts_with(&addr) && !l.contains('{'))
            .unwrap_or_else(|| panic!("no row for master {addr} in {out}"));
        assert_eq!(row.split_whitespace().nth(1), Some("2"), "{row}");
    }

    // dedup of old and new lines, repeats included: exactly the new ones, in order, and they
    // are added (a second run prints nothing).
    let fresh = items("fresh", 500);
    let mut input = Vec::new();
    for (i, f) in fresh.iter().enumerate() {
        input.push(members[i].clone());
        input.push(f.clone());
        input.push(f.clone());
    }
    let out = ok(&bfctl_at(
        &url,
        &["dedup", "clicks", "--batch", "50", "--pipeline", "3"],
        lines(&input).as_bytes(),
    ));
    assert_eq!(out, lines(&fresh));
    assert_eq!(
        ok(&bfctl_at(
            &url,
            &["dedup", "clicks"],
            lines(&input).as_bytes()
        )),
        ""
    );
    // A plain filter on the cluster too; a missing one needs --capacity.
    let out = bfctl_at(&url, &["dedup", "plainf"], b"a\n");
    assert!(!out.status.success());
    let out = ok(&bfctl_at(
        &url,
        &["dedup", "plainf", "--capacity", "1000", "--error", "1e-9"],
        b"a\nb\na\n",
    ));
    assert_eq!(out, "a\nb\n");

    // dump and restore under another name: every partition and the descriptor.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("clicks.dump");
    let file = file.to_str().unwrap();
    ok(&bfctl_at(&url, &["dump", "clicks", file], b""));
    ok(&bfctl_at(&cl.url(2), &["restore", "copy", file], b""));
    assert_eq!(info_totals(&url, "copy"), (6, 6000, 3500));
    assert_eq!(count_present(&url, "copy", &members), 3000);
    assert_eq!(count_present(&url, "copy", &fresh), 500);
    let out = bfctl_at(&url, &["restore", "copy", file], b"");
    assert!(String::from_utf8_lossy(&out.stderr).contains("already exists"));
    ok(&bfctl_at(&url, &["restore", "copy", file, "--force"], b""));
    assert_eq!(info_totals(&url, "copy"), (6, 6000, 3500));

    // migrate to another cluster: a named partitioned filter brings its partitions, then its
    // descriptor; with no names, every filter of every master.
    let other = Cluster::start(3, 0);
    let out = bfctl_at(
        &url,
        &["migrate", "--from", &url, "--to", &other.url(0), "clicks"],
        b"",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(info_totals(&other.url(1), "clicks"), (6, 6000, 3500));
    assert_eq!(count_present(&other.url(2), "clicks", &members), 3000);
    let out = bfctl_at(
        &url,
        &["migrate", "--from", &url, "--to", &other.url(0)],
        b"",
    );
    // clicks is there already: nothing copied without --replace.
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--replace"));
    let out = bfctl_at(
        &url,
        &[
            "migrate",
            "--from",
            &url,
            "--to",
            &other.url(0),
            "--replace",
        ],
        b"",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(info_totals(&other.url(1), "copy"), (6, 6000, 3500));
    assert_eq!(
        ok(&bfctl_at(&other.url(2), &["dedup", "plainf"], b"a\nb\nc\n")),
        "c\n"
    );

    // A missing partition fails the check.
    let mut conn = Client::open(&other.url(0)).unwrap().connect().unwrap();
    let f = Filter::discover(&mut conn, b"copy").unwrap().unwrap();
    let gone = f.partitioning().unwrap().keys[3].clone();
    conn.query(redis::cmd("DEL").arg(gone.as_slice())).unwrap();
    let out = bfctl_at(&other.url(0), &["info", "copy"], b"");
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!(
            "partition {} is missing",
            String::from_utf8_lossy(&gone)
        )),
        "{text}"
    );
}

/// A command of `args` on node `i`.
fn on_node(cl: &Cluster, i: usize, args: &[&str]) -> Value {
    let mut c = redis::Client::open(cl.url(i))
        .and_then(|c| c.get_connection())
        .expect("a node connection");
    let mut cmd = redis::Cmd::new();
    for a in args {
        cmd.arg(*a);
    }
    cmd.query(&mut c)
        .unwrap_or_else(|e| panic!("{args:?} on node {i}: {e}"))
}

#[test]
fn adds_follow_ask_and_moved_of_a_partition_mid_migration_at_once() {
    let cl = Cluster::start(3, 0);
    let mut conn = Client::open(&cl.url(0))
        .and_then(|c| c.connect())
        .expect("connect");
    let opts = rustbloom_client::ReserveOptions {
        error_rate: 0.001,
        capacity: 30_000,
        growth: rustbloom_client::Growth::NonScaling,
        partitions: Some(3),
    };
    let filter = Filter::reserve(&mut conn, b"moving", &opts).expect("reserve");
    let routing = filter.partitioning().expect("partitioned").clone();
    // No pause and no retry: a redirection is followed within the call, or the call fails.
    let write = rustbloom_client::WriteOptions {
        batch: 50,
        retry_for: std::time::Duration::ZERO,
        ..Default::default()
    };
    let all = items("moving", 3000);
    let rounds: Vec<Vec<&[u8]>> = all
        .chunks(1000)
        .map(|c| c.iter().map(|s| s.as_bytes()).collect())
        .collect();
    // Round 1 opens the connections to the masters, with the slot map of before.
    assert!(filter
        .add(&mut conn, &rounds[0], &write)
        .expect("add")
        .iter()
        .all(|&n| n));

    let key = &routing.keys[0];
    let slot = key_slot(key);
    let owners = cl.slot_owners(0);
    let src = owners[slot as usize];
    let dst = *Cluster::masters(&owners)
        .iter()
        .find(|&&m| m != src)
        .expect("another master");
    let (src_id, dst_id) = (cl.id(src), cl.id(dst));
    let key_text = String::from_utf8(key.clone()).expect("a text key");
    let slot_text = slot.to_string();
    on_node(
        &cl,
        dst,
        &["CLUSTER", "SETSLOT", &slot_text, "IMPORTING", &src_id],
    );
    on_node(
        &cl,
        src,
        &["CLUSTER", "SETSLOT", &slot_text, "MIGRATING", &dst_id],
    );
    let port = cl.addr(dst).rsplit_once(':').expect("port").1.to_string();
    let migrate = [
        "MIGRATE",
        "127.0.0.1",
        &port,
        "",
        "0",
        "5000",
        "KEYS",
        &key_text,
    ];
    on_node(&cl, src, &migrate);

    // Round 2: partition 0's commands meet ASK at the old master.
    assert!(filter
        .add(&mut conn, &rounds[1], &write)
        .expect("add")
        .iter()
        .all(|&n| n));
    for m in Cluster::masters(&owners) {
        on_node(&cl, m, &["CLUSTER", "SETSLOT", &slot_text, "NODE", &dst_id]);
    }
    // Round 3: MOVED from the old master; every item of the three rounds again.
    assert!(filter
        .add(&mut conn, &rounds[2], &write)
        .expect("add")
        .iter()
        .all(|&n| n));
    let again: Vec<&[u8]> = rounds.concat();
    assert!(filter
        .add(&mut conn, &again, &write)
        .expect("add")
        .iter()
        .all(|&n| !n));
    // The partition on its new master holds exactly its items.
    let in_part0 = all
        .iter()
        .filter(|i| partition_of(i.as_bytes(), routing.routing_seed, 3) == 0)
        .count() as i64;
    let Value::Int(count) = on_node(&cl, dst, &["BF.CARD", &key_text]) else {
        panic!("BF.CARD");
    };
    assert_eq!(count, in_part0);
}

/// A one-node cluster (every slot on a node that never met another) names itself with an empty
/// host in `CLUSTER SLOTS`: partitioned loads and lookups still reach it, at the URL's host.
#[test]
fn a_one_node_cluster_takes_partitioned_loads_and_lookups() {
    let node = Server::start_cluster_node(&[]);
    let mut c = node.conn_tcp();
    let _: () = redis::cmd("CLUSTER")
        .arg("ADDSLOTSRANGE")
        .arg(0)
        .arg(16383)
        .query(&mut c)
        .unwrap();
    assert!(
        wait_until(std::time::Duration::from_secs(30), || {
            let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut c).unwrap();
            info.contains("cluster_state:ok")
        }),
        "the one-node cluster never became healthy"
    );
    let url = format!("redis://127.0.0.1:{}", node.port());
    ok(&bfctl_at(
        &url,
        &["reserve", "alone", "0.001", "10000", "--partitions", "4"],
        b"",
    ));
    let want = items("alone", 2000);
    let out = ok(&bfctl_at(&url, &["load", "alone"], lines(&want).as_bytes()));
    assert!(out.contains("2000 items, 2000 new"), "{out}");
    assert_eq!(count_present(&url, "alone", &want), 2000);
}
