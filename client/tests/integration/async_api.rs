//! The async API against a single server and a 3+3 cluster: every operation, the typed errors
//! (a vanished key with the items acknowledged beside it, a missing partition), plain and
//! partitioned filters, and interop with the synchronous API on the same filter.

use rustbloom_client::aio::Connection;
use rustbloom_client::routing::partition_of;
use rustbloom_client::{Client, Error, Filter, Growth, ReserveOptions, WriteOptions};
use rustbloom_testkit::cluster::Cluster;
use rustbloom_testkit::Server;

fn items(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}:{i}")).collect()
}

fn refs(items: &[String]) -> Vec<&[u8]> {
    items.iter().map(|s| s.as_bytes()).collect()
}

fn options(partitions: Option<u32>) -> ReserveOptions {
    ReserveOptions {
        error_rate: 0.001,
        capacity: 20_000,
        growth: Growth::Scaling { expansion: None },
        partitions,
    }
}

/// Small batches, so that one call sends several commands per partition.
fn write_options() -> WriteOptions {
    WriteOptions {
        batch: 100,
        ..WriteOptions::default()
    }
}

/// Deletes `key` through the synchronous client (routed to its master on a cluster).
fn delete(url: &str, key: &[u8]) {
    let mut conn = Client::open(url).unwrap().connect().unwrap();
    conn.query(redis::cmd("DEL").arg(key)).unwrap();
}

/// An add's result is `Vanished` for `key` (partition `index`, `None` for a plain filter) of
/// `name`, with `acknowledged` items acknowledged, in the contract's words (docs/partitions.md,
/// "One contract").
fn assert_vanished(
    result: rustbloom_client::Result<Vec<bool>>,
    name: &str,
    index: Option<u32>,
    key: &[u8],
    acknowledged: u64,
) {
    let e = match result {
        Err(e @ Error::Vanished { .. }) => e,
        other => panic!("an add to a key that does not exist answered {other:?}"),
    };
    if let Error::Vanished {
        name: n,
        index: i,
        key: k,
        acknowledged: a,
    } = &e
    {
        assert_eq!(
            (n.as_str(), *i, k.as_bytes(), *a),
            (name, index, key, acknowledged)
        );
    }
    let key = String::from_utf8_lossy(key);
    let missing = match index {
        Some(i) => format!(
            "partition {i} of \"{name}\" is missing (key \"{key}\"): restore it or recreate \
             the filter"
        ),
        None => format!(
            "\"{name}\" is missing (deleted, expired, or lost in a restart or failover; adds \
             never recreate it): restore it or recreate the filter"
        ),
    };
    assert_eq!(
        e.to_string(),
        format!("{missing}; {acknowledged} items of this call had been acknowledged")
    );
}

/// Every one of `items` answers present, asked `batch` at a time.
async fn all_present(
    filter: &Filter,
    conn: &mut Connection,
    items: &[String],
    batch: usize,
) -> bool {
    let seen = filter
        .exists_async(conn, &refs(items), batch)
        .await
        .unwrap();
    seen.len() == items.len() && seen.iter().all(|&s| s)
}

/// No filter at `name`.
async fn absent(conn: &mut Connection, name: &str) -> bool {
    Filter::discover_async(conn, name.as_bytes())
        .await
        .unwrap()
        .is_none()
}

async fn connect(url: &str) -> Connection {
    Client::open_async(url)
        .await
        .unwrap()
        .connect_async()
        .await
        .unwrap()
}

