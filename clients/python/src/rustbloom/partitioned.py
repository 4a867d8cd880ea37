"""PartitionedBloom: one logical Bloom filter whose items are spread over P partition keys."""

import secrets
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from redis.exceptions import ResponseError

from .errors import (
    DescriptorError,
    FilterNotFoundError,
    NodeUnavailableError,
    PartitionedBloomError,
    PartitionMissingError,
    ServerError,
    quoted,
)
from .routing import (
    check_partitions,
    check_routing_seed,
    partition_capacity,
    partition_keys,
    partition_of,
)
from .transport import Transport

#: Items per BF.INSERT / BF.MEXISTS command; a big batch becomes several commands, all pipelined.
CHUNK_ITEMS = 1000
#: How long a lookup or an add whose reply was lost (a node down, a failover) is sent again.
DEFAULT_RETRY_FOR = 30.0
#: BF.INSERT's defaults when it creates a filter, as in RedisBloom.
DEFAULT_ERROR_RATE = 0.01
DEFAULT_CAPACITY = 100


@dataclass(frozen=True)
class Layout:
    """What BF.INFO of the logical name says: all a client needs to route items."""

    partitions: int
    routing_seed: int
    capacity: int
    partition_capacity: int
    error_rate: float
    expansion: Optional[int]
    window_ms: Optional[int]
    keys: Tuple[bytes, ...]


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _reply_int(field: str, value: Any, allow_nil: bool = False) -> Optional[int]:
    if value is None and allow_nil:
        return None
    if isinstance(value, bool):
        raise DescriptorError(f"BF.INFO field {field!r} is not an integer: {value!r}")
    if isinstance(value, int):
        return value
    try:
        return int(_text(value))
    except ValueError:
        raise DescriptorError(f"BF.INFO field {field!r} is not an integer: {value!r}") from None


def _server_error(error: Exception, key: Optional[bytes]) -> ServerError:
    """The server's refusal as this package's error, its text without Redis' ``ERR ``."""
    text = str(error)
    return ServerError(text[4:] if text.startswith("ERR ") else text, key)


def _reply_truth(value: Any, key: bytes) -> bool:
    """An answer of BF.MEXISTS or BF.INSERT: 1/0 (RESP2) or a boolean (RESP3)."""
    if isinstance(value, Exception):
        raise _server_error(value, key)
    if isinstance(value, (bool, int)):
        return bool(value)
    raise DescriptorError(f"unexpected answer from the server: {value!r}")


def _info_fields(reply: Any) -> Dict[str, Any]:
    """BF.INFO's answer as a dict: a map in RESP3, a flat name/value array in RESP2."""
    if isinstance(reply, dict):
        pairs: Iterable = reply.items()
    elif isinstance(reply, (list, tuple)) and len(reply) % 2 == 0:
        pairs = zip(reply[0::2], reply[1::2])
    else:
        raise DescriptorError(f"BF.INFO answered {type(reply).__name__}")
    return {_text(k): v for k, v in pairs}


