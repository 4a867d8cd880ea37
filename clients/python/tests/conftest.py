"""Servers for the tests: one server, and a cluster of 3 masters + 3 replicas, each with the
rustbloom module loaded; both are always stopped, also when a test fails.

The server binary is $RUSTBLOOM_SERVER (default: redis-server from PATH), the module
$RUSTBLOOM_MODULE (default: target/release/librustbloom.so of this repository).
"""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import List, Optional

import pytest
import redis
from redis.cluster import RedisCluster

ROOT = Path(__file__).resolve().parents[3]
# The cluster bus listens on port + 10000, which must stay below 65536.
MAX_NODE_PORT = 55535
START_DEADLINE_SECONDS = 30
CLUSTER_DEADLINE_SECONDS = 60


def module_path() -> str:
    p = Path(os.environ.get("RUSTBLOOM_MODULE") or ROOT / "target/release/librustbloom.so")
    if not p.exists():
        pytest.exit(f"module not found at {p}: run `make build` or set RUSTBLOOM_MODULE", 2)
    return str(p.resolve())


def server_binary() -> str:
    return os.environ.get("RUSTBLOOM_SERVER") or shutil.which("redis-server") or "/usr/bin/redis-server"


def cli_binary() -> str:
    cli = shutil.which("redis-cli")
    if cli is None:
        pytest.exit("redis-cli not found (Debian's redis-tools): it creates the test cluster", 2)
    return cli


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(cluster_bus: bool) -> int:
    """A free loopback port; for a cluster node one <= 55535 whose bus port (+10000) is free."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if not cluster_bus:
            return port
        if port <= MAX_NODE_PORT and _bindable(port + 10000):
            return port
    raise RuntimeError("no free port pair (p, p + 10000) on loopback")


class Node:
    """One server process in its own temporary directory."""

    def __init__(self, cluster: bool):
        self.cluster = cluster
        self.dir = tempfile.mkdtemp(prefix="rbpy-")
        self.proc: Optional[subprocess.Popen] = None
        self.port = 0
        for _ in range(8):
            self.port = free_port(cluster)
            self._spawn()
            if self._wait_ping():
                return
            self._kill()
        self.stop()
        raise RuntimeError(f"{server_binary()} did not start (log in {self.dir})")

    def _spawn(self):
        args = [
            server_binary(), "--port", str(self.port), "--bind", "127.0.0.1",
            "--dir", self.dir, "--logfile", "server.log", "--save", "", "--appendonly", "no",
            "--loadmodule", module_path(),
        ]
        if self.cluster:
            args += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                     "--cluster-node-timeout", "2000"]
        self.proc = subprocess.Popen(args, cwd=self.dir, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def _wait_ping(self) -> bool:
        deadline = time.monotonic() + START_DEADLINE_SECONDS
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                if redis.Redis(port=self.port, socket_timeout=2).ping():
                    return True
            except redis.ConnectionError:
                time.sleep(0.05)
        return False

    def client(self, **kw) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=60, **kw)

    def hang(self):
        """Stops the server without closing its connections (SIGSTOP), as a frozen machine would:
        the kernel still accepts connections, nothing answers. stop() still ends it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGSTOP)

    def _kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        self.proc = None

    def stop(self):
        self._kill()
        shutil.rmtree(self.dir, ignore_errors=True)


class Cluster:
    """3 masters + 3 replicas (`redis-cli --cluster create --cluster-replicas 1`)."""

    def __init__(self, masters: int = 3):
        self.nodes: List[Node] = []
        try:
            for _ in range(masters * 2):
                self.nodes.append(Node(cluster=True))
            addresses = [f"127.0.0.1:{n.port}" for n in self.nodes]
            created = subprocess.run(
                [cli_binary(), "--cluster", "create", *addresses, "--cluster-replicas", "1",
                 "--cluster-yes"],
                stdin=subprocess.DEVNULL, capture_output=True, text=True,
                timeout=CLUSTER_DEADLINE_SECONDS,
            )
            if created.returncode != 0:
                raise RuntimeError(f"redis-cli --cluster create failed: {created.stdout}"
                                   f"{created.stderr}")
            self._wait_ok()
        except BaseException:
            self.stop()
            raise

    def _wait_ok(self):
        """Until every node says cluster_state:ok and knows every other node."""
        deadline = time.monotonic() + CLUSTER_DEADLINE_SECONDS
        last = ""
        while time.monotonic() < deadline:
            states = []
            for node in self.nodes:
                with node.client(decode_responses=True) as c:
                    states.append(c.cluster("info"))
            if all(s.get("cluster_state") == "ok"
                   and int(s.get("cluster_known_nodes", 0)) == len(self.nodes) for s in states):
                return
            last = str(states)
            time.sleep(0.1)
        raise RuntimeError(f"the cluster did not reach cluster_state:ok: {last}")

    def client(self, **kw) -> RedisCluster:
        return RedisCluster(host="127.0.0.1", port=self.nodes[0].port, socket_timeout=60, **kw)

    def stop(self):
        for node in self.nodes:
            node.stop()


@pytest.fixture(scope="session")
def single_server():
    node = Node(cluster=False)
    try:
        yield node
    finally:
        node.stop()


@pytest.fixture(scope="session")
def cluster():
    c = Cluster()
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(params=["single", "cluster"])
def target(request):
    """A client on one server or on the cluster (the test runs once with each)."""
    if request.param == "single":
        client = request.getfixturevalue("single_server").client()
    else:
        client = request.getfixturevalue("cluster").client()
    try:
        yield client
    finally:
        client.close()
