"""Redis Streams as `kraft-bench peers`' one-node peer: a redis-server of our own (never the
packaged service) on a free port with its files in a temporary directory, and the produce and
consume runs with redis-py, pipelined (one round trip per `PIPELINE` commands, over one
connection, as the kraft producer sends over one connection per broker).

Persistence is Redis's documented durable setting, the append-only file with `appendfsync
everysec`: every write reaches the file (the OS's page cache), as kraft's log does, and neither
syncs each write.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from kraft.bench.cluster import free_port, poll
from kraft.bench.common import BenchResult, Progress, make_payload
from kraft.bench.peers import processes
from kraft.bench.histogram import LatencyHistogram

PIPELINE = 1_000  # XADDs per round trip (~100 KB at 100 B: the size of a kraft produce request)
READ_COUNT = 10_000  # entries per XRANGE, as the kraft consumer's max_poll_records
FIELD = b"v"
INSTALL = "apt-get install -y redis-server (Debian's package; the bench starts its own server) and " \
          "pip install 'kraft[bench]' (redis-py)"


def missing() -> str | None:
    """Why this peer cannot run here (with how to install it), or None."""
    if shutil.which("redis-server") is None:
        return f"redis-server not found on PATH: {INSTALL}"
    try:
        import redis  # noqa: F401
    except ImportError:
        return f"redis-py not installed: {INSTALL}"
    return None


@contextmanager
def redis_server() -> Iterator[Any]:
    """A redis-server for the run and a redis-py client connected to it."""
    import redis

    root = Path(tempfile.mkdtemp(prefix="kraft-bench-redis-"))
    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(root), "--save", "",
         "--appendonly", "yes", "--appendfsync", "everysec", "--daemonize", "no", "--loglevel", "warning",
         "--logfile", str(root / "redis.log")],
        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    client = redis.Redis(host="127.0.0.1", port=port)
    try:
        poll(lambda: _ping(client), 30, 0.05, f"redis-server on port {port}")
        yield client
    finally:
        client.close()
        processes.stop([proc])
        shutil.rmtree(root, ignore_errors=True)


def _ping(client: Any) -> bool:
    import redis

    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False


def stream_names(prefix: str, streams: int) -> list[str]:
    return [f"{prefix}-{i}" for i in range(streams)]


def produce(client: Any, prefix: str, num_records: int, record_size: int, streams: int) -> BenchResult:
    """XADD `num_records` records to `streams` streams, each pipeline of `PIPELINE` records to
    the next stream in turn (kraft's sticky partitioner fills one partition's batch at a time).
    Latency: each record's XADD queued to its pipeline's answer."""
    import random

    payload = make_payload(record_size, random.Random(0))
    names = stream_names(prefix, streams)
    latency = LatencyHistogram()
    progress = Progress("redis produce")
    clock = time.perf_counter
    pipe = client.pipeline(transaction=False)
    add = pipe.execute_command
    start = clock()
    sent = 0
    while sent < num_records:
        n = min(PIPELINE, num_records - sent)
        stream = names[(sent // PIPELINE) % streams]
        queued = []
        for _ in range(n):
            queued.append(clock())
            add("XADD", stream, "*", FIELD, payload)  # xadd() builds the same command, a quarter slower
        pipe.execute()
        done = clock()
        for t in queued:
            latency.record_us(round((done - t) * 1e6))
        sent += n
        progress.update(sent, sent * record_size)
    elapsed = clock() - start
    return BenchResult("redis produce", dict(streams=streams, record_size=record_size, pipeline=PIPELINE),
                       num_records, num_records * record_size, elapsed, latency)


def consume(client: Any, prefix: str, num_records: int, streams: int) -> BenchResult:
    """Reads every stream from its start with XRANGE, `READ_COUNT` entries a call."""
    progress = Progress("redis consume")
    records = nbytes = 0
    start = time.perf_counter()
    for stream in stream_names(prefix, streams):
        after = "-"
        while records < num_records:
            entries = client.xrange(stream, min=after, max="+", count=READ_COUNT)
            if not entries:
                break
            records += len(entries)
            nbytes += sum(len(fields[FIELD]) for _id, fields in entries)
            after = b"(" + entries[-1][0]
            progress.update(records, nbytes)
    elapsed = time.perf_counter() - start
    return BenchResult("redis consume", dict(streams=streams, count=READ_COUNT), records, nbytes, elapsed)