class PartitionedBloom:
    """One Bloom filter over P partition keys, for the rustbloom module (docs/partitions.md).

    ``client`` is a redis-py ``Redis`` or ``RedisCluster``; ``name`` is the logical filter name
    (str or bytes). Each item goes to the one partition a seeded hash of it picks, so an add or a
    lookup touches one key, and the partitions sit on evenly spaced cluster slots so a cluster's
    masters share them. Batches are grouped per partition and sent in one pipeline (per node on
    a cluster); answers come back in the order of the items.

    The layout (partition count, routing seed, keys) is read from ``BF.INFO name`` on first use
    and kept; call :meth:`refresh` after the filter is deleted and recreated under the same name.

    Items and the name are bytes, or text sent as UTF-8 whatever the client's ``encoding``;
    anything else (numbers, booleans, None) raises TypeError before anything is sent.

    Every error is a :class:`PartitionedBloomError` (docs/partitions.md, "One contract"). A
    lookup or an add whose reply was lost (a node down, a failover under way) is sent again for
    up to ``retry_for`` seconds (harmless: re-adding an item leaves the filter as it was, though
    the "new" answers of a resent add may undercount), then :class:`NodeUnavailableError`; a
    reserve is never resent. The commands go over connections of the package's own to each node,
    with the client's settings (password, TLS, RESP version) and every wait bounded (5 s, or the
    client's shorter timeout), so a node that hangs rather than dies costs an attempt, and the
    call ends by its deadline; :meth:`close` closes them.
    """

    def __init__(self, client: Any, name: Any, retry_for: float = DEFAULT_RETRY_FOR):
        self._transport = Transport(client)
        self._encode = _item_bytes
        self._retry_for = retry_for
        self.name: bytes = _item_bytes(name, "a name")
        self._layout: Optional[Layout] = None

    # ----- layout -----

    @property
    def layout(self) -> Layout:
        """The filter's layout, read from the server on first use."""
        if self._layout is None:
            return self.refresh()
        return self._layout

    @property
    def partition_keys(self) -> Tuple[bytes, ...]:
        """The P partition keys, in partition order."""
        return self.layout.keys

    def partition_of(self, item: Any) -> int:
        """The partition that holds ``item``."""
        layout = self.layout
        return partition_of(self._encode(item), layout.routing_seed, layout.partitions)

    def refresh(self) -> Layout:
        """Read the layout again from ``BF.INFO name`` (one round trip)."""
        self._layout = self._layout_from_info(_info_fields(self._info_reply()))
        return self._layout

    def info(self) -> Dict[str, Any]:
        """BF.INFO of the logical name, as a dict with str keys; also refreshes the layout.

        Fields: ``Partitions``, ``Routing seed``, ``Capacity``, ``Partition capacity``,
        ``Error rate``, ``Expansion rate`` (None when NONSCALING or WINDOW), ``Window (ms)``
        (None unless WINDOW) and ``Partition keys`` (a list of bytes).
        """
        layout = self.refresh()
        return {
            "Partitions": layout.partitions,
            "Routing seed": layout.routing_seed,
            "Capacity": layout.capacity,
            "Partition capacity": layout.partition_capacity,
            "Error rate": layout.error_rate,
            "Expansion rate": layout.expansion,
            "Window (ms)": layout.window_ms,
            "Partition keys": list(layout.keys),
        }

    def _info_reply(self) -> Any:
        reply = self._pipeline([("BF.INFO", self.name)], resendable=True)[0]
        if isinstance(reply, ResponseError):
            if str(reply) == "not found":
                raise FilterNotFoundError(f"no filter named {quoted(self.name)}")
            raise _server_error(reply, self.name)
        return reply

    def _layout_from_info(self, fields: Dict[str, Any]) -> Layout:
        if "Partition keys" not in fields:
            raise DescriptorError(f"{quoted(self.name)} is not a partitioned filter")
        partitions = _reply_int("Partitions", fields.get("Partitions"))
        routing_seed = _reply_int("Routing seed", fields.get("Routing seed"))
        try:
            check_partitions(partitions)
            check_routing_seed(routing_seed)
        except ValueError as e:
            raise DescriptorError(f"descriptor of {quoted(self.name)}: {e}") from None
        keys = tuple(partition_keys(self.name, partitions))
        listed = fields["Partition keys"]
        if not isinstance(listed, (list, tuple)) or [self._encode(k) for k in listed] != list(
            keys
        ):
            raise DescriptorError(
                f"the descriptor of {quoted(self.name)} lists partition keys other than "
                "docs/partitions.md gives"
            )
        try:
            error_rate = float(_text(fields.get("Error rate")))
        except ValueError:
            raise DescriptorError(f"bad error rate in {quoted(self.name)}") from None
        return Layout(
            partitions=partitions,
            routing_seed=routing_seed,
            capacity=_reply_int("Capacity", fields.get("Capacity")),
            partition_capacity=_reply_int("Partition capacity", fields.get("Partition capacity")),
            error_rate=error_rate,
            expansion=_reply_int("Expansion rate", fields.get("Expansion rate"), allow_nil=True),
            window_ms=_reply_int("Window (ms)", fields.get("Window (ms)"), allow_nil=True),
            keys=keys,
        )

    # ----- creation -----

    def reserve(
        self,
        error: float,
        capacity: int,
        partitions: int,
        nonscaling: bool = False,
        expansion: Optional[int] = None,
        window_ms: Optional[int] = None,
    ) -> Layout:
        """Create the filter: ``capacity`` items at false-positive rate ``error`` over
        ``partitions`` keys, each a filter of the same kind (scaling with ``expansion``,
        NONSCALING, or WINDOW ``window_ms``).

        The partitions are created first, then the descriptor, so a descriptor implies its
        partitions. When any step fails the partitions this call created are deleted again and
        the server's error is raised (``item exists`` when the name or a partition is taken).
        Returns the layout read back from the new descriptor.
        On a cluster choose ``partitions`` >= 2 x masters, so a reshard moves whole partitions.
        """
        check_partitions(partitions)
        per_partition = partition_capacity(capacity, partitions, nonscaling)
        options: List[Any] = []
        if nonscaling:
            options.append("NONSCALING")
        if expansion is not None:
            options += ["EXPANSION", expansion]
        if window_ms is not None:
            options += ["WINDOW", window_ms]
        routing_seed = secrets.randbits(64)
        keys = tuple(partition_keys(self.name, partitions))
        results = self._pipeline(
            [
                ("BF.RESERVE", key, error, per_partition, *options,
                 "PARTITION", i, partitions, routing_seed)
                for i, key in enumerate(keys)
            ],
            resendable=False,
        )
        created = [key for key, r in zip(keys, results) if not isinstance(r, Exception)]
        failure = next(
            (_server_error(r, key) for key, r in zip(keys, results) if isinstance(r, Exception)),
            None,
        )
        if failure is None:
            try:
                reply = self._pipeline(
                    [("BF.RESERVE", self.name, error, capacity, "PARTITIONS", partitions,
                      routing_seed, *options)],
                    resendable=False,
                )[0]
                if isinstance(reply, Exception):
                    failure = _server_error(reply, self.name)
            except NodeUnavailableError as e:
                failure = e
        if failure is not None:
            self._pipeline([("DEL", key) for key in created], resendable=True)
            raise failure
        # Read back what the server recorded (its default expansion, its rounding of ε).
        return self.refresh()

    # ----- adds and lookups -----

    def add(self, item: Any) -> bool:
        """Add one item; True when it was new (no false positive said it was there)."""
        return self.madd([item])[0]

    def madd(self, items: Sequence[Any]) -> List[bool]:
        """Add items; one answer per item, in order: True when the item was new.

        Every add is ``BF.INSERT key NOCREATE ITEMS …``: a partition that vanished (deleted,
        expired, lost in a restart or failover) is never recreated empty; it raises
        :class:`PartitionMissingError` with ``acknowledged``, the items of this call the other
        partitions took. The server's other refusals (e.g. ``non scaling filter is full``) are
        :class:`ServerError`.
        """
        return self._per_partition(items, "BF.INSERT", ("NOCREATE", "ITEMS"), check_exists=False)

    def insert(
        self,
        items: Sequence[Any],
        *,
        error: Optional[float] = None,
        capacity: Optional[int] = None,
        partitions: Optional[int] = None,
        nonscaling: bool = False,
        expansion: Optional[int] = None,
        window_ms: Optional[int] = None,
        nocreate: bool = False,
    ) -> List[bool]:
        """Add items, first creating the filter when there is none (as BF.INSERT does).

        Creation needs ``partitions``; ``error`` and ``capacity`` default to BF.INSERT's 0.01
        and 100. With ``nocreate`` a missing filter raises :class:`FilterNotFoundError`.
        When another client creates the same name at the same moment, this one uses its filter.
        """
        if not nocreate and self._layout is None:
            try:
                self.refresh()
            except FilterNotFoundError:
                if partitions is None:
                    raise ValueError(
                        f"no filter named {quoted(self.name)}: creating it needs partitions="
                    ) from None
                try:
                    self.reserve(
                        DEFAULT_ERROR_RATE if error is None else error,
                        DEFAULT_CAPACITY if capacity is None else capacity,
                        partitions,
                        nonscaling=nonscaling,
                        expansion=expansion,
                        window_ms=window_ms,
                    )
                except ServerError as e:
                    if str(e) != "item exists":
                        raise
                    self.refresh()
        return self.madd(items)

    def exists(self, item: Any) -> bool:
        """True when ``item`` may have been added (false positives at the error rate)."""
        return self.mexists([item])[0]

    def mexists(self, items: Sequence[Any]) -> List[bool]:
        """Look items up; one answer per item, in order.

        Each partition's lookup is preceded by ``EXISTS key`` in the same pipeline, so a deleted
        partition raises :class:`PartitionMissingError` instead of answering "absent".
        """
        return self._per_partition(items, "BF.MEXISTS", (), check_exists=True)

    # ----- plumbing -----

    def _per_partition(
        self, items: Sequence[Any], command: str, flags: Tuple[str, ...], check_exists: bool
    ) -> List[bool]:
        """Send ``command key *flags chunk`` for each partition's items, all in one pipeline,
        and put the answers back in the items' order."""
        if isinstance(items, (str, bytes)):
            raise TypeError("items must be a sequence of items, not a single str or bytes")
        encoded = [self._encode(item) for item in items]
        if not encoded:
            return []
        layout = self.layout
        groups: Dict[int, List[int]] = {}
        for position, item in enumerate(encoded):
            part = partition_of(item, layout.routing_seed, layout.partitions)
            groups.setdefault(part, []).append(position)
        commands: List[Tuple[Any, ...]] = []
        # For each command: the partition it checks (EXISTS) or the item positions it answers.
        plan: List[Tuple[int, Optional[List[int]]]] = []
        for part, positions in groups.items():
            key = layout.keys[part]
            if check_exists:
                commands.append(("EXISTS", key))
                plan.append((part, None))
            for start in range(0, len(positions), CHUNK_ITEMS):
                chunk = positions[start : start + CHUNK_ITEMS]
                commands.append((command, key, *flags, *(encoded[p] for p in chunk)))
                plan.append((part, chunk))
        answers: List[bool] = [False] * len(encoded)
        results = list(zip(plan, self._pipeline(commands, resendable=True)))
        missing = next(
            (
                part
                for (part, positions), result in results
                if (isinstance(result, ResponseError) and str(result) == "not found")
                or (positions is None and result == 0)
            ),
            None,
        )
        if missing is not None:
            # The items the other partitions took: an add never recreates the missing one.
            acknowledged = sum(
                len(positions)
                for (_, positions), result in results
                if positions is not None and isinstance(result, (list, tuple))
            )
            raise PartitionMissingError(
                self.name, missing, layout.keys[missing],
                acknowledged if not check_exists else None,
            )
        for (part, positions), result in results:
            key = layout.keys[part]
            if isinstance(result, Exception):
                raise _server_error(result, key)
            if positions is None:
                continue
            if (
                isinstance(result, (list, tuple))
                and result
                and len(result) <= len(positions)
                and isinstance(result[-1], Exception)
            ):
                # The server stopped at an item it refused: `non scaling filter is full`.
                raise _server_error(result[-1], key)
            if not isinstance(result, (list, tuple)) or len(result) != len(positions):
                raise ServerError(
                    f"{command} on {quoted(key)} answered {len(positions)} items with {result!r}",
                    key,
                )
            for position, answer in zip(positions, result):
                answers[position] = _reply_truth(answer, key)
        return answers

    def drop(self) -> int:
        """Delete the filter: the descriptor first (a descriptor implies its partitions), then
        every partition. Returns how many keys were deleted."""
        keys = self.layout.keys
        self._layout = None
        deleted = 0
        for batch in ([self.name], list(keys)):
            for key, reply in zip(
                batch, self._pipeline([("DEL", key) for key in batch], resendable=True)
            ):
                if isinstance(reply, Exception):
                    raise _server_error(reply, key)
                deleted += int(reply)
        return deleted

    def close(self) -> None:
        """Closes the package's own connections to the nodes (opened again when needed); the
        client given stays open."""
        self._transport.close()

    def _pipeline(self, commands: List[Tuple[Any, ...]], resendable: bool) -> List[Any]:
        """Run commands pipelined per node; errors come back as values, in the commands' order.
        A reply lost (a node down or hung, a cluster healing) is sent again until ``retry_for``
        has passed when ``resendable``; otherwise, and after that, :class:`NodeUnavailableError`
        (by the deadline plus one attempt, at most 5 s per node: see transport.py)."""
        if not commands:
            return []
        return self._transport.pipeline(commands, resendable, self._retry_for)


def _item_bytes(value: Any, what: str = "an item") -> bytes:
    """The bytes of an item (or a name) by the clients' one rule (docs/partitions.md, "One
    contract"): bytes as they are, text as UTF-8, anything else refused, never coerced — so an
    item added from any client is found from every other, whatever this client's encoding."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    raise TypeError(f"{what} must be bytes or a string, not {type(value).__name__}")
