"""A short `kraft-bench chaos --duration` run on a real 3-node cluster (RF 3, acks=all,
min.insync.replicas 2) with kill -9, SIGSTOP, a network partition and a full disk on the active
controller: every fault type is injected (the next starts from the last recovery, so a loaded
machine delays faults rather than dropping them), the cluster recovers from each, and the checker
finds nothing lost, duplicated by the idempotent producer, reordered or truncated after being
served."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kraft.bench.chaos.run import ChaosOptions, run_chaos

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.spread]  # a cluster per test


def test_seventy_seconds_of_kill_stop_partition_and_a_full_controller_disk_lose_nothing(tmp_path: Path):
    history = tmp_path / "history.jsonl"
    faults = ["kill", "stop", "partition", "controller-disk-full"]
    outcome = run_chaos(ChaosOptions(70, faults, 3, str(history)), lambda line: None)
    found = outcome.findings
    assert set(found.faults) == set(faults) and found.faults_missing == [] and found.not_recovered == 0
    assert {r["fault"] for r in found.recoveries} == set(faults)
    full = [e for e in map(json.loads, history.read_text().splitlines())
            if e["k"] == "heal" and e["fault"] == "controller-disk-full"]
    # the full controller resigned (its metadata write failed), another node led when the disk
    # was freed, and the write committed there
    assert full and all(e["detail"]["controller_at_heal"] not in (None, e["target"]) for e in full), full
    assert all(isinstance(e["detail"]["metadata_write"], float) for e in full), full
    assert found.acked > 0 and found.seen > 0 and found.commits > 0
    assert (found.lost, found.duplicated_idempotent, found.reordered, found.truncated_after_seen,
            found.offsets_lost, found.metadata_lost) == (0, 0, 0, 0, 0, 0), found.examples
    assert found.worker_errors == 0, found.examples


def test_a_failed_log_directory_in_a_chaos_run_loses_nothing_and_recovers(tmp_path: Path):
    """The log-dir fault: every node has two log directories and one node's second one fails
    (EIO) under the workload; the cluster recovers (the disk replaced and the node restarted)
    and the checker finds nothing lost."""
    history = tmp_path / "history.jsonl"
    outcome = run_chaos(ChaosOptions(60, ["log-dir"], 3, str(history)), lambda line: None)
    found = outcome.findings
    assert found.faults.get("log-dir", 0) >= 1 and found.faults_missing == [] and found.not_recovered == 0
    failed = [e for e in map(json.loads, history.read_text().splitlines())
              if e["k"] == "heal" and e["fault"] == "log-dir"]
    assert failed and all(e["detail"]["log_dir"].endswith("-disk2") for e in failed), failed
    logs = "".join(p.read_text() for p in tmp_path.glob("history.jsonl.node-*.log"))
    assert "is offline: OSError: [Errno 5]" in logs and "reports log directories" in logs
    assert found.acked > 0 and (found.lost, found.duplicated_idempotent, found.reordered, found.truncated_after_seen,
                                found.offsets_lost, found.metadata_lost) == (0, 0, 0, 0, 0, 0), found.examples
