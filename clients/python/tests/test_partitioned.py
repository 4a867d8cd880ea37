"""PartitionedBloom against a real server and a real cluster (3 masters + 3 replicas), each with
the rustbloom module: every test runs on both (the `target` fixture)."""

import itertools

import pytest
import redis

from rustbloom import (
    DescriptorError,
    FilterNotFoundError,
    NodeUnavailableError,
    PartitionedBloom,
    PartitionedBloomError,
    PartitionMissingError,
    ServerError,
    partition_capacity,
    partition_keys,
)

_names = itertools.count()


def fresh_name(prefix: str) -> bytes:
    return f"{prefix}:{next(_names)}".encode()


def info_of(client, key) -> dict:
    reply = client.execute_command("BF.INFO", key)
    if isinstance(reply, dict):
        pairs = reply.items()
    else:
        pairs = zip(reply[0::2], reply[1::2])
    return {(k.decode() if isinstance(k, bytes) else k): v for k, v in pairs}


def node_of(client, key):
    """The address of the master holding key (one server: always the same)."""
    if hasattr(client, "get_node_from_key"):
        return client.get_node_from_key(key).name
    return "single"


def test_reserve_writes_descriptor_and_partitions(target):
    name = fresh_name("reserve")
    bloom = PartitionedBloom(target, name)
    layout = bloom.reserve(0.01, 60_000, partitions=6)
    assert layout.keys == tuple(partition_keys(name, 6))

    # Another client discovers the same layout in one BF.INFO.
    info = PartitionedBloom(target, name).info()
    assert info["Partitions"] == 6
    assert info["Routing seed"] == layout.routing_seed
    assert info["Capacity"] == 60_000
    assert info["Partition capacity"] == 10_000
    assert info["Error rate"] == pytest.approx(0.01)
    assert info["Expansion rate"] == 2
    assert info["Window (ms)"] is None
    assert info["Partition keys"] == list(layout.keys)

    for i, key in enumerate(layout.keys):
        part = info_of(target, key)
        assert part["Partition"] == i
        assert part["Partitions"] == 6
        assert int(part["Routing seed"]) == layout.routing_seed
        assert part["Capacity"] == 10_000

    # Six partitions over three masters: two on each (one server: all six on it).
    per_node = {}
    for key in layout.keys:
        per_node[node_of(target, key)] = per_node.get(node_of(target, key), 0) + 1
    expected = [2, 2, 2] if len(per_node) > 1 else [6]
    assert sorted(per_node.values()) == expected


def test_reserve_nonscaling_sizes_partitions_with_margin(target):
    name = fresh_name("nonscaling")
    bloom = PartitionedBloom(target, name)
    bloom.reserve(0.001, 60_000, partitions=6, nonscaling=True)
    info = PartitionedBloom(target, name).info()
    assert info["Partition capacity"] == partition_capacity(60_000, 6, True) == 10_549
    assert info["Expansion rate"] is None
    part = info_of(target, info["Partition keys"][0])
    assert part["Capacity"] == 10_549
    assert part["Expansion rate"] is None


def test_reserve_refuses_a_taken_name_and_leaves_nothing_behind(target):
    name = fresh_name("taken")
    bloom = PartitionedBloom(target, name)
    bloom.reserve(0.01, 1000, partitions=4)
    bloom.madd([b"kept"])
    with pytest.raises(ServerError, match="^item exists$"):
        PartitionedBloom(target, name).reserve(0.01, 1000, partitions=4)
    assert bloom.exists(b"kept")

    # One partition key already holds something else: nothing of the new filter remains.
    other = fresh_name("blocked")
    keys = partition_keys(other, 4)
    target.set(keys[2], b"in the way")
    with pytest.raises(ServerError) as refused:
        PartitionedBloom(target, other).reserve(0.01, 1000, partitions=4)
    assert refused.value.key == keys[2]
    assert [target.exists(k) for k in keys] == [0, 0, 1, 0]
    assert target.exists(other) == 0


def test_sixty_thousand_items_all_present_and_fpr_within_error_rate(target):
    error_rate = 0.01
    n = 60_000
    name = fresh_name("load")
    bloom = PartitionedBloom(target, name)
    bloom.reserve(error_rate, n, partitions=6, nonscaling=True)
    members = [b"member:%d" % i for i in range(n)]
    added = []
    for start in range(0, n, 10_000):
        added += bloom.madd(members[start : start + 10_000])
    assert len(added) == n
    # An add answers False only for a false positive, at most about ε of them.
    assert sum(added) >= n * (1 - error_rate)

    # Every partition received its share, and the items it counts are the adds answered True.
    counts = [info_of(target, key)["Number of items inserted"] for key in bloom.partition_keys]
    assert sum(counts) == sum(added)
    assert min(counts) > n / 6 * 0.9 and max(counts) < n / 6 * 1.1, counts

    assert all(bloom.mexists(members))

    non_members = [b"other:%d" % i for i in range(4 * n)]
    positives = sum(bloom.mexists(non_members))
    # 240,000 trials at ε = 1%: mean <= 2,400, sd ~ 49.
    assert positives / len(non_members) <= error_rate * 1.1, positives


