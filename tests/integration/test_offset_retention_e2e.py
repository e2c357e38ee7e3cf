"""offsets.retention.minutes (KIP-211) on a real node, at Kafka's minimum of one minute, checked
every 200 ms: a simple group's offsets expire a minute after the commit while a group with a
member subscribed to the topic keeps its own as old; a group whose member left expires a minute
after it left and is removed (the three groups share one retention minute); a kill -9 and a restart
with the default retention (7 days) bring nothing back, since the expiry was written as tombstones."""

from __future__ import annotations

import time
import uuid

import pytest

from kraft.api.client import Admin, Consumer, Producer, TopicPartition
from harness import shutdown_all, start_node, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

RETENTION_S = 60  # offsets.retention.minutes=1, Kafka's minimum
WAIT_S = RETENTION_S + 60  # the deadline for an expiry that is due (a loaded machine is slow)


def group_ids(admin: Admin) -> set[str]:
    return {g["group_id"] for g in admin.list_groups()}


def read_and_commit(consumer: Consumer, topic: str) -> None:
    """The member reads the topic's 10 records and commits where it is."""
    consumer.subscribe([topic])
    seen: list[int] = []
    wait_for(lambda: seen.extend(r.offset for rs in consumer.poll(200).values() for r in rs)
             or len(seen) == 10, 30, what="the member reads the topic")
    consumer.commit()


def test_offsets_expire_after_retention_and_the_expiry_survives_a_restart(tmp_path) -> None:
    node = start_node(tmp_path, offsets_retention_minutes=1, offsets_retention_check_interval_ms=200)
    consumer = None
    try:
        topic = f"ret-{uuid.uuid4().hex[:8]}"
        tp = TopicPartition(topic, 0)
        with Admin(node.bootstrap) as admin, Producer(node.bootstrap, acks="all") as producer:
            admin.create_topic(topic, 1, 1)
            for i in range(10):
                producer.send(topic, value=f"v{i}".encode(), partition=0)
            producer.flush()

            committed_before = time.monotonic()
            consumer = Consumer(node.bootstrap, group_id="live", auto_offset_reset="earliest",
                                enable_auto_commit=False, fetch_max_wait_ms=50)
            read_and_commit(consumer, topic)
            leaver = Consumer(node.bootstrap, group_id="left", auto_offset_reset="earliest",
                              enable_auto_commit=False, fetch_max_wait_ms=50)
            read_and_commit(leaver, topic)
            left_before = time.monotonic()
            leaver.close()  # the group is empty from now: its offsets have a minute from here
            admin.reset_group_offsets("simple", [topic], "offset", value=3, dry_run=False)
            assert admin.list_group_offsets("live") == {tp: 10} and admin.list_group_offsets("simple") == {tp: 3}
            assert admin.list_group_offsets("left") == {tp: 10}
            wait_for(lambda: admin.list_group_offsets("simple") == {}, WAIT_S,
                     what="the simple group's offsets expire")
            assert time.monotonic() - committed_before >= RETENTION_S
            wait_for(lambda: admin.list_group_offsets("left") == {}, WAIT_S,
                     what="the emptied group's offsets expire")
            assert time.monotonic() - left_before >= RETENTION_S
            # As old, but a member subscribes to the topic: kept (the member heartbeats meanwhile).
            assert admin.list_group_offsets("live") == {tp: 10}
            assert group_ids(admin) == {"live"}
            consumer.close()
            consumer = None
        assert "expired offsets" in node.log_path.read_text(errors="replace")

        # Without the tombstones the replay would restore both groups' offsets, and with the
        # default retention they would stay.
        node.kill()
        node.overrides.pop("offsets.retention.minutes")
        node.start()
        with Admin(node.bootstrap) as admin:
            assert admin.list_group_offsets("left") == {} and admin.list_group_offsets("simple") == {}
            assert admin.list_group_offsets("live") == {tp: 10} and group_ids(admin) == {"live"}
    finally:
        if consumer is not None:
            consumer.close()
        shutdown_all([node])
