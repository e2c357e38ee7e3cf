"""`Admin.list_groups_with_errors` while a broker accepts connections but never answers (SIGSTOP):
the listing names that broker among the errors (retriable) and still has the groups the others
coordinate (Kafka's ListConsumerGroups with a partial result)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from kraft.api.client import Admin, Consumer
from harness import Cluster, wait_for

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = Cluster(Path(tmp_path_factory.mktemp("groups-list")), 3, combined=True,
                overrides={"offsets.topic.replication.factor": 1, "offsets.topic.num.partitions": 6})
    try:
        yield c.start()
    finally:
        c.stop()


def test_list_groups_with_a_paused_broker_is_partial_and_names_it(cluster: Cluster):
    cluster.create_topic("listed", 1, 1)
    group = f"listed-{uuid.uuid4().hex[:6]}"
    bootstrap = ",".join(n.bootstrap for n in cluster.running())
    consumer = Consumer(bootstrap, group_id=group, auto_offset_reset="earliest", fetch_max_wait_ms=50)
    try:
        consumer.subscribe(["listed"])
        wait_for(lambda: consumer.poll(20) is not None and consumer.assignment(), 60, what="the member joins")
        with Admin(bootstrap) as admin:
            coordinator = admin.describe_group(group)["coordinator"]["node_id"]
        paused = next(n for n in cluster.running() if n.node_id != coordinator)
        awake = ",".join(n.bootstrap for n in cluster.running() if n is not paused)
        # metadata through the awake nodes only; under load an awake broker may also miss the
        # per-broker deadline once, so ask again until the coordinator's answer is in
        with Admin(awake) as admin:
            paused.pause()
            try:
                groups, unreachable = wait_for(
                    lambda: (answer := admin.list_groups_with_errors())
                    and coordinator not in answer[1] and answer, 120, what="a listing with the coordinator's answer")
            finally:
                paused.resume()
    finally:
        consumer.close()
    assert group in [g["group_id"] for g in groups]
    assert paused.node_id in unreachable
    assert unreachable[paused.node_id].retriable
