//! A reserve over a name that is taken, on a cluster, through the synchronous and the async
//! API: refused with the server's `item exists` (the words of the Python, PHP and Node
//! clients), every partition the reserve created removed again, and the filter that was there
//! untouched, whether it is plain or partitioned with the same or another P.

use rustbloom_client::{Client, Error, Filter, Growth, ReserveOptions, WriteOptions};
use rustbloom_testkit::cluster::Cluster;
use rustbloom_testkit::{all_keys, dataset_digest};

fn options(partitions: Option<u32>) -> ReserveOptions {
    ReserveOptions {
        error_rate: 0.01,
        capacity: 10_000,
        growth: Growth::Scaling { expansion: None },
        partitions,
    }
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

/// The reserves that must be refused: over a plain filter and over a partitioned one of 8
/// partitions, as plain or partitioned, with the same P and others.
const TAKEN: [(&str, Option<u32>); 7] = [
    ("taken", Some(8)),
    ("taken", Some(3)),
    ("taken", None),
    ("split", Some(8)),
    ("split", Some(5)),
    ("split", Some(16)),
    ("split", None),
];

#[test]
fn a_reserve_over_a_taken_name_is_refused_and_leaves_nothing_behind() {
    let cluster = Cluster::start(3, 0);
    let url = cluster.url(0);
    let mut conn = Client::open(&url).unwrap().connect().unwrap();
    let items: Vec<String> = (0..500).map(|i| format!("item-{i}")).collect();
    let refs: Vec<&[u8]> = items.iter().map(|s| s.as_bytes()).collect();
    for (name, partitions) in [("taken", None), ("split", Some(8))] {
        let filter = Filter::reserve(&mut conn, name.as_bytes(), &options(partitions)).unwrap();
        filter
            .add(&mut conn, &refs, &WriteOptions::default())
            .unwrap();
    }
    let before = snapshot(&cluster);

    for (name, partitions) in TAKEN {
        let got = Filter::reserve(&mut conn, name.as_bytes(), &options(partitions));
        match got {
            Err(Error::Server(text)) => assert_eq!(text, "item exists", "{name} {partitions:?}"),
            other => panic!("sync reserve of {name} {partitions:?}: {other:?}"),
        }
        assert_eq!(snapshot(&cluster), before, "sync {name} {partitions:?}");
    }

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut conn = Client::open_async(&url)
            .await
            .unwrap()
            .connect_async()
            .await
            .unwrap();
        for (name, partitions) in TAKEN {
            let got = Filter::reserve_async(&mut conn, name.as_bytes(), &options(partitions)).await;
            match got {
                Err(Error::Server(text)) => {
                    assert_eq!(text, "item exists", "{name} {partitions:?}")
                }
                other => panic!("async reserve of {name} {partitions:?}: {other:?}"),
            }
            assert_eq!(snapshot(&cluster), before, "async {name} {partitions:?}");
        }
    });

    // Both filters still answer every item they held.
    for name in ["taken", "split"] {
        let filter = Filter::discover(&mut conn, name.as_bytes())
            .unwrap()
            .unwrap();
        let seen = filter.exists(&mut conn, &refs, 100).unwrap();
        assert!(seen.iter().all(|&s| s), "{name}");
    }
}
