"""One scenario through every client (issue 35, docs/partitions.md "One contract"): bfctl, the
Rust client (synchronous and async), the Python, PHP and Node packages (Node on node-redis 6 as
well, where clients/node has its preload for another node-redis) run the same steps on one
3-master + 3-replica cluster, and what each did is compared with what the contract says.

Each client has a filter of its own, "scénario:<client>", and goes through the same steps:
reserve; reserve again over the same name (refused, nothing left behind); add ASCII, non-ASCII and
binary items; look them up and never-added ones; non-string items refused before anything is
sent; every other client's items found; a partition deleted under an add and a lookup; drop; and
a load through a master's kill -9, every client loading at once (ending complete or with
NodeUnavailable by the deadline; once the cluster is whole again, every acknowledged item present,
looked up on a new connection and on the one that loaded).

The outcome of each step goes into a transcript (names and keys replaced by placeholders), and
every client's transcript must equal EXPECTED with that client's entries of NOT_EXPRESSIBLE and
OWN_WORDS applied. All transcripts are made first and compared at the end, so that one failure
shows every client's differences at once.

Drivers (beside this file, and client/examples/scenario_driver.rs) are long-running processes
speaking JSON lines: a request {"op": ..., "name": ..., ...} on stdin, one answer on stdout,
either {"ok": value} or {"error": {"class": C, "message": M}}, C the contract's class name
(FilterNotFound, PartitionMissing, Descriptor, NodeUnavailable, Server) or TypeError. Ops:
reserve (error_rate, capacity, partitions), add and exists (items: each {"text": s},
{"hex": h}, {"float": x}, {"bool": b} or {"null": true}; answers one boolean per item), drop
(answers the keys deleted), and load (count items "<prefix><i>" in batches of batch, with the
client's deadline retry_for seconds; after pause_after batches it answers {"paused": n} and
waits for a line before going on; its answer carries "acknowledged", the items of the batches
that succeeded). bfctl is driven from here, one command a step.
"""

import copy
import importlib.util
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from redis.cluster import RedisCluster

from rustbloom import PartitionedBloom, partition_keys, partition_of

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]

# The Python package's test servers (3 + 3 cluster, each node in its own directory).
_spec = importlib.util.spec_from_file_location(
    "rustbloom_python_test_servers", ROOT / "clients/python/tests/conftest.py"
)
servers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(servers)

# The node-redis the Node package resolves (its lockfile's, unless installed otherwise).
NODE_REDIS_MAJOR = int(json.loads(
    (ROOT / "clients/node/node_modules/redis/package.json").read_text())["version"].split(".")[0])
# The Node package on node-redis 6 as well, where the package has the preload that runs it on
# another node-redis than its lockfile's (make client-packages installs node-redis 6 there).
NODE_REDIS_FROM = ROOT / "clients/node/test/node-redis-from.js"
NODE_REDIS_6 = ROOT / "target/node-redis-6"
CLIENTS = ["bfctl", "rust", "rust-async", "python", "php", "node"] + (
    ["node-redis-6"] if NODE_REDIS_FROM.exists() else [])
PARTITIONS = 8
# The deadline a load through a master's death is given: a failover takes ~3 s here (a node
# timeout of 2 s, then the election), so a client that follows it completes well before.
LOAD_RETRY_FOR = 10
# How long past that deadline a load may take before it counts as hung (one attempt's timeouts).
HUNG_AFTER = LOAD_RETRY_FOR + 30
# What a step that never ends is given before the driver is stopped.
STEP_TIMEOUT = 60

# The items every client adds: labels, and each item as a request names it.
ITEMS = {
    "ascii": {"text": "item-ascii"},
    "ü": {"text": "ü"},
    "日本": {"text": "日本"},
    "bytes 0x00-0xff": {"hex": bytes(range(256)).hex()},
    "bytes 0x00-0xff but 0x0a": {"hex": bytes(b for b in range(256) if b != 0x0A).hex()},
}
# Looked up beside them: the UTF-8 bytes of a text item (the same item), and items never added.
PROBES = {
    "ü as bytes c3 bc": {"hex": "c3bc"},
    "never added": {"text": "never-added"},
    "never added, bytes": {"hex": "00ff00"},
}
TYPED = {"float": {"float": 1.5}, "bool": {"bool": True}, "null": {"null": True}}
TYPED_PROBE = {"text": "typed-probe"}


