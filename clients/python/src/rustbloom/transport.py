"""Sends a batch's commands to the nodes that hold their keys, over connections of the package's
own whose every wait is bounded, and resends what was lost until a deadline.

The user's redis-py client gives the connection settings (password, TLS, RESP version) and the
nodes to start from; its own pipelines are not used: a node that hangs rather than dies (a frozen
machine: the kernel accepts the connection, nothing answers) would hold them for redis-py's
socket timeout (none by default), and its cluster client's own retries and slot-map reads, each
meeting the hung node again, would multiply that wait far past the caller's deadline.
"""

import threading
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from redis.backoff import NoBackoff
from redis.exceptions import (
    AskError,
    BusyLoadingError,
    ClusterDownError,
    MasterDownError,
    MovedError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

from .errors import NodeUnavailableError
from .routing import key_slot

#: The longest one attempt waits to connect to a node, or for any reply of it, before its
#: commands count as lost (as in the PHP and Node packages); a shorter timeout of the user's
#: client is kept.
ATTEMPT_SECONDS = 5.0
#: The pause before commands are sent again, doubled each time up to RESEND_PAUSE_MAX.
RESEND_PAUSE = 0.05
RESEND_PAUSE_MAX = 1.0
#: A connection that failed or timed out: what was sent on it may or may not have been done.
LOST = (RedisConnectionError, RedisTimeoutError, OSError)
#: Error replies of a cluster still healing: the command was not run, so it is always sent again.
REFUSED_FOR_NOW = (ClusterDownError, TryAgainError, MasterDownError, BusyLoadingError)

#: A node as (host, port); None is the one server of a client that is no cluster.
Node = Optional[Tuple[str, int]]


class Transport:
    """The package's connections to the nodes of the user's ``Redis`` or ``RedisCluster``."""

    def __init__(self, client: Any):
        self._client = client
        self._cluster = hasattr(client, "nodes_manager")
        self._connections: Dict[Node, Any] = {}
        # slot => its master, read from CLUSTER SLOTS; empty until the first read.
        self._slot_owners: Dict[int, Tuple[str, int]] = {}
        self._stale = True
        # Nodes whose connection failed: asked for the slot map last, since one that hangs would
        # cost a whole attempt each time.
        self._failed: set = set()
        # One batch at a time on the package's connections: a PartitionedBloom may be shared by
        # threads, as redis-py clients are.
        self._lock = threading.Lock()

    def close(self) -> None:
        """Closes the package's connections (opened again when needed)."""
        with self._lock:
            for connection in self._connections.values():
                connection.disconnect()
            self._connections.clear()

    def pipeline(self, commands: Sequence[Tuple[Any, ...]], resendable: bool,
                 retry_for: float) -> List[Any]:
        """Runs ``commands`` (each ``(name, key, *args)``), pipelined per node, and answers in
        their order with error replies as values. Commands a node refused for now (CLUSTERDOWN,
        TRYAGAIN, MOVED, ASK: not run) are sent again until ``retry_for`` has passed; those whose
        reply was lost likewise when ``resendable``; otherwise, and after that,
        :class:`NodeUnavailableError`. Every attempt waits at most ATTEMPT_SECONDS per node."""
        with self._lock:
            return self._pipeline(list(commands), resendable, retry_for)

    def _pipeline(self, commands: List[Tuple[Any, ...]], resendable: bool,
                  retry_for: float) -> List[Any]:
        answers: List[Any] = [None] * len(commands)
        pending = list(range(len(commands)))
        # index => the node an ASK sent it to, for its next attempt only.
        asked: Dict[int, Tuple[str, int]] = {}
        deadline = time.monotonic() + retry_for
        pause = RESEND_PAUSE
        while pending:
            again: List[int] = []
            failure: Any = None
            # The connection error, when a node's replies were lost.
            lost: Optional[BaseException] = None
            # Only redirected (MOVED, ASK): sent again at once, to the node named.
            redirected_only = True
            try:
                groups = self._group(commands, pending, asked)
            except NodeUnavailableError as e:
                # Nothing was sent: whatever the commands, they are tried again.
                groups, again, failure, redirected_only = {}, pending, e, False
            for (node, asking), indices in groups.items():
                try:
                    replies = self._run_on(node, [commands[i] for i in indices], asking)
                except LOST as e:
                    self._forget(node)
                    again += indices
                    failure, lost, redirected_only = e, e, False
                    continue
                for i, reply in zip(indices, replies):
                    if isinstance(reply, MovedError):
                        self._slot_owners[reply.slot_id] = reply.node_addr
                        self._stale = True
                    elif isinstance(reply, AskError):
                        asked[i] = reply.node_addr
                    elif isinstance(reply, REFUSED_FOR_NOW):
                        redirected_only = False
                    else:
                        answers[i] = reply
                        continue
                    again.append(i)
                    failure = reply
            if not again:
                return answers
            name = commands[again[0]][0]
            if lost is not None and not resendable:
                raise NodeUnavailableError(
                    f"the reply to {name} was lost and it is not resent: {lost}"
                ) from lost
            if time.monotonic() >= deadline:
                raise NodeUnavailableError(
                    f"gave up resending {name} after {retry_for} s: {failure}"
                ) from failure
            if not redirected_only:
                time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
                pause = min(pause * 2, RESEND_PAUSE_MAX)
            pending = sorted(again)
        return answers

    def _group(self, commands: List[Tuple[Any, ...]], indices: List[int],
               asked: Dict[int, Tuple[str, int]]) -> Dict[Tuple[Node, bool], List[int]]:
        """The commands at ``indices`` per (node, sent after ASKING)."""
        if not self._cluster:
            return {(None, False): indices}
        if self._stale or not self._slot_owners:
            self._read_slot_map()
        groups: Dict[Tuple[Node, bool], List[int]] = {}
        for i in indices:
            if i in asked:
                groups.setdefault((asked.pop(i), True), []).append(i)
                continue
            slot = key_slot(_bytes(commands[i][1]))
            owner = self._slot_owners.get(slot)
            if owner is None:
                self._stale = True
                raise NodeUnavailableError(f"no master serves slot {slot}")
            groups.setdefault((owner, False), []).append(i)
        return groups

    def _run_on(self, node: Node, commands: List[Tuple[Any, ...]], asking: bool) -> List[Any]:
        """One pipeline on the node's connection; error replies as values. A connection that
        fails or times out is closed (its replies are out of step) and the error raised."""
        connection = self._connection(node)
        sent: List[Tuple[Any, ...]] = []
        for command in commands:
            if asking:
                sent.append(("ASKING",))
            sent.append(command)
        try:
            connection.send_packed_command(connection.pack_commands(sent))
            replies = []
            for _ in sent:
                try:
                    replies.append(connection.read_response())
                except ResponseError as e:
                    replies.append(e)
            # ASKING's OK dropped: one reply per command.
            return replies[1::2] if asking else replies
        except BaseException:
            connection.disconnect()
            raise

    def _read_slot_map(self) -> None:
        """The slot map from the first node that answers CLUSTER SLOTS, nodes whose connection
        failed asked last; NodeUnavailableError when none does."""
        candidates: List[Tuple[str, int]] = list(dict.fromkeys(
            [*self._slot_owners.values(), *self._known_nodes()]))
        candidates.sort(key=lambda node: node in self._failed)
        last: Any = None
        for node in candidates:
            try:
                reply = self._run_on(node, [("CLUSTER", "SLOTS")], asking=False)[0]
            except LOST as e:
                self._forget(node)
                last = e
                continue
            if isinstance(reply, (list, tuple)):
                self._failed.discard(node)
                self._slot_owners = _slot_owners(reply, node[0])
                self._stale = False
                return
            last = reply
        raise NodeUnavailableError(f"no node answered CLUSTER SLOTS: {last}")

    def _known_nodes(self) -> List[Tuple[str, int]]:
        """The nodes the user's cluster client knows, and those it started from."""
        manager = self._client.nodes_manager
        nodes = [*manager.nodes_cache.values(), *manager.startup_nodes.values()]
        return [(node.host, int(node.port)) for node in nodes]

    def _connection(self, node: Node) -> Any:
        connection = self._connections.get(node)
        if connection is None:
            connection = self._connections[node] = self._open(node)
        return connection

    def _open(self, node: Node) -> Any:
        """A connection with the settings of the user's client, each wait bounded by
        ATTEMPT_SECONDS, and no retries of redis-py's own (the resend loop above is the one)."""
        if self._cluster:
            pool = self._client.get_default_node().redis_connection.connection_pool
        else:
            pool = self._client.connection_pool
        settings = dict(pool.connection_kwargs)
        if node is not None:
            # The address the nodes announce, as the user's client would remap it.
            remap = getattr(self._client.nodes_manager, "address_remap", None)
            settings["host"], settings["port"] = remap(node) if remap else node
        timeout = settings.get("socket_timeout")
        settings["socket_timeout"] = _bounded(timeout)
        if "host" in settings:
            settings["socket_connect_timeout"] = _bounded(
                settings.get("socket_connect_timeout") or timeout)
        settings["retry"] = Retry(NoBackoff(), 0)
        settings["retry_on_timeout"] = False
        return pool.connection_class(**settings)

    def _forget(self, node: Node) -> None:
        connection = self._connections.pop(node, None)
        if connection is not None:
            connection.disconnect()
        if node is not None:
            self._failed.add(node)
        self._stale = True


def _bounded(seconds: Optional[float]) -> float:
    return ATTEMPT_SECONDS if seconds is None else min(float(seconds), ATTEMPT_SECONDS)


def _bytes(key: Any) -> bytes:
    return key.encode("utf-8") if isinstance(key, str) else bytes(key)


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _slot_owners(reply: Sequence[Any], asked_host: str) -> Dict[int, Tuple[str, int]]:
    """CLUSTER SLOTS ([start, end, [host, port, ...], replicas...]...) as slot => master."""
    owners: Dict[int, Tuple[str, int]] = {}
    for entry in reply:
        if not isinstance(entry, (list, tuple)) or len(entry) < 3:
            continue
        start, end, master = entry[0], entry[1], entry[2]
        if not isinstance(master, (list, tuple)) or len(master) < 2:
            continue
        host = _text(master[0])
        # An empty host means "the address you reached me at".
        node = (asked_host if host in ("", "?") else host, int(master[1]))
        for slot in range(int(start), min(int(end), 16383) + 1):
            owners[slot] = node
    return owners
