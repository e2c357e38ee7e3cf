"""A lone voter restarted hundreds of times through log compaction, killed -9 at seeded random
moments or closed cleanly: every acknowledged record survives, in order, exactly once.

Each incarnation is a real process (forked from this one: starting it costs milliseconds, not an
interpreter start) in a process group of its own, so kill -9 also takes pysyncobj's forked dump
writer, as a machine crash or a container kill would. It proposes keys 0, 1, 2, ... one at a
time (a retry keeps the request id, so it applies once) and reports every acknowledged key on a
pipe; the next incarnation reports what it recovered. Keys, not offsets, are checked: offsets
also count the controller claims of every incarnation. Several voters, each with a data dir of
its own, go through their cycles side by side (a cycle mostly waits), which divides the test's
time, not its number of kills.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import random
import select
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.raft_voter import AppliedKeys, Voter  # tests/ is on sys.path (tests/conftest.py)
from harness import free_port, wait_until
from kraft.controller.errors import ControllerError
from kraft.controller.raft_quorum import RaftQuorum, RaftQuorumConfig

COMPACTION_ENTRIES = 8  # a dump every few proposals: most kills land near one


def voter_config(data_dir: Path, port: int) -> RaftQuorumConfig:
    # Short Raft timings: a restart is an election, and there are hundreds of them.
    return RaftQuorumConfig(node_id=1, voters={1: ("127.0.0.1", port)}, data_dir=data_dir,
                            secret="s", raft_min_timeout=0.04, raft_max_timeout=0.08,
                            append_entries_period=0.01, auto_tick_period=0.005,
                            leader_fallback_timeout=0.05, request_timeout=3.0,
                            log_compaction_min_entries=COMPACTION_ENTRIES)


def _send(fd: int, kind: str, value: object) -> None:
    os.write(fd, (json.dumps([kind, value]) + "\n").encode())  # one small write: atomic on a pipe


async def _incarnation(data_dir: Path, port: int, out: int) -> None:
    quorum = RaftQuorum(voter_config(data_dir, port), AppliedKeys())
    voter = Voter(quorum)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await quorum.start()
    await wait_until(quorum.is_active_controller, 30, interval=0.005, what="the voter leading")
    recovered = [key for _, key in sorted(voter.applied.items()) if key is not None]
    _send(out, "recovered", {"keys": recovered, "violations": voter.violations})
    key = max(recovered, default=-1) + 1
    while not stop.is_set():
        try:
            await quorum.propose([{"type": "TestPut", "key": key}], request_id=f"key-{key}")
        except ControllerError:
            continue  # outcome unknown: the same request id again
        _send(out, "acked", key)
        key += 1
    await quorum.close()
    _send(out, "closed", key)


def _child(data_dir: Path, port: int, unused_read: int, out: int) -> None:
    # Without the read end here, a dead test process makes the next report fail (EPIPE), so an
    # incarnation never outlives it.
    os.close(unused_read)
    os.setpgrp()
    asyncio.run(_incarnation(data_dir, port, out))


class Incarnation:
    """One voter process and what it reported so far."""

    def __init__(self, data_dir: Path, port: int) -> None:
        read, write = os.pipe()
        self.process = multiprocessing.get_context("fork").Process(
            target=_child, args=(data_dir, port, read, write), daemon=True)
        self.process.start()
        os.close(write)
        self._read = read
        self._buffer = b""
        self.messages: list[tuple[str, object]] = []
        self.eof = False

    def poll(self, timeout: float) -> None:
        if self.eof or not select.select([self._read], [], [], timeout)[0]:
            return
        chunk = os.read(self._read, 65536)
        if not chunk:
            self.eof = True
            os.close(self._read)
            return
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        self.messages.extend(tuple(json.loads(line)) for line in lines)

    def wait_for(self, condition, timeout: float, what: str) -> Iterator[int]:
        """Yields (its pipe) until `condition` holds: the caller waits on the pipes of all chains."""
        deadline = time.monotonic() + timeout
        while not condition():
            assert not self.eof, f"incarnation ended before {what}"
            assert time.monotonic() < deadline, f"no {what} within {timeout} s"
            yield self._read
            self.poll(0)

    def values(self, kind: str) -> list:
        return [value for k, value in self.messages if k == kind]

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self._finish()

    def close(self) -> Iterator[int]:
        os.kill(self.process.pid, signal.SIGTERM)
        yield from self.wait_for(lambda: self.values("closed"), 30, "clean close")
        self._finish()

    def _finish(self) -> None:
        while not self.eof:  # the pipe holds every ack written before the end
            self.poll(5.0)
        self.process.join(10)
        assert self.process.exitcode is not None


def cycles_of_one_voter(data_dir: Path, cycles: int, seed: str) -> Iterator[int | None]:
    """One voter's data dir through `cycles` incarnations; yields whenever it waits (a pipe to
    wait on, or None while it sleeps)."""
    rng = random.Random(seed)
    port = free_port()
    acked: list[int] = []
    recovered_before: list[int] = []
    compactions = 0
    for cycle in range(cycles):
        incarnation = Incarnation(data_dir, port)
        try:
            yield from incarnation.wait_for(lambda: incarnation.values("recovered"), 30, "recovery report")
            report = incarnation.values("recovered")[0]
            keys = report["keys"]
            context = f"seed {seed}, cycle {cycle}"
            assert report["violations"] == [], context
            # In order and exactly once: proposals are sequential and retries keep their id.
            assert keys == list(range(len(keys))), context
            # Nothing acknowledged, nor anything committed that an earlier incarnation saw, is
            # lost (an unacknowledged proposal may have committed: it is then the next key).
            assert len(keys) >= max(len(recovered_before), max(acked, default=-1) + 1), context
            recovered_before = keys
            target = len(acked) + rng.randint(0, 3 * COMPACTION_ENTRIES)
            yield from incarnation.wait_for(lambda: len(acked) + len(incarnation.values("acked")) >= target,
                                            30, f"{target} acknowledged keys")
            kill_at = time.monotonic() + rng.uniform(0, 0.02)  # the random moment of the kill
            while time.monotonic() < kill_at:
                yield None
            if rng.random() < 0.2:
                yield from incarnation.close()
        finally:
            if not incarnation.eof:
                incarnation.kill()
        acked.extend(incarnation.values("acked"))
        compactions += (data_dir / "__cluster_metadata-0" / "raft.snapshot").exists()
    assert acked and compactions, f"seed {seed}: the cycles never got through a log compaction"


def run_cycles(tmp_path: Path, voters: int, cycles: int, seed: int) -> None:
    """`voters` independent lone voters, `cycles` incarnations each, run side by side: a cycle
    mostly waits (a fork, an election, a commit per key), so their waits overlap on this thread."""
    runs = [cycles_of_one_voter(tmp_path / f"voter-{i}", cycles, f"{seed}-{i}") for i in range(voters)]
    try:
        while runs:
            pipes = []
            for run in list(runs):
                try:
                    pipe = next(run)
                except StopIteration:
                    runs.remove(run)
                    continue
                if pipe is not None:
                    pipes.append(pipe)
            select.select(pipes, [], [], 0.002)
    finally:
        for run in runs:  # a failed voter's fellows: each kills its incarnation
            run.close()


def test_lone_voter_keeps_every_acknowledged_record_across_kills_and_restarts(tmp_path: Path) -> None:
    run_cycles(tmp_path, voters=2, cycles=50, seed=11)


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_lone_voter_survives_a_thousand_kills(tmp_path: Path) -> None:
    run_cycles(tmp_path, voters=4, cycles=250, seed=int(os.environ.get("KRAFT_RESTART_SEED", "7")))