/// Reserve, add, look up, describe and drop a partitioned filter; what the async API added
/// answers through the synchronous one and the other way round.
async fn partitioned_round_trip(url: &str) {
    let mut conn = connect(url).await;
    let filter = Filter::reserve_async(&mut conn, b"clicks", &options(Some(8)))
        .await
        .unwrap();
    let added = items("added", 2000);
    let new = filter
        .add_async(&mut conn, &refs(&added), &write_options())
        .await
        .unwrap();
    assert_eq!(new.len(), added.len());
    assert!(new.iter().filter(|&&n| n).count() > 1990, "nearly all new");
    let again = filter
        .add_async(&mut conn, &refs(&added), &write_options())
        .await
        .unwrap();
    assert!(again.iter().all(|&n| !n), "an item added before is not new");

    // Answers come back in input order, the strangers mixed in.
    let strangers = items("stranger", 2000);
    let mut asked = refs(&added);
    asked.extend(refs(&strangers));
    let seen = filter.exists_async(&mut conn, &asked, 150).await.unwrap();
    assert!(seen[..added.len()].iter().all(|&s| s), "no false negative");
    assert!(seen[added.len()..].iter().filter(|&&s| s).count() < 40);

    let info = filter.info_async(&mut conn).await.unwrap();
    assert_eq!(info.partitions.len(), 8);
    assert!(info.problems.is_empty(), "{:?}", info.problems);
    assert_eq!(info.totals().items, 2000);
    assert!(info.partitions.iter().all(|p| p.info.is_some()));

    // The synchronous API finds the same filter and answers the same.
    let mut sync = Client::open(url).unwrap().connect().unwrap();
    let found = Filter::discover(&mut sync, b"clicks").unwrap().unwrap();
    assert_eq!(found.partitioning(), filter.partitioning());
    assert!(found
        .exists(&mut sync, &refs(&added), 500)
        .unwrap()
        .iter()
        .all(|&s| s));
    let later = items("later", 300);
    found
        .add(&mut sync, &refs(&later), &WriteOptions::default())
        .unwrap();
    let rediscovered = Filter::discover_async(&mut conn, b"clicks")
        .await
        .unwrap()
        .unwrap();
    assert!(all_present(&rediscovered, &mut conn, &later, 1000).await);

    assert_eq!(filter.drop_async(&mut conn).await.unwrap(), 9);
    assert!(absent(&mut conn, "clicks").await);
}

/// A plain filter: the same operations on one key; an add to a key that does not exist is
/// `Vanished` with nothing acknowledged, never a new filter.
async fn plain_round_trip(url: &str) {
    let mut conn = connect(url).await;
    let filter = Filter::reserve_async(&mut conn, b"plainf", &options(None))
        .await
        .unwrap();
    assert!(filter.partitioning().is_none());
    let added = items("plain", 500);
    filter
        .add_async(&mut conn, &refs(&added), &write_options())
        .await
        .unwrap();
    assert!(all_present(&filter, &mut conn, &added, 64).await);
    let info = filter.info_async(&mut conn).await.unwrap();
    assert_eq!(info.key.items, 500);
    assert!(info.partitions.is_empty());
    assert_eq!(filter.drop_async(&mut conn).await.unwrap(), 1);

    let missing = Filter::plain(b"never-reserved");
    let added = missing
        .add_async(&mut conn, &[b"x".as_slice()], &write_options())
        .await;
    assert_vanished(added, "never-reserved", None, b"never-reserved", 0);
    assert!(absent(&mut conn, "never-reserved").await);
}

