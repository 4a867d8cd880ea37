"""The scenario's driver for the Python package (clients/python): reads one JSON request a line
on stdin, runs it with rustbloom.PartitionedBloom over redis-py's RedisCluster, and writes one
JSON answer a line on stdout (the protocol is described in test_scenario.py).

Usage: python driver.py PORT (any node of the cluster).
"""

import json
import sys

from redis.cluster import RedisCluster

from rustbloom import PartitionedBloom, PartitionedBloomError


def item(spec):
    """The item a request describes, as a Python user would pass it."""
    kind, value = next(iter(spec.items()))
    if kind == "text":
        return value
    if kind == "hex":
        return bytes.fromhex(value)
    if kind in ("float", "bool"):
        return value
    if kind == "null":
        return None
    raise ValueError(f"unknown item kind {kind!r}")


def error_class(e: Exception) -> str:
    """The contract's class name: FilterNotFound, PartitionMissing, Descriptor, NodeUnavailable,
    Server (the package's *Error classes without the suffix), or TypeError; any other exception
    by its own class name (a difference the scenario shows)."""
    if isinstance(e, PartitionedBloomError):
        return type(e).__name__.removesuffix("Error")
    return type(e).__name__


def load(bloom, request, say, wait_go):
    """Adds `count` items `prefix<i>` in batches; after `pause_after` batches says how many were
    acknowledged and waits for the go-ahead. Answers how many were acknowledged in all."""
    acknowledged = 0
    for batch_number, start in enumerate(range(0, request["count"], request["batch"])):
        if batch_number == request["pause_after"]:
            say({"paused": acknowledged})
            wait_go()
        end = min(start + request["batch"], request["count"])
        try:
            bloom.madd([f"{request['prefix']}{i}" for i in range(start, end)])
        except Exception as e:  # every failure is an outcome to compare
            return {"error": {"class": error_class(e), "message": str(e)},
                    "acknowledged": acknowledged}
        acknowledged += end - start
    return {"ok": {"acknowledged": acknowledged}}


def run(client, request, say, wait_go):
    retry_for = request.get("retry_for", 30.0)
    bloom = PartitionedBloom(client, request["name"], retry_for=retry_for)
    op = request["op"]
    if op == "reserve":
        bloom.reserve(request["error_rate"], request["capacity"],
                      partitions=request["partitions"])
        return {"ok": None}
    if op == "add":
        return {"ok": bloom.madd([item(s) for s in request["items"]])}
    if op == "exists":
        return {"ok": bloom.mexists([item(s) for s in request["items"]])}
    if op == "drop":
        return {"ok": bloom.drop()}
    if op == "load":
        return load(bloom, request, say, wait_go)
    raise ValueError(f"unknown op {op!r}")


def main():
    client = RedisCluster(host="127.0.0.1", port=int(sys.argv[1]), socket_timeout=5)

    def say(answer):
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()

    def wait_go():
        sys.stdin.readline()

    for line in sys.stdin:
        request = json.loads(line)
        try:
            answer = run(client, request, say, wait_go)
        except Exception as e:  # every failure is an outcome to compare
            answer = {"error": {"class": error_class(e), "message": str(e)}}
        say(answer)


if __name__ == "__main__":
    main()
