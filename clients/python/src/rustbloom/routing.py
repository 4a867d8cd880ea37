"""The partitioning rules of docs/partitions.md: which partition an item goes to, the keys of
the partitions, their slots, and how big each one is made.

Everything here is pure computation (no server), so any other implementation can be checked
against the same test vectors (tests/fixtures/partitioning-vectors.json).
"""

import binascii
import math
from functools import lru_cache
from typing import List, Tuple

import xxhash

#: Redis Cluster's number of hash slots.
SLOTS = 16384
#: The largest number of partitions a filter may have.
MAX_PARTITIONS = 4096
# The module's largest filter capacity (BF.RESERVE's range).
MAX_CAPACITY = 1 << 30
_U64 = (1 << 64) - 1


def check_partitions(partitions: int) -> int:
    """Return ``partitions`` when it is an int in 1..=4096, else raise ValueError."""
    if isinstance(partitions, bool) or not isinstance(partitions, int):
        raise ValueError(f"partitions must be an integer, not {partitions!r}")
    if not 1 <= partitions <= MAX_PARTITIONS:
        raise ValueError(f"partitions must be between 1 and {MAX_PARTITIONS}, not {partitions}")
    return partitions


def check_routing_seed(routing_seed: int) -> int:
    """Return ``routing_seed`` when it is an unsigned 64-bit int, else raise ValueError."""
    if isinstance(routing_seed, bool) or not isinstance(routing_seed, int):
        raise ValueError(f"routing seed must be an integer, not {routing_seed!r}")
    if not 0 <= routing_seed <= _U64:
        raise ValueError(f"routing seed must be an unsigned 64-bit integer, not {routing_seed}")
    return routing_seed


def routing_hash(item: bytes, routing_seed: int) -> int:
    """XXH3 64-bit of the item's bytes under the routing seed."""
    return xxhash.xxh3_64_intdigest(item, seed=routing_seed)


def partition_of(item: bytes, routing_seed: int, partitions: int) -> int:
    """The partition (0-based) that holds ``item``: the top 64 bits of hash × partitions.

    The multiply-shift maps the hash onto 0..partitions without the bias of a modulo and without
    reusing the hash's low bits.
    """
    return (routing_hash(item, routing_seed) * partitions) >> 64


def crc16(data: bytes) -> int:
    """CRC16-XMODEM (polynomial 0x1021, initial value 0), the checksum Redis Cluster uses."""
    return binascii.crc_hqx(data, 0)


def key_slot(key: bytes) -> int:
    """The cluster slot of ``key``, honouring its hash tag (the bytes between the first ``{``
    and the next ``}``, when there is at least one)."""
    start = key.find(b"{")
    if start != -1:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            key = key[start + 1 : end]
    return crc16(key) % SLOTS


@lru_cache(maxsize=1)
def slot_tags() -> Tuple[bytes, ...]:
    """For every slot s, the decimal string of the smallest n >= 0 whose CRC16 lands in s.

    Built once per process (about 110,000 CRCs, tens of milliseconds).
    """
    tags: List[bytes] = [b""] * SLOTS
    missing = SLOTS
    n = 0
    while missing:
        tag = str(n).encode()
        slot = crc16(tag) % SLOTS
        if not tags[slot]:
            tags[slot] = tag
            missing -= 1
        n += 1
    return tuple(tags)


def partition_slots(name: bytes, partitions: int) -> List[int]:
    """The slots of the partitions of filter ``name``: evenly spaced from the name's own slot."""
    check_partitions(partitions)
    base = key_slot(name)
    return [(base + i * SLOTS // partitions) % SLOTS for i in range(partitions)]


def partition_keys(name: bytes, partitions: int) -> List[bytes]:
    """The keys ``{T_i}NAME/i`` of the partitions of filter ``name``, in partition order."""
    tags = slot_tags()
    return [
        b"{" + tags[slot] + b"}" + name + b"/" + str(i).encode()
        for i, slot in enumerate(partition_slots(name, partitions))
    ]


def partition_capacity(items: int, partitions: int, nonscaling: bool) -> int:
    """The capacity each partition is reserved with, for ``items`` items over ``partitions``.

    A scaling partition holds its share, rounded up. A NONSCALING partition also holds six
    standard deviations of the binomial spread of items per partition (plus one), so that
    loading ``items`` random items never fills one of them first.
    """
    check_partitions(partitions)
    if isinstance(items, bool) or not isinstance(items, int) or items < 1:
        raise ValueError(f"capacity must be a positive integer, not {items!r}")
    if not nonscaling:
        return -(-items // partitions)
    share = 1 / partitions
    capacity = math.ceil(items / partitions + 6 * math.sqrt(items * share * (1 - share))) + 1
    # No partition receives more than all the items: past the module's capacity cap the
    # spread is dropped where N itself fits (one NONSCALING partition of 2^30 items).
    return min(capacity, items) if capacity > MAX_CAPACITY else capacity