def type_error(type_name):
    return {"error": ["TypeError", f"an item must be bytes or a string, not {type_name}"]}


MISSING = 'partition <i> of "<name>" is missing (key "<key>"): restore it or recreate the filter'


class Contains:
    """A message in a client's own words that must still say these parts, and never Redis'
    "ERR " prefix (the contract strips it)."""

    def __init__(self, *parts):
        self.parts = parts

    def __eq__(self, other):
        return (isinstance(other, str) and all(p in other for p in self.parts)
                and "ERR" not in other.split())

    def __repr__(self):
        return f"<a message containing {self.parts!r}, without ERR>"


class OneOf:
    """Any of these outcomes."""

    def __init__(self, *outcomes):
        self.outcomes = outcomes

    def __eq__(self, other):
        return other in self.outcomes

    def __repr__(self):
        return f"<one of {self.outcomes!r}>"


# What every client does, by the contract (docs/partitions.md, "One contract").
EXPECTED = {
    "reserve": {"ok": None},
    "reserve again, 8 partitions": {"error": ["Server", "item exists"], "keys unchanged": True},
    "reserve again, 6 partitions": {"error": ["Server", "item exists"], "keys unchanged": True},
    "add": {"ok": {label: True for label in ITEMS}},
    "exists": {
        "ok": {
            **{label: True for label in ITEMS},
            "ü as bytes c3 bc": True,
            "never added": False,
            "never added, bytes": False,
        }
    },
    **{f"add a {t}": type_error(t) for t in ("float", "bool", "null")},
    **{f"exists of a {t}": type_error(t) for t in ("float", "bool", "null")},
    "a refused batch sent nothing": {"ok": {"typed-probe": False}},
    "other clients' items found": {"ok": {c: True for c in CLIENTS}},
    "add with a partition deleted": {
        "error": ["PartitionMissing", MISSING + "; <ack> items of this call had been acknowledged"]
    },
    "exists with a partition deleted": {"error": ["PartitionMissing", MISSING]},
    # The descriptor and the partitions left (one was deleted).
    "drop": {"ok": 1 + PARTITIONS - 1, "keys left": []},
    "load through a master's kill -9": {
        "ended": OneOf("complete", "NodeUnavailable"),
        "acknowledged items present": True,
        "the loading connection works again": True,
    },
}

# Steps a client cannot express, and why: its transcript holds "n/a" there.
NOT_EXPRESSIBLE = {
    # bfctl reads one item a line: an item holding 0x0a is two lines. It has no typed items.
    "bfctl": {
        "items": {"bytes 0x00-0xff": "a line cannot hold 0x0a"},
        "steps": {f"{op} a {t}": "bfctl items are lines of bytes"
                  for op in ("add", "exists of") for t in ("float", "bool", "null")}
                 | {"a refused batch sent nothing": "bfctl items are lines of bytes"},
    },
    # Rust items are &[u8]: a float, a boolean or null does not compile.
    **{
        client: {
            "items": {},
            "steps": {f"{op} a {t}": "Rust items are &[u8]"
                      for op in ("add", "exists of") for t in ("float", "bool", "null")}
                     | {"a refused batch sent nothing": "Rust items are &[u8]"},
        }
        for client in ("rust", "rust-async")
    },
}

