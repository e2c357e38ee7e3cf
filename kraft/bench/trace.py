"""`kraft-bench --trace`: where a record's acknowledgement waits, stage by stage.

While the benchmark runs, a thread reads every broker's stage events (`GET /v1/trace`, recorded
when the nodes run with `stage.trace.events`; `kraft/broker/stage_trace.py` says what each one
means). Afterwards the first record of each acknowledged batch (the one that waited longest in it) is
followed along its way:

    client_enqueue → client_send → leader_append → fetch_answered → follower_append
    → follower_fetch → hw_advance → produce_answered → client_ack

A stage is passed at the first event of that stage (of that follower) whose offset is above the
record's. With followers, the way goes through the follower whose fetch reported the record last
(the one the high watermark waited for). Stages a way lacks (acks=1, RF 1) are skipped, and each
step is the time between two consecutive stages present; `stage_histograms` keeps one histogram
per step.
"""

from __future__ import annotations

import bisect
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from kraft.api.client import Admin, KraftError
from kraft.api.client.transport import Transport
from kraft.api.client.types import TopicPartition
from kraft.bench.histogram import LatencyHistogram
from kraft.broker.stage_trace import (
    FETCH_ANSWERED, FOLLOWER_APPEND, FOLLOWER_FETCH, HW_ADVANCE, LEADER_APPEND, PRODUCE_ANSWERED, TraceEvent,
)

CLIENT_ENQUEUE = "client_enqueue"
CLIENT_SEND = "client_send"
CLIENT_ACK = "client_ack"
WAY = (CLIENT_ENQUEUE, CLIENT_SEND, LEADER_APPEND, FETCH_ANSWERED, FOLLOWER_APPEND, FOLLOWER_FETCH, HW_ADVANCE,
       PRODUCE_ANSWERED, CLIENT_ACK)
_FOLLOWER_STAGES = (FETCH_ANSWERED, FOLLOWER_APPEND, FOLLOWER_FETCH)

# partition, offset, and the client's stages: send() called, request sent, acknowledged (ns)
TracedRecord = tuple[TopicPartition, int, int, int, int]


@dataclass
class _Series:
    """One stage's events for one partition (and follower), in the order they happened."""

    reach: list[int] = field(default_factory=list)  # running maximum of the offsets
    times: list[int] = field(default_factory=list)

    def add(self, offset: int, time_ns: int) -> None:
        self.reach.append(max(offset, self.reach[-1]) if self.reach else offset)
        self.times.append(time_ns)

    def first_past(self, offset: int) -> int | None:
        """When this stage first reached beyond `offset`."""
        i = bisect.bisect_right(self.reach, offset)
        return self.times[i] if i < len(self.times) else None


class StageIndex:
    """The nodes' events, by (stage, topic, partition, replica)."""

    def __init__(self, events: Iterable[TraceEvent]) -> None:
        self._series: dict[tuple[str, str, int, int], _Series] = defaultdict(_Series)
        self._followers: dict[tuple[str, int], set[int]] = defaultdict(set)
        for _seq, time_ns, stage, topic, partition, offset, replica in sorted(events, key=lambda e: e[1]):
            self._series[(stage, topic, partition, replica)].add(offset, time_ns)
            if stage == FOLLOWER_FETCH:
                self._followers[(topic, partition)].add(replica)

    def first_past(self, stage: str, tp: TopicPartition, offset: int, replica: int = -1) -> int | None:
        series = self._series.get((stage, tp.topic, tp.partition, replica))
        return None if series is None else series.first_past(offset)

    def way(self, tp: TopicPartition, offset: int, enqueue_ns: int, send_ns: int, ack_ns: int) -> dict[str, int]:
        """The stages the record at `offset` passed and when (wall-clock ns)."""
        times = {CLIENT_ENQUEUE: enqueue_ns, CLIENT_SEND: send_ns}
        for stage in (LEADER_APPEND, HW_ADVANCE, PRODUCE_ANSWERED):
            t = self.first_past(stage, tp, offset)
            if t is not None:
                times[stage] = t
        hw = times.get(HW_ADVANCE)
        critical: tuple[int, int] | None = None  # (time of its reporting fetch, follower)
        for follower in self._followers.get((tp.topic, tp.partition), ()):
            t = self.first_past(FOLLOWER_FETCH, tp, offset, follower)
            if t is not None and (hw is None or t <= hw) and (critical is None or t > critical[0]):
                critical = (t, follower)
        if critical is not None:
            for stage in _FOLLOWER_STAGES:
                t = self.first_past(stage, tp, offset, critical[1])
                if t is not None:
                    times[stage] = t
        times[CLIENT_ACK] = ack_ns
        return times


def steps(times: dict[str, int]) -> list[tuple[str, int]]:
    """(\"a→b\", ns) between consecutive stages present in `times`, in the way's order."""
    present = [s for s in WAY if s in times]
    return [(f"{a}→{b}", times[b] - times[a]) for a, b in zip(present, present[1:])]


def stage_histograms(index: StageIndex, records: Sequence[TracedRecord]) -> dict[str, LatencyHistogram]:
    out: dict[str, LatencyHistogram] = {}
    for tp, offset, enqueue_ns, send_ns, ack_ns in records:
        if not send_ns:
            continue
        for name, ns in steps(index.way(tp, offset, enqueue_ns, send_ns, ack_ns)):
            hist = out.get(name)
            if hist is None:
                hist = out[name] = LatencyHistogram()
            hist.record_us(ns // 1000)
    order = {f"{a}→{b}": (WAY.index(a), WAY.index(b)) for a in WAY for b in WAY}
    return dict(sorted(out.items(), key=lambda kv: order[kv[0]]))


def stage_summary(histograms: dict[str, LatencyHistogram]) -> dict[str, Any]:
    return {name: {"records": h.count, **h.summary_ms()} for name, h in histograms.items()}


class TraceCollector:
    """Reads every broker's stage events every `interval_s` in a thread, from `start` to `stop`
    (the nodes keep a ring: reading while the run goes on loses none)."""

    def __init__(self, bootstrap: str, interval_s: float = 0.2) -> None:
        with Admin(bootstrap) as admin:
            brokers = admin.describe_cluster().brokers
        self._addresses = {b.node_id: (b.host, b.port) for b in brokers}
        self._transport = Transport(bootstrap)
        self._after = dict.fromkeys(self._addresses, 0)
        self.events: list[TraceEvent] = []
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kraft-bench-trace", daemon=True)

    def start(self) -> None:
        for node_id, address in self._addresses.items():  # events before the run are not ours
            answer = self._transport.request("GET", "/v1/trace", params={"after": 0}, address=address)
            if not answer.get("enabled"):
                raise KraftError("INVALID_CONFIG", f"node {node_id} records no stage events: start the "
                                                   "nodes with stage.trace.events (e.g. 200000), or use "
                                                   "--local-cluster")
            self._after[node_id] = answer["next"]
        self._thread.start()

    def stop(self) -> list[TraceEvent]:
        self._stop.set()
        self._thread.join()
        self._poll()
        self._transport.close()
        return self.events

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self._poll()

    def _poll(self) -> None:
        for node_id, address in self._addresses.items():
            try:
                answer = self._transport.request("GET", "/v1/trace", params={"after": self._after[node_id]},
                                                 address=address)
            except KraftError:
                continue  # a node busy or away: its ring keeps the events for the next read
            self.events.extend(tuple(e) for e in answer["events"])  # type: ignore[misc]
            self._after[node_id] = answer["next"]
