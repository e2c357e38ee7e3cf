"""A short `kraft-bench chaos --duration` run on a real 3-node cluster (RF 3, acks=all,
min.insync.replicas 2) with kill -9, SIGSTOP and a network partition: the checker finds nothing
lost, duplicated by the idempotent producer, reordered or truncated after being served."""

from __future__ import annotations

from pathlib import Path

import pytest

from kraft.bench.chaos.run import ChaosOptions, run_chaos

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def test_seventy_seconds_of_kill_stop_and_partition_lose_nothing(tmp_path: Path):
    history = tmp_path / "history.jsonl"
    # seed 3 over 70 s schedules all three: kill at 7 s, stop at 30 s, partition (isolate) at 47 s
    outcome = run_chaos(ChaosOptions(70, ["kill", "stop", "partition"], 3, str(history)), lambda line: None)
    found = outcome.findings
    # the later faults are left out when recoveries on a loaded machine use up the run's time
    assert found.faults["kill"] == 1 and sum(found.faults.values()) + outcome.late == 3
    assert found.acked > 0 and found.seen > 0 and found.commits > 0
    assert (found.lost, found.duplicated_idempotent, found.reordered, found.truncated_after_seen,
            found.offsets_lost, found.metadata_lost) == (0, 0, 0, 0, 0, 0), found.examples
    assert found.worker_errors == 0, found.examples
