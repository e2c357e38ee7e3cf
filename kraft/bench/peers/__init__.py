"""`kraft-bench peers`: the rows of issue 25's table, kraft and its peer side by side in one run
(each pair back to back, under the same load), with the ratio of the two and the load average
(1 minute) when each figure was taken.

| row | kraft | peer |
|---|---|---|
| produce 100 B, 6 partitions, one node | `measure_produce` on a 1-node local cluster | Redis Streams, 6 streams |
| consume 100 B, one node | `measure_consume` of those records | Redis Streams XRANGE |
| produce 1 KiB, one node | `measure_produce`, 1 partition | Redis Streams, 1 stream |
| RF 3 acks=all, 100 B | 3-node local cluster, 6 partitions | NATS JetStream R3 |
| RF 3 acks=all paced at 20k rec/s | the same, `--throughput`, warm-up | NATS JetStream R3, paced |

Each side uses its client's batch call where the workload is bulk: the unpaced produce rows
queue kraft's records with `Producer.send_many`, `--send-many` (1,000) per call, as Redis's are
pipelined `PIPELINE` (1,000) per round trip and NATS's published asynchronously with
`MAX_PENDING` (4,000) acks outstanding; the paced row sends one record at a time on both sides.

A peer that is not installed gets "missing" in its cells and a line saying how to install it;
the kraft rows still run.
"""

from __future__ import annotations

import asyncio
import json
import os
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Callable

import click

from kraft.bench.cluster import LocalCluster
from kraft.bench.common import BenchResult, main
from kraft.bench.consume import measure_consume
from kraft.bench.peers import nats_jetstream, redis_streams
from kraft.bench.produce import measure_produce

GROUPS = ("one-node", "rf3")


@dataclass
class Row:
    workload: str
    unit: str  # "rec/s", "MB/s" (higher is better) or "p99 ms" (lower is better)
    goal: str
    kraft: BenchResult | None = None
    peer_name: str = ""
    peer: BenchResult | None = None
    peer_missing: str | None = None
    load: dict[str, float] = field(default_factory=dict)  # "kraft"/"peer" -> 1-minute load average

    def figure(self, result: BenchResult | None) -> float | None:
        if result is None:
            return None
        s = result.summary()
        return {"rec/s": s["records_per_sec"], "MB/s": s["mb_per_sec"], "p99 ms": s.get("p99_ms")}[self.unit]

    def ratio(self) -> float | None:
        """How many times kraft beats the peer: throughput kraft / peer, latency peer / kraft."""
        k, p = self.figure(self.kraft), self.figure(self.peer)
        if not k or not p:
            return None
        return p / k if self.unit == "p99 ms" else k / p

    def cell(self, result: BenchResult | None, who: str) -> str:
        if result is None:
            return "missing" if who == "peer" and self.peer_missing else "-"
        s = result.summary()
        if self.unit == "p99 ms":
            text = f"p50 {s['p50_ms']} / p99 {s['p99_ms']} / p99.9 {s['p999_ms']} ms"
        else:
            text = f"{self.figure(result):,.1f} {self.unit}"
        return f"{text} (load {self.load.get(who, 0):.1f})"

    def summary(self) -> dict[str, Any]:
        return {"workload": self.workload, "unit": self.unit, "goal": self.goal, "peer": self.peer_name,
                "kraft_result": self.kraft.summary() if self.kraft else None,
                "peer_result": self.peer.summary() if self.peer else None, "peer_missing": self.peer_missing,
                "ratio": self.ratio(), "load": self.load}


def _load() -> float:
    return os.getloadavg()[0]


def _timed(row: Row, who: str, run: Callable[[], BenchResult]) -> BenchResult:
    """`run()`, with the load average at its end next to its figure."""
    result = run()
    row.load[who] = _load()
    return result


@main.command()
@click.option("--only", type=click.Choice(GROUPS), multiple=True,
              help="Run only these rows: one-node (Redis Streams rows), rf3 (NATS JetStream rows); repeatable.")
@click.option("--records", type=click.IntRange(min=1), default=1_000_000, show_default=True,
              help="100-byte records of the one-node produce and consume rows.")
@click.option("--records-1k", type=click.IntRange(min=1), default=200_000, show_default=True,
              help="1 KiB records of the one-node 1 KiB row.")
@click.option("--rf3-records", type=click.IntRange(min=1), default=500_000, show_default=True,
              help="Records of the RF 3 acks=all throughput row.")
@click.option("--paced-records", type=click.IntRange(min=1), default=200_000, show_default=True,
              help="Records of the paced latency row (after a tenth as many of warm-up).")
@click.option("--throughput", type=click.IntRange(min=1), default=20_000, show_default=True,
              help="Records/s of the paced latency row.")
@click.option("--send-many", type=click.IntRange(min=0), default=redis_streams.PIPELINE, show_default=True,
              help="kraft's records per Producer.send_many call in the unpaced produce rows (Redis pipelines "
                   "as many per round trip); 0: Producer.send one at a time.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, writable=True),
              help="Write every row (both sides' summaries, ratio, load) as JSON here.")
