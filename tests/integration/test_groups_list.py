"""kafka-consumer-groups --list while a broker accepts connections but never answers (SIGSTOP):
the listing comes back within the per-broker timeout, names that broker, and still has the groups
the others coordinate."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from api.client import Admin, Consumer
from tests.harness import Cluster, wait_for

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(Path(tmp_path_factory.mktemp("groups-list")), 3, combined=True,
                overrides={"offsets.topic.replication.factor": 1, "offsets.topic.num.partitions": 6})
    try:
        yield c.start()
    finally:
        c.stop()


def test_list_groups_reports_a_paused_broker_and_lists_the_rest(cluster):
    nodes = cluster.running()
    bootstrap = ",".join(n.bootstrap for n in nodes)
    cluster.create_topic("listed", 1, 1)
    group = f"listed-{uuid.uuid4().hex[:6]}"
    consumer = Consumer(bootstrap, group_id=group, auto_offset_reset="earliest", fetch_max_wait_ms=50)
    try:
        consumer.subscribe(["listed"])
        wait_for(lambda: consumer.poll(20) is not None and consumer.assignment(), 30, what="the member joins")
        with Admin(bootstrap) as admin:
            coordinator = admin.describe_group(group)["coordinator"]["node_id"]
            paused = next(n for n in nodes if n.node_id != coordinator)
            paused.pause()
            try:
                groups, unreachable = admin.list_groups_with_errors()
            finally:
                paused.resume()
    finally:
        consumer.close()
    assert group in [g["group_id"] for g in groups]
    assert list(unreachable) == [paused.node_id]
    assert unreachable[paused.node_id].retriable
