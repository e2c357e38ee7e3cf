"""Idempotence across a leader failover (3 real nodes, RF 3): the followers rebuilt the producer
state from the replicated batches, so the new leader answers a retry of what the old leader
acknowledged with the original offsets and writes nothing twice."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest
import requests

from kraft.log.batch import build_batch
from tests.harness import Cluster, wait_for

TOPIC = "idem"
MSGPACK = "application/msgpack"
OVERRIDES = {
    "min.insync.replicas": 2,
    "replica.fetch.wait.max.ms": 200,
    "broker.session.timeout.ms": 3000,
    "broker.heartbeat.interval.ms": 300,
}


def leader_of(cluster: Cluster, not_in: tuple[int, ...] = ()) -> int:
    def agreed() -> int | None:
        leaders = {cluster.metadata(n.node_id, TOPIC)["topics"][0]["partitions"][0]["leader"]
                   for n in cluster.running()}
        leader = leaders.pop() if len(leaders) == 1 else -1
        return leader if leader > 0 and leader not in not_in else None
    return wait_for(agreed, 30, what=f"a leader of {TOPIC}-0 other than {not_in}")


def produce(cluster: Cluster, node: int, records: bytes) -> dict:
    body = {"acks": -1, "timeout_ms": 10_000,
            "partitions": [{"topic": TOPIC, "partition": 0, "records": records}]}
    r = requests.post(f"{cluster.node(node).url}/v1/produce", data=msgpack.packb(body, use_bin_type=True),
                      headers={"Content-Type": MSGPACK, "Accept": MSGPACK}, timeout=30)
    assert r.status_code == 200, r.content
    return msgpack.unpackb(r.content, raw=False)["partitions"][0]


def batch(pid: int, seq: int, *values: bytes) -> bytes:
    return build_batch([(None, v, (), 1_700_000_000_000) for v in values],
                       producer_id=pid, producer_epoch=0, base_sequence=seq)


@pytest.mark.cluster
@pytest.mark.timeout(120)
def test_a_retry_after_leader_failover_is_written_once(tmp_path: Path) -> None:
    with Cluster(tmp_path, controllers=3, combined=True, overrides=OVERRIDES) as cluster:
        cluster.start()
        cluster.create_topic(TOPIC, 1, 3)
        leader = leader_of(cluster)
        pid = requests.post(f"{cluster.node(leader).url}/v1/producers/init", timeout=30).json()["producer_id"]
        first, second = batch(pid, 0, b"a", b"b"), batch(pid, 2, b"c")
        assert produce(cluster, leader, first)["base_offset"] == 0
        assert produce(cluster, leader, second)["base_offset"] == 2  # acks=all: on every replica
        cluster.kill(leader)
        new_leader = leader_of(cluster, not_in=(leader,))
        assert produce(cluster, new_leader, second)["base_offset"] == 2  # the lost answer's retry
        assert produce(cluster, new_leader, first)["base_offset"] == 0
        assert produce(cluster, new_leader, batch(pid, 3, b"d"))["base_offset"] == 3
        r = requests.get(f"{cluster.node(new_leader).url}/v1/topics/{TOPIC}/partitions/0/records",
                         params={"offset": 0}, timeout=10).json()
        assert [x["value"] for x in r["records"]] == ["a", "b", "c", "d"]
