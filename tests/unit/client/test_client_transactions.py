"""The client's TransactionManager over a scripted transport (the network is outside the unit):
Kafka's states, fatal vs abortable errors, the coordinator's retriable answers retried and a moved
coordinator found again, EndTxn skipped for a transaction that added nothing."""

from __future__ import annotations

from collections import deque
from typing import Any

import pytest

from kraft.api.client.transactions import (
    TransactionAbortableError, TransactionFatalError, TransactionManager, TransactionState, classify,
)
from kraft.api.client.types import TopicPartition
from kraft.api.errors import KraftError

TP = TopicPartition("t", 0)
COORDINATOR = {"transactional_id": "tx", "partition": 0, "coordinator": {"node_id": 1, "host": "h", "port": 1}}


class ScriptedTransport:
    """Answers each request with the next scripted answer for its path suffix (an exception is
    raised); records what was asked."""

    def __init__(self, **answers: list[Any]) -> None:
        self.answers = {k: deque(v) for k, v in answers.items()}
        self.asked: list[tuple[str, str, Any]] = []

    def request(self, method: str, path: str, body: Any = None, **_: Any) -> Any:
        self.asked.append((method, path, body))
        suffix = path.rsplit("/", 1)[-1]
        if suffix == "coordinator":
            return COORDINATOR
        answer = self.answers[suffix].popleft()
        if isinstance(answer, BaseException):
            raise answer
        return answer


def manager(transport: ScriptedTransport) -> TransactionManager:
    return TransactionManager(transport, "tx", 60_000, timeout_s=5, backoff_s=0.001)  # type: ignore[arg-type]


def test_a_transaction_goes_through_kafkas_states() -> None:
    t = ScriptedTransport(init=[{"producer_id": 7, "producer_epoch": 2}],
                          partitions=[{"partitions": [{"topic": "t", "partition": 0}]}], end=[{}])
    m = manager(t)
    with pytest.raises(KraftError) as e:
        m.begin()
    assert e.value.error_code == "INVALID_TXN_STATE"
    assert m.init() == (7, 2) and m.state is TransactionState.READY
    with pytest.raises(KraftError):
        m.check_sendable()  # not in a transaction
    m.begin()
    m.add_partitions([TP])
    assert m.unadded([TP]) == set()
    m.add_partitions([TP])  # added already: nothing asked
    m.end(commit=True)
    assert m.state is TransactionState.READY
    bodies = [b for _, path, b in t.asked if path.endswith("/end")]
    assert bodies == [{"producer_id": 7, "producer_epoch": 2, "commit": True}]


def test_an_empty_transaction_ends_without_asking_the_coordinator() -> None:
    t = ScriptedTransport(init=[{"producer_id": 7, "producer_epoch": 0}])
    m = manager(t)
    m.init()
    m.begin()
    m.end(commit=True)
    assert not [p for _, p, _ in t.asked if p.endswith("/end")] and m.state is TransactionState.READY


def test_retriable_answers_are_retried_and_a_moved_coordinator_found_again() -> None:
    moved = KraftError("NOT_COORDINATOR", "elsewhere", coordinator={"node_id": 2, "host": "h2", "port": 2})
    t = ScriptedTransport(init=[KraftError("CONCURRENT_TRANSACTIONS", "markers"), moved,
                                {"producer_id": 7, "producer_epoch": 1}])
    assert manager(t).init() == (7, 1)


def test_fencing_is_fatal_and_a_failed_send_abortable() -> None:
    t = ScriptedTransport(init=[{"producer_id": 7, "producer_epoch": 0}], end=[{}],
                          partitions=[KraftError("PRODUCER_FENCED", "a newer producer")])
    m = manager(t)
    m.init()
    m.begin()
    failed = m.fail(KraftError("NOT_ENOUGH_REPLICAS_AFTER_APPEND", "a send failed"))
    assert isinstance(failed, TransactionAbortableError) and m.state is TransactionState.ABORTABLE_ERROR
    with pytest.raises(TransactionAbortableError):
        m.check_sendable()
    with pytest.raises(KraftError):
        m.end(commit=True)  # only an abort now
    m.end(commit=False)
    m.begin()
    with pytest.raises(TransactionFatalError):
        m.add_partitions([TP])
    assert m.state is TransactionState.FATAL_ERROR
    for step in (m.begin, lambda: m.end(commit=False), m.init):
        with pytest.raises(TransactionFatalError):
            step()


@pytest.mark.parametrize("code, fatal", [
    ("PRODUCER_FENCED", True), ("INVALID_PRODUCER_EPOCH", True), ("TRANSACTIONAL_ID_AUTHORIZATION_FAILED", True),
    ("INVALID_TXN_STATE", False), ("TOPIC_AUTHORIZATION_FAILED", False), ("REQUEST_TIMED_OUT", False),
])
def test_errors_are_classed_as_kafka_classes_them(code: str, fatal: bool) -> None:
    error = classify(KraftError(code, "x"))
    assert isinstance(error, TransactionFatalError if fatal else TransactionAbortableError)
    assert error.error_code == code
