"""rustbloom: one Bloom filter over many keys and a Redis Cluster's nodes.

See docs/partitions.md in the rustbloom repository for the rules this package follows.
"""

from .errors import (
    DescriptorError,
    FilterNotFoundError,
    NodeUnavailableError,
    PartitionedBloomError,
    PartitionMissingError,
    ServerError,
)
from .partitioned import Layout, PartitionedBloom
from .routing import (
    MAX_PARTITIONS,
    key_slot,
    partition_capacity,
    partition_keys,
    partition_of,
    partition_slots,
    routing_hash,
    slot_tags,
)

__all__ = [
    "DescriptorError",
    "FilterNotFoundError",
    "Layout",
    "MAX_PARTITIONS",
    "NodeUnavailableError",
    "PartitionMissingError",
    "PartitionedBloom",
    "PartitionedBloomError",
    "ServerError",
    "key_slot",
    "partition_capacity",
    "partition_keys",
    "partition_of",
    "partition_slots",
    "routing_hash",
    "slot_tags",
]
