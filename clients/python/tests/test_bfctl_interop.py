"""bfctl and this package share partitioned filters: what one writes the other reads.

Skipped only when the bfctl binary has no `reserve --partitions` (a bfctl without partitioned
filters); a missing bfctl binary is a failure.
"""

import os
import subprocess
from pathlib import Path

import pytest

from rustbloom import PartitionedBloom, partition_keys

ROOT = Path(__file__).resolve().parents[3]


def bfctl_binary() -> str:
    path = Path(os.environ.get("RUSTBLOOM_BFCTL") or ROOT / "target/release/bfctl")
    if not path.exists():
        pytest.fail(f"bfctl not found at {path}: run `make build` or set RUSTBLOOM_BFCTL")
    return str(path)


def bfctl_has_partitions() -> bool:
    probe = subprocess.run([bfctl_binary(), "reserve", "--help"], capture_output=True,
                           text=True, timeout=60)
    return probe.returncode == 0 and "--partitions" in probe.stdout


@pytest.fixture
def bfctl(target, request):
    """Runs bfctl against the same server or cluster as `target`."""
    if not bfctl_has_partitions():
        pytest.skip("this bfctl has no `reserve --partitions`")
    if request.node.callspec.params["target"] == "single":
        port = request.getfixturevalue("single_server").port
    else:
        port = request.getfixturevalue("cluster").nodes[0].port
    env = dict(os.environ, BFCTL_URL=f"redis://127.0.0.1:{port}")

    def run(*args, stdin: bytes = b"") -> bytes:
        done = subprocess.run([bfctl_binary(), "--quiet", *args], input=stdin,
                              capture_output=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        return done.stdout

    return run


def lines(items) -> bytes:
    return b"".join(item + b"\n" for item in items)


def test_bfctl_writes_python_reads(target, bfctl):
    name = b"interop:bfctl-writes"
    members = [b"from-bfctl:%d" % i for i in range(3000)]
    bfctl("reserve", name.decode(), "0.01", "3000", "--partitions", "6")
    bfctl("load", name.decode(), stdin=lines(members))

    bloom = PartitionedBloom(target, name)
    info = bloom.info()
    assert info["Partitions"] == 6
    assert info["Partition keys"] == partition_keys(name, 6)
    assert all(bloom.mexists(members))
    assert sum(bloom.mexists([b"never:%d" % i for i in range(3000)])) < 3000 * 0.02


def test_python_writes_bfctl_reads(target, bfctl):
    name = b"interop:python-writes"
    bloom = PartitionedBloom(target, name)
    bloom.reserve(0.01, 3000, partitions=6)
    members = [b"from-python:%d" % i for i in range(3000)]
    bloom.madd(members)
    probes = members + [b"never:%d" % i for i in range(3000)]

    answers = bfctl("exists", name.decode(), stdin=lines(probes)).split()
    # bfctl prints 1 or 0 per input line, in order: the same answers as this package's.
    assert answers == [b"1" if a else b"0" for a in bloom.mexists(probes)]
    assert answers[:3000] == [b"1"] * 3000
