"""A partition's slot moved to another master while a PartitionedBloom holds the old slot map:
mid-move the old master answers ASK, after it MOVED, and the package follows both (it keeps a
slot map of its own, read from CLUSTER SLOTS). A cluster of its own, since it moves a slot."""

from conftest import Cluster
from rustbloom import PartitionedBloom, key_slot


def ask(node, *args):
    with node.client() as c:
        return c.execute_command(*args)


def test_adds_and_lookups_follow_a_partition_moved_to_another_master():
    cluster = Cluster()
    try:
        bloom = PartitionedBloom(cluster.client(), "moving")
        bloom.reserve(0.001, 10_000, partitions=6)
        key = bloom.partition_keys[0]
        slot = key_slot(key)
        candidates = [b"m:%d" % i for i in range(6000)]
        items, later = candidates[:3000], candidates[3000:]
        on_the_moving_partition = [item for item in items if bloom.partition_of(item) == 0]
        # The slot map is read here, and kept through the move.
        assert on_the_moving_partition and all(bloom.madd(items))
        masters = [node for node in cluster.nodes if ask(node, "ROLE")[0] == b"master"]
        source = next(node for node in masters
                      if ask(node, "CLUSTER", "COUNTKEYSINSLOT", slot) > 0)
        keys_in_slot = ask(source, "CLUSTER", "GETKEYSINSLOT", slot, 100)
        assert key in keys_in_slot
        target = next(node for node in masters if node is not source)
        source_id = ask(source, "CLUSTER", "MYID")
        target_id = ask(target, "CLUSTER", "MYID")

        # Mid-move: the key is on the target, the slot still the source's, which answers ASK.
        ask(target, "CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
        ask(source, "CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)
        ask(source, "MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *keys_in_slot)
        assert all(bloom.mexists(on_the_moving_partition))
        during = [item for item in later[:1500] if bloom.partition_of(item) == 0]
        assert during and all(bloom.madd(during))

        # Moved: every master says the target owns the slot; the source answers MOVED.
        for node in masters:
            ask(node, "CLUSTER", "SETSLOT", slot, "NODE", target_id)
        after = [item for item in later[1500:] if bloom.partition_of(item) == 0]
        assert after and all(bloom.madd(after))
        assert all(bloom.mexists(on_the_moving_partition + during))

        assert ask(target, "CLUSTER", "COUNTKEYSINSLOT", slot) == len(keys_in_slot)
        assert ask(source, "CLUSTER", "COUNTKEYSINSLOT", slot) == 0
        reader = PartitionedBloom(cluster.client(), "moving")
        assert all(reader.mexists(items + during + after))
    finally:
        cluster.stop()
