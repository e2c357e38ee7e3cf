"""The sans-I/O Partition core on a real PartitionLog: the actions it returns for make-leader and
make-follower, epoch checks, both sides of a follower fetch, ISR changes; and the replica
manager performing them (a restarted broker leads only from metadata holding its registration)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import wait_until  # tests/ is on sys.path (tests/conftest.py)
from kraft.api.errors import KraftError
from kraft.server.records import ProduceEntry
from kraft.broker.replica_manager import ReplicaManager, ReplicationSettings
from kraft.broker.replication.follower import Append, PartitionFetchResponse, Truncate
from kraft.broker.replication.leader import LeaderAndIsr
from kraft.broker.replication.partition import (
    TXN_VERIFICATION_GRACE_MS, CompleteWaiters, Partition, ReplicaState, SendAlterPartition, StartFetching,
    StopFetching,
)
from kraft.log.batch import build_batch, iter_batches
from kraft.log.config import LogConfig
from kraft.log.errors import CorruptRecordError
from kraft.log.partition_log import PartitionLog
from kraft.metadata.delta import apply_records
from kraft.metadata.image import MetadataImage
from kraft.metadata.records import (
    ClaimController, Endpoint, MetadataRecord, Partition as PartitionRecord, RegisterBroker, Topic,
    UnfenceBroker,
)

LAG = 1_000


def batch(*values: bytes) -> bytes:
    return build_batch([(None, v, [], 1_700_000_000_000) for v in values])


def core(tmp_path: Path, node_id: int = 1, min_isr: int = 2) -> Partition:
    plog = PartitionLog.open(tmp_path / f"t-0-{node_id}", LogConfig(min_insync_replicas=min_isr), 0)
    return Partition(node_id, "t", 0, plog, replica_lag_time_max_ms=LAG, alter_partition_retry_ms=500)


def state(leader: int, leader_epoch: int = 0, isr: tuple[int, ...] = (1, 2, 3),
          partition_epoch: int = 0) -> ReplicaState:
    return ReplicaState("tid", leader, leader_epoch, partition_epoch, (1, 2, 3), isr)


def test_make_leader_stops_fetching_marks_the_epoch_start_and_wakes_waiters(tmp_path: Path) -> None:
    p = core(tmp_path)
    p.log.append_as_leader(batch(b"a", b"b"), 0, 0)
    actions = p.apply_registration(state(1, leader_epoch=3), now_ms=0)
    assert actions[:2] == [StopFetching(), CompleteWaiters(0, role_changed=True)]
    assert p.is_leader and p.leader_state.epoch_start_offset == 2
    assert p.log.end_offset_for_epoch(3) == (3, 2)
    assert p.check_leader_epoch(2).error_code == "FENCED_LEADER_EPOCH"
    assert p.check_leader_epoch(4).error_code == "UNKNOWN_LEADER_EPOCH"
    assert p.check_leader_epoch(3) is None


def test_only_a_new_leader_of_a_partition_that_had_one_waits_for_a_transactions_verification(
        tmp_path: Path) -> None:
    """KIP-890: an unverified first batch gets the retriable answer only from a leader that took
    over from another (epoch > 0) less than TXN_VERIFICATION_GRACE_MS ago."""
    p = core(tmp_path)
    p.apply_registration(state(1, leader_epoch=0), now_ms=1_000)
    assert not p.awaits_txn_verification(1_000)  # the first leader got every verification
    p.apply_registration(state(2, leader_epoch=1), now_ms=2_000)
    assert not p.awaits_txn_verification(2_000)  # a follower
    p.apply_registration(state(1, leader_epoch=2), now_ms=5_000)
    assert p.awaits_txn_verification(5_000 + TXN_VERIFICATION_GRACE_MS - 1)
    assert not p.awaits_txn_verification(5_000 + TXN_VERIFICATION_GRACE_MS)
    p.apply_registration(state(1, leader_epoch=2, isr=(1, 2)), now_ms=6_000)  # same epoch: same start
    assert not p.awaits_txn_verification(5_000 + TXN_VERIFICATION_GRACE_MS)


def test_the_txn_verification_grace_is_the_partitions_setting(tmp_path: Path) -> None:
    """transaction.partition.verification.grace.ms replaces the default window."""
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig(), 0)
    p = Partition(1, "t", 0, plog, replica_lag_time_max_ms=LAG,
                  alter_partition_retry_ms=500, txn_verification_grace_ms=1_000)
    p.apply_registration(state(2, leader_epoch=0), now_ms=0)
    p.apply_registration(state(1, leader_epoch=1), now_ms=5_000)
    assert p.awaits_txn_verification(5_999)
    assert not p.awaits_txn_verification(6_000)


def test_make_follower_starts_fetching_and_a_deposed_leader_wakes_its_waiters(tmp_path: Path) -> None:
    p = core(tmp_path)
    p.apply_registration(state(1), now_ms=0)
    assert p.apply_registration(state(2, leader_epoch=1), now_ms=1) == [
        CompleteWaiters(0, role_changed=True), StartFetching(2, 1)]
    assert not p.is_leader and p.is_following(1) and not p.is_following(0)


def test_follower_fetch_advances_the_high_watermark_and_completes_produces(tmp_path: Path) -> None:
    p = core(tmp_path)
    p.apply_registration(state(1), now_ms=0)
    p.log.append_as_leader(batch(b"a", b"b"), 0, 0)
    assert p.on_leader_append(0) == []  # followers have not fetched: HW stays
    assert p.produce_completed(0, 2) is None
    assert p.on_fetch_request(2, 2, 0, now_ms=1).actions == ()  # one of two followers
    decision = p.on_fetch_request(3, 2, 0, now_ms=2)
    assert decision.error is None and decision.actions == (CompleteWaiters(2),)
    assert p.produce_completed(0, 2) is True and p.produce_completed(1, 2) is False
    assert p.on_fetch_request(2, 3, -1, now_ms=3).error.error_code == "OFFSET_OUT_OF_RANGE"
    assert p.on_fetch_request(9, 0, -1, now_ms=3).error.error_code == "NOT_LEADER_OR_FOLLOWER"
    diverging = p.on_fetch_request(2, 5, 7, now_ms=3).diverging  # an epoch this leader never had
    assert diverging is not None and diverging.end_offset <= 2


def test_a_lagging_follower_is_proposed_out_of_the_isr_and_a_refusal_allows_a_retry(tmp_path: Path) -> None:
    p = core(tmp_path)
    p.apply_registration(state(1), now_ms=0)
    p.log.append_as_leader(batch(b"a"), 0, 0)
    p.on_fetch_request(2, 1, 0, now_ms=10)
    [action] = p.maybe_shrink_isr(now_ms=LAG + 1)
    assert isinstance(action, SendAlterPartition) and action.proposal.new_isr == (1, 2)
    assert p.maybe_shrink_isr(now_ms=LAG + 2) == []  # one in flight
    p.on_alter_partition_response(action.proposal, "INVALID_REQUEST")  # refused, nothing applied
    assert p.maybe_shrink_isr(now_ms=LAG + 3) == [action]


def test_an_expansion_refused_as_a_stale_copy_still_counts_its_joiner_for_the_high_watermark(
    tmp_path: Path,
) -> None:
    """Seed 333 of the simulation: the AlterPartition adding broker 3 was delivered twice; the
    first copy committed, the second was refused INVALID_UPDATE_VERSION, and the leader (its
    metadata not there yet) dropped 3 from its maximal ISR and advanced the HW past 3's log end,
    acknowledging a record an ISR member lacked."""
    p = core(tmp_path)
    p.apply_registration(state(1, isr=(1, 2)), now_ms=0)
    p.log.append_as_leader(batch(b"a", b"b"), 0, 0)
    [action] = p.on_fetch_request(3, 0, -1, now_ms=1).actions  # 3 joins at the HW (0)
    assert isinstance(action, SendAlterPartition) and action.proposal.new_isr == (1, 2, 3)
    p.on_fetch_request(2, 2, 0, now_ms=2)
    assert p.log.high_watermark == 0  # 3 counts already (KIP-497)
    p.on_alter_partition_response(action.proposal, "INVALID_UPDATE_VERSION")
    assert p.on_fetch_request(2, 2, 0, now_ms=3).actions == ()
    assert p.log.high_watermark == 0
    p.apply_registration(state(1, isr=(1, 2, 3), partition_epoch=1), now_ms=4)  # it committed
    assert p.on_fetch_request(3, 2, 0, now_ms=5).actions == (CompleteWaiters(2),)


def test_an_accepted_isr_change_is_taken_from_the_answer_before_the_metadata_brings_it(
    tmp_path: Path,
) -> None:
    """Seed 401074 of the simulation with metadata stalls: leader 1 (ISR [1, 3]) swapped 3 out and
    2 in, the controller committed [1, 2], and the leader's metadata stalled. After
    `alter_partition_retry_ms` it dropped the accepted proposal and went on from its older view:
    it counted broker 3 (out of the controller's ISR) and not broker 2 for the HW, and acknowledged
    a record broker 2, an ISR member, lacked. Now the answer's ISR is the leader's at once."""
    p = core(tmp_path)
    p.apply_registration(state(1, isr=(1, 3), partition_epoch=1), now_ms=0)
    p.log.append_as_leader(batch(b"a", b"b"), 0, 0)
    p.on_fetch_request(3, 0, -1, now_ms=1)  # 3 falls behind from here
    [action] = p.on_fetch_request(2, 2, 0, now_ms=LAG + 10).actions[-1:]  # 2 caught up; 3 lags
    assert isinstance(action, SendAlterPartition) and action.proposal.new_isr == (1, 2)
    answer = LeaderAndIsr(leader=1, leader_epoch=0, partition_epoch=2, isr=(1, 2))
    p.on_alter_partition_response(action.proposal, None, answer)
    assert p.state.isr == (1, 2) and p.leader_state.isr == (1, 2) and p.leader_state.pending is None
    p.log.append_as_leader(batch(b"c", b"d"), 0, 0)
    p.on_fetch_request(3, 4, 0, now_ms=2 * LAG)  # long after the retry interval: 3 caught up, 2 did not
    p.maybe_shrink_isr(now_ms=2 * LAG + 1)
    assert p.log.high_watermark == 2  # waits for broker 2, an ISR member
    assert p.apply_registration(state(1, isr=(1, 3), partition_epoch=1), now_ms=2 * LAG + 2) == []  # stale
    assert p.state.isr == (1, 2)
    p.apply_registration(state(1, isr=(1, 2), partition_epoch=2), now_ms=2 * LAG + 3)  # it arrives
    assert p.on_fetch_request(2, 4, 0, now_ms=2 * LAG + 4).actions[0] == CompleteWaiters(4)


def test_follower_appends_learns_the_high_watermark_and_truncates_by_diverging_epoch(
    tmp_path: Path,
) -> None:
    leader, follower = core(tmp_path, 1), core(tmp_path, 2)
    leader.apply_registration(state(1), now_ms=0)
    follower.apply_registration(state(1), now_ms=0)
    leader.log.append_as_leader(batch(b"a", b"b"), 0, 0)
    records = leader.log.read(0, 1 << 20).records
    action = follower.on_fetch_response(PartitionFetchResponse(1, 0, 2, records), now_ms=1)
    assert isinstance(action, Append)
    assert (follower.log.log_end_offset, follower.log.high_watermark) == (2, 1)
    follower.log.append_as_leader(batch(b"x"), 0, 0)  # a suffix the leader never had
    assert follower.fetch_position() == (3, 0, 1)
    leader.apply_registration(state(1, leader_epoch=1), now_ms=2)
    follower.apply_registration(state(1, leader_epoch=1), now_ms=2)
    # the follower's epoch 0 ends at 2 on the leader, below its fetch offset 3
    diverging = leader.on_fetch_request(2, 3, 0, now_ms=3).diverging
    assert diverging is not None and (diverging.epoch, diverging.end_offset) == (0, 2)
    action = follower.on_fetch_response(
        PartitionFetchResponse(1, 0, 2, b"", diverging), now_ms=4)
    assert action == Truncate(2) and follower.log.log_end_offset == 2


def test_only_a_position_from_the_registered_process_brings_a_follower_into_the_isr(
    tmp_path: Path,
) -> None:
    """Seed 215 of the simulation: broker 2 fetched up to 2 and lost that suffix in a power loss;
    after its restart (new broker epoch 57) the leader still held the old process's position and
    proposed it back into the ISR without the records (KIP-903)."""
    registered = {2: 50, 3: 3}
    p = core(tmp_path)
    p.registered_broker_epoch = registered.get
    p.apply_registration(state(1), now_ms=0)
    p.log.append_as_leader(batch(b"a", b"b"), 0, 0)
    p.on_fetch_request(3, 2, 0, now_ms=1, replica_epoch=3)
    p.on_fetch_request(2, 2, 0, now_ms=1, replica_epoch=50)  # then broker 2 dies, restarts
    registered[2] = 57  # its registration takes it out of the ISR
    p.apply_registration(state(1, isr=(1, 3), partition_epoch=1), now_ms=2)
    assert p.maybe_shrink_isr(now_ms=2) == []
    [action] = p.on_fetch_request(2, 2, 0, now_ms=3, replica_epoch=57).actions
    assert isinstance(action, SendAlterPartition) and action.proposal.new_isr == (1, 3, 2)


def test_no_leadership_without_this_brokers_registration(tmp_path: Path) -> None:
    p = core(tmp_path)
    actions = p.apply_registration(state(1), now_ms=0, may_lead=False)
    assert actions == [StopFetching()] and not p.is_leader
    assert p.apply_registration(state(1), now_ms=1)[0] == StopFetching() and p.is_leader


def test_a_follower_refetches_a_range_a_read_quarantined(tmp_path: Path) -> None:
    """Issue 11: a corrupt batch in a follower's closed segment, met by a read after a clean
    restart (recovery never scanned it), is quarantined by that read; the follower's next fetch
    position truncates to the region's start, as make_follower does for what recovery
    quarantined, and the leader's batches heal the log."""
    config = LogConfig(segment_bytes=600, min_insync_replicas=2)

    def replica(node_id: int) -> Partition:
        plog = PartitionLog.open(tmp_path / f"t-0-{node_id}", config, 0)
        return Partition(node_id, "t", 0, plog, replica_lag_time_max_ms=LAG, alter_partition_retry_ms=500)

    def catch_up(follower: Partition) -> None:
        while (offset := follower.fetch_position()[0]) < leader.log.log_end_offset:
            records = leader.log.read(offset, 1 << 20).records
            end = leader.log.log_end_offset
            assert isinstance(follower.on_fetch_response(
                PartitionFetchResponse(end, 0, end, records), now_ms=1), Append)

    leader, follower = replica(1), replica(2)
    leader.apply_registration(state(1), now_ms=0)
    follower.apply_registration(state(1), now_ms=0)
    for i in range(30):
        leader.log.append_as_leader(batch(*(b"%d-%d" % (i, j) * 5 for j in range(4))), 0, 0)
    catch_up(follower)
    total = leader.log.log_end_offset
    assert len(follower.log.segments) >= 3
    segment = follower.log.segments[1]
    pos, header = list(iter_batches(segment.read(0, segment.size)))[1]
    path = segment.log_path
    follower.log.close()  # a clean restart: closed segments are trusted, not scanned
    data = bytearray(path.read_bytes())
    data[pos + 60] ^= 0x40  # the record count, covered by the CRC
    path.write_bytes(bytes(data))
    follower = replica(2)
    follower.apply_registration(state(1), now_ms=2)
    assert follower.log.quarantined == () and follower.fetch_position()[0] == total

    with pytest.raises(CorruptRecordError):
        follower.log.read(header.base_offset, 1 << 20)
    assert [(r.start_offset, r.end_offset) for r in follower.log.quarantined] == [
        (header.base_offset, header.next_offset)]
    assert follower.fetch_position()[0] == header.base_offset  # truncated to refetch from there
    assert follower.log.quarantined == ()
    catch_up(follower)
    assert follower.log.read(0, 1 << 30).records == leader.log.read(0, 1 << 30).records
    follower.log.close()
    leader.log.close()


# -- the shell ---------------------------------------------------------------------------------


def _image(records: list[MetadataRecord], image: MetadataImage = MetadataImage.EMPTY) -> MetadataImage:
    stamped = [r.stamped(1, "rid") for r in records]
    return apply_records(image, ((image.offset + 1 + i, r) for i, r in enumerate(stamped)))[1]


def _register(broker_epoch: int) -> list[MetadataRecord]:
    return [RegisterBroker(broker_id=1, incarnation_id=f"inc-{broker_epoch}",
                           endpoints=(Endpoint("HTTP", "127.0.0.1", 9092),), broker_epoch=broker_epoch),
            UnfenceBroker(broker_id=1, broker_epoch=broker_epoch)]


async def test_a_restarted_broker_leads_only_once_the_metadata_holds_its_registration(
    tmp_path: Path,
) -> None:
    """Seed 10 of the simulation: a broker restarted from a metadata snapshot that still names it
    leader (registered by its previous process) must not take produces at that epoch: it may have
    lost a suffix its followers hold. It leads once its new registration is in the metadata."""
    lifecycle_epoch = -1  # not registered yet
    image = _image([ClaimController(node_id=1, controller_epoch=1), *_register(5),
                    Topic(name="t", topic_id="tid"),
                    PartitionRecord(topic_id="tid", partition=0, replicas=(1,), isr=(1,), leader=1)])
    manager = ReplicaManager(1, tmp_path, LogConfig(), 3_600_000, 1 << 20,
                             broker_epoch=lambda: lifecycle_epoch)
    manager.on_metadata_update(None, image)
    await manager.replica("t", 0).wait_ready()
    try:
        [result] = await manager.produce([ProduceEntry("t", 0, batch(b"a"))], 1, 1000)
        assert result.error_code == "NOT_LEADER_OR_FOLLOWER"
        lifecycle_epoch = 40  # the controller answered the registration ...
        manager.on_metadata_update(None, _image([], image))
        [result] = await manager.produce([ProduceEntry("t", 0, batch(b"a"))], 1, 1000)
        assert result.error_code == "NOT_LEADER_OR_FOLLOWER"  # ... not yet in the metadata
        manager.on_metadata_update(None, _image(_register(40), image))
        [result] = await manager.produce([ProduceEntry("t", 0, batch(b"a"))], 1, 1000)
        assert result.error_code is None and result.base_offset == 0
    finally:
        await manager.close()


async def test_a_broker_leads_once_its_registration_answer_comes_after_the_metadata(
    tmp_path: Path,
) -> None:
    """The registration is in the metadata before the lifecycle has the controller's answer, and
    no later delta touches the partition: the periodic ISR check applies the role then."""
    lifecycle_epoch = -1
    image = _image([ClaimController(node_id=1, controller_epoch=1), *_register(40),
                    Topic(name="t", topic_id="tid"),
                    PartitionRecord(topic_id="tid", partition=0, replicas=(1,), isr=(1,), leader=1)])
    manager = ReplicaManager(1, tmp_path, LogConfig(), 3_600_000, 1 << 20,
                             replication=ReplicationSettings(replica_lag_time_max_ms=100),
                             broker_epoch=lambda: lifecycle_epoch)
    manager.start()
    manager.on_metadata_update(None, image)
    replica = manager.replica("t", 0)
    await replica.wait_ready()
    try:
        assert not replica.is_leader
        lifecycle_epoch = 40
        await wait_until(lambda: replica.is_leader, 10, what="the replica leading")
    finally:
        await manager.close()


def test_delete_records_checks_as_kafkas_delete_records_on_leader(tmp_path: Path) -> None:
    p = core(tmp_path)
    p.log.append_as_leader(batch(*[b"v%d" % i for i in range(10)]), 0, 0)
    p.log.high_watermark = 6
    with pytest.raises(KraftError) as e:
        p.check_delete_records(4)
    assert e.value.error_code == "NOT_LEADER_OR_FOLLOWER"  # no role yet
    p.apply_registration(state(1), now_ms=0)
    assert p.check_delete_records(4) == 4 and p.check_delete_records(6) == 6
    assert p.check_delete_records(-1) == 6  # -1: the high watermark
    for offset in (7, -2):
        with pytest.raises(KraftError) as e:
            p.check_delete_records(offset)
        assert e.value.error_code == "OFFSET_OUT_OF_RANGE"
    p.log.config = LogConfig(cleanup_policy="compact")
    with pytest.raises(KraftError) as e:
        p.check_delete_records(4)
    assert e.value.error_code == "POLICY_VIOLATION"
    p.log.config = LogConfig(cleanup_policy="compact,delete")
    assert p.check_delete_records(4) == 4
    p.apply_registration(state(2, leader_epoch=1), now_ms=1)
    with pytest.raises(KraftError) as e:
        p.check_delete_records(4)
    assert e.value.error_code == "NOT_LEADER_OR_FOLLOWER"


def test_the_low_watermark_counts_the_live_replicas_as_their_fetches_report_them(tmp_path: Path) -> None:
    fenced: set[int] = set()
    p = core(tmp_path)
    p.is_unfenced = lambda r: r not in fenced
    p.apply_registration(state(1), now_ms=0)
    p.log.append_as_leader(batch(*[b"v%d" % i for i in range(10)]), 0, 0)
    p.on_fetch_request(2, 10, 0, now_ms=1, log_start_offset=0)
    p.on_fetch_request(3, 10, 0, now_ms=1, log_start_offset=0)
    assert p.log.high_watermark == 10 and p.low_watermark() == 0
    p.log.maybe_increment_log_start_offset(p.check_delete_records(7))
    assert p.low_watermark() == 0  # the followers have not fetched since
    # a follower's log start rising wakes the waiters (a DeleteRecords looks again)
    assert p.on_fetch_request(2, 10, 0, now_ms=2, log_start_offset=7).actions == (CompleteWaiters(10),)
    assert p.on_fetch_request(2, 10, 0, now_ms=3, log_start_offset=7).actions == ()
    assert p.low_watermark() == 0  # 3 is live and still at 0
    fenced.add(3)
    assert p.low_watermark() == 7  # a dead replica does not hold it back (Kafka's rule)
    fenced.clear()
    # a metadata change (here 3 leaves the ISR) wakes the waiters too: liveness may have changed
    assert CompleteWaiters(10) in p.apply_registration(state(1, isr=(1, 2), partition_epoch=1), now_ms=4)
    assert p.low_watermark() == 0  # out of the ISR but live: it still counts


def test_the_follower_reports_and_learns_the_log_start(tmp_path: Path) -> None:
    leader, follower = core(tmp_path, 1), core(tmp_path, 2)
    leader.apply_registration(state(1), now_ms=0)
    follower.apply_registration(state(1), now_ms=0)
    leader.log.append_as_leader(batch(*[b"v%d" % i for i in range(10)]), 0, 0)
    follower.on_fetch_response(PartitionFetchResponse(0, 0, 10, leader.log.read(0, 1 << 20).records), now_ms=1)
    leader.on_fetch_request(2, 10, 0, now_ms=2, log_start_offset=follower.log.log_start_offset)
    leader.on_fetch_request(3, 10, 0, now_ms=2, log_start_offset=0)
    leader.log.maybe_increment_log_start_offset(leader.check_delete_records(-1))
    assert leader.log.log_start_offset == 10
    follower.on_fetch_response(PartitionFetchResponse(10, 10, 10, b""), now_ms=3)
    assert follower.log.log_start_offset == 10  # from the answer, as far as its high watermark