def peers(only: tuple[str, ...], records: int, records_1k: int, rf3_records: int, paced_records: int,
          throughput: int, send_many: int, json_path: str | None) -> None:
    """Issue 25's table in one run: kraft beside Redis Streams (one node) and NATS JetStream R3
    (three nodes), each pair back to back, with the ratio and the load average of each figure."""
    groups = set(only or GROUPS)
    rows: list[Row] = []
    if "one-node" in groups:
        rows += _one_node_rows(records, records_1k, send_many)
    if "rf3" in groups:
        rows += _rf3_rows(rf3_records, paced_records, throughput, send_many)
    _print(rows, send_many)
    if json_path:
        with open(json_path, "w") as f:
            json.dump([r.summary() for r in rows], f, indent=2, sort_keys=True)
            f.write("\n")


def _one_node_rows(records: int, records_1k: int, send_many: int) -> list[Row]:
    produce = Row("one node, produce 100 B, 6 partitions", "rec/s", "≥ 4×", peer_name="Redis Streams")
    consume = Row("one node, consume 100 B", "rec/s", "≥ 2×", peer_name="Redis Streams")
    large = Row("one node, produce 1 KiB", "MB/s", "≥ 2×", peer_name="Redis Streams")
    rows = [produce, consume, large]
    missing = redis_streams.missing()
    with LocalCluster(1) as cluster, (nullcontext() if missing else redis_streams.redis_server()) as client:
        b = cluster.bootstrap
        runs = [
            (produce, lambda: measure_produce(b, "peers-100b", num_records=records, partitions=6,
                                              send_many=send_many),
             lambda: redis_streams.produce(client, "s100", records, 100, 6)),
            (consume, lambda: measure_consume(b, "peers-100b", num_records=records, partitions=6)[0],
             lambda: redis_streams.consume(client, "s100", records, 6)),
            (large, lambda: measure_produce(b, "peers-1k", num_records=records_1k, record_size=1024,
                                            send_many=send_many),
             lambda: redis_streams.produce(client, "s1k", records_1k, 1024, 1)),
        ]
        for row, kraft_run, peer_run in runs:
            row.kraft = _timed(row, "kraft", kraft_run)
            if client is not None:
                row.peer = _timed(row, "peer", peer_run)
    for row in rows:
        row.peer_missing = missing
    return rows


def _rf3_rows(records: int, paced_records: int, throughput: int, send_many: int) -> list[Row]:
    bulk = Row("3 nodes, RF 3, acks=all, 100 B", "rec/s", "≥ 20×", peer_name="NATS JetStream R3")
    paced = Row(f"RF 3 acks=all ack latency, paced at {throughput:,} rec/s", "p99 ms",
                "p50 ≤ 2 ms, p99 ≤ 5 ms, p99.9 ≤ 20 ms", peer_name="NATS JetStream R3")
    rows = [bulk, paced]
    missing = nats_jetstream.missing()
    warmup = max(1, paced_records // 10)
    with LocalCluster(3) as cluster:
        b = cluster.bootstrap
        bulk.kraft = _timed(bulk, "kraft", lambda: measure_produce(
            b, "peers-rf3", num_records=records, partitions=6, replication_factor=3, acks="all",
            send_many=send_many))
        paced.kraft = _timed(paced, "kraft", lambda: measure_produce(
            b, "peers-lat", num_records=paced_records, partitions=6, replication_factor=3, acks="all",
            linger_ms=0, throughput=throughput, warmup_records=warmup))
    if not missing:
        bulk.peer, paced.peer = asyncio.run(_nats_rows(bulk, paced, records, paced_records, throughput, warmup))
    for row in rows:
        row.peer_missing = missing
    return rows


async def _nats_rows(bulk: Row, paced: Row, records: int, paced_records: int, throughput: int,
                     warmup: int) -> tuple[BenchResult, BenchResult]:
    async with nats_jetstream.jetstream_r3() as js:
        bulk_result = await nats_jetstream.produce(js, records, 100)
        bulk.load["peer"] = _load()
        paced_result = await nats_jetstream.produce(js, paced_records, 100, throughput, warmup)
        paced.load["peer"] = _load()
    return bulk_result, paced_result


def _print(rows: list[Row], send_many: int) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table("workload", "kraft", "peer", "peer figure", "ratio", "goal", title="kraft-bench peers",
                  title_justify="left")
    for row in rows:
        ratio = row.ratio()
        table.add_row(row.workload, row.cell(row.kraft, "kraft"), row.peer_name, row.cell(row.peer, "peer"),
                      "-" if ratio is None else f"{ratio:.2f}×", row.goal)
    console = Console(file=click.get_text_stream("stdout"), width=200)
    console.print(table)
    console.print("ratio: kraft's figure over the peer's (rec/s, MB/s); for latency the peer's p99 over kraft's. "
                  "load: the 1-minute load average when the figure was taken.")
    kraft_call = f"Producer.send_many, {send_many:,} records per call" if send_many else "Producer.send, one at a time"
    console.print(f"batch calls, unpaced produce rows: kraft {kraft_call}; Redis XADD pipelined "
                  f"{redis_streams.PIPELINE:,} per round trip; NATS publish_async, {nats_jetstream.MAX_PENDING:,} "
                  "acks outstanding. The paced row sends one record at a time on both sides.")
    for reason in sorted({r.peer_missing for r in rows if r.peer_missing}):
        console.print(f"peer missing: {reason}")
