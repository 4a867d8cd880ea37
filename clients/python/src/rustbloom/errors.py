"""Errors raised by the rustbloom client: every one a PartitionedBloomError, as in the PHP and
Node packages (docs/partitions.md, "One contract: errors")."""

import json
from typing import Optional


def quoted(name: bytes) -> str:
    """A name or key as the messages of every client show it: JSON-quoted text (bytes that are
    not UTF-8 replaced), never Python's ``b'...'``."""
    return json.dumps(name.decode("utf-8", "replace"), ensure_ascii=False)


class PartitionedBloomError(Exception):
    """Base class of every error this package raises."""


class FilterNotFoundError(PartitionedBloomError):
    """The logical name holds no filter at all."""


class PartitionMissingError(PartitionedBloomError):
    """A partition key the descriptor lists is gone: its items can be neither added nor looked
    up, so the client refuses rather than answer "absent" (adds use NOCREATE, so a vanished
    partition is never recreated empty). On an add, ``acknowledged`` is how many items of that
    call the server had added to the other partitions (None on a lookup)."""

    def __init__(self, name: bytes, index: int, key: bytes, acknowledged: Optional[int] = None):
        message = (
            f"partition {index} of {quoted(name)} is missing (key {quoted(key)}): "
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
    """BF.INFO of the logical name answered something this client cannot route by: not a
    partitioned filter, or a descriptor whose keys or fields disagree with docs/partitions.md."""


class NodeUnavailableError(PartitionedBloomError):
    """The node an item's partition lives on could not be reached within ``retry_for`` seconds,
    or a reply was lost where resending is not harmless (a reserve)."""


class ServerError(PartitionedBloomError):
    """The server refused a command; the message is its error text without Redis' ``ERR ``
    prefix (``item exists``, ``non scaling filter is full``, ``item routed to partition j of P,
    not i``); ``key`` is the key it was sent to."""

    def __init__(self, message: str, key: Optional[bytes] = None):
        super().__init__(message)
        self.key = key
