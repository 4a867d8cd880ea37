"""Starts a redis-server with the rustbloom module for the client tests."""

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import redis

ROOT = Path(__file__).resolve().parents[2]


def module_path() -> str:
    p = Path(os.environ.get("RUSTBLOOM_MODULE") or ROOT / "target/release/librustbloom.so")
    if not p.exists():
        pytest.exit(f"module not found at {p}: run `make build` or set RUSTBLOOM_MODULE", 2)
    return str(p.resolve())


def server_binary() -> str:
    """$RUSTBLOOM_SERVER (as the Rust integration tests), else redis-server from PATH."""
    return (os.environ.get("RUSTBLOOM_SERVER") or shutil.which("redis-server")
            or "/usr/bin/redis-server")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="rbpy")
        self.proc = None
        for _ in range(8):
            self.port = free_port()
            self.proc = subprocess.Popen(
                [server_binary(),
                 "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
                 "--logfile", "redis.log", "--save", "", "--appendonly", "no",
                 "--loadmodule", module_path()],
                cwd=self.dir, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL)
            if self._wait():
                return
            self.stop()
            self.dir = tempfile.mkdtemp(prefix="rbpy")
        raise RuntimeError("redis-server did not start")

    def _wait(self) -> bool:
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                if redis.Redis(port=self.port, socket_timeout=2).ping():
                    return True
            except redis.ConnectionError:
                time.sleep(0.05)
        return False

    def client(self, protocol=2, **kw) -> redis.Redis:
        return redis.Redis(port=self.port, protocol=protocol, socket_timeout=60, **kw)

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                redis.Redis(port=self.port, socket_timeout=5).shutdown(nosave=True)
            except redis.RedisError:
                pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def server():
    s = Server()
    try:
        yield s
    finally:
        s.stop()