# Where a client's words are its own: the parts the message must still hold.
OWN_WORDS = {
    # bfctl reports any failure by its exit status and a message on stderr.
    "bfctl": {
        "reserve again, 8 partitions": {"error": ["exit 1", Contains("item exists")],
                                        "keys unchanged": True},
        "reserve again, 6 partitions": {"error": ["exit 1", Contains("item exists")],
                                        "keys unchanged": True},
        # The contract's sentence, with the count of the whole run rather than of one call.
        "add with a partition deleted": {
            "error": ["exit 1", Contains(MISSING, "<ack> lines acknowledged")]
        },
        "exists with a partition deleted": {"error": ["exit 1", Contains(MISSING)]},
    },
    # The lockfile's node-redis (5 unless it changed).
    "node": {} if NODE_REDIS_MAJOR >= 6 else {
        # node-redis 5 keeps commands for a master that died queued, and its cluster client
        # may go on doing so after the cluster is whole again (the killed master back as a
        # replica; seen on Valkey 9 and Redis 8): its lookups then fail by the deadline, never
        # hang. node-redis 6 follows the failover.
        "load through a master's kill -9": {
            "ended": OneOf("complete", "NodeUnavailable"),
            "acknowledged items present": True,
            "the loading connection works again": OneOf(True, {"error": [
                "NodeUnavailable", Contains("gave up resending")]}),
        },
    },
    # Python's null is None, whose type is NoneType.
    "python": {
        "add a null": type_error("NoneType"),
        "exists of a null": type_error("NoneType"),
    },
}


def expected_for(client):
    expected = copy.deepcopy(EXPECTED)
    na = NOT_EXPRESSIBLE.get(client, {"items": {}, "steps": {}})
    for step in ("add", "exists"):
        for label in na["items"]:
            expected[step]["ok"][label] = "n/a"
    for step in na["steps"]:
        expected[step] = "n/a"
    expected.update(OWN_WORDS.get(client, {}))
    return expected


def expressible(client, items):
    """The labelled items `client` can express."""
    skipped = NOT_EXPRESSIBLE.get(client, {"items": {}})["items"]
    return {label: spec for label, spec in items.items() if label not in skipped}


def item_bytes(spec):
    kind, value = next(iter(spec.items()))
    return value.encode() if kind == "text" else bytes.fromhex(value)


# ----- the drivers -----


class Driver:
    """A client driver process speaking JSON lines (see the module's docstring)."""

    def __init__(self, client, argv, env=None):
        self.client = client
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, encoding="utf-8",
                                     env=env)
        self.answers = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.answers.put(json.loads(line))
        self.answers.put(None)

    def send(self, request):
        self.proc.stdin.write(json.dumps(request, ensure_ascii=False) + "\n")
        self.proc.stdin.flush()

    def answer(self, timeout=STEP_TIMEOUT):
        """The next answer; None when the driver gave none within `timeout` (it is stopped)."""
        try:
            answer = self.answers.get(timeout=timeout)
        except queue.Empty:
            self.proc.kill()
            return None
        if answer is None:
            raise RuntimeError(f"the {self.client} driver stopped: {self.proc.stderr.read()}")
        return answer

    def request(self, op, name, **fields):
        self.send({"op": op, "name": name, **fields})
        answer = self.answer()
        if answer is None:
            raise RuntimeError(f"the {self.client} driver did not answer {op} within "
                               f"{STEP_TIMEOUT} s")
        return answer

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def newest(*paths):
    existing = [p for p in paths if p.exists()]
    return max(existing, key=lambda p: p.stat().st_mtime) if existing else None


def rust_driver():
    path = os.environ.get("RUSTBLOOM_SCENARIO_DRIVER")
    found = Path(path) if path else newest(
        *(ROOT / "target" / profile / "examples/scenario_driver" for profile in ("release",
                                                                                 "debug"))
    )
    if found is None or not found.exists():
        pytest.fail("the Rust scenario driver is not built: `cargo build --release -p "
                    "rustbloom-client --example scenario_driver` (`make test` builds it)")
    return str(found)


def bfctl_binary():
    path = Path(os.environ.get("RUSTBLOOM_BFCTL") or ROOT / "target/release/bfctl")
    if not path.exists():
        pytest.fail(f"bfctl not found at {path}: run `make build` or set RUSTBLOOM_BFCTL")
    return str(path)


def tool(name):
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} not found: `make client-packages` installs it")
    return found


def start_driver(client, port):
    url = f"redis://127.0.0.1:{port}"
    env = None
    if client == "node-redis-6":
        env = dict(os.environ, RUSTBLOOM_NODE_REDIS=str(NODE_REDIS_6))
        argv = [tool("node"), "--import", NODE_REDIS_FROM.as_uri(), str(HERE / "driver.mjs"),
                str(port)]
    else:
        argv = {
            "rust": [rust_driver(), url],
            "rust-async": [rust_driver(), "--async", url],
            "python": [sys.executable, str(HERE / "driver.py"), str(port)],
            "php": [tool("php"), str(HERE / "driver.php"), str(port)],
            "node": [tool("node"), str(HERE / "driver.mjs"), str(port)],
        }[client]
    return Driver(client, argv, env)


