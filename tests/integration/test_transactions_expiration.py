"""Expiration on a real node with small values: `transactional.id.expiration.ms` forgets a
transactional id idle that long once its transaction completed (DescribeTransactions answers
TRANSACTIONAL_ID_NOT_FOUND; a new producer of the id starts over with a new producer id), while an
id with a transaction open is kept; `producer.id.expiration.ms` forgets an idle producer's state
in a partition (DescribeProducers no longer lists it)."""

from __future__ import annotations

from harness import shutdown_all, start_node, wait_for
from kraft.api.client import Admin, Producer
from kraft.api.client.types import NewTopic
from kraft.api.errors import KraftError


def described(admin: Admin, transactional_id: str) -> dict | None:
    try:
        return admin.describe_transactions([transactional_id])[transactional_id]
    except KraftError as e:
        if e.error_code != "TRANSACTIONAL_ID_NOT_FOUND":
            raise
        return None


def test_idle_transactional_ids_and_producer_ids_expire(tmp_path) -> None:
    node = start_node(tmp_path, transaction_state_log_num_partitions=1, transactional_id_expiration_ms=3000,
                      transaction_remove_expired_transaction_cleanup_interval_ms=500,
                      producer_id_expiration_ms=3000, log_retention_check_interval_ms=500)
    try:
        with Admin(node.bootstrap) as admin:
            admin.create_topics([NewTopic("orders", 1, 1)])
            done = Producer(node.bootstrap, transactional_id="done", linger_ms=0)
            done.init_transactions()
            done.begin_transaction()
            done.send("orders", b"one", partition=0).get(timeout=30)
            done.commit_transaction()
            first_pid = done._txn.producer_id
            done.close()
            still_open = Producer(node.bootstrap, transactional_id="open", linger_ms=0,
                                  transaction_timeout_ms=600_000)
            still_open.init_transactions()
            still_open.begin_transaction()
            still_open.send("orders", b"two", partition=0).get(timeout=30)
            assert described(admin, "done")["state"] == "CompleteCommit"
            wait_for(lambda: described(admin, "done") is None, 30, what="the idle transactional id to expire")
            assert described(admin, "open")["state"] == "Ongoing"
            # the open transaction's producer stays in the partition; the committed one's goes
            wait_for(lambda: [p["producer_id"] for p in admin.describe_producers("orders", 0)]
                     == [still_open._txn.producer_id], 30, what="the idle producer id to expire")
            again = Producer(node.bootstrap, transactional_id="done", linger_ms=0)
            try:
                pid, epoch = again._txn.init()
                assert pid != first_pid and epoch == 0  # a new start, not the old id's epoch + 1
            finally:
                again.close()
            still_open.abort_transaction()
            still_open.close()
    finally:
        shutdown_all([node])