def test_answers_keep_the_order_of_the_items(target):
    name = fresh_name("order")
    bloom = PartitionedBloom(target, name)
    bloom.reserve(0.001, 10_000, partitions=8)
    assert bloom.madd([b"a", "b", "17", b"a", b"\x00\xff", ""]) == [
        True, True, True, False, True, True,
    ]
    assert bloom.add(b"c") is True
    assert bloom.add(b"c") is False
    assert bloom.exists(b"17") is True
    probes = [b"\x00\xff", b"absent-1", b"a", b"absent-2", "b", b"c", ""]
    assert bloom.mexists(probes) == [True, False, True, False, True, True, True]
    assert bloom.mexists([]) == []
    with pytest.raises(TypeError):
        bloom.mexists(b"not a list")


@pytest.mark.parametrize("bad", [17, 1.5, True, None, ["x"]])
def test_items_neither_bytes_nor_text_are_refused_before_anything_is_sent(target, bad):
    # The clients' one contract (docs/partitions.md): never coerced, so 1.5 is not "1.5" here
    # and "1" in another client.
    bloom = PartitionedBloom(target, fresh_name("types"))
    bloom.reserve(0.01, 1000, partitions=4)
    with pytest.raises(TypeError, match="^an item must be bytes or a string, not "):
        bloom.madd([b"before", bad])
    with pytest.raises(TypeError, match="^an item must be bytes or a string, not "):
        bloom.exists(bad)
    assert bloom.mexists([b"before"]) == [False]


def test_text_is_sent_as_utf8_whatever_the_clients_encoding(target, request):
    servers = "single_server" if request.node.callspec.params["target"] == "single" else "cluster"
    latin = request.getfixturevalue(servers).client(encoding="latin-1")
    try:
        name = fresh_name("utf8")
        PartitionedBloom(latin, name).reserve(0.01, 1000, partitions=4)
        assert PartitionedBloom(latin, name).add("ü") is True
        # Found as the UTF-8 bytes every other client sends for "ü".
        assert PartitionedBloom(target, name).mexists(["ü".encode("utf-8"), "ü"]) == [True, True]
        assert PartitionedBloom(target, name).exists("ü".encode("latin-1")) is False
    finally:
        latin.close()


def test_resp3_and_decoded_replies(target, request):
    servers = "single_server" if request.node.callspec.params["target"] == "single" else "cluster"
    client = request.getfixturevalue(servers).client(protocol=3, decode_responses=True)
    try:
        name = fresh_name("resp3").decode()
        bloom = PartitionedBloom(client, name)
        bloom.reserve(0.01, 1000, partitions=3)
        assert bloom.madd(["x", "y", "x"]) == [True, True, False]
        reader = PartitionedBloom(client, name)
        assert reader.mexists(["y", "x"]) == [True, True]
        assert reader.info()["Partition keys"] == partition_keys(name.encode(), 3)
    finally:
        client.close()


def test_misrouted_item_is_refused_by_the_server(target):
    name = fresh_name("misrouted")
    bloom = PartitionedBloom(target, name)
    bloom.reserve(0.01, 1000, partitions=4)
    keys = bloom.partition_keys
    item = b"somewhere"
    right = bloom.partition_of(item)
    wrong = (right + 1) % 4
    with pytest.raises(redis.ResponseError,
                       match=f"item routed to partition {right} of 4, not {wrong}"):
        target.execute_command("BF.ADD", keys[wrong], item)
    with pytest.raises(redis.ResponseError, match="item routed to partition"):
        target.execute_command("BF.EXISTS", keys[wrong], item)

    # A batch holding one misrouted item is refused whole, before it adds anything.
    belongs = next(b"own:%d" % i for i in range(1000)
                   if bloom.partition_of(b"own:%d" % i) == wrong)
    with pytest.raises(redis.ResponseError, match="item routed to partition"):
        target.execute_command("BF.MADD", keys[wrong], belongs, item)
    assert bloom.exists(belongs) is False
    assert bloom.mexists([item, belongs]) == [False, False]


def test_the_logical_name_refuses_plain_commands(target):
    name = fresh_name("logical")
    PartitionedBloom(target, name).reserve(0.01, 1000, partitions=4)
    for command in (("BF.ADD", name, b"x"), ("BF.EXISTS", name, b"x"),
                    ("BF.MADD", name, b"x", b"y"), ("BF.INSERT", name, "ITEMS", b"x")):
        with pytest.raises(redis.ResponseError, match="is a partitioned filter"):
            target.execute_command(*command)


