"""Any broker accepts any convenience request (design §7): on a cluster, JSON produce, reads and
offset lookups sent to a broker that does not lead the partition are served through its leader."""

from __future__ import annotations

import pytest
import requests

from harness import Cluster

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with Cluster(tmp_path_factory.mktemp("fwd"), 3, combined=True) as c:
        c.start()
        yield c


@pytest.fixture(scope="module")
def fwd(cluster):
    """Topic `fwd`: 3 partitions of one replica each, leaders spread over the brokers."""
    r = requests.post(f"{cluster.running()[0].url}/v1/topics",
                      json={"name": "fwd", "partitions": 3, "replication_factor": 1}, timeout=30)
    assert r.status_code == 201, r.text
    cluster.wait_for_metadata(lambda m: any(t["name"] == "fwd" and all(p["leader"] >= 0 for p in t["partitions"])
                                            for t in m["topics"]), what="fwd has leaders everywhere")
    return "fwd"


def test_convenience_routes_work_from_every_broker(cluster, fwd):
    nodes = cluster.running()
    leaders = {p["partition"]: p["leader"] for p in cluster.metadata(nodes[0].node_id, "fwd")["topics"][0]["partitions"]}
    assert len(set(leaders.values())) > 1  # placement spreads leaders, so some partition is remote for every node
    for node in nodes:
        body = {"records": [{"partition": p, "value": f"from-{node.node_id}-{p}"} for p in range(3)]}
        r = requests.post(f"{node.url}/v1/topics/fwd/records?acks=all", json=body, timeout=30)
        assert r.status_code == 200, r.text
        assert [o["partition"] for o in r.json()["offsets"]] == [0, 1, 2]
        assert all(isinstance(o["offset"], int) for o in r.json()["offsets"])
    for node in nodes:
        for p in range(3):
            got = requests.get(f"{node.url}/v1/topics/fwd/partitions/{p}/records", params={"offset": 0}, timeout=30)
            assert got.status_code == 200, got.text
            assert [x["value"] for x in got.json()["records"]] == [f"from-{n.node_id}-{p}" for n in nodes]
            offsets = requests.get(f"{node.url}/v1/topics/fwd/partitions/{p}/offsets", timeout=30).json()
            assert offsets["high_watermark"] == 3


def test_forwarded_requests_are_not_forwarded_again(cluster, fwd):
    """A request that already took its hop is answered where it lands, with the leader's address."""
    node = cluster.running()[0]
    md = cluster.metadata(node.node_id, "fwd")["topics"][0]["partitions"]
    remote = next(p for p in md if p["leader"] != node.node_id)
    r = requests.get(f"{node.url}/v1/topics/fwd/partitions/{remote['partition']}/records",
                     params={"offset": 0}, headers={"X-Kraft-Forwarded": "99"}, timeout=30)
    assert r.status_code == 421
    body = r.json()
    assert body["error_code"] == "NOT_LEADER_OR_FOLLOWER" and body["retriable"] is True
    leader = cluster.node(remote["leader"])
    assert body["leader"] == {"node_id": leader.node_id, "host": "127.0.0.1", "port": leader.port}
