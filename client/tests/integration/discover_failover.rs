//! `Filter::discover` while the descriptor's master has just died (kill -9) on a 3 + 3 cluster:
//! the BF.INFO is sent again, as a lookup's commands are, until the replica has taken over, and
//! the filter is found, through the synchronous and the async API (docs/partitions.md, "One
//! contract": a lookup whose reply was lost is resent until the deadline).

use rustbloom_client::routing::key_slot;
use rustbloom_client::{Client, Filter, Growth, ReserveOptions};
use rustbloom_testkit::cluster::Cluster;

const PARTITIONS: u32 = 6;

/// A name whose slot master `m` serves (`owners`: the master of every slot).
fn name_on(owners: &[usize], m: usize, prefix: &str) -> String {
    (0..)
        .map(|n| format!("{prefix}-{n}"))
        .find(|name| owners[usize::from(key_slot(name.as_bytes()))] == m)
        .expect("some name lands on every master")
}

/// Reserves a partitioned filter at `name` and waits until the replicas have it.
fn reserve(cluster: &Cluster, owners: &[usize], name: &str) {
    let mut conn = Client::open(&cluster.url(0)).unwrap().connect().unwrap();
    let opts = ReserveOptions {
        error_rate: 0.01,
        capacity: 10_000,
        growth: Growth::Scaling { expansion: None },
        partitions: Some(PARTITIONS),
    };
    Filter::reserve(&mut conn, name.as_bytes(), &opts).unwrap();
    cluster.wait_replicas(owners);
}

/// What a discover found: the name's partition count, or why it failed.
fn found(got: rustbloom_client::Result<Option<Filter>>) -> Result<u32, String> {
    match got {
        Ok(Some(f)) => f
            .partitioning()
            .map(|p| p.partitions)
            .ok_or_else(|| "found as a plain filter".to_string()),
        Ok(None) => Err("not found".into()),
        Err(e) => Err(e.to_string()),
    }
}

#[test]
fn a_discover_during_a_failover_finds_the_filter_once_the_replica_takes_over() {
    let mut cluster = Cluster::start(3, 1);
    let owners = cluster.slot_owners(0);
    // The clients start from node 0: the masters that die are the two others.
    let victims: Vec<usize> = Cluster::masters(&owners)
        .into_iter()
        .filter(|&m| m != 0)
        .collect();
    assert_eq!(victims.len(), 2, "{owners:?}");
    let sync_name = name_on(&owners, victims[0], "discover-sync");
    let async_name = name_on(&owners, victims[1], "discover-async");
    reserve(&cluster, &owners, &sync_name);
    reserve(&cluster, &owners, &async_name);

    // Connected, and the descriptor's master known, before it dies.
    let mut conn = Client::open(&cluster.url(0)).unwrap().connect().unwrap();
    assert_eq!(
        found(Filter::discover(&mut conn, sync_name.as_bytes())),
        Ok(PARTITIONS)
    );
    cluster.nodes[victims[0]].kill9();
    assert_eq!(
        found(Filter::discover(&mut conn, sync_name.as_bytes())),
        Ok(PARTITIONS),
        "sync discover during the failover"
    );
    cluster.wait_healthy(&[victims[0]]);

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut conn = Client::open_async(&cluster.url(0))
            .await
            .unwrap()
            .connect_async()
            .await
            .unwrap();
        assert_eq!(
            found(Filter::discover_async(&mut conn, async_name.as_bytes()).await),
            Ok(PARTITIONS)
        );
        cluster.nodes[victims[1]].kill9();
        assert_eq!(
            found(Filter::discover_async(&mut conn, async_name.as_bytes()).await),
            Ok(PARTITIONS),
            "async discover during the failover"
        );
    });
}