class Bfctl:
    """bfctl run one command a step, answering as the drivers do; a failure is its exit
    status with what it printed on stderr."""

    def __init__(self, port):
        self.env = dict(os.environ, BFCTL_URL=f"redis://127.0.0.1:{port}")

    def run(self, *args, stdin=b""):
        done = subprocess.run([bfctl_binary(), "--quiet", *args], input=stdin,
                              capture_output=True, env=self.env, timeout=STEP_TIMEOUT)
        return done

    def request(self, op, name, **fields):
        lines = b"".join(item_bytes(s) + b"\n" for s in fields.get("items", []))
        if op == "reserve":
            done = self.run("reserve", name, str(fields["error_rate"]), str(fields["capacity"]),
                            "--partitions", str(fields["partitions"]))
            return self._answer(done, None)
        if op == "add":
            # dedup answers for every line whether it was new: it prints exactly the new ones.
            done = self.run("dedup", name, stdin=lines)
            new = set(done.stdout.split(b"\n"))
            return self._answer(done, [item_bytes(s) in new for s in fields["items"]])
        if op == "exists":
            done = self.run("exists", name, stdin=lines)
            return self._answer(done, [a == b"1" for a in done.stdout.split()])
        if op == "drop":
            # It prints "NAME: deleted N keys".
            done = self.run("drop", name)
            words = done.stdout.split()
            deleted = int(words[-2]) if words[-1:] == [b"keys"] else done.stdout.decode()
            return self._answer(done, deleted)
        raise ValueError(op)

    @staticmethod
    def _answer(done, ok):
        if done.returncode != 0:
            return {"error": {"class": f"exit {done.returncode}",
                              "message": done.stderr.decode(errors="replace").strip()}}
        return {"ok": ok}


LOAD_ITEMS = 20_000
LOAD_BATCH = 1000
# Batches a load has added when the master is killed.
LOAD_BATCHES_BEFORE_KILL = 5
LOAD_PREFIX = "load-"


class DriverLoad:
    """A driver's load op: it pauses after its first batches, then goes on when told."""

    def __init__(self, driver, name):
        self.driver = driver
        driver.send({"op": "load", "name": name, "prefix": LOAD_PREFIX, "count": LOAD_ITEMS,
                     "batch": LOAD_BATCH, "pause_after": LOAD_BATCHES_BEFORE_KILL,
                     "retry_for": LOAD_RETRY_FOR})

    def wait_paused(self, _scenario):
        paused = self.driver.answer()
        expected = {"paused": LOAD_BATCHES_BEFORE_KILL * LOAD_BATCH}
        assert paused == expected, f"{self.driver.client}: {paused}"

    def go_on(self):
        self.driver.send({"op": "go on"})

    def end(self, deadline):
        """How the load ended ("complete", or the error's class) and the items acknowledged."""
        answer = self.driver.answer(max(deadline - time.monotonic(), 0))
        if answer is None:
            return f"hung for more than {HUNG_AFTER} s", 0
        if "ok" in answer:
            return "complete", answer["ok"]["acknowledged"]
        return answer["error"]["class"], answer["acknowledged"]

    def stop(self):
        pass


