"""The quick form of `kraft-bench chaos` (`--rounds N`): one partition at RF 3 on a local
3-node cluster; each round kills -9 the leader and restarts it, SIGSTOPs the next leader past the
session timeout and wakes it, kills -9 a follower and restarts it, while an acks=all producer and
a consumer run; then the audit of `kraft.bench.chaos.clients`.
"""

from __future__ import annotations

import signal
import time
from typing import Callable

import click
import requests

from kraft.bench.chaos.clients import AckedProducer, WatchingConsumer, audit, read_partition
from kraft.bench.cluster import LocalCluster, LocalNode, poll
from kraft.bench.common import BenchResult, ensure_topic, report
from kraft.bench.failover import _partition


def _chaos_leader(cluster: LocalCluster, topic: str, not_in: tuple[int, ...] = ()) -> LocalNode:
    """The partition's leader as the running nodes outside `not_in` agree on it."""
    def agreed() -> LocalNode | None:
        leaders = {_partition(n, topic, 0)["leader"] for n in cluster.running()
                   if n.node_id not in not_in}
        leader = leaders.pop() if len(leaders) == 1 else -1
        return cluster.nodes[leader] if leader > 0 and leader not in not_in else None
    return poll(agreed, 60, 0.05, "an agreed partition leader")


def _chaos_full_isr(cluster: LocalCluster, topic: str) -> None:
    size = len(cluster.nodes)
    poll(lambda: all(len(_partition(n, topic, 0)["isr"]) == size for n in cluster.running()),
         120, 0.05, "a full ISR")


def _chaos_round(cluster: LocalCluster, topic: str, wait_acked: Callable[[], None]) -> None:
    """kill -9 the leader and restart it; SIGSTOP the next leader past the session timeout and
    wake it; kill -9 a follower and restart it."""
    leader = _chaos_leader(cluster, topic)
    wait_acked()
    leader.kill()
    paused = _chaos_leader(cluster, topic, not_in=(leader.node_id,))
    wait_acked()
    leader.start()
    _chaos_full_isr(cluster, topic)
    assert paused.proc is not None
    paused.proc.send_signal(signal.SIGSTOP)
    try:
        current = _chaos_leader(cluster, topic, not_in=(paused.node_id,))
        wait_acked()  # acknowledgements go on while the old leader is still paused
    finally:
        paused.proc.send_signal(signal.SIGCONT)  # wakes believing it leads
    wait_acked()
    _chaos_full_isr(cluster, topic)
    follower = next(n for n in cluster.running() if n is not current)
    follower.kill()
    wait_acked()
    follower.start()
    _chaos_full_isr(cluster, topic)


def run_rounds(rounds: int, session_timeout_ms: int, json_path: str | None) -> None:
    topic = "chaos"
    overrides = {"broker.session.timeout.ms": session_timeout_ms,
                 "broker.heartbeat.interval.ms": max(50, min(2000, session_timeout_ms // 6)),
                 "min.insync.replicas": 2, "replica.lag.time.max.ms": session_timeout_ms}
    with LocalCluster(3, combined=True, overrides=overrides) as cluster:
        bootstrap = ",".join(f"127.0.0.1:{n.port}" for n in cluster.running())
        ensure_topic(bootstrap, topic, 1, 3)
        _chaos_full_isr(cluster, topic)
        producer = AckedProducer(bootstrap, topic).start()
        consumer = WatchingConsumer(bootstrap, topic).start()

        def wait_acked() -> None:
            producer.wait_acked_more(200, 120)

        start = time.monotonic()
        try:
            for r in range(rounds):
                _chaos_round(cluster, topic, wait_acked)
                click.echo(f"round {r + 1}/{rounds}: {len(producer.acked)} acknowledged", err=True)
        finally:
            producer.stop()
            consumer.stop()
        elapsed = time.monotonic() - start
        leader = _chaos_leader(cluster, topic)
        offsets = requests.get(f"{leader.url}/v1/topics/{topic}/partitions/0/offsets", timeout=10).json()
        result = audit(producer.acked,
                       read_partition(bootstrap, topic, 0, offsets["high_watermark"]), consumer.seen)
    params = {"rounds": rounds, "acked": result.acked, "lost": result.lost,
              "duplicated": result.duplicated, "truncated_seen": result.truncated_seen,
              "failed_sends": producer.failed}
    report(BenchResult("chaos", params, result.acked, 0, elapsed), json_path)
    click.echo(f"acked {result.acked} / lost {result.lost} / duplicated {result.duplicated}")
    if not result.ok:
        raise click.ClickException(f"acknowledged records lost or served then truncated: {result}")
