"""Standby voters learn a commit when it happens, not at the leader's next AppendEntries period
(issue 25, metadata propagation): pysyncobj with `appendEntriesUseBatch` sent a tick's new
entries and the advanced commit index only at the next `appendEntriesPeriod`, so a standby
controller (and the broker on its node) applied a record up to a period after the active
controller had answered it.

Three voters in this process with a 2 s period (elections, which pysyncobj wants beyond three
periods, and the leader's fallback stretched to match): every record must be applied by both
standbys within a quarter of a period of the leader applying it. Before the change each one waited a uniformly random part of a period, so
five in a row under 0.5 s happened once in a thousand runs.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from harness import free_port, wait_until
from integration.raft_voter import AppliedKeys  # tests/ is on sys.path (tests/conftest.py)
from kraft.controller.raft_quorum import RaftQuorum, RaftQuorumConfig

PERIOD_S = 2.0
WITHIN_S = PERIOD_S / 4
RECORDS = 5


async def test_standbys_apply_a_commit_without_waiting_for_the_period(tmp_path: Path) -> None:
    ports = {i: free_port() for i in (1, 2, 3)}
    voters = {i: ("127.0.0.1", p) for i, p in ports.items()}
    quorums: dict[int, RaftQuorum] = {}
    applied: dict[int, dict[Any, float]] = {i: {} for i in voters}  # voter -> key -> when applied
    for i in voters:
        quorum = quorums[i] = RaftQuorum(
            RaftQuorumConfig(node_id=i, voters=voters, data_dir=tmp_path / f"v{i}", secret="s",
                             raft_min_timeout=3.25 * PERIOD_S, raft_max_timeout=4 * PERIOD_S,
                             append_entries_period=PERIOD_S, auto_tick_period=0.02,
                             leader_fallback_timeout=5 * PERIOD_S, request_timeout=30.0),
            AppliedKeys())
        quorum.on_commit(lambda _offset, record, i=i: applied[i].setdefault(record.get("key"), time.monotonic()))
    for quorum in quorums.values():
        await quorum.start()
    try:
        await wait_until(lambda: any(q.is_active_controller() for q in quorums.values()), 60,
                         what="an active controller")
        leader = next(i for i, q in quorums.items() if q.is_active_controller())
        standbys = [i for i in voters if i != leader]
        for key in range(RECORDS):
            await quorums[leader].propose([{"type": "TestPut", "key": key}], request_id=f"k{key}")
            await wait_until(lambda: all(key in applied[i] for i in standbys), 3 * PERIOD_S, interval=0.005,
                             what=f"record {key} on the standbys")
            lags = {i: round(applied[i][key] - applied[leader][key], 3) for i in standbys}
            assert all(lag < WITHIN_S for lag in lags.values()), (key, lags)
    finally:
        for quorum in quorums.values():
            await quorum.close()
