"""The Raft journal is compacted by records applied, not only by entries: one entry carries a
whole request's batch, so a few huge entries must still lead to a snapshot (the dump file)."""

from __future__ import annotations

from pathlib import Path

from harness import free_port, wait_until  # tests/ is on sys.path (tests/conftest.py)
from kraft.controller.raft_quorum import DUMP_FILE, RaftQuorum, RaftQuorumConfig


async def test_a_few_large_batches_trigger_a_snapshot(tmp_path: Path) -> None:
    quorum = RaftQuorum(RaftQuorumConfig(
        node_id=1, voters={1: ("127.0.0.1", free_port())}, data_dir=tmp_path, secret="s",
        log_compaction_min_entries=10**6, log_compaction_min_time=10**6,
        log_compaction_min_records=50))
    await quorum.start()
    try:
        await wait_until(quorum.is_active_controller, what="an active controller")
        dump = quorum.config.metadata_dir / DUMP_FILE
        assert not dump.exists()
        for i in range(3):  # 3 entries of 20 records: far below the entry count, above 50 records
            await quorum.propose([{"type": "NoOp", "version": 0}] * 20, request_id=f"r{i}")
        await wait_until(dump.exists, what="a snapshot after 60 records")
    finally:
        await quorum.close()
