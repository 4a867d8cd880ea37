"""Errors raised by the rustbloom client (server errors surface as redis-py's ResponseError)."""


class PartitionedBloomError(Exception):
    """Base class of the errors this package raises itself."""


class FilterNotFoundError(PartitionedBloomError):
    """The logical name holds no partitioned filter (no key, or not a descriptor)."""


class PartitionMissingError(PartitionedBloomError):
    """A partition key the descriptor lists is gone: its items can be neither added nor looked
    up, so the client refuses rather than answer "absent"."""

    def __init__(self, name: bytes, index: int, key: bytes):
        super().__init__(
            f"partition {index} of {name!r} is missing (key {key!r}): "
            "restore it or recreate the filter"
        )
        self.name = name
        self.index = index
        self.key = key


class DescriptorError(PartitionedBloomError):
    """BF.INFO of the logical name answered something this client cannot route by."""
