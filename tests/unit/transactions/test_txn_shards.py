"""The transaction shard and the group shard's transactional offsets on the coordinator runtime,
over real partition logs (tests/coordinator_fakes.py) and a manual clock: a prepared transaction
is handed to the marker channel and completes; a load after failover finds it prepared and hands
it over again; the transaction timeout aborts under a bumped epoch; transactional offsets count
for the group only after the COMMIT marker, also when the partition is loaded again from its log.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from coordinator_fakes import FakePartitions, ManualScheduler
from kraft.api.errors import KraftError
from kraft.broker.groups.membership import GroupConfig
from kraft.broker.groups.shard import GroupShard
from kraft.broker.transactions.shard import TransactionShard
from kraft.broker.transactions.state import TransactionMetadata, TxnError, TxnState
from kraft.coordinator.result import CoordinatorResult
from kraft.coordinator.runtime import CoordinatorRuntime, RuntimeSettings
from kraft.metadata.image import MetadataImage

TID = "orders-1"


class TxnHarness:
    def __init__(self, tmp: Path, **shard_settings: int) -> None:
        self.partitions = FakePartitions(tmp, "__transaction_state")
        self.clock = ManualScheduler()
        self.prepared: list[TransactionMetadata] = []
        self.shard_settings = shard_settings
        self.runtime = self._runtime()

    def _runtime(self) -> CoordinatorRuntime[TransactionShard]:
        return CoordinatorRuntime("__transaction_state", self.partitions,
                                  lambda p: TransactionShard(p, lambda _, meta: self.prepared.append(meta),
                                                             **self.shard_settings),
                                  self.clock.clock, RuntimeSettings(), scheduler=self.clock)

    async def failover(self) -> TransactionShard:
        """A new coordinator: a fresh runtime loads the same partition log."""
        await self.runtime.close()
        self.runtime = self._runtime()
        self.runtime.on_election(0, 1)
        return await self.runtime.active(0, 5)

    async def write(self, name: str, **kwargs):
        return await self.runtime.write(0, name, lambda s, now: getattr(s, name)(now, **kwargs))


@pytest.fixture
async def h(tmp_path: Path):
    harness = TxnHarness(tmp_path)
    harness.runtime.on_election(0, 0)
    await harness.runtime.active(0, 5)
    yield harness
    await harness.runtime.close()
    harness.partitions.close()


async def test_end_transaction_hands_the_prepared_transaction_over_and_completes(h: TxnHarness) -> None:
    pid = await h.write("init_producer_id", transactional_id=TID, timeout_ms=60_000, new_producer_id=5)
    assert (pid.producer_id, pid.producer_epoch, pid.error) == (5, 0, None)
    await h.write("add_partitions", transactional_id=TID, producer_id=5, producer_epoch=0,
                  partitions=[("t", 0), ("t", 1)])
    assert list((await h.runtime.active(0, 1)).ongoing) == [TID]  # the verification pushes look here
    await h.write("end_transaction", transactional_id=TID, producer_id=5, producer_epoch=0, commit=True)
    assert not (await h.runtime.active(0, 1)).ongoing
    [prepared] = h.prepared
    assert prepared.state is TxnState.PREPARE_COMMIT and prepared.partitions == {("t", 0), ("t", 1)}
    await h.write("complete", transactional_id=TID, producer_id=5, producer_epoch=0, state=TxnState.PREPARE_COMMIT)
    shard = await h.runtime.active(0, 1)
    assert shard.transactions[TID].state is TxnState.COMPLETE_COMMIT
    # a retried EndTxn of a done commit succeeds and writes nothing
    end = h.partitions.log(0).log_end_offset
    await h.write("end_transaction", transactional_id=TID, producer_id=5, producer_epoch=0, commit=True)
    assert h.partitions.log(0).log_end_offset == end


async def test_an_end_of_transaction_version_2_logs_the_bumped_epoch_and_answers_it(h: TxnHarness) -> None:
    """EndTxn v5: the prepared record carries epoch + 1 (the markers fence the ended
    transaction's late batches), the answer names it, and a new coordinator loads it."""
    await h.write("init_producer_id", transactional_id=TID, timeout_ms=60_000, new_producer_id=5)
    await h.write("add_partitions", transactional_id=TID, producer_id=5, producer_epoch=0, partitions=[("t", 0)])
    answer = await h.write("end_transaction", transactional_id=TID, producer_id=5, producer_epoch=0, commit=True,
                           bump_epoch=True)
    assert (answer.producer_id, answer.producer_epoch) == (5, 1)
    [prepared] = h.prepared
    assert (prepared.state, prepared.producer_epoch) == (TxnState.PREPARE_COMMIT, 1)
    await h.write("complete", transactional_id=TID, producer_id=5, producer_epoch=1, state=TxnState.PREPARE_COMMIT)
    retried = await h.write("end_transaction", transactional_id=TID, producer_id=5, producer_epoch=0, commit=True,
                            bump_epoch=True)
    assert (retried.producer_id, retried.producer_epoch) == (5, 1)
    shard = await h.failover()
    assert (shard.transactions[TID].state, shard.transactions[TID].producer_epoch) == (TxnState.COMPLETE_COMMIT, 1)


async def test_a_new_coordinator_finishes_a_prepared_transaction(h: TxnHarness) -> None:
    await h.write("init_producer_id", transactional_id=TID, timeout_ms=60_000, new_producer_id=5)
    await h.write("add_partitions", transactional_id=TID, producer_id=5, producer_epoch=0, partitions=[("t", 0)])
    await h.write("end_transaction", transactional_id=TID, producer_id=5, producer_epoch=0, commit=False)
    h.prepared.clear()
    shard = await h.failover()  # the old coordinator died before its markers were done
    [prepared] = h.prepared
    assert prepared.state is TxnState.PREPARE_ABORT and shard.transactions[TID] == prepared


async def test_the_timeout_aborts_an_abandoned_transaction_and_fences_its_producer(h: TxnHarness) -> None:
    await h.write("init_producer_id", transactional_id=TID, timeout_ms=1_000, new_producer_id=5)
    await h.write("add_partitions", transactional_id=TID, producer_id=5, producer_epoch=0, partitions=[("t", 0)])
    assert h.clock.advance(999) == 0
    assert h.clock.advance(1) == 1
    shard = await h.runtime.active(0, 1)
    await h.runtime.write(0, "noop", lambda s, now: _nothing())  # queued after the timer's operation
    meta = shard.transactions[TID]
    assert (meta.state, meta.producer_epoch) == (TxnState.PREPARE_ABORT, 1)
    assert [m.state for m in h.prepared] == [TxnState.PREPARE_ABORT]
    with pytest.raises(TxnError) as e:
        await h.write("end_transaction", transactional_id=TID, producer_id=5, producer_epoch=0, commit=True)
    assert e.value.error_code == "PRODUCER_FENCED"


async def test_a_timer_is_restored_by_a_load(h: TxnHarness) -> None:
    await h.write("init_producer_id", transactional_id=TID, timeout_ms=5_000, new_producer_id=5)
    await h.write("add_partitions", transactional_id=TID, producer_id=5, producer_epoch=0, partitions=[("t", 0)])
    await h.failover()
    assert h.clock.pending() >= 1
    h.clock.advance(5_000)
    shard = await h.runtime.active(0, 1)
    await h.runtime.write(0, "noop", lambda s, now: _nothing())
    assert shard.transactions[TID].state is TxnState.PREPARE_ABORT


async def test_idle_transactional_ids_expire_with_a_tombstone(tmp_path: Path) -> None:
    """transactional.id.expiration.ms on the runtime's clock: an id idle that long in Empty or
    CompleteCommit is forgotten at the next check (and stays forgotten after a load); an id with
    a transaction open is kept however old."""
    h = TxnHarness(tmp_path, id_expiration_ms=10_000, id_expiration_check_interval_ms=1_000)
    h.runtime.on_election(0, 0)
    await h.runtime.active(0, 5)
    try:
        await h.write("init_producer_id", transactional_id="idle", timeout_ms=60_000, new_producer_id=5)
        await h.write("init_producer_id", transactional_id="open", timeout_ms=900_000, new_producer_id=6)
        await h.write("add_partitions", transactional_id="open", producer_id=6, producer_epoch=0,
                      partitions=[("t", 0)])
        h.clock.advance(5_000)
        await h.write("init_producer_id", transactional_id="done", timeout_ms=60_000, new_producer_id=7)
        await h.write("add_partitions", transactional_id="done", producer_id=7, producer_epoch=0,
                      partitions=[("t", 1)])
        await h.write("end_transaction", transactional_id="done", producer_id=7, producer_epoch=0, commit=True)
        await h.write("complete", transactional_id="done", producer_id=7, producer_epoch=0,
                      state=TxnState.PREPARE_COMMIT)

        async def ids() -> set[str]:
            shard = await h.runtime.active(0, 1)
            await h.runtime.write(0, "noop", lambda s, now: _nothing())  # after the timers' writes
            return set(shard.transactions)

        h.clock.advance(4_999)
        assert await ids() == {"idle", "open", "done"}
        h.clock.advance(1_000)  # "idle" was last asked about 10 s ago
        assert await ids() == {"open", "done"}
        h.clock.advance(5_000)
        assert await ids() == {"open"}  # Ongoing: its timeout, not the expiration, ends it
        await h.failover()  # the tombstones are in the log: a load forgets the ids too
        assert await ids() == {"open"}
    finally:
        await h.runtime.close()
        h.partitions.close()


def _nothing() -> CoordinatorResult[None]:
    return CoordinatorResult((), None)


# -- the group shard's transactional offsets ---------------------------------------------------

class _Env:
    image = MetadataImage.EMPTY

    def regex_topics(self, image):
        return lambda m: frozenset()

    def group_changed(self, partition: int, group_id: str) -> None:
        pass  # nothing waits on a group here

    def unloaded(self, partition: int) -> None:
        pass


def _group_runtime(partitions: FakePartitions, clock: ManualScheduler) -> CoordinatorRuntime[GroupShard]:
    return CoordinatorRuntime("__consumer_offsets", partitions,
                              lambda p: GroupShard(p, _Env(), GroupConfig(), 10**9, 10**9),
                              clock.clock, RuntimeSettings(), scheduler=clock)


@pytest.mark.parametrize("commit", [True, False])
async def test_transactional_offsets_count_only_after_the_commit_marker(tmp_path: Path, commit: bool) -> None:
    partitions = FakePartitions(tmp_path, "__consumer_offsets")
    clock = ManualScheduler()
    runtime = _group_runtime(partitions, clock)
    runtime.on_election(0, 0)
    shard = await runtime.active(0, 5)
    partitions.log(0).verify_transaction(9, 0)  # the transaction coordinator's AddOffsetsToTxn
    try:
        await runtime.write(0, "plain", lambda s, now: s.reset_offsets("g", {("t", 1): 3}, now))
        await runtime.write(0, "txn", lambda s, now: s.commit_transactional_offsets("g", 9, 0, {("t", 0): (42, "m")}, now))
        assert ("t", 0) not in shard.groups["g"].offsets  # pending until the marker
        assert partitions.log(0).last_stable_offset == 1  # the open transaction holds the LSO
        await runtime.write(0, "marker", lambda s, now: s.complete_transaction(
            now, producer_id=9, producer_epoch=0, coordinator_epoch=0, commit=commit))
        expected = {("t", 1): 3} | ({("t", 0): 42} if commit else {})
        assert {tp: o.offset for tp, o in shard.groups["g"].offsets.items()} == expected
        # a new coordinator replays the transactional batch and the marker to the same state
        await runtime.close()
        runtime = _group_runtime(partitions, clock)
        runtime.on_election(0, 1)
        reloaded = await runtime.active(0, 5)
        assert {tp: o.offset for tp, o in reloaded.groups["g"].offsets.items()} == expected
        assert not reloaded._state.pending
    finally:
        await runtime.close()
        partitions.close()


async def test_a_zombie_transactional_offset_commit_is_fenced(tmp_path: Path) -> None:
    partitions = FakePartitions(tmp_path, "__consumer_offsets")
    clock = ManualScheduler()
    runtime = _group_runtime(partitions, clock)
    runtime.on_election(0, 0)
    await runtime.active(0, 5)
    try:
        partitions.log(0).verify_transaction(9, 1)
        await runtime.write(0, "txn", lambda s, now: s.commit_transactional_offsets("g", 9, 1, {("t", 0): (1, "")}, now))
        with pytest.raises(KraftError) as e:
            await runtime.write(0, "txn", lambda s, now: s.commit_transactional_offsets("g", 9, 0, {("t", 0): (2, "")}, now))
        assert e.value.error_code == "INVALID_PRODUCER_EPOCH"
        with pytest.raises(KraftError) as e:  # a producer the coordinator never added here
            await runtime.write(0, "txn", lambda s, now: s.commit_transactional_offsets("g", 10, 0, {("t", 0): (3, "")}, now))
        assert e.value.error_code == "INVALID_TXN_STATE"
    finally:
        await runtime.close()
        partitions.close()
