"""The transactional workload's checks (atomicity and isolation for read_committed readers) find
each violation in a hand-made history, and none in a clean one."""

from __future__ import annotations

from typing import Any

from kraft.bench.chaos.checker import check


def txn(name: str, outcome: str, end_t: float = 1.0) -> list[dict[str, Any]]:
    """A transaction of two records, one in each partition: its `txn_end` and `txn` events."""
    return [{"k": "txn_end", "t": end_t, "producer": "txn-1", "txn": name, "commit": outcome == "committed"},
            {"k": "txn", "t": end_t + 0.1, "producer": "txn-1", "txn": name, "outcome": outcome,
             "records": [[0, f"{name}.0"], [1, f"{name}.1"]]}]


def seen(value: str, t: float = 2.0, part: int = 0) -> dict[str, Any]:
    return {"k": "txn_seen", "t": t, "consumer": "txn-reader", "part": part, "offset": 0, "value": value}


def final(*values_by_part: list[str]) -> list[dict[str, Any]]:
    return [{"k": "final_txn_log", "t": 9.0, "topic": "chaos-txn", "part": p,
             "records": [[o, v] for o, v in enumerate(values)]} for p, values in enumerate(values_by_part)]


def clean() -> list[dict[str, Any]]:
    return [*txn("txn-1.0", "committed"), *txn("txn-1.1", "aborted"), *txn("txn-1.2", "unknown"),
            *txn("txn-1.3", "unknown"), seen("txn-1.0.0"), seen("txn-1.0.1", part=1),
            *final(["txn-1.0.0", "txn-1.3.0"], ["txn-1.0.1", "txn-1.3.1"])]


def test_a_clean_transactional_history_has_no_violation():
    found = check(clean())
    assert found.ok, found.examples
    assert (found.txn_committed, found.txn_aborted, found.txn_unknown) == (1, 1, 2)


def test_an_aborted_transaction_seen_during_the_run_or_at_the_end_is_visible():
    assert check([*clean(), seen("txn-1.1.0")]).txn_aborted_visible == 1
    found = check([e for e in clean() if e["k"] != "final_txn_log"] +
                  final(["txn-1.0.0", "txn-1.1.0"], ["txn-1.0.1"]))
    assert found.txn_aborted_visible == 1 and not found.ok


def test_a_record_seen_before_its_transaction_ended_is_seen_early():
    found = check([*clean(), seen("txn-1.0.0", t=0.5)])
    assert found.txn_seen_early == 1 and not found.ok


def test_part_of_a_committed_or_unknown_transaction_is_partial():
    committed_half = final(["txn-1.0.0"], [])
    found = check([e for e in clean() if e["k"] != "final_txn_log"] + committed_half)
    assert found.txn_partial == 1 and not found.ok
    unknown_half = final(["txn-1.0.0", "txn-1.3.0"], ["txn-1.0.1"])
    assert check([e for e in clean() if e["k"] != "final_txn_log"] + unknown_half).txn_partial == 1


def test_a_committed_transaction_missing_is_lost_and_a_record_twice_is_duplicated():
    found = check([e for e in clean() if e["k"] != "final_txn_log"] + final([], []))
    assert found.txn_committed_lost == 1 and found.txn_partial == 0 and not found.ok
    twice = final(["txn-1.0.0", "txn-1.0.0"], ["txn-1.0.1"])
    assert check([e for e in clean() if e["k"] != "final_txn_log"] + twice).txn_duplicated == 1
