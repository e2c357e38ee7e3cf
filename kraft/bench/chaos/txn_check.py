"""The checks of the transactional workload (`kraft.bench.chaos.transactional`): atomicity and
isolation as a read_committed consumer sees them. Pure: the events come from the history.

- `txn_aborted_visible`: an aborted transaction with a record a read_committed consumer was shown
  during the run or that the final read_committed read holds (isolation);
- `txn_seen_early`: a record shown to a read_committed consumer before its transaction's EndTxn
  was even sent (isolation: an open transaction is invisible);
- `txn_partial`: a transaction (committed, or of unknown outcome) with some but not all of its
  records in the final read_committed read, taken once every partition's last stable offset
  reached its high watermark (atomicity);
- `txn_committed_lost`: a committed transaction with none of its records there;
- `txn_duplicated`: a record more than once there (a transactional producer is idempotent).

While the run goes on, a reader sees a committed transaction's partitions as their markers are
written, one after another (Kafka's read_committed is per partition); all of it is visible once
the last marker is, so atomicity is checked on the final read.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, Protocol

from kraft.bench.chaos.transactional import transaction_of


class _Findings(Protocol):
    txn_committed: int
    txn_aborted: int
    txn_unknown: int
    txn_aborted_visible: int
    txn_seen_early: int
    txn_partial: int
    txn_committed_lost: int
    txn_duplicated: int

    def example(self, kind: str, what: Any) -> None: ...


def check_transactions(txns: list[dict[str, Any]], ends: dict[str, float], seen: list[dict[str, Any]],
                       final: dict[int, list[list[Any]]] | None, found: _Findings) -> None:
    """`txns`: the `txn` events; `ends`: transaction -> when its EndTxn was about to be sent;
    `seen`: the `txn_seen` events; `final`: partition -> [offset, value] of the final
    read_committed read (None: the run ended before it)."""
    outcomes = Counter(t["outcome"] for t in txns)
    found.txn_committed, found.txn_aborted, found.txn_unknown = (
        outcomes["committed"], outcomes["aborted"], outcomes["unknown"])
    by_id = {t["txn"]: t for t in txns}
    visible: dict[str, set[str]] = defaultdict(set)  # transaction -> its values visible at the end
    counts: Counter[str] = Counter()
    for records in (final or {}).values():
        for _, value in records:
            visible[transaction_of(value)].add(value)
            counts[value] += 1
    aborted_visible: set[str] = set()
    for e in seen:
        txn = transaction_of(e["value"])
        if txn in by_id and by_id[txn]["outcome"] == "aborted":
            aborted_visible.add(txn)
        if e["t"] < ends.get(txn, float("inf")):
            found.txn_seen_early += 1
            found.example("txn_seen_early", {**e, "txn_end": ends.get(txn)})
    for value, count in counts.items():
        if count > 1:
            found.txn_duplicated += count - 1
            found.example("txn_duplicated", {"value": value, "times": count})
    if final is None:
        return
    for txn, t in by_id.items():
        values = {value for _, value in t["records"]}
        shown = visible.get(txn, set())
        if t["outcome"] == "aborted":
            if shown:
                aborted_visible.add(txn)
        elif shown and shown != values:
            found.txn_partial += 1
            found.example("txn_partial", {"txn": txn, "outcome": t["outcome"], "visible": sorted(shown),
                                          "missing": sorted(values - shown)})
        elif not shown and t["outcome"] == "committed":
            found.txn_committed_lost += 1
            found.example("txn_committed_lost", {"txn": txn, "records": t["records"]})
    found.txn_aborted_visible = len(aborted_visible)
    for txn in sorted(aborted_visible)[:5]:
        found.example("txn_aborted_visible", {"txn": txn, "records": by_id[txn]["records"]})
