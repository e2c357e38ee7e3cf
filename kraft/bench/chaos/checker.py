"""The independent checker of a chaos run: reads the recorded history (JSON lines, see
`kraft.bench.chaos.workload`) and nothing else, and counts what the guarantees forbid.

Final-state events, written once the faults are healed and the cluster has recovered:
`final_log` (every record of a produced partition: [offset, value] pairs, and the `quarantined`
[start, end) ranges its leader answered CORRUPT_MESSAGE for, which the read stepped over),
`final_commit` (a group's committed offset per partition) and `final_topics` (topic -> partition
count, one per node).

- lost: an acknowledged record whose value is not at its acknowledged offset in the final log
  (`lost_quarantined`: those of them inside a quarantined range: unreadable, a loss too);
- quarantined_ranges, quarantined_records: the ranges (and offsets in them) below the high
  watermark that the final read could not be served: corrupt on the leader. Records no producer
  had acknowledged may lie there harmlessly (a plain producer's send that timed out but was
  written); an acknowledged one is counted lost;
- duplicated: a value at more than one offset (`duplicated_idempotent` counts those of idempotent
  producers, which must be 0; a plain producer's retry of a write whose answer was lost may
  duplicate, as in Kafka);
- reordered: within a partition, a producer's record at a lower offset than one it sent before
  (the client keeps one request in flight per leader, so even a plain producer must not reorder);
- truncated_after_seen: a record a consumer was shown whose offset holds something else, or
  nothing (also: it lies in a quarantined range), in the final log;
- offsets_lost: a partition whose final committed offset is below an offset a commit had been
  acknowledged with;
- metadata_lost: a topic whose creation was acknowledged (and never asked to be deleted) missing
  on a node, a deleted topic still present, or fewer partitions than an acknowledged increase;
- max_unavailable_s: the longest time a partition could not take an acks=all write (`avail`
  events: no leader, or an ISR below min.insync.replicas), and every window's length for
  percentiles;
- faults: fault type -> times injected (`fault` events), not counting those whose `heal` says
  they could not be done (`"done": False` in its details: `faults_not_injected`); `faults_missing`:
  a requested type (the `run` event's `faults`) never injected;
- recoveries: per injected fault, the seconds from healing it to every partition led with a full
  ISR on every node (`recovered` events: time to full ISR), and their max and p99;
  `not_recovered`: faults the cluster did not recover from within the harness's timeout;
- fencings: the brokers the controllers fenced (`fenced` events, from the nodes' logs), and
  `fencings_uncaused`: those outside every fault's window (from its injection to its recovery),
  a live broker fenced with no fault to blame;
- with the transactional workload, atomicity and isolation as read_committed consumers see them
  (`txn_check`: `txn_aborted_visible`, `txn_seen_early`, `txn_partial`, `txn_committed_lost`,
  `txn_duplicated`), and the transactions' outcomes (`txn_committed`, `txn_aborted`, `txn_unknown`).

`ok` is false when a guarantee broke (lost, duplicated by an idempotent producer, reordered,
truncated after being served, offsets or metadata lost, a transaction seen partly or when it
should not be), a fault was not recovered from, or a
requested fault type was never injected.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

from kraft.bench.chaos.txn_check import check_transactions


@dataclass
class Findings:
    acked: int = 0
    failed: int = 0
    seen: int = 0
    commits: int = 0
    lost: int = 0
    lost_quarantined: int = 0
    quarantined_ranges: int = 0
    quarantined_records: int = 0
    duplicated: int = 0
    duplicated_idempotent: int = 0
    reordered: int = 0
    truncated_after_seen: int = 0
    offsets_lost: int = 0
    metadata_lost: int = 0
    max_unavailable_s: float = 0.0
    p99_unavailable_s: float = 0.0
    unavailable_windows: int = 0
    worker_errors: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    faults_not_injected: dict[str, int] = field(default_factory=dict)
    faults_missing: list[str] = field(default_factory=list)
    recoveries: list[dict[str, Any]] = field(default_factory=list)  # {fault, target, seconds}
    max_time_to_full_isr_s: float = 0.0
    p99_time_to_full_isr_s: float = 0.0
    not_recovered: int = 0
    fencings: int = 0
    fencings_uncaused: int = 0
    txn_committed: int = 0
    txn_aborted: int = 0
    txn_unknown: int = 0
    txn_aborted_visible: int = 0
    txn_seen_early: int = 0
    txn_partial: int = 0
    txn_committed_lost: int = 0
    txn_duplicated: int = 0
    examples: dict[str, list[Any]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated_idempotent or self.reordered or self.truncated_after_seen
                    or self.offsets_lost or self.metadata_lost or self.not_recovered or self.faults_missing
                    or self.txn_aborted_visible or self.txn_seen_early or self.txn_partial or self.txn_committed_lost
                    or self.txn_duplicated)

    def example(self, kind: str, what: Any) -> None:
        examples = self.examples.setdefault(kind, [])
        if len(examples) < 5:
            examples.append(what)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["ok"] = self.ok
        return out


def check(events: Iterable[dict[str, Any]]) -> Findings:
    found = Findings()
    acks: list[dict[str, Any]] = []
    seen: dict[tuple[str, int, int], str] = {}
    committed: dict[tuple[str, str, int], int] = {}  # highest acknowledged commit per (group, tp)
    final_log: dict[tuple[str, int], dict[int, str]] = {}
    quarantined: dict[tuple[str, int], list[tuple[int, int]]] = {}
    final_commit: dict[tuple[str, str, int], int] = {}
    final_topics: dict[int, dict[str, int]] = {}
    idempotent: dict[str, bool] = {}
    meta: list[dict[str, Any]] = []
    windows: dict[tuple[str, int], float] = {}  # tp -> when it became unavailable
    lengths: list[float] = []
    requested: list[str] = []
    fault_windows: list[tuple[float, float]] = []  # (injected, recovered) of every fault
    fault_started: float | None = None
    fenced: list[dict[str, Any]] = []
    end_t = 0.0
    txns: list[dict[str, Any]] = []
    txn_ends: dict[str, float] = {}
    txn_seen: list[dict[str, Any]] = []
    final_txn_log: dict[int, list[list[Any]]] | None = None
    for e in events:
        kind = e["k"]
        end_t = max(end_t, e.get("t", 0.0))
        if kind == "run":
            requested = list(e.get("faults") or ())
        elif kind == "recovered":
            found.recoveries.append({"fault": e["fault"], "target": e.get("target"), "seconds": e["seconds"]})
        elif kind == "not_recovered":
            found.not_recovered += 1
            found.example("not_recovered", e)
        elif kind == "fenced":
            fenced.append(e)
        if kind in ("recovered", "not_recovered") and fault_started is not None:
            fault_windows.append((fault_started, e["t"]))
            fault_started = None
        if kind == "ack":
            acks.append(e)
            idempotent[e["producer"]] = bool(e.get("idem"))
        elif kind == "fail":
            found.failed += 1
        elif kind == "seen":
            found.seen += 1
            seen[(e["topic"], e["part"], e["offset"])] = e["value"]
        elif kind == "commit":
            found.commits += 1
            key = (e["group"], e["topic"], e["part"])
            committed[key] = max(committed.get(key, -1), e["offset"])
        elif kind == "meta":
            meta.append(e)
        elif kind == "fault":
            found.faults[e["fault"]] = found.faults.get(e["fault"], 0) + 1
            fault_started = e["t"]
        elif kind == "heal" and (e.get("detail") or {}).get("done") is False:
            fault = e["fault"]
            left = found.faults.get(fault, 0) - 1
            if left > 0:
                found.faults[fault] = left
            else:
                found.faults.pop(fault, None)
            found.faults_not_injected[fault] = found.faults_not_injected.get(fault, 0) + 1
            found.example("not_injected", e)
        elif kind == "avail":
            tp = (e["topic"], e["part"])
            if not e["ok"]:
                windows.setdefault(tp, e["t"])
            elif tp in windows:
                lengths.append(e["t"] - windows.pop(tp))
        elif kind == "worker_error":
            found.worker_errors += 1
            found.example("worker_error", e)
        elif kind == "final_log":
            final_log[(e["topic"], e["part"])] = {int(o): v for o, v in e["records"]}
            ranges = quarantined[(e["topic"], e["part"])] = [(int(a), int(b)) for a, b in e.get("quarantined", ())]
            found.quarantined_ranges += len(ranges)
            found.quarantined_records += sum(b - a for a, b in ranges)
            for start, end in ranges:
                found.example("quarantined", {"topic": e["topic"], "part": e["part"], "start": start,
                                              "end": end, "leader": e.get("leader")})
        elif kind == "final_commit":
            final_commit[(e["group"], e["topic"], e["part"])] = e["offset"]
        elif kind == "final_topics":
            final_topics[e["node"]] = e["topics"]
        elif kind == "txn":
            txns.append(e)
        elif kind == "txn_end":
            txn_ends[e["txn"]] = e["t"]
        elif kind == "txn_seen":
            txn_seen.append(e)
        elif kind == "final_txn_log":
            final_txn_log = final_txn_log or {}
            final_txn_log[e["part"]] = e["records"]
    lengths += [end_t - since for since in windows.values()]  # still unavailable at the end
    if fault_started is not None:  # injected, never recovered nor given up on: to the end
        fault_windows.append((fault_started, end_t))
    found.faults_missing = sorted(set(requested) - set(found.faults))
    seconds = sorted(r["seconds"] for r in found.recoveries)
    if seconds:
        found.max_time_to_full_isr_s = seconds[-1]
        found.p99_time_to_full_isr_s = _p99(seconds)
    found.fencings = len(fenced)
    for e in fenced:
        if not any(start <= e["t"] <= end for start, end in fault_windows):
            found.fencings_uncaused += 1
            found.example("fenced_uncaused", e)

    found.acked = len(acks)
    for a in acks:
        log = final_log.get((a["topic"], a["part"]), {})
        if log.get(a["offset"]) != a["value"]:
            found.lost += 1
            unreadable = _inside(a["offset"], quarantined.get((a["topic"], a["part"]), ()))
            found.lost_quarantined += unreadable
            found.example("lost", {"topic": a["topic"], "part": a["part"], "offset": a["offset"],
                                   "value": a["value"], "final": log.get(a["offset"]), "quarantined": unreadable})

    for (topic, part), log in final_log.items():
        counts = Counter(log.values())
        for value, count in counts.items():
            if count > 1:
                found.duplicated += count - 1
                if idempotent.get(value.rsplit("-", 1)[0]):
                    found.duplicated_idempotent += count - 1
                found.example("duplicated", {"topic": topic, "part": part, "value": value,
                                             "offsets": sorted(o for o, v in log.items() if v == value)})
        # per producer, offsets in send order must increase (first occurrence of each value)
        first: dict[str, int] = {}
        for offset in sorted(log):
            first.setdefault(log[offset], offset)
        by_producer: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for value, offset in first.items():
            producer, _, seq = value.rpartition("-")
            if producer and seq.isdigit():
                by_producer[producer].append((int(seq), offset))
        for producer, pairs in by_producer.items():
            highest = -1
            for seq, offset in sorted(pairs):
                if offset < highest:
                    found.reordered += 1
                    found.example("reordered", {"topic": topic, "part": part, "producer": producer,
                                                "seq": seq, "offset": offset, "after_offset": highest})
                highest = max(highest, offset)

    for (topic, part, offset), value in seen.items():
        log = final_log.get((topic, part))
        if log is not None and log.get(offset) != value:
            found.truncated_after_seen += 1
            found.example("truncated_after_seen", {
                "topic": topic, "part": part, "offset": offset, "seen": value, "final": log.get(offset),
                "quarantined": _inside(offset, quarantined.get((topic, part), ()))})

    for key, offset in committed.items():
        final = final_commit.get(key, -1)
        if final < offset:
            found.offsets_lost += 1
            found.example("offsets_lost", {"group": key[0], "topic": key[1], "part": key[2],
                                           "acknowledged": offset, "final": final})

    found.metadata_lost = _metadata_lost(meta, final_topics, found)
    check_transactions(txns, txn_ends, txn_seen, final_txn_log, found)

    if lengths:
        ordered = sorted(lengths)
        found.unavailable_windows = len(ordered)
        found.max_unavailable_s = round(ordered[-1], 3)
        found.p99_unavailable_s = round(_p99(ordered), 3)
    return found


def _inside(offset: int, ranges: Iterable[tuple[int, int]]) -> bool:
    return any(start <= offset < end for start, end in ranges)


def _p99(ordered: list[float]) -> float:
    """The nearest-rank 99th percentile of an ascending, non-empty list."""
    return ordered[max(0, -(-len(ordered) * 99 // 100) - 1)]


def _metadata_lost(meta: list[dict[str, Any]], final_topics: dict[int, dict[str, int]], found: Findings) -> int:
    created: set[str] = set()
    delete_asked: set[str] = set()
    deleted: set[str] = set()
    create_asked: set[str] = set()
    partitions: dict[str, int] = {}
    for e in meta:
        if e["op"] == "create":
            if e["phase"] == "sent":
                create_asked.add(e["topic"])
            elif e["phase"] == "ok":
                created.add(e["topic"])
        elif e["op"] == "delete":
            if e["phase"] == "sent":
                delete_asked.add(e["topic"])
            elif e["phase"] == "ok":
                deleted.add(e["topic"])
        elif e["op"] == "add_partitions" and e["phase"] == "ok":
            partitions[e["topic"]] = max(partitions.get(e["topic"], 0), e["partitions"])
    lost = 0
    for node, topics in final_topics.items():
        for name in sorted(created - delete_asked):
            if name not in topics:
                lost += 1
                found.example("metadata_lost", {"node": node, "topic": name, "problem": "created, missing"})
        for name in sorted(deleted):
            if name in topics:
                lost += 1
                found.example("metadata_lost", {"node": node, "topic": name, "problem": "deleted, present"})
        for name, count in partitions.items():
            if topics.get(name, 0) < count:
                lost += 1
                found.example("metadata_lost", {"node": node, "topic": name, "problem":
                                                f"{topics.get(name, 0)} partitions, {count} acknowledged"})
    return lost
