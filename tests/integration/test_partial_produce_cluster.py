"""A JSON produce spanning a partition this node leads and one whose leader is down is answered
per partition, as Kafka's ProduceResponse: offsets for what was stored, a retriable error for what
was not (never one blanket retriable error after part was stored), so retrying only the failed
partitions duplicates nothing."""

from __future__ import annotations

import pytest
import requests

from harness import Cluster, wait_for

pytestmark = pytest.mark.cluster

OVERRIDES = {"broker.session.timeout.ms": 3000, "broker.heartbeat.interval.ms": 300}


def leaders(cluster: Cluster, via: int, topic: str) -> dict[int, int]:
    return {p["partition"]: p["leader"] for p in cluster.metadata(via, topic)["topics"][0]["partitions"]}


def values(cluster: Cluster, via: int, topic: str, partition: int) -> list[str]:
    got = requests.get(f"{cluster.node(via).url}/v1/topics/{topic}/partitions/{partition}/records",
                       params={"offset": 0}, timeout=30)
    assert got.status_code == 200, got.text
    return [r["value"] for r in got.json()["records"]]


def test_partly_stored_produce_is_answered_per_partition(tmp_path) -> None:
    with Cluster(tmp_path, 1, 1, combined=True, overrides=OVERRIDES) as cluster:
        cluster.start()
        cluster.create_topic("split", partitions=4)
        cluster.wait_for_metadata(lambda m: any(t["name"] == "split" and {p["leader"] for p in t["partitions"]} == {1, 2}
                                                for t in m["topics"]), what="split led by both brokers")
        led = leaders(cluster, 1, "split")
        local = next(p for p, leader in led.items() if leader == 1)
        remote = next(p for p, leader in led.items() if leader == 2)
        cluster.kill(2)

        records = [{"partition": local, "value": "l1"}, {"partition": remote, "value": "r1"},
                   {"partition": local, "value": "l2"}]
        answer = requests.post(f"{cluster.node(1).url}/v1/topics/split/records", json={"records": records},
                               params={"acks": "1"}, timeout=60)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        stored, failed = sorted(body["partitions"], key=lambda p: p["partition"] != local)
        assert stored == {"partition": local, "base_offset": 0, "record_count": 2}
        assert failed["partition"] == remote and failed["base_offset"] is None and failed["record_count"] == 1
        assert failed["retriable"] is True and failed["error_code"], failed
        assert [o["offset"] for o in body["offsets"]] == [0, None, 1]
        assert body["offsets"][1]["error_code"] == failed["error_code"]

        cluster.node(2).start()
        cluster.wait_ready()
        wait_for(lambda: leaders(cluster, 1, "split")[remote] == 2, what="the restarted broker leads again")
        retry = [r for r in records if r["partition"] == remote]
        again = requests.post(f"{cluster.node(1).url}/v1/topics/split/records", json={"records": retry},
                              params={"acks": "1"}, timeout=60)
        assert again.status_code == 200, again.text
        assert values(cluster, 1, "split", local) == ["l1", "l2"]
        assert values(cluster, 1, "split", remote) == ["r1"]
