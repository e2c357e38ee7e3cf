"""The client's idempotence state (pure): sequences per partition, epoch bumps after sequence
errors (once per burst), a new producer id when the epoch is exhausted."""

from __future__ import annotations

from kraft.api.client.idempotence import BatchSequence, IdempotenceState, ProducerIdAndEpoch
from kraft.api.client.types import TopicPartition
from kraft.producer_ids import MAX_PRODUCER_EPOCH

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


def test_sequences_count_records_per_partition_and_wrap() -> None:
    state = IdempotenceState()
    state.set_producer(7, 0)
    assert state.assign(T0, 3) == BatchSequence(7, 0, 0)
    assert state.assign(T0, 2) == BatchSequence(7, 0, 3)
    assert state.assign(T1, 1) == BatchSequence(7, 0, 0)
    state._next_sequence[T1] = 2**31 - 2
    assert state.assign(T1, 4).base_sequence == 2**31 - 2
    assert state.assign(T1, 1).base_sequence == 2


def test_a_sequence_error_bumps_the_epoch_once_and_restarts_every_partition() -> None:
    state = IdempotenceState()
    state.set_producer(7, 0)
    first = state.assign(T0, 1)
    second = state.assign(T0, 1)
    state.assign(T1, 5)
    state.on_error("OUT_OF_ORDER_SEQUENCE_NUMBER", first)
    state.on_error("OUT_OF_ORDER_SEQUENCE_NUMBER", second)  # same burst: no second bump
    assert state.producer == ProducerIdAndEpoch(7, 1)
    assert state.assign(T1, 1) == BatchSequence(7, 1, 0)
    state.on_error("NOT_LEADER_OR_FOLLOWER", state.assign(T0, 1))  # not a sequence error
    assert state.producer == ProducerIdAndEpoch(7, 1)
    state.on_error("UNKNOWN_PRODUCER_ID", state.assign(T0, 1))
    assert state.producer == ProducerIdAndEpoch(7, 2)


def test_an_exhausted_epoch_needs_a_new_producer_id() -> None:
    state = IdempotenceState()
    state.set_producer(7, MAX_PRODUCER_EPOCH)
    state.on_error("UNKNOWN_PRODUCER_ID", state.assign(T0, 1))
    assert state.producer is None
    state.set_producer(8, 0)
    assert state.assign(T0, 1) == BatchSequence(8, 0, 0)


def test_a_sequence_error_behind_an_unacknowledged_batch_is_retried() -> None:
    state = IdempotenceState()
    state.set_producer(7, 0)
    first, second = state.assign(T0, 2), state.assign(T0, 1)
    # `first` is still on its way (to a deposed leader, say, or on another connection)
    behind = state.behind_unacked(T0, second)
    assert behind and not state.behind_unacked(T0, first)
    assert state.should_retry("OUT_OF_ORDER_SEQUENCE_NUMBER", second, behind)  # `second` arrived too early
    assert not state.should_retry("OUT_OF_ORDER_SEQUENCE_NUMBER", first, False)  # the next expected
    assert not state.should_retry("NOT_LEADER_OR_FOLLOWER", second, behind)
    state.on_acked(T0, first, 2)
    # `second` overtook `first`, whose ack was handled before `second`'s refusal: still a retry
    assert state.should_retry("UNKNOWN_PRODUCER_ID", second, behind)
    assert not state.behind_unacked(T0, second)  # sent again now, it is the next expected one:
    assert not state.should_retry("UNKNOWN_PRODUCER_ID", second, False)  # a refusal is the broker's loss
    state.bump_epoch(second)  # e.g. it expired unsent
    assert state.producer == ProducerIdAndEpoch(7, 1)
    assert not state.should_retry("OUT_OF_ORDER_SEQUENCE_NUMBER", second, behind)  # an older epoch