/// A partition deleted under the filter: a lookup is `MissingPartition`, an add is `Vanished`
/// naming it and counting the items the other partitions acknowledged.
async fn missing_partition(url: &str) {
    let mut conn = connect(url).await;
    let filter = Filter::reserve_async(&mut conn, b"holed", &options(Some(6)))
        .await
        .unwrap();
    let routing = filter.partitioning().unwrap().clone();
    let lost = &routing.keys[2];
    delete(url, lost);

    let added = items("holed", 1200);
    match filter.exists_async(&mut conn, &refs(&added), 100).await {
        Err(e @ Error::MissingPartition { .. }) => {
            let key = String::from_utf8_lossy(lost);
            // The contract's sentence, word for word (docs/partitions.md, "One contract").
            assert_eq!(
                e.to_string(),
                format!(
                    "partition 2 of \"holed\" is missing (key \"{key}\"): restore it or \
                     recreate the filter"
                )
            );
            if let Error::MissingPartition { name, index, key } = e {
                assert_eq!(
                    (name.as_str(), index, key.as_bytes()),
                    ("holed", 2, lost.as_slice())
                );
            }
        }
        other => panic!("a lookup with a missing partition answered {other:?}"),
    }
    let elsewhere = added
        .iter()
        .filter(|i| partition_of(i.as_bytes(), routing.routing_seed, routing.partitions) != 2)
        .count() as u64;
    assert!(elsewhere > 0 && elsewhere < 1200);
    let result = filter
        .add_async(&mut conn, &refs(&added), &write_options())
        .await;
    assert_vanished(result, "holed", Some(2), lost, elsewhere);
    // Nothing recreated the partition.
    let info = filter.info_async(&mut conn).await.unwrap();
    assert_eq!(info.problems.len(), 1, "{:?}", info.problems);
    assert!(info.partitions[2].info.is_none());
    assert_eq!(info.totals().items, elsewhere);
}

/// Adds that WAIT for `replicas` replicas of every master written to.
async fn adds_wait_for_replicas(url: &str, replicas: u32) {
    let mut conn = connect(url).await;
    let filter = Filter::reserve_async(&mut conn, b"durable", &options(Some(6)))
        .await
        .unwrap();
    let opts = WriteOptions {
        wait: Some((replicas, std::time::Duration::from_secs(10))),
        retry_for: std::time::Duration::from_secs(20),
        ..write_options()
    };
    let added = items("durable", 1000);
    let new = filter
        .add_async(&mut conn, &refs(&added), &opts)
        .await
        .unwrap();
    assert_eq!(new.len(), 1000);
    assert!(all_present(&filter, &mut conn, &added, 1000).await);
}

/// A pipeline over keys of several slots answers in the order asked, an error reply in its
/// place.
async fn pipeline_keeps_order(url: &str) {
    let mut conn = connect(url).await;
    let (a, b) = ("order-a", "order-b");
    assert_ne!(
        rustbloom_client::routing::key_slot(a.as_bytes()),
        rustbloom_client::routing::key_slot(b.as_bytes())
    );
    let cmd = |name: &str, key: &str| {
        let mut c = redis::cmd(name);
        c.arg(key);
        c
    };
    let mut wrong_type = cmd("BF.ADD", a);
    wrong_type.arg("x");
    let cmds = [
        cmd("INCR", a),
        cmd("INCR", b),
        cmd("INCR", a),
        wrong_type,
        cmd("INCR", b),
        cmd("INCR", a),
    ];
    let replies = conn.pipeline(&cmds).await.unwrap();
    let ints: Vec<Option<i64>> = replies
        .iter()
        .map(|v| match v {
            redis::Value::Int(i) => Some(*i),
            _ => None,
        })
        .collect();
    assert_eq!(ints, [Some(1), Some(1), Some(2), None, Some(2), Some(3)]);
    match &replies[3] {
        redis::Value::ServerError(e) => assert_eq!(e.code(), "WRONGTYPE"),
        other => panic!("BF.ADD on a string answered {other:?}"),
    }
}

/// Adds from several tasks at once over clones of one connection.
async fn concurrent_adds(url: &str) {
    let mut conn = connect(url).await;
    let filter = Filter::reserve_async(&mut conn, b"shared", &options(Some(4)))
        .await
        .unwrap();
    let tasks: Vec<_> = (0..4)
        .map(|t| {
            let mut conn = conn.clone();
            let filter = filter.clone();
            tokio::spawn(async move {
                let mine = items(&format!("task{t}"), 1000);
                filter
                    .add_async(&mut conn, &refs(&mine), &write_options())
                    .await
                    .map(|answers| answers.len())
            })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap().unwrap(), 1000);
    }
    let info = filter.info_async(&mut conn).await.unwrap();
    assert_eq!(info.totals().items, 4000);
}

