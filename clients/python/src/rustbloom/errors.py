"""Errors raised by the rustbloom client (server errors surface as redis-py's ResponseError)."""

from typing import Optional


class PartitionedBloomError(Exception):
    """Base class of the errors this package raises itself."""


class FilterNotFoundError(PartitionedBloomError):
    """The logical name holds no partitioned filter (no key, or not a descriptor)."""


class PartitionMissingError(PartitionedBloomError):
    """A partition key the descriptor lists is gone: its items can be neither added nor looked
    up, so the client refuses rather than answer "absent" (adds use NOCREATE, so a vanished
    partition is never recreated empty). On an add, ``acknowledged`` is how many items of that
    call the server had added to the other partitions."""

    def __init__(self, name: bytes, index: int, key: bytes, acknowledged: Optional[int] = None):
        message = (
            f"partition {index} of {name!r} is missing (key {key!r}): "
            "restore it or recreate the filter"
        )
        if acknowledged is not None:
            message += f"; {acknowledged} items of this call had been acknowledged"
        super().__init__(message)
        self.name = name
        self.index = index
        self.key = key
        self.acknowledged = acknowledged


class DescriptorError(PartitionedBloomError):
    """BF.INFO of the logical name answered something this client cannot route by."""
