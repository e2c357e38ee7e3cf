"""find-hanging's rules (api/cli/transactions.py), Kafka's FindHangingTransactionsCommand: only
open transactions whose producer is idle longer than the timeout are candidates, and a candidate
hangs unless a transactional id owns its producer id and its coordinator lists the partition."""

from __future__ import annotations

from kraft.api.cli.transactions import hanging, hanging_rows, open_transactions

NOW = 10_000_000


def producer(pid: int, start: int, last: int, epoch: int = 0) -> dict:
    return {"producer_id": pid, "producer_epoch": epoch, "coordinator_epoch": -1, "last_sequence": 0,
            "last_timestamp": last, "current_txn_start_offset": start}


def test_candidates_are_open_and_older_than_the_timeout() -> None:
    producers = [producer(1, 5, NOW - 60_001), producer(2, -1, NOW - 600_000), producer(3, 9, NOW - 60_000)]
    found = open_transactions("t", 0, producers, NOW, 60_000)
    assert [c.producer["producer_id"] for c in found] == [1]  # 2 has none open, 3 is not older


def test_a_candidate_hangs_unless_its_coordinator_owns_the_partition() -> None:
    candidates = open_transactions("t", 0, [producer(p, 4, 0) for p in (1, 2, 3, 4)], NOW, 0)
    ids = {2: "two", 3: "three", 4: "four"}  # 1: no transactional id has it
    descriptions = {
        "two": {"state": "Ongoing", "topic_partitions": [{"topic": "t", "partition": 0}]},  # live
        "three": {"state": "Ongoing", "topic_partitions": [{"topic": "t", "partition": 1}]},  # not this one
        "four": None,  # TRANSACTIONAL_ID_NOT_FOUND
    }
    assert [c.producer["producer_id"] for c in hanging(candidates, ids, descriptions)] == [1, 3, 4]
    [row] = hanging_rows(hanging(candidates[:1], {}, {}), NOW)
    assert row == ["t", 0, 1, 0, -1, 4, 0, NOW // 60_000]
