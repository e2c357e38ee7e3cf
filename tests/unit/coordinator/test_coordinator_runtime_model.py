"""A hypothesis model of the coordinator runtime against a fake partition log: random writes whose
appends commit, are refused, or land without committing; appends of two partitions completing in
either order; resignations (the uncommitted tail truncated, as a new leader does) and elections;
timers falling due. Whatever happens, a loaded shard is exactly the replay of its partition's
committed records, and every answered write stays in the log."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Coroutine

from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from coordinator_fakes import FakePartitions, ManualScheduler
from kraft.api.errors import KraftError
from kraft.coordinator.result import CoordinatorResult, ScheduleTimer
from kraft.coordinator.runtime import CoordinatorRuntime, RuntimeSettings
from kraft.log.batch import decode_records, iter_batches
from test_coordinator_runtime import TOPIC, KeyValueShard, barrier, put

PARTITIONS = (0, 1)
KEYS = st.sampled_from([b"a", b"b", b"c"])
OUTCOMES = st.sampled_from(["commit", "commit", "refuse", "not_leader", "uncommitted"])
FAILED_APPEND = {"refuse": "COORDINATOR_NOT_AVAILABLE", "not_leader": "NOT_COORDINATOR",
                 "uncommitted": "COORDINATOR_NOT_AVAILABLE"}


def committed(partitions: FakePartitions, p: int) -> list[tuple[int, bytes | None, bytes | None]]:
    plog = partitions.log(p)
    info = plog.read(plog.log_start_offset, 1 << 24, max_offset=plog.high_watermark)
    return [(r.offset, r.key, r.value) for pos, _ in iter_batches(info.records)
            for r in decode_records(info.records, pos)]


class RuntimeModel(RuleBasedStateMachine):
    @initialize()
    def setup(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.dir = Path(tempfile.mkdtemp(prefix="coordinator-model-"))
        self.partitions = FakePartitions(self.dir, TOPIC)
        self.clock = ManualScheduler()
        self.runtime: CoordinatorRuntime[KeyValueShard] = CoordinatorRuntime(
            TOPIC, self.partitions, KeyValueShard, self.clock.clock, RuntimeSettings(), scheduler=self.clock)
        self.epochs = {p: 0 for p in PARTITIONS}
        self.answered: list[tuple[int, int, bytes, bytes]] = []  # partition, offset, key, value
        self.value = 0
        for p in PARTITIONS:
            self.on_loop(self.runtime.on_election, p, 0)

    def teardown(self) -> None:
        if hasattr(self, "loop"):
            self.run(self.runtime.close())
            self.partitions.close()
            self.loop.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    def run(self, work: Coroutine[Any, Any, Any]) -> Any:
        return self.loop.run_until_complete(work)

    def on_loop(self, call: Callable[..., None], *args: Any) -> None:
        """Elections and resignations come from the metadata publisher, on the loop."""

        async def now() -> None:
            call(*args)

        self.run(now())

    def active(self, p: int) -> KeyValueShard | None:
        return dict(self.runtime.active_shards()).get(p)

    def next_value(self) -> bytes:
        self.value += 1
        return b"%d" % self.value

    async def _write(self, p: int, key: bytes, value: bytes) -> None:
        shard = self.active(p)
        try:
            seen = await self.runtime.write(p, "put", put(key, value))
        except KraftError as e:
            assert shard is None or e.error_code in FAILED_APPEND.values(), e
            return
        assert shard is not None and seen is not None
        offset = shard.replayed[-1] if self.active(p) is shard else None
        if offset is not None:
            self.answered.append((p, offset, key, value))

    @rule(p=st.sampled_from(PARTITIONS), key=KEYS, outcome=OUTCOMES)
    def write(self, p: int, key: bytes, outcome: str) -> None:
        if self.active(p) is not None:
            self.partitions.outcomes[p].append(outcome)
        before = None if self.active(p) is None else dict(self.active(p).values)
        self.run(self._write(p, key, self.next_value()))
        self.partitions.outcomes[p].clear()
        if before is not None and outcome in ("refuse", "not_leader"):
            assert self.active(p).values == before  # nothing to roll back

    @rule(first=st.sampled_from(PARTITIONS), key=KEYS)
    def two_appends_complete_in_either_order(self, first: int, key: bytes) -> None:
        if any(self.active(p) is None for p in PARTITIONS):
            return
        for p in PARTITIONS:
            self.partitions.hold(p)

        async def both() -> None:
            writes = [asyncio.ensure_future(self._write(p, key, self.next_value())) for p in PARTITIONS]
            while self.partitions.appends < self.appends_before + 2:
                await asyncio.sleep(0)
            for p in (first, 1 - first):
                self.partitions.release(p)
                await writes[p]

        self.appends_before = self.partitions.appends
        self.run(both())

    @rule(p=st.sampled_from(PARTITIONS))
    def followers_catch_up(self, p: int) -> None:
        self.partitions.commit(p)

    @rule(p=st.sampled_from(PARTITIONS))
    def leadership_moves_away(self, p: int) -> None:
        self.on_loop(self.runtime.on_resignation, p)
        plog = self.partitions.log(p)
        plog.truncate_to(plog.high_watermark)  # the next leader did not have the uncommitted tail

    @rule(p=st.sampled_from(PARTITIONS))
    def elected(self, p: int) -> None:
        self.epochs[p] += 1
        self.on_loop(self.runtime.on_election, p, self.epochs[p])

    @rule(p=st.sampled_from(PARTITIONS), delay=st.integers(0, 2000))
    def timer_scheduled(self, p: int, delay: int) -> None:
        if self.active(p) is None:
            return
        timer = ScheduleTimer(("t", p), self.clock.now_ms + delay, put(b"timer", self.next_value()))
        self.run(self._timer_write(p, timer))

    async def _timer_write(self, p: int, timer: ScheduleTimer) -> None:
        def schedule(shard: KeyValueShard, now_ms: int) -> CoordinatorResult[None]:
            return CoordinatorResult((), None, (timer,))

        await self.runtime.write(p, "schedule", schedule)

    @rule(ms=st.integers(0, 3000))
    def time_passes(self, ms: int) -> None:
        async def advance() -> None:
            self.clock.advance(ms)
            for p in PARTITIONS:
                if self.active(p) is not None:
                    try:
                        await self.runtime.write(p, "barrier", barrier)
                    except KraftError:
                        pass  # reloading after the timer's append did not commit

        self.run(advance())

    @invariant()
    def a_loaded_shard_is_the_replay_of_the_committed_log(self) -> None:
        if not hasattr(self, "loop"):
            return
        for p in PARTITIONS:
            plog = self.partitions.log(p)
            if self.runtime.is_coordinator(p) and plog.high_watermark == plog.log_end_offset:
                self.run(self.runtime.active(p, 5))  # nothing uncommitted: its load finishes
            shard = self.active(p)
            if shard is None:
                continue
            records = committed(self.partitions, p)
            assert plog.high_watermark == plog.log_end_offset
            assert shard.replayed == [offset for offset, _, _ in records]
            values: dict[bytes, bytes] = {}
            for _, key, value in records:
                assert key is not None and value is not None
                values[key] = value
            assert shard.values == values

    @invariant()
    def answered_writes_stay(self) -> None:
        if not hasattr(self, "loop"):
            return
        logs = {p: {offset: (key, value) for offset, key, value in committed(self.partitions, p)} for p in PARTITIONS}
        for p, offset, key, value in self.answered:
            assert logs[p].get(offset) == (key, value), (p, offset, key, value)


RuntimeModel.TestCase.settings = settings(max_examples=40, stateful_step_count=30, deadline=None)
TestRuntimeModel = RuntimeModel.TestCase
