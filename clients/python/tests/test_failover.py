"""The clients' bounded wait (docs/partitions.md, "One contract"): a load in progress when a
master dies goes on once its replica took over, and where no node can serve a partition any
more the call fails with NodeUnavailableError by its deadline, never hangs. Each test has a
cluster of its own, since it kills nodes."""

import threading
import time

import pytest
from redis.cluster import RedisCluster

from conftest import Cluster
from rustbloom import NodeUnavailableError, PartitionedBloom


def master_ports(client: RedisCluster, cluster: Cluster):
    """The masters' ports, the one new clients start from (nodes[0]) excluded."""
    return sorted({node.port for node in client.get_primaries()} - {cluster.nodes[0].port})


def node_on(cluster: Cluster, port: int):
    return next(node for node in cluster.nodes if node.port == port)


def wait_replicas_synced(cluster: Cluster):
    """Until every replica's link to its master is up: a replica that never synced does not
    take over (its data is too old to be trusted)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        links = []
        for node in cluster.nodes:
            with node.client(decode_responses=True) as c:
                replication = c.info("replication")
            if replication.get("role") == "slave":
                links.append(replication.get("master_link_status"))
        if len(links) == len(cluster.nodes) // 2 and all(link == "up" for link in links):
            return
        time.sleep(0.1)
    raise RuntimeError("the replicas did not sync")


def test_a_load_goes_on_through_a_masters_failover():
    cluster = Cluster()
    try:
        client = cluster.client()
        bloom = PartitionedBloom(client, "failover", retry_for=30)
        bloom.reserve(0.001, 200_000, partitions=6)
        wait_replicas_synced(cluster)
        victim = node_on(cluster, master_ports(client, cluster)[0])
        items = [b"f:%d" % i for i in range(60_000)]
        started = time.monotonic()
        for start in range(0, len(items), 1000):
            if start == 6000:
                victim._kill()  # a tenth of the way in; the load goes on through the failover
            bloom.madd(items[start : start + 1000])
        # Within the documented deadline, and the items added after the replica took over are
        # all there (those acknowledged just before the kill may not have reached the replica:
        # replication is asynchronous).
        assert time.monotonic() - started < 30
        reader = PartitionedBloom(cluster.client(), "failover")
        assert all(reader.mexists(items[-5000:]))
    finally:
        cluster.stop()


def replica_of(cluster: Cluster, master_port: int):
    for node in cluster.nodes:
        with node.client(decode_responses=True) as c:
            replication = c.info("replication")
        if replication.get("role") == "slave" and replication.get("master_port") == master_port:
            return node
    return None


def test_a_partition_no_node_serves_fails_by_the_deadline_even_when_its_master_hangs():
    """The master hangs rather than dies (frozen: connections accepted, nothing answered), its
    replica gone, and the client has redis-py's default timeouts (none): each attempt is bounded
    by the package, so the call ends by its deadline plus one attempt's bound (5 s) instead of
    hanging (it did, for minutes, over redis-py's own pipelines and retries)."""
    cluster = Cluster()
    try:
        client = RedisCluster(host="127.0.0.1", port=cluster.nodes[0].port)
        bloom = PartitionedBloom(client, "hung", retry_for=3)
        bloom.reserve(0.01, 10_000, partitions=6)
        bloom.madd([b"before"])
        wait_replicas_synced(cluster)
        master = master_ports(client, cluster)[0]
        replica = replica_of(cluster, master)
        assert replica is not None, "no replica found for the master"
        replica._kill()
        node_on(cluster, master).hang()
        outcome = []

        def load():
            try:
                outcome.append(bloom.madd([b"after:%d" % i for i in range(2000)]))
            except BaseException as e:  # the outcome is asserted below, in the test's thread
                outcome.append(e)

        started = time.monotonic()
        # In a thread, so that a hang fails the test (after the generous bound the contract's
        # "never a hang" allows) instead of stopping the suite.
        loader = threading.Thread(target=load, daemon=True)
        loader.start()
        loader.join(3 + 15)
        took = time.monotonic() - started
        assert not loader.is_alive(), f"madd still running after {took:.1f} s"
        assert len(outcome) == 1 and isinstance(outcome[0], NodeUnavailableError), outcome
        assert "gave up resending" in str(outcome[0])
        assert took >= 3
    finally:
        cluster.stop()


def test_a_partition_no_node_serves_fails_by_the_deadline():
    cluster = Cluster()
    try:
        client = cluster.client()
        bloom = PartitionedBloom(client, "orphaned", retry_for=3)
        bloom.reserve(0.01, 10_000, partitions=6)
        bloom.madd([b"before"])
        # A master and its replica both gone: their slots have no node.
        master = master_ports(client, cluster)[0]
        with node_on(cluster, master).client(decode_responses=True) as c:
            node_id = c.cluster("myid")
        for node in cluster.nodes:
            with node.client(decode_responses=True) as c:
                if c.execute_command("ROLE")[0] == "slave" and c.info("replication").get(
                    "master_port"
                ) == master:
                    node._kill()
                    break
        node_on(cluster, master)._kill()
        assert node_id
        items = [b"after:%d" % i for i in range(2000)]
        started = time.monotonic()
        with pytest.raises(NodeUnavailableError, match="gave up resending"):
            bloom.madd(items)
        # Not before the deadline, and not long after it (one attempt's timeouts).
        assert 3 <= time.monotonic() - started < 30
    finally:
        cluster.stop()