class BfctlLoad:
    """`bfctl load` reading its items from a pipe: the first batches, then (once they are in
    the filter) the rest. One command of LOAD_BATCH items a round trip, so that it sends the
    first lines without waiting for a round's worth of input."""

    def __init__(self, bfctl, name):
        self.name = name
        self.lines = [b"%s%d\n" % (LOAD_PREFIX.encode(), i) for i in range(LOAD_ITEMS)]
        self.first = LOAD_BATCHES_BEFORE_KILL * LOAD_BATCH
        self.proc = subprocess.Popen(
            [bfctl_binary(), "--quiet", "load", "--pipeline", "1", "--batch", str(LOAD_BATCH),
             name], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=bfctl.env)
        self.proc.stdin.write(b"".join(self.lines[: self.first]))
        self.proc.stdin.flush()

    def wait_paused(self, scenario):
        wait_for("bfctl to add its first lines", lambda: scenario.card(self.name) >= self.first)

    def go_on(self):
        self.proc.stdin.write(b"".join(self.lines[self.first :]))
        self.proc.stdin.close()

    def end(self, deadline):
        try:
            self.proc.wait(max(deadline - time.monotonic(), 0))
        except subprocess.TimeoutExpired:
            self.stop()
            return f"hung for more than {HUNG_AFTER} s", 0
        if self.proc.returncode == 0:
            return "complete", LOAD_ITEMS
        return f"exit {self.proc.returncode}: {self.proc.stderr.read().decode(errors='replace')}", 0

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


# ----- the cluster -----


def cluster_client(cluster):
    return RedisCluster(host="127.0.0.1", port=cluster.nodes[0].port, socket_timeout=10)


def all_keys(cluster):
    keys = set()
    for node in cluster.nodes:
        with node.client() as c:
            if c.execute_command("ROLE")[0] == b"master":
                keys.update(c.keys("*"))
    return keys


def wait_for(what, check, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what}")


def replicas_synced(cluster):
    """Every replica's link to its master up, and each caught up with its master's offset."""
    masters, replicas = {}, []
    for node in cluster.nodes:
        with node.client(decode_responses=True) as c:
            info = c.info("replication")
        if info["role"] == "master":
            masters[node.port] = info["master_repl_offset"]
        else:
            replicas.append(info)
    return len(replicas) == len(cluster.nodes) // 2 and all(
        r.get("master_link_status") == "up"
        and r.get("slave_repl_offset") == masters.get(r.get("master_port"))
        for r in replicas
    )


def cluster_whole(cluster):
    for node in cluster.nodes:
        with node.client(decode_responses=True) as c:
            info = c.cluster("info")
        if info.get("cluster_state") != "ok" or int(info.get("cluster_known_nodes", 0)) != len(
            cluster.nodes
        ):
            return False
    return replicas_synced(cluster)


def victim_master(cluster):
    """A master other than the node the clients start from."""
    for node in cluster.nodes[1:]:
        with node.client() as c:
            if c.execute_command("ROLE")[0] == b"master":
                return node
    raise RuntimeError("no master besides the first node")


def tag_on(cluster, node):
    """A hash tag whose slot `node` serves."""
    with cluster_client(cluster) as c:
        for n in range(10_000):
            if c.get_node_from_key(f"{{kill{n}}}").port == node.port:
                return f"kill{n}"
    raise RuntimeError(f"no slot of node {node.port} found")


def restart(node):
    """Starts a killed node again on its port and directory: it rejoins as a replica."""
    node._spawn()
    if not node._wait_ping():
        raise RuntimeError(f"node {node.port} did not restart (log in {node.dir})")


# ----- the steps -----