def test_a_deleted_partition_is_an_error_never_absent(target):
    name = fresh_name("deleted")
    bloom = PartitionedBloom(target, name)
    bloom.reserve(0.01, 1000, partitions=4)
    items = [b"item:%d" % i for i in range(200)]
    bloom.madd(items)
    gone = 1
    target.delete(bloom.partition_keys[gone])
    in_gone = [i for i in items if bloom.partition_of(i) == gone]
    elsewhere = [i for i in items if bloom.partition_of(i) != gone]
    assert in_gone and elsewhere

    with pytest.raises(PartitionMissingError) as missing:
        bloom.exists(in_gone[0])
    assert missing.value.index == gone
    # Names as text, as every client shows them (never Python's b'...').
    assert str(missing.value) == (
        f'partition {gone} of "{name.decode()}" is missing (key '
        f'"{bloom.partition_keys[gone].decode()}"): restore it or recreate the filter'
    )
    assert missing.value.acknowledged is None
    with pytest.raises(PartitionMissingError):
        bloom.mexists(items)
    with pytest.raises(PartitionMissingError):
        bloom.add(in_gone[0])
    # The partitions that are there still answer.
    assert all(bloom.mexists(elsewhere))


def test_drop_deletes_the_descriptor_then_every_partition(target):
    name = fresh_name("drop")
    bloom = PartitionedBloom(target, name)
    bloom.reserve(0.01, 1000, partitions=5)
    bloom.madd([b"a", b"b"])
    keys = bloom.partition_keys
    assert bloom.drop() == 6
    assert target.exists(name, *keys) == 0
    with pytest.raises(FilterNotFoundError):
        bloom.exists(b"a")


def test_every_error_is_the_packages_own(target):
    # The server's refusals are ServerErrors without Redis' ERR prefix, naming the key.
    name = fresh_name("full")
    bloom = PartitionedBloom(target, name)
    bloom.reserve(0.01, 4, partitions=2, nonscaling=True)
    with pytest.raises(ServerError, match="^non scaling filter is full$") as full:
        bloom.madd([b"x:%d" % i for i in range(200)])
    assert full.value.key in bloom.partition_keys
    assert issubclass(ServerError, PartitionedBloomError)
    assert issubclass(NodeUnavailableError, PartitionedBloomError)


def test_missing_filter_and_insert(target):
    name = fresh_name("insert")
    with pytest.raises(FilterNotFoundError):
        PartitionedBloom(target, name).exists(b"x")
    with pytest.raises(FilterNotFoundError):
        PartitionedBloom(target, name).insert([b"x"], nocreate=True)
    with pytest.raises(ValueError, match="partitions"):
        PartitionedBloom(target, name).insert([b"x"])

    bloom = PartitionedBloom(target, name)
    assert bloom.insert([b"x", b"y"], capacity=500, error=0.001, partitions=4) == [True, True]
    info = PartitionedBloom(target, name).info()
    assert (info["Partitions"], info["Capacity"], info["Error rate"]) == (4, 500, 0.001)
    # Filter there already: the creation options are not used again.
    assert PartitionedBloom(target, name).insert([b"y", b"z"], partitions=9) == [False, True]

    # A plain filter is not a partitioned one.
    plain = fresh_name("plain")
    target.execute_command("BF.RESERVE", plain, 0.01, 100)
    with pytest.raises(DescriptorError, match="not a partitioned filter"):
        PartitionedBloom(target, plain).exists(b"x")


def test_a_filter_that_vanishes_mid_run_is_never_recreated(target):
    """A load that finds its partitions gone (deleted, expired, lost in a restart) stops with
    the missing key and the count of the call's items the other partitions took."""
    name = fresh_name("vanishing")
    bloom = PartitionedBloom(target, name)
    bloom.reserve(0.01, 1000, partitions=4)
    first = [b"first:%d" % i for i in range(200)]
    assert all(bloom.madd(first))
    gone = 2
    target.delete(bloom.partition_keys[gone])
    later = [b"later:%d" % i for i in range(200)]
    elsewhere = [i for i in later if bloom.partition_of(i) != gone]
    assert 0 < len(elsewhere) < len(later)

    with pytest.raises(PartitionMissingError) as missing:
        bloom.madd(later)
    assert missing.value.index == gone
    assert missing.value.key == bloom.partition_keys[gone]
    assert missing.value.acknowledged == len(elsewhere)
    assert f"{len(elsewhere)} items of this call had been acknowledged" in str(missing.value)
    # insert() of a filter already found never creates either.
    with pytest.raises(PartitionMissingError):
        bloom.insert(later, partitions=4)
    assert target.exists(bloom.partition_keys[gone]) == 0

    # The whole filter gone: nothing recreated, nothing acknowledged.
    target.delete(name, *bloom.partition_keys)
    with pytest.raises(PartitionMissingError) as missing:
        bloom.madd(first)
    assert missing.value.acknowledged == 0
    assert target.exists(name, *bloom.partition_keys) == 0
