"""A Spark pipeline (kraft source -> kraft sink) against a real 3-node cluster while the partition
leader is killed: every record reaches the sink (at-least-once), none is lost."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import requests

from spark_support import KraftFixture
from harness import NodeProcess, free_port, shutdown_all, wait_for

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

RECORDS = 3000  # 60 micro-batches of 50: the leader dies while the query is still copying


@pytest.fixture
def cluster(tmp_path: Path):
    controller_ports = {i: free_port() for i in (1, 2, 3)}
    quorum = ",".join(f"{i}@127.0.0.1:{port}" for i, port in controller_ports.items())
    nodes = [NodeProcess(node_id=i, data_dir=tmp_path / f"data-{i}", controller_port=controller_ports[i],
                         quorum=quorum, overrides={"controller.quorum.secret": "spark-test-secret"})
             for i in (1, 2, 3)]
    try:
        for node in nodes:
            node.start(wait=False)
        for node in nodes:
            node.wait_healthy(60)
        for node in nodes:  # registered and unfenced everywhere: an RF 3 topic needs all three
            node.wait_ready(60)
        yield nodes
    finally:
        shutdown_all(nodes)


def _leader(url: str, topic: str) -> int | None:
    topics = requests.get(f"{url}/v1/metadata", params={"topics": topic}, timeout=5).json()["topics"]
    return topics[0]["partitions"][0]["leader"] if topics and topics[0]["partitions"] else None


def test_pipeline_survives_leader_kill(spark, cluster, tmp_path):
    bootstrap = ",".join(n.bootstrap for n in cluster)
    admin = KraftFixture(cluster[0].bootstrap, None)
    source, sink = "cl-src", "cl-sink"
    for name in (source, sink):
        wait_for(lambda: requests.post(f"{admin.url}/v1/topics", json={"name": name, "partitions": 1,
                                                                       "replication_factor": 3},
                                       timeout=10).status_code in (201, 409), 60, what=f"create {name}")
    first_leader = wait_for(lambda: _leader(admin.url, source), 60, what="a leader")
    # the batch produce route answers NOT_LEADER_OR_FOLLOWER elsewhere, as Kafka's does: seed via the leader
    seed = KraftFixture(next(n for n in cluster if n.node_id == first_leader).bootstrap, None)
    wait_for(lambda: seed.produce(source, 0, [b"%d" % i for i in range(RECORDS)]) is None, 60, what="produce")

    df = (spark.readStream.format("kraft").option("kraft.bootstrap.servers", bootstrap)
          .option("subscribe", source).option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", "50").load().selectExpr("key", "value"))
    query = (df.writeStream.format("kraft").option("kraft.bootstrap.servers", bootstrap)
             .option("topic", sink).option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(availableNow=True).start())
    leader = _leader(admin.url, source)
    survivors = [n for n in cluster if n.node_id != leader]

    def sink_records() -> list:
        """The sink partition as its current leader serves it (fetches go to leaders, as in Kafka)."""
        sink_leader = _leader(survivors[0].url, sink)
        node = next(n for n in cluster if n.node_id == sink_leader)
        return KraftFixture(node.bootstrap, None).records(sink, 0) if node.running else []

    def kill_when_half_copied() -> None:
        wait_for(lambda: len(sink_records()) >= 100, 120, what="part of the records copied")
        next(n for n in cluster if n.node_id == leader).kill()

    killer = threading.Thread(target=kill_when_half_copied, daemon=True)
    killer.start()
    query.awaitTermination(240)
    killer.join(5)
    assert not query.isActive and query.exception() is None, query.exception()
    assert not next(n for n in cluster if n.node_id == leader).running, "the leader was not killed"
    copied = wait_for(lambda: [v for _, _, v in sink_records()], 60, what="the sink readable from its leader")
    assert set(copied) == {b"%d" % i for i in range(RECORDS)}
