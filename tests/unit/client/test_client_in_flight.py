"""The producer's requests in flight per leader (Kafka's max.in.flight.requests.per.connection):
5 by default with idempotence, 1 without, at most 5 with idempotence; the sender really keeps
that many requests waiting on one leader at once (counted inside the fake broker)."""

from __future__ import annotations

import threading

import pytest

from client_fake_broker import FakeBroker
from kraft.api.client import Producer
from kraft.api.errors import KraftError


def test_the_limit_is_five_with_idempotence_and_one_without(broker: FakeBroker) -> None:
    with Producer(broker.bootstrap, acks="all", enable_idempotence=True) as idempotent:
        assert idempotent._sender._config.max_in_flight == 5
    with Producer(broker.bootstrap) as plain:
        assert plain._sender._config.max_in_flight == 1
    for bad in (0, 6):
        with pytest.raises(KraftError) as err:
            Producer(broker.bootstrap, acks="all", enable_idempotence=True, max_in_flight_requests_per_connection=bad)
        assert err.value.error_code == "INVALID_CONFIG" and "<= 5" in err.value.message


def test_the_limit_is_the_batches_a_broker_keeps_per_producer() -> None:
    from kraft.api.client.idempotence import MAX_IN_FLIGHT_IDEMPOTENT
    from kraft.log.producer_state import MAX_BATCHES_PER_PRODUCER

    assert MAX_IN_FLIGHT_IDEMPOTENT == MAX_BATCHES_PER_PRODUCER


def test_up_to_the_limit_of_requests_wait_on_one_leader_at_once(broker: FakeBroker) -> None:
    broker.create_topic("t")
    inside = peak = 0
    entered = threading.Condition()
    release = threading.Event()

    def gate() -> None:  # holds every produce request until released, counting them
        nonlocal inside, peak
        with entered:
            inside += 1
            peak = max(peak, inside)
            entered.notify_all()
        release.wait(30)
        with entered:
            inside -= 1

    broker.produce_gate = gate
    with Producer(broker.bootstrap, linger_ms=0, max_in_flight_requests_per_connection=3) as producer:
        futures = []
        for k in range(1, 4):  # each record its own request, the ones before it unanswered
            futures.append(producer.send("t", b"r%d" % k))
            with entered:
                assert entered.wait_for(lambda: inside == k, 30), f"request {k} never reached the broker"
        futures += [producer.send("t", b"queued%d" % i) for i in range(5)]  # no request to spare
        release.set()
        producer.flush(30)
    assert all(f.get(timeout=5).offset >= 0 for f in futures)
    assert peak == 3


def test_a_request_is_written_only_after_the_one_drained_before_it() -> None:
    """Each request in flight has its own I/O worker: the later one waits for the earlier
    one's write (not its answer), so a partition's batches reach the broker in order."""
    from kraft.api.client.sender import SendOrder

    order = SendOrder()
    first, second = order.ticket(1), order.ticket(1)
    assert order.ticket(2) == 0  # leaders are independent
    writes: list[int] = []
    later = threading.Thread(target=lambda: (order.wait_turn(1, second, 30), writes.append(second)))
    later.start()
    later.join(0.2)  # it is still waiting: nothing was written
    assert writes == [] and later.is_alive()
    writes.append(first)
    order.written(1, first)
    later.join(30)
    assert writes == [first, second]
    order.written(1, first)  # a second call (the error path's) changes nothing
    assert order.ticket(1) == 2


def test_a_new_batch_for_a_leader_with_every_request_in_flight_does_not_wake_the_sender(broker: FakeBroker) -> None:
    """The I/O worker answered first drains the leader's next batches itself, so batches opened
    while the leader has no request to spare cost no sender wake-up (counted), and are still
    sent without one: no flush, no linger timer."""
    broker.create_topic("t")
    in_gate, release = threading.Event(), threading.Event()

    def gate() -> None:
        in_gate.set()
        release.wait(30)

    broker.produce_gate = gate
    with Producer(broker.bootstrap, linger_ms=0, batch_size=100) as producer:  # one record per batch
        first = producer.send("t", b"first")
        assert in_gate.wait(30), "the first request never reached the broker"
        wakeups = 0
        wakeup = producer._sender.wakeup

        def counted() -> None:
            nonlocal wakeups
            wakeups += 1
            wakeup()

        producer._sender.wakeup = counted  # type: ignore[method-assign]
        queued = [producer.send("t", b"queued%d" % i) for i in range(20)]
        assert wakeups == 0
        release.set()
        offsets = [f.get(timeout=10).offset for f in [first, *queued]]  # no flush: the worker sends them
    assert offsets == list(range(21))