def test_a_retried_batch_is_drained_alone_for_its_partition() -> None:
    from kraft.api.client.accumulator import RecordAccumulator

    leaders = {T0: 1, T1: 1}.get
    for isolate, expected in ((True, [[T0, T1], [T0], [T0]]), (False, [[T0, T1], [T0, T0]])):
        acc = RecordAccumulator(batch_size=100, linger_ms=0, one_batch_per_partition=isolate)
        for tp in (T0, T1):
            acc.append_new_batch(tp, None, b"x", (), 0, 10, now_ms=0)
        [sent] = acc.drain([1], leaders, 10_000, now_ms=0).values()
        acc.reenqueue([b for b in sent if b.tp == T0], retry_at_ms=0)  # T0's answer was lost
        acc.append_new_batch(T0, None, b"y", (), 0, 10, now_ms=0)
        rounds = [[b.tp for b in sent]]
        while acc.has_queued():
            rounds.append([b.tp for b in acc.drain([1], leaders, 10_000, now_ms=0)[1]])
        assert rounds == expected


def test_an_idempotent_request_takes_one_batch_of_each_partition() -> None:
    """So a partition never has more batches in flight than the broker keeps per producer (5):
    a retry of any of them is answered with its original offsets."""
    from kraft.api.client.accumulator import RecordAccumulator

    leaders = {T0: 1, T1: 1}.get
    acc = RecordAccumulator(batch_size=100, linger_ms=0, one_batch_per_partition=True)
    for tp in (T0, T0, T0, T1):
        acc.append_new_batch(tp, None, b"x", (), 0, 10, now_ms=0)
    rounds = []
    while acc.has_queued():
        rounds.append([b.tp for b in acc.drain([1], leaders, 10_000, now_ms=0)[1]])
    assert sorted(rounds[0]) == [T0, T1] and rounds[1:] == [[T0], [T0]]


def test_retries_wait_for_their_partition_in_flight_and_go_back_in_creation_order() -> None:
    """Five requests in flight: the later batches came back first (OUT_OF_ORDER_SEQUENCE_NUMBER
    behind an unanswered one); none is sent again while a batch of its partition is in flight,
    and they are sent again one at a time, oldest first (Kafka's insertInSequenceOrder)."""
    from kraft.api.client.accumulator import RecordAccumulator

    leaders = {T0: 1, T1: 1}.get
    acc = RecordAccumulator(batch_size=100, linger_ms=0, one_batch_per_partition=True)
    sent = []
    for value in (b"a", b"b", b"c"):  # three requests, one batch each
        acc.append_new_batch(T0, None, value, (), 0, 10, now_ms=0)
        [[batch]] = acc.drain([1], leaders, 10_000, now_ms=0).values()
        sent.append(batch)
    a, b, c = sent
    acc.reenqueue([c], retry_at_ms=0)  # c's answer first, then b's; a still in flight
    acc.reenqueue([b], retry_at_ms=0)
    acc.append_new_batch(T1, None, b"other", (), 0, 10, now_ms=0)
    in_flight = {T0: 1}
    check = acc.ready(0, leaders, (), False, in_flight)
    assert check.ready_nodes == {1}  # T1 is sendable
    assert [x.tp for x in acc.drain([1], leaders, 10_000, 0, in_flight)[1]] == [T1]  # T0's retries wait
    assert acc.ready(0, leaders, (), False, in_flight).ready_nodes == set()
    assert acc.queued(T0) == [b, c]
    rounds = []
    while acc.has_queued():  # a answered; each retry is in flight alone
        [[batch]] = acc.drain([1], leaders, 10_000, 0, {}).values()
        rounds.append(batch)
    assert rounds == [b, c]


def test_the_acknowledged_sequence_never_moves_back() -> None:
    """With several requests in flight, an earlier batch's answer may be handled after a later
    one's: a sequence error on the next batch must still be seen as one behind nothing."""
    state = IdempotenceState()
    state.set_producer(7, 0)
    first, second, third = (state.assign(T0, 5) for _ in range(3))
    state.on_acked(T0, second, 5)
    state.on_acked(T0, first, 5)  # answered last
    assert not state.behind_unacked(T0, third)  # it is the next one