class Scenario:
    def __init__(self, cluster):
        self.cluster = cluster
        self.port = cluster.nodes[0].port
        self.transcripts = {client: {} for client in CLIENTS}
        self.written = {}  # client -> the labelled items it added

    def name(self, client):
        return f"scénario:{client}"

    def connect(self, client):
        return Bfctl(self.port) if client == "bfctl" else start_driver(client, self.port)

    def record(self, client, step, outcome):
        self.transcripts[client][step] = outcome

    @staticmethod
    def outcome(answer, normalise=lambda m: m):
        if "error" in answer:
            return {"error": [answer["error"]["class"], normalise(answer["error"]["message"])]}
        return {"ok": answer["ok"]}

    def first_steps(self, client, driver):
        """Reserve, reserve again, add, exists, non-string items."""
        name = self.name(client)
        reserve = {"error_rate": 1e-6, "capacity": 100_000}
        self.record(client, "reserve",
                    self.outcome(driver.request("reserve", name, partitions=PARTITIONS,
                                                **reserve)))
        for partitions in (PARTITIONS, 6):
            before = all_keys(self.cluster)
            outcome = self.outcome(driver.request("reserve", name, partitions=partitions,
                                                  **reserve))
            outcome["keys unchanged"] = all_keys(self.cluster) == before
            self.record(client, f"reserve again, {partitions} partitions", outcome)

        items = expressible(client, ITEMS)
        self.written[client] = items
        self.record(client, "add", self.labelled(
            driver.request("add", name, items=list(items.values())), items, ITEMS))
        probes = {**items, **PROBES}
        self.record(client, "exists", self.labelled(
            driver.request("exists", name, items=list(probes.values())), probes,
            {**ITEMS, **PROBES}))

        na = NOT_EXPRESSIBLE.get(client, {"steps": {}})["steps"]
        for type_name, spec in TYPED.items():
            for op, step in (("add", f"add a {type_name}"), ("exists", f"exists of a {type_name}")):
                if step in na:
                    self.record(client, step, "n/a")
                    continue
                self.record(client, step, self.outcome(
                    driver.request(op, name, items=[TYPED_PROBE, spec])))
        step = "a refused batch sent nothing"
        if step in na:
            self.record(client, step, "n/a")
        else:
            self.record(client, step, self.labelled(
                driver.request("exists", name, items=[TYPED_PROBE]),
                {"typed-probe": TYPED_PROBE}, {"typed-probe": TYPED_PROBE}))

    @staticmethod
    def labelled(answer, sent, all_labels):
        """An answer of one boolean per item sent, by label; "n/a" for the labels not sent."""
        if "error" in answer or len(answer["ok"]) != len(sent):
            return Scenario.outcome(answer)
        by_label = dict(zip(sent, answer["ok"]))
        return {"ok": {label: by_label.get(label, "n/a") for label in all_labels}}

    def others_items(self, reader, driver):
        """Every client's items, looked up from `reader`."""
        found = {}
        for writer, written in self.written.items():
            items = expressible(reader, written)
            answer = driver.request("exists", self.name(writer), items=list(items.values()))
            found[writer] = answer.get("ok") == [True] * len(items) or answer
        self.record(reader, "other clients' items found", {"ok": found})

    def vanished_partition(self, client, driver):
        """A partition deleted under an add and a lookup, then drop."""
        name = self.name(client)
        with cluster_client(self.cluster) as c:
            layout = PartitionedBloom(c, name).layout
            batch = {**self.written[client],
                     **{f"vanish {i}": {"text": f"vanish-{i}"} for i in range(20)}}
            gone = partition_of(b"item-ascii", layout.routing_seed, layout.partitions)
            key = layout.keys[gone]
            c.delete(key)
        acknowledged = sum(
            partition_of(item_bytes(s), layout.routing_seed, layout.partitions) != gone
            for s in batch.values()
        )

        def normalise(message):
            return (message.replace(key.decode(), "<key>").replace(name, "<name>")
                    .replace(f"partition {gone} of", "partition <i> of")
                    .replace(f" {acknowledged} items", " <ack> items")
                    .replace(f" {acknowledged} lines acknowledged", " <ack> lines acknowledged"))

        self.record(client, "add with a partition deleted", self.outcome(
            driver.request("add", name, items=list(batch.values())), normalise))
        self.record(client, "exists with a partition deleted", self.outcome(
            driver.request("exists", name, items=list(self.written[client].values())),
            normalise))
        outcome = self.outcome(driver.request("drop", name))
        left = {name.encode(), *partition_keys(name.encode(), PARTITIONS)} & all_keys(
            self.cluster)
        outcome["keys left"] = sorted(k.decode(errors="replace") for k in left)
        self.record(client, "drop", outcome)

    def loads_through_a_kill(self):
        """Every client loading its own filter when a master is killed (kill -9): each has
        added its first batches when the master dies, then goes on. Each load must end complete
        or with NodeUnavailable by the deadline; once the cluster is whole again (the master
        restarted, now a replica), every item a load acknowledged is there, looked up both on
        the connection that loaded it and on a new one."""
        victim = victim_master(self.cluster)
        # Every load filter's descriptor on the master that dies, so that each client reads a
        # layout from its slot after the failover (a new filter object on the same connection).
        self.load_tag = tag_on(self.cluster, victim)
        drivers = {client: self.connect(client) for client in CLIENTS}
        loads = {}
        try:
            for client, driver in drivers.items():
                answer = driver.request("reserve", self.load_name(client), error_rate=1e-6,
                                        capacity=100_000, partitions=PARTITIONS)
                assert "ok" in answer, f"{client}: {answer}"
            wait_for("the replicas to sync", lambda: replicas_synced(self.cluster))
            for client, driver in drivers.items():
                loads[client] = (BfctlLoad(driver, self.load_name(client)) if client == "bfctl"
                                 else DriverLoad(driver, self.load_name(client)))
            for client, load in loads.items():
                load.wait_paused(self)
            # What was acknowledged has reached the replicas: replication is asynchronous, and
            # the scenario tests the clients, not that race.
            wait_for("the replicas to catch up", lambda: replicas_synced(self.cluster))
            victim.proc.kill()
            victim.proc.wait()
            killed = time.monotonic()
            for load in loads.values():
                load.go_on()
            ended = {client: load.end(killed + HUNG_AFTER) for client, load in loads.items()}
            restart(victim)
            wait_for("the cluster to be whole again", lambda: cluster_whole(self.cluster))
            for client, (how, acknowledged) in ended.items():
                items = [{"text": f"{LOAD_PREFIX}{i}"} for i in range(acknowledged)]
                if isinstance(drivers[client], Driver) and drivers[client].proc.poll() is not None:
                    drivers[client] = self.connect(client)  # the hung one was stopped
                fresh = self.connect(client)
                try:
                    outcome = {
                        "ended": how,
                        "acknowledged items present": self.all_found(fresh, client, items),
                        "the loading connection works again":
                            self.all_found(drivers[client], client, items),
                    }
                finally:
                    if isinstance(fresh, Driver):
                        fresh.close()
                self.record(client, "load through a master's kill -9", outcome)
        finally:
            for load in loads.values():
                load.stop()
            for driver in drivers.values():
                if isinstance(driver, Driver):
                    driver.close()

    def load_name(self, client):
        return f"{{{self.load_tag}}}scénario-load:{client}"

    def all_found(self, driver, client, items):
        answer = driver.request("exists", self.load_name(client), items=items,
                                retry_for=LOAD_RETRY_FOR)
        return answer.get("ok") == [True] * len(items) or self.outcome(answer)

    def card(self, name):
        """Items in all partitions of `name` (BF.CARD of each)."""
        with cluster_client(self.cluster) as c:
            keys = partition_keys(name.encode(), PARTITIONS)
            return sum(c.execute_command("BF.CARD", key) for key in keys)

    def run(self):
        """Every step for every client; prints how long each part took."""
        started = time.monotonic()
        drivers = {client: self.connect(client) for client in CLIENTS}
        try:
            for client, driver in drivers.items():
                self.first_steps(client, driver)
            for client, driver in drivers.items():
                self.others_items(client, driver)
            for client, driver in drivers.items():
                self.vanished_partition(client, driver)
        finally:
            for driver in drivers.values():
                if isinstance(driver, Driver):
                    driver.close()
        print(f"steps before the kill: {time.monotonic() - started:.1f} s")
        started = time.monotonic()
        self.loads_through_a_kill()
        print(f"loads through a kill -9, the cluster whole again: "
              f"{time.monotonic() - started:.1f} s")


@pytest.fixture(scope="module")
def cluster():
    c = servers.Cluster()
    try:
        yield c
    finally:
        c.stop()


def test_every_client_does_what_the_contract_says(cluster):
    scenario = Scenario(cluster)
    scenario.run()
    for client in CLIENTS:
        print(f"{client}: {json.dumps(scenario.transcripts[client], ensure_ascii=False)}")
    differences = []
    for client in CLIENTS:
        expected = expected_for(client)
        actual = scenario.transcripts[client]
        for step in expected.keys() | actual.keys():
            if expected.get(step, "<missing>") != actual.get(step, "<missing>"):
                differences.append(f"{client}, {step}:\n    expected {expected.get(step)!r}\n"
                                   f"    got      {actual.get(step)!r}")
    assert not differences, "\n".join(differences)
