"""The Raft journal is compacted by records applied, not only by entries: one entry carries a
whole request's batch, so a few huge entries must still lead to a snapshot (the dump file)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from harness import free_port  # tests/ is on sys.path (tests/conftest.py)
from kraft.controller.raft_quorum import DUMP_FILE, RaftQuorum, RaftQuorumConfig


async def test_a_few_large_batches_trigger_a_snapshot(tmp_path: Path) -> None:
    quorum = RaftQuorum(RaftQuorumConfig(
        node_id=1, voters={1: ("127.0.0.1", free_port())}, data_dir=tmp_path, secret="s",
        log_compaction_min_entries=10**6, log_compaction_min_time=10**6,
        log_compaction_min_records=50))
    await quorum.start()
    try:
        deadline = asyncio.get_running_loop().time() + 30
        while not quorum.is_active_controller():
            assert asyncio.get_running_loop().time() < deadline, "no active controller"
            await asyncio.sleep(0.02)
        dump = quorum.config.metadata_dir / DUMP_FILE
        assert not dump.exists()
        for i in range(3):  # 3 entries of 20 records: far below the entry count, above 50 records
            await quorum.propose([{"type": "NoOp", "version": 0}] * 20, request_id=f"r{i}")
        while not dump.exists():
            assert asyncio.get_running_loop().time() < deadline, "no snapshot after 60 records"
            await asyncio.sleep(0.05)
    finally:
        await quorum.close()
