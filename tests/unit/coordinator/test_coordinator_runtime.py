"""The coordinator runtime on a fake partition log (real logs; appends that fail, stay in flight,
or land uncommitted; leadership lost) and a manual clock: state changes only on replay of
committed records, a failed append leaves nothing to undo, handlers of a partition run one at a
time from a bounded queue, timers run as handlers, loads replay from the log start, and an idle
runtime wakes nobody."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from coordinator_fakes import FakePartitions, ManualScheduler
from kraft.api.errors import KraftError
from kraft.coordinator.result import CancelTimer, CoordinatorRecord, CoordinatorResult, ScheduleTimer, TimerChange
from kraft.coordinator.runtime import CoordinatorRuntime, RuntimeSettings
from kraft.log.batch import build_batch
from loop_turns import loop_turns

TOPIC = "__state"


class KeyValueShard:
    """The last value per key; every replayed offset, in order."""

    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.values: dict[bytes, bytes] = {}
        self.replayed: list[int] = []
        self.loaded_timers: tuple[TimerChange, ...] = ()
        self.unloaded = 0

    def replay(self, record: CoordinatorRecord) -> None:
        assert record.key is not None
        self.replayed.append(record.offset)
        if record.value is None:
            self.values.pop(record.key, None)
        else:
            self.values[record.key] = record.value

    def on_loaded(self, now_ms: int) -> tuple[TimerChange, ...]:
        return self.loaded_timers

    def on_unloaded(self) -> None:
        self.unloaded += 1


def put(key: bytes, value: bytes | None, timers: tuple[TimerChange, ...] = (), seen: list[Any] | None = None):
    """A handler writing key=value; answers the values it saw."""

    def handler(shard: KeyValueShard, now_ms: int) -> CoordinatorResult[dict[bytes, bytes]]:
        if seen is not None:
            seen.append(dict(shard.values))
        return CoordinatorResult(((key, value),), dict(shard.values), timers)

    return handler


def barrier(shard: KeyValueShard, now_ms: int) -> CoordinatorResult[None]:
    """Writes nothing: once answered, everything queued before it ran."""
    return CoordinatorResult((), None)


class Harness:
    def __init__(self, tmp: Path, **settings: Any) -> None:
        self.partitions = FakePartitions(tmp, TOPIC)
        self.clock = ManualScheduler()
        self.runtime: CoordinatorRuntime[KeyValueShard] = CoordinatorRuntime(
            TOPIC, self.partitions, KeyValueShard, self.clock.clock, RuntimeSettings(**settings),
            scheduler=self.clock)

    async def elect(self, partition: int = 0, epoch: int = 0) -> KeyValueShard:
        self.runtime.on_election(partition, epoch)
        return await self.runtime.active(partition, 5)

    def write_raw(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> None:
        """Records in the log that the runtime did not write (a previous leader's)."""
        self.partitions.log(partition).append_as_leader(build_batch([(k, v, (), 0) for k, v in records]), 0, 0)

    async def close(self) -> None:
        await self.runtime.close()
        self.partitions.close()


@pytest.fixture
async def h(tmp_path: Path):
    harness = Harness(tmp_path)
    yield harness
    await harness.close()


async def test_a_write_is_replayed_and_answered_only_once_committed(h: Harness) -> None:
    shard = await h.elect()
    h.partitions.hold(0)
    seen: list[Any] = []
    first = asyncio.create_task(h.runtime.write(0, "put", put(b"k", b"1", seen=seen)))
    second = asyncio.create_task(h.runtime.write(0, "put", put(b"k", b"2", seen=seen)))
    while not h.partitions.appends:
        await asyncio.sleep(0)
    for _ in range(20):
        await asyncio.sleep(0)
    # appended, not committed: not in the state, not answered, and the next handler waits
    assert shard.values == {} and not first.done() and not second.done() and seen == [{}]
    h.partitions.release(0)
    assert await first == {} and shard.values[b"k"] == b"2"
    assert await second == {b"k": b"1"}  # it ran on the state the first write committed
    assert seen == [{}, {b"k": b"1"}] and shard.replayed == [0, 1]


@pytest.mark.parametrize("outcome, cause, answered", [
    ("refuse", "NOT_ENOUGH_REPLICAS", "COORDINATOR_NOT_AVAILABLE"),
    ("not_leader", "NOT_LEADER_OR_FOLLOWER", "NOT_COORDINATOR"),
])
async def test_a_failed_append_leaves_the_state_and_timers_as_they_were(
    h: Harness, outcome: str, cause: str, answered: str,
) -> None:
    shard = await h.elect()
    await h.runtime.write(0, "put", put(b"k", b"1"))
    h.partitions.outcomes[0].append(outcome)
    timer = ScheduleTimer("t", h.clock.now_ms + 1000, barrier)
    with pytest.raises(KraftError) as e:
        await h.runtime.write(0, "put", put(b"k", b"2", timers=(timer,)))
    assert e.value.error_code == answered and cause in e.value.message
    assert shard.values == {b"k": b"1"} and shard.replayed == [0]
    assert h.clock.pending() == 0  # the failed write's timer was not scheduled
    assert await h.runtime.write(0, "put", put(b"k", b"3")) == {b"k": b"1"}
    assert await h.runtime.active(0, 1) is shard and shard.replayed == [0, 1]  # no reload was needed


async def test_an_append_that_may_still_commit_reloads_the_shard_from_the_log(h: Harness) -> None:
    shard = await h.elect()
    h.partitions.outcomes[0].append("uncommitted")
    with pytest.raises(KraftError) as e:
        await h.runtime.write(0, "put", put(b"k", b"1"))
    assert e.value.error_code == "COORDINATOR_NOT_AVAILABLE" and shard.values == {}
    # the record is in the log above the high watermark: the runtime cannot tell its fate yet
    with pytest.raises(KraftError) as e:
        await h.runtime.active(0, 0.05)
    assert e.value.error_code == "COORDINATOR_LOAD_IN_PROGRESS"
    h.partitions.commit(0)  # the followers caught up: it is committed after all
    reloaded = await h.runtime.active(0, 5)
    assert reloaded is not shard and reloaded.values == {b"k": b"1"}
    assert await h.runtime.write(0, "put", put(b"k", b"2")) == {b"k": b"1"}
    assert reloaded.replayed == [0, 1]


async def test_a_write_that_lands_elsewhere_than_expected_reloads(h: Harness) -> None:
    shard = await h.elect()
    h.write_raw(0, [(b"other", b"x")])  # someone else wrote to the partition
    assert await h.runtime.write(0, "put", put(b"k", b"1")) == {}  # committed, so answered
    reloaded = await h.runtime.active(0, 5)
    assert reloaded is not shard and reloaded.values == {b"other": b"x", b"k": b"1"}


async def test_the_queue_of_a_partition_is_bounded(tmp_path: Path) -> None:
    h = Harness(tmp_path, max_queued=2)
    try:
        await h.elect()
        h.partitions.hold(0)
        writes = [asyncio.create_task(h.runtime.write(0, "put", put(b"k", b"0")))]
        while not h.partitions.appends:
            await asyncio.sleep(0)  # in flight
        writes += [asyncio.create_task(h.runtime.write(0, "put", put(b"k", b"%d" % i))) for i in (1, 2)]
        await asyncio.sleep(0)  # both wait in the queue
        with pytest.raises(KraftError) as e:
            await h.runtime.write(0, "put", put(b"k", b"full"))
        assert e.value.error_code == "COORDINATOR_LOAD_IN_PROGRESS" and e.value.retriable
        h.partitions.release(0)
        assert [await w for w in writes] == [{}, {b"k": b"0"}, {b"k": b"1"}]
    finally:
        await h.close()


async def test_resignation_fails_what_waits_and_answers_the_append_in_flight(h: Harness) -> None:
    await h.elect()
    await h.runtime.write(0, "put", put(b"k", b"0", timers=(ScheduleTimer("t", h.clock.now_ms + 10, barrier),)))
    assert h.clock.pending() == 1
    h.partitions.hold(0)
    in_flight = asyncio.create_task(h.runtime.write(0, "put", put(b"k", b"1")))
    queued = asyncio.create_task(h.runtime.write(0, "put", put(b"k", b"2")))
    while not h.partitions.appends == 2:
        await asyncio.sleep(0)
    h.runtime.on_resignation(0)
    with pytest.raises(KraftError) as e:
        await queued
    assert e.value.error_code == "NOT_COORDINATOR"
    assert h.clock.pending() == 0  # timers cancelled
    h.partitions.release(0)
    assert await in_flight == {b"k": b"0"}  # committed: the next leader replays it
    with pytest.raises(KraftError) as e:
        await h.runtime.write(0, "put", put(b"k", b"3"))
    assert e.value.error_code == "NOT_COORDINATOR"
    h.runtime.on_election(0, 1)  # elected again: the log has what was answered
    assert (await h.runtime.active(0, 5)).values == {b"k": b"1"}


async def test_a_shard_is_told_when_it_is_no_longer_served(h: Harness) -> None:
    """What waits on a shard's state (a classic group's JoinGroup) is failed on resignation, on
    a new leader epoch and on close."""
    first = await h.elect(0, 0)
    assert first.unloaded == 0
    second = await h.elect(0, 1)
    assert (first.unloaded, second.unloaded) == (1, 0)
    h.runtime.on_resignation(0)
    assert second.unloaded == 1
    third = await h.elect(0, 2)
    await h.runtime.close()
    assert third.unloaded == 1


async def test_a_load_replays_from_the_log_start_and_waits_for_the_high_watermark(h: Harness) -> None:
    h.write_raw(0, [(b"gone", b"x")])
    h.write_raw(0, [(b"a", b"1"), (b"b", b"1")])
    h.partitions.commit(0)
    h.partitions.log(0).maybe_increment_log_start_offset(1)  # DeleteRecords: offset 0 is gone
    h.write_raw(0, [(b"a", b"2")])  # a previous leader's tail, not in the ISR yet
    h.runtime.on_election(0, 0)
    with pytest.raises(KraftError) as e:
        await h.runtime.write(0, "put", put(b"k", b"1"))
    assert e.value.error_code == "COORDINATOR_LOAD_IN_PROGRESS"
    with pytest.raises(KraftError) as e:
        await h.runtime.active(0, 0.05)
    assert e.value.error_code == "COORDINATOR_LOAD_IN_PROGRESS"
    h.partitions.commit(0)
    shard = await h.runtime.active(0, 5)
    assert shard.values == {b"a": b"2", b"b": b"1"} and shard.replayed == [1, 2, 3]
    await h.runtime.write(0, "put", put(b"k", b"1"))
    assert shard.replayed[-1] == 4


async def test_a_load_gives_the_loop_turns(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    try:
        for i in range(50):
            h.write_raw(0, [(b"k%d" % j, b"%d" % i) for j in range(100)])
        h.partitions.commit(0)
        async with loop_turns() as turns:
            shard = await h.elect()
        assert len(shard.values) == 100 and len(shard.replayed) == 5000
        assert turns() >= 4  # a turn every 1000 records at least
    finally:
        await h.close()


async def test_timers_run_as_handlers_and_an_idle_runtime_wakes_nobody(h: Harness) -> None:
    shard = await h.elect()
    fired = ScheduleTimer("t", h.clock.now_ms + 1000, put(b"timer", b"1"))
    await h.runtime.write(0, "put", put(b"k", b"1", timers=(fired,)))
    assert h.clock.pending() == 1
    assert h.clock.advance(999) == 0  # nothing polls meanwhile
    assert h.clock.advance(1) == 1
    await h.runtime.write(0, "barrier", barrier)
    assert shard.values == {b"k": b"1", b"timer": b"1"}
    assert h.clock.pending() == 0 and h.clock.advance(3_600_000) == 0


async def test_a_timer_rescheduled_before_its_turn_does_not_run(h: Harness) -> None:
    shard = await h.elect()
    await h.runtime.write(0, "put", put(b"k", b"0", timers=(ScheduleTimer("t", h.clock.now_ms + 10, put(b"t", b"old")),)))
    h.partitions.hold(0)
    renewing = asyncio.create_task(h.runtime.write(0, "put", put(
        b"k", b"1", timers=(ScheduleTimer("t", h.clock.now_ms + 1000, put(b"t", b"new")),))))
    while h.partitions.appends < 2:
        await asyncio.sleep(0)
    assert h.clock.advance(10) == 1  # due while the renewing write is in flight: queued behind it
    h.partitions.release(0)
    await renewing
    await h.runtime.write(0, "barrier", barrier)
    assert b"t" not in shard.values  # the old timer was replaced before its turn came
    h.clock.advance(990)
    await h.runtime.write(0, "barrier", barrier)
    assert shard.values[b"t"] == b"new"


async def test_a_failed_timer_operation_runs_again_after_the_backoff(h: Harness) -> None:
    shard = await h.elect()
    attempts: list[int] = []

    def flaky(s: KeyValueShard, now_ms: int) -> CoordinatorResult[None]:
        attempts.append(now_ms)
        if len(attempts) == 1:
            raise KraftError("COORDINATOR_NOT_AVAILABLE", "not now")
        return CoordinatorResult(((b"done", b"1"),), None)

    await h.runtime.write(0, "put", put(b"k", b"0", timers=(ScheduleTimer("t", h.clock.now_ms + 10, flaky),)))
    h.clock.advance(10)
    await h.runtime.write(0, "barrier", barrier)
    assert len(attempts) == 1 and b"done" not in shard.values
    assert h.clock.advance(499) == 0 and h.clock.advance(1) == 1
    await h.runtime.write(0, "barrier", barrier)
    assert shard.values[b"done"] == b"1" and attempts[1] - attempts[0] == 500


async def test_cancelled_timers_and_loaded_timers(h: Harness) -> None:
    h.runtime.on_election(0, 0)
    shard = await h.runtime.active(0, 5)
    await h.runtime.write(0, "put", put(b"k", b"0", timers=(ScheduleTimer("t", h.clock.now_ms + 10, put(b"t", b"1")),)))
    await h.runtime.write(0, "put", put(b"k", b"1", timers=(CancelTimer("t"),)))
    assert h.clock.pending() == 0 and h.clock.advance(100) == 0 and b"t" not in shard.values


async def test_partitions_are_independent(h: Harness) -> None:
    """One partition's append in flight holds only its own queue; completions in either order."""
    zero, one = await h.elect(0), await h.elect(1)
    h.partitions.hold(0)
    slow = asyncio.create_task(h.runtime.write(0, "put", put(b"k", b"0")))
    assert await h.runtime.write(1, "put", put(b"k", b"1")) == {}
    assert one.values == {b"k": b"1"} and zero.values == {} and not slow.done()
    h.partitions.release(0)
    await slow
    assert zero.values == {b"k": b"0"}


async def test_a_handler_error_is_the_answer_and_changes_nothing(h: Harness) -> None:
    shard = await h.elect()

    def refuse(s: KeyValueShard, now_ms: int) -> CoordinatorResult[None]:
        raise KraftError("INVALID_REQUEST", "no")

    with pytest.raises(KraftError) as e:
        await h.runtime.write(0, "refuse", refuse)
    assert e.value.error_code == "INVALID_REQUEST" and h.partitions.appends == 0 and shard.replayed == []


async def test_not_elected_and_a_new_epoch(h: Harness) -> None:
    with pytest.raises(KraftError) as e:
        await h.runtime.write(0, "put", put(b"k", b"0"))
    assert e.value.error_code == "NOT_COORDINATOR"
    first = await h.elect(0, 1)
    await h.runtime.write(0, "put", put(b"k", b"0"))
    h.runtime.on_election(0, 1)  # the same epoch again: nothing to do
    assert await h.runtime.active(0, 1) is first
    h.runtime.on_election(0, 2)  # a new epoch: the log is read again
    second = await h.runtime.active(0, 5)
    assert second is not first and second.values == {b"k": b"0"}


async def test_a_load_that_fails_answers_not_coordinator_until_the_next_election(h: Harness) -> None:
    h.write_raw(0, [(b"k", b"1")])
    h.partitions.commit(0)
    replay = KeyValueShard.replay

    def broken(shard: KeyValueShard, record: CoordinatorRecord) -> None:
        raise ValueError("a bug")

    KeyValueShard.replay = broken  # type: ignore[method-assign]
    try:
        h.runtime.on_election(0, 0)
        with pytest.raises(KraftError) as e:
            await h.runtime.active(0, 5)
        assert e.value.error_code == "NOT_COORDINATOR"
        with pytest.raises(KraftError) as e:
            await h.runtime.write(0, "put", put(b"k", b"2"))
        assert e.value.error_code == "NOT_COORDINATOR" and h.partitions.appends == 0
    finally:
        KeyValueShard.replay = replay  # type: ignore[method-assign]
    h.runtime.on_election(0, 1)
    assert (await h.runtime.active(0, 5)).values == {b"k": b"1"}


async def test_a_failure_of_the_partitions_task_leaves_no_request_waiting(h: Harness) -> None:
    await h.elect()

    async def broken(topic: str, partition: int) -> Any:
        raise RuntimeError("a bug")

    h.partitions.offsets = broken  # type: ignore[method-assign]
    h.partitions.outcomes[0].append("refuse")
    with pytest.raises(KraftError) as e:
        await h.runtime.write(0, "put", put(b"k", b"1"))
    assert e.value.error_code == "COORDINATOR_NOT_AVAILABLE"  # the append's error, then the bug
    with pytest.raises(KraftError) as e:
        await h.runtime.write(0, "put", put(b"k", b"2"))
    assert e.value.error_code == "NOT_COORDINATOR"