/// Merges of partitioned filters: a missing destination created as a copy (the way to a filter
/// alike to one reserved with a random routing seed), then items of both merged back; on a
/// cluster every partition goes through a temporary copy in the destination's slot. A filter
/// reserved on its own has another routing seed and is refused, the destination unchanged; one
/// reserved like it merges.
async fn merges(url: &str, cluster: bool) {
    let mut conn = connect(url).await;
    let a = Filter::reserve_async(&mut conn, b"merge-a", &options(Some(4)))
        .await
        .unwrap();
    let first = items("merge-first", 2000);
    a.add_async(&mut conn, &refs(&first), &write_options())
        .await
        .unwrap();
    let copy = Filter::merge_async(&mut conn, b"merge-b", &[b"merge-a".as_slice()])
        .await
        .unwrap();
    let copies = if cluster { 4 } else { 0 };
    assert_eq!(
        (copy.sources, copy.partitions, copy.created, copy.copies),
        (1, 4, true, copies)
    );
    assert_eq!(copy.bytes_copied > 0, cluster);
    let b = Filter::discover_async(&mut conn, b"merge-b")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        b.partitioning().unwrap().routing_seed,
        a.partitioning().unwrap().routing_seed
    );
    let second = items("merge-second", 2000);
    b.add_async(&mut conn, &refs(&second), &write_options())
        .await
        .unwrap();
    let back = Filter::merge_async(&mut conn, b"merge-a", &[b"merge-b".as_slice()])
        .await
        .unwrap();
    assert_eq!((back.partitions, back.created), (4, false));
    assert!(all_present(&a, &mut conn, &first, 500).await);
    assert!(all_present(&a, &mut conn, &second, 500).await);
    assert!(all_present(&b, &mut conn, &first, 500).await);
    Filter::reserve_async(&mut conn, b"merge-c", &options(Some(4)))
        .await
        .unwrap();
    let before = a.info_async(&mut conn).await.unwrap().totals();
    match Filter::merge_async(&mut conn, b"merge-a", &[b"merge-c".as_slice()]).await {
        Err(Error::Server(text)) => {
            assert!(text.starts_with("filters differ: routing seed"), "{text}")
        }
        other => panic!("an unlike filter merged: {other:?}"),
    }
    assert_eq!(a.info_async(&mut conn).await.unwrap().totals(), before);
    // Reserved like it, an empty filter merges with the one reserved on its own.
    let d = Filter::reserve_like_async(&mut conn, b"merge-d", b"merge-c")
        .await
        .unwrap();
    assert_eq!(d.partitioning().unwrap().keys.len(), 4);
    assert_eq!(d.info_async(&mut conn).await.unwrap().totals().items, 0);
    d.add_async(&mut conn, &refs(&first), &write_options())
        .await
        .unwrap();
    let c = Filter::discover_async(&mut conn, b"merge-c")
        .await
        .unwrap()
        .unwrap();
    Filter::merge_async(&mut conn, b"merge-c", &[b"merge-d".as_slice()])
        .await
        .unwrap();
    assert!(all_present(&c, &mut conn, &first, 500).await);
}

/// Every case above against `url`, whose server keeps `replicas` replicas of each master.
async fn every_case(url: &str, cluster: bool, replicas: u32) {
    let client = Client::open_async(url).await.unwrap();
    assert_eq!(client.is_cluster(), cluster);
    adds_wait_for_replicas(url, replicas).await;
    partitioned_round_trip(url).await;
    plain_round_trip(url).await;
    missing_partition(url).await;
    concurrent_adds(url).await;
    pipeline_keeps_order(url).await;
    merges(url, cluster).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_single_server() {
    let server = Server::start();
    every_case(&format!("redis://127.0.0.1:{}", server.port()), false, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster() {
    let cluster = Cluster::start(3, 1);
    every_case(&cluster.url(4), true, 1).await;
}
