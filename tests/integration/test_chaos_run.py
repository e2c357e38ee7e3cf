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


def test_the_transactional_workload_under_kill_and_stop_is_atomic_and_isolated(tmp_path: Path):
    """`--workload transactional`: transactional producers commit and abort transactions over three
    partitions while nodes are killed -9 and paused; the read_committed consumer never sees a
    record of an aborted transaction nor one before its commit, and the final read_committed
    read holds every committed transaction whole and no part of any other."""
    outcome = run_chaos(ChaosOptions(50, ["kill", "stop"], 5, str(tmp_path / "history.jsonl"),
                                     workload="transactional"), lambda line: None)
    found = outcome.findings
    assert found.faults_missing == [] and found.not_recovered == 0
    assert found.txn_committed > 0 and found.txn_aborted > 0, found.as_dict()
    assert (found.txn_aborted_visible, found.txn_seen_early, found.txn_partial, found.txn_committed_lost,
            found.txn_duplicated) == (0, 0, 0, 0, 0), found.examples
    assert (found.lost, found.duplicated_idempotent, found.reordered, found.truncated_after_seen,
            found.offsets_lost, found.metadata_lost) == (0, 0, 0, 0, 0, 0), found.examples
    assert found.worker_errors == 0, found.examples


def test_torn_writes_in_a_chaos_run_lose_nothing_and_the_final_read_completes(tmp_path: Path):
    """torn-write: kill -9, a torn tail or a flipped bit in a segment, restart. The final read
    goes on past any range a leader quarantined (it used to abort the run with CORRUPT_MESSAGE),
    the history names the ranges, and no acknowledged record is lost in one or anywhere."""
    history = tmp_path / "history.jsonl"
    outcome = run_chaos(ChaosOptions(60, ["torn-write"], 5, str(history)), lambda line: None)
    found = outcome.findings
    assert found.faults.get("torn-write", 0) >= 1 and found.faults_missing == [] and found.not_recovered == 0
    finals = [e for e in map(json.loads, history.read_text().splitlines()) if e["k"] == "final_log"]
    assert len(finals) == 5 and all("quarantined" in e for e in finals), finals
    assert found.quarantined_ranges == sum(len(e["quarantined"]) for e in finals)
    assert found.acked > 0 and (found.lost, found.lost_quarantined, found.duplicated_idempotent, found.reordered,
                                found.truncated_after_seen) == (0, 0, 0, 0, 0), found.examples
