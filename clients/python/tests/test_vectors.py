"""The shared vectors of docs/partitions.md (tests/fixtures/partitioning-vectors.json); no
server needed."""

import json
from pathlib import Path

import pytest

from rustbloom import (
    key_slot,
    partition_capacity,
    partition_keys,
    partition_of,
    partition_slots,
    routing_hash,
    slot_tags,
)

VECTORS = json.loads(
    (Path(__file__).resolve().parents[3] / "tests/fixtures/partitioning-vectors.json").read_text()
)


@pytest.mark.parametrize("v", VECTORS["routing"])
def test_routing(v):
    item = bytes.fromhex(v["item_hex"])
    seed = int(v["routing_seed"])
    assert routing_hash(item, seed) == int(v["xxh3_64"])
    assert partition_of(item, seed, v["partitions"]) == v["partition"]


@pytest.mark.parametrize("v", VECTORS["keys"], ids=lambda v: f"{v['name']}-{v['partitions']}")
def test_keys_and_slots(v):
    name = v["name"].encode()
    assert key_slot(name) == v["name_slot"]
    keys = partition_keys(name, v["partitions"])
    assert keys == [k.encode() for k in v["keys"]]
    assert partition_slots(name, v["partitions"]) == v["slots"]
    # The tag leads each key, so the key's slot is the partition's target slot.
    assert [key_slot(k) for k in keys] == v["slots"]


@pytest.mark.parametrize(
    "v", VECTORS["capacity"], ids=lambda v: f"{v['items']}-{v['partitions']}-{v['nonscaling']}"
)
def test_capacity(v):
    assert partition_capacity(v["items"], v["partitions"], v["nonscaling"]) == v[
        "partition_capacity"
    ]


@pytest.mark.parametrize("v", VECTORS["slot_tags"], ids=lambda v: str(v["slot"]))
def test_slot_tags(v):
    assert slot_tags()[v["slot"]] == v["tag"].encode()


def test_every_slot_has_the_smallest_tag():
    tags = slot_tags()
    assert all(key_slot(tag) == slot for slot, tag in enumerate(tags))
    # Smallest: no smaller number lands in the same slot.
    for slot in (0, 1, 2515, 11058, 16383):
        n = int(tags[slot])
        assert all(key_slot(str(m).encode()) != slot for m in range(n))
    assert max(int(t) for t in tags) < 110_000


def test_redis_docs_slots():
    assert key_slot(b"somekey") == 11058
    assert key_slot(b"foo{hash_tag}") == key_slot(b"hash_tag") == 2515
    # An empty tag is no tag: the whole key is hashed.
    assert key_slot(b"foo{}bar") != key_slot(b"")


@pytest.mark.parametrize("bad", [0, 4097, -1, 2.0, True])
def test_partition_count_is_checked(bad):
    with pytest.raises(ValueError):
        partition_keys(b"f", bad)


def test_routing_spreads_items_evenly():
    counts = [0] * 16
    for i in range(16_000):
        counts[partition_of(str(i).encode(), 12345, 16)] += 1
    # Binomial(16000, 1/16): mean 1000, sd 31.
    assert min(counts) > 850 and max(counts) < 1150, counts
