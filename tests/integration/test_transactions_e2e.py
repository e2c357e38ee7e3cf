"""Transactions end to end on real nodes (issue 24): the Python Producer's transactional API over
the transaction coordinator. A transaction over three partitions plus a group offset commit is
all-or-nothing for read_committed consumers and the group; an abort hides both; a zombie of the
same transactional id is fenced; an abandoned transaction is aborted by its timeout; kill -9 of the
node before the prepare (the transaction aborts) and after it (it commits once the new coordinator
writes the markers) keeps all-or-nothing."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
import requests

from harness import shutdown_all, start_node, wait_for
from kraft.api.client import Admin, Producer, TopicPartition
from kraft.api.client.transactions import TransactionFatalError
from kraft.api.client.types import NewTopic
from kraft.api.errors import KraftError
from kraft.broker.transactions.coordinator import COORDINATOR_WAIT_S
from transactions_support import committed_values, group_offset, stable

PARTITIONS = 3


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    n = start_node(tmp_path_factory.mktemp("txn"), transaction_state_log_num_partitions=3,
                   offsets_topic_num_partitions=3)
    yield n
    shutdown_all([n])


def new_topic(node, partitions: int = PARTITIONS) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    with Admin(node.bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])
    return name


def producer(node, tid: str, **kw) -> Producer:
    p = Producer(node.bootstrap, transactional_id=tid, linger_ms=0, max_block_ms=30_000, **kw)
    p.init_transactions()
    return p


def send_everywhere(p: Producer, topic: str, tag: str) -> None:
    futures = [p.send(topic, f"{tag}-{i}".encode(), partition=i) for i in range(PARTITIONS)]
    for f in futures:
        f.get(timeout=30)


@pytest.mark.parametrize("commit", [True, False])
def test_three_partitions_and_a_group_offset_are_all_or_nothing(node, commit: bool) -> None:
    topic, group, tid = new_topic(node), f"g-{uuid.uuid4().hex[:6]}", f"tx-{uuid.uuid4().hex[:6]}"
    p = producer(node, tid)
    try:
        p.begin_transaction()
        send_everywhere(p, topic, "a")
        p.send_offsets_to_transaction({TopicPartition(topic, 0): 17}, group)
        # acknowledged, not committed: nothing is visible, and the group has no offset
        assert committed_values(node.bootstrap, topic, PARTITIONS) == []
        assert group_offset(node.bootstrap, group, topic) is None
        if commit:
            p.commit_transaction()
        else:
            p.abort_transaction()
        expected = sorted(f"a-{i}" for i in range(PARTITIONS)) if commit else []
        wait_for(lambda: committed_values(node.bootstrap, topic, PARTITIONS) == expected, 30, what="the transaction's outcome")
        wait_for(lambda: group_offset(node.bootstrap, group, topic) == (17 if commit else None), 30,
                 what="the group's offset")
        p.begin_transaction()  # the producer goes on after either
        send_everywhere(p, topic, "b")
        p.commit_transaction()
        both = sorted(expected + [f"b-{i}" for i in range(PARTITIONS)])
        wait_for(lambda: committed_values(node.bootstrap, topic, PARTITIONS) == both, 30, what="the next transaction")
    finally:
        p.close()


def test_txn_offsets_answer_an_unknown_partition_on_its_own(node) -> None:
    """POST /v1/groups/{group}/txn-offsets answers each offset (Kafka's TxnOffsetCommit): an
    unknown partition UNKNOWN_TOPIC_OR_PARTITION, the known one added (the whole commit used to be
    refused); the client then leaves the transaction to abort, which drops the added offset."""
    topic, group, tid = new_topic(node), f"g-{uuid.uuid4().hex[:6]}", f"tx-{uuid.uuid4().hex[:6]}"
    p = producer(node, tid)
    try:
        p.begin_transaction()
        with pytest.raises(KraftError) as refused:
            p.send_offsets_to_transaction({TopicPartition(topic, 0): 17, TopicPartition(topic, 9): 3}, group)
        assert refused.value.error_code == "UNKNOWN_TOPIC_OR_PARTITION", refused.value
        assert f"{topic}-9 (UNKNOWN_TOPIC_OR_PARTITION)" in str(refused.value)
        assert f"{topic}-0 " not in str(refused.value)
        p.abort_transaction()
        p.begin_transaction()
        p.send_offsets_to_transaction({TopicPartition(topic, 0): 21}, group)
        p.commit_transaction()
        wait_for(lambda: group_offset(node.bootstrap, group, topic) == 21, 30, what="the group's offset")
    finally:
        p.close()


def test_a_zombie_with_the_old_epoch_is_fenced(node) -> None:
    topic, tid = new_topic(node), f"tx-{uuid.uuid4().hex[:6]}"
    zombie = producer(node, tid)
    try:
        zombie.begin_transaction()
        send_everywhere(zombie, topic, "zombie")
        fresh = producer(node, tid)  # a new instance: its init aborts the zombie's transaction
        try:
            with pytest.raises(TransactionFatalError) as e:
                zombie.commit_transaction()
            assert e.value.error_code in ("PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH")
            with pytest.raises(TransactionFatalError):
                zombie.begin_transaction()
            fresh.begin_transaction()
            send_everywhere(fresh, topic, "fresh")
            fresh.commit_transaction()
            fresh_only = sorted(f"fresh-{i}" for i in range(PARTITIONS))
            wait_for(lambda: committed_values(node.bootstrap, topic, PARTITIONS) == fresh_only, 30,
                     what="only the new producer's records")
        finally:
            fresh.close()
    finally:
        zombie.close()


def test_the_transaction_timeout_aborts_an_abandoned_transaction(node) -> None:
    topic, tid = new_topic(node), f"tx-{uuid.uuid4().hex[:6]}"
    p = producer(node, tid, transaction_timeout_ms=1500)
    try:
        p.begin_transaction()
        send_everywhere(p, topic, "late")
        with Admin(node.bootstrap) as admin:
            wait_for(lambda: admin.describe_transactions([tid])[tid]["state"] == "CompleteAbort", 30,
                     what="the coordinator's abort")
        assert stable(node.bootstrap, topic, PARTITIONS)  # the markers are written
        assert committed_values(node.bootstrap, topic, PARTITIONS) == []
        with pytest.raises(TransactionFatalError):
            p.commit_transaction()
    finally:
        p.close()


def kraft_cli(node, *args: str) -> list[list[str]]:
    proc = subprocess.run([sys.executable, "-c", "from kraft.api.cli import main; main()", *args,
                           "--bootstrap-server", node.bootstrap], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return [line.split() for line in proc.stdout.splitlines()]


def test_the_transactions_tool_lists_describes_and_shows_producers(node) -> None:
    topic, tid = new_topic(node), f"tx-{uuid.uuid4().hex[:6]}"
    p = producer(node, tid)
    try:
        p.begin_transaction()
        send_everywhere(p, topic, "open")
        header, *rows = kraft_cli(node, "transactions", "list")
        assert header == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
        assert [tid, "1", str(p._txn.producer_id), "Ongoing"] in rows
        header, row = kraft_cli(node, "transactions", "describe", "--transactional-id", tid)
        assert header[:5] == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState"]
        assert row[1:5] == [tid, str(p._txn.producer_id), "0", "Ongoing"]
        assert row[-1] == ",".join(f"{topic}-{i}" for i in range(PARTITIONS))
        header, row = kraft_cli(node, "transactions", "describe-producers", "--topic", topic, "--partition", "1")
        assert header == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                          "CurrentTransactionStartOffset"]
        assert row[0] == str(p._txn.producer_id) and row[-1] == "0"  # the open transaction starts at 0
        p.commit_transaction()
        wait_for(lambda: kraft_cli(node, "transactions", "describe", "--transactional-id", tid)[1][4]
                 == "CompleteCommit", 30, what="the commit")
    finally:
        p.close()


def test_bad_requests_get_kafka_errors(node) -> None:
    with pytest.raises(KraftError) as e:
        Producer(node.bootstrap, transactional_id="too-long", transaction_timeout_ms=10**9).init_transactions()
    assert e.value.error_code == "INVALID_TRANSACTION_TIMEOUT"
    p = producer(node, f"tx-{uuid.uuid4().hex[:6]}")
    try:
        with pytest.raises(KraftError) as e:
            p.send("anything", b"x")  # outside a transaction
        assert e.value.error_code == "INVALID_TXN_STATE"
    finally:
        p.close()


@pytest.mark.parametrize("prepared", [False, True])
def test_kill_9_before_and_after_the_prepare(tmp_path, prepared: bool) -> None:
    n = start_node(tmp_path, transaction_state_log_num_partitions=1, offsets_topic_num_partitions=1)
    try:
        topic, group, tid = new_topic(n), "g", "tx-crash"
        p = producer(n, tid, transaction_timeout_ms=3000)
        p.begin_transaction()
        send_everywhere(p, topic, "c")
        p.send_offsets_to_transaction({TopicPartition(topic, 0): 5}, group)
        if prepared:
            p._txn.end(commit=True)  # EndTxn answered: PrepareCommit is logged; no flush after
        n.kill()
        p.close(timeout=0)
        n.start()
        expected = sorted(f"c-{i}" for i in range(PARTITIONS)) if prepared else []
        # prepared: the new coordinator writes the markers; not prepared: the timeout aborts it
        wait_for(lambda: _state(n, tid) == ("CompleteCommit" if prepared else "CompleteAbort"), 60,
                 what="the transaction to complete after the restart")
        wait_for(lambda: stable(n.bootstrap, topic, PARTITIONS), 30, what="the markers")
        assert committed_values(n.bootstrap, topic, PARTITIONS) == expected
        assert group_offset(n.bootstrap, group, topic) == (5 if prepared else None)
    finally:
        shutdown_all([n])


PRODUCER_SCRIPT = """
import sys, time
from kraft import Producer
servers, topic, tid, prepared = sys.argv[1:5]
p = Producer(servers, transactional_id=tid, linger_ms=0)
p.init_transactions()
p.begin_transaction()
for i in range({partitions}):
    p.send(topic, f"p-{{i}}".encode(), partition=i).get(timeout=30)
if prepared == "1":
    p.commit_transaction()
print("ready", flush=True)
time.sleep(600)  # the transaction stays open until the test kills this producer -9
""".format(partitions=PARTITIONS)


@pytest.mark.parametrize("prepared", [False, True])
def test_the_producer_killed_9_before_and_after_the_commit(node, prepared: bool) -> None:
    topic, tid = new_topic(node), f"tx-{uuid.uuid4().hex[:6]}"
    child = subprocess.Popen([sys.executable, "-c", PRODUCER_SCRIPT, node.bootstrap, topic, tid,
                              "1" if prepared else "0"], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    finally:
        child.kill()  # SIGKILL: no close, no abort
        child.wait(timeout=30)
    expected = sorted(f"p-{i}" for i in range(PARTITIONS)) if prepared else []
    successor = producer(node, tid)  # fences the dead one; its open transaction is aborted
    try:
        wait_for(lambda: stable(node.bootstrap, topic, PARTITIONS), 30, what="the dead producer's transaction to end")
        assert committed_values(node.bootstrap, topic, PARTITIONS) == expected
    finally:
        successor.close()


def _state(node, tid: str) -> str | None:
    try:
        with Admin(node.bootstrap) as admin:
            return admin.describe_transactions([tid])[tid]["state"]
    except KraftError:
        return None


def test_before_any_coordinator_is_found_requests_are_answered_at_once(tmp_path) -> None:
    """`__transaction_state` is created by the first FindCoordinator or InitProducerId: before
    it exists, DescribeTransactions answers TRANSACTIONAL_ID_NOT_FOUND and EndTxn the retriable
    COORDINATOR_NOT_AVAILABLE at once (on main both waited for a partition leader that could not
    appear until the coordinator's wait ran out)."""
    fresh = start_node(tmp_path / "fresh")
    try:
        timeout = COORDINATOR_WAIT_S / 2
        described = requests.get(f"{fresh.url}/v1/transactions/never-seen", timeout=timeout)
        assert described.status_code == 404 and described.json()["error_code"] == "TRANSACTIONAL_ID_NOT_FOUND"
        ended = requests.post(f"{fresh.url}/v1/transactions/never-seen/end", timeout=timeout,
                              json={"producer_id": 1, "producer_epoch": 0, "commit": True})
        assert ended.status_code == 503 and ended.json()["error_code"] == "COORDINATOR_NOT_AVAILABLE"
        assert requests.get(f"{fresh.url}/v1/transactions/never-seen/coordinator", timeout=60).status_code == 200
    finally:
        shutdown_all([fresh])
