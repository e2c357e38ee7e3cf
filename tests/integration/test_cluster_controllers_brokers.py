"""A cluster of 3 controller-only nodes and 2 broker-only nodes (real processes): it forms with
one active controller, every node serves the same metadata, any node accepts admin requests
(forwarded to the active controller) while the controller API answers NOT_CONTROLLER with the
leader's address, kafka-metadata-quorum and kafka-leader-election work, a killed broker is fenced
after its session timeout and loses its leaderships and ISR memberships (KIP-841), and a broker
restarts from its metadata snapshot or, wiped, catches up from the controller's."""

from __future__ import annotations

import requests
import pytest
from click.testing import CliRunner

from kraft.api.cli import main as kraft_cli
from harness import Cluster, wait_for
from security_support import node_request

pytestmark = pytest.mark.cluster

SESSION_TIMEOUT_MS = 1500
OVERRIDES = {"broker.session.timeout.ms": SESSION_TIMEOUT_MS, "broker.heartbeat.interval.ms": 300,
             "offsets.topic.replication.factor": 2}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with Cluster(tmp_path_factory.mktemp("cb"), controllers=3, brokers=2, overrides=OVERRIDES) as c:
        c.start()
        yield c


def topics_of(metadata: dict) -> dict:
    return {t["name"]: t for t in metadata["topics"]}


def has_topic(name: str):
    return lambda m: name in topics_of(m)


def test_forms_with_one_active_controller_and_same_metadata_everywhere(cluster):
    active = cluster.active_controller()
    assert active in cluster.voter_ids
    healths = cluster.healths()
    assert len({h["cluster_id"] for h in healths.values()}) == 1
    assert {i for i, h in healths.items() if h["broker_state"] == "RUNNING"} == {4, 5}
    cluster.create_topic("everywhere", partitions=4, replication_factor=2, via=4)
    agreed = cluster.wait_for_same_metadata(has_topic("everywhere"))
    topic = topics_of(agreed)["everywhere"]
    leaders = [p["leader"] for p in topic["partitions"]]
    assert sorted(set(leaders)) == [4, 5] and all(sorted(p["replicas"]) == [4, 5] for p in topic["partitions"])
    assert agreed["controller_id"] == active


def test_controller_api_answers_not_controller_with_the_leaders_address(cluster):
    active = cluster.active_controller()
    for node_id in [i for i in cluster.nodes if i != active]:
        response = node_request(cluster.node(node_id).url, cluster.secret, node_id, "POST", "/v1/controller/topics",
                                {"name": "nope"}, timeout=5, as_json=True)
        body = response.json()
        assert (response.status_code, body["error_code"], body["retriable"]) == (421, "NOT_CONTROLLER", True)
        assert body["leader"] == {"node_id": active, "host": "127.0.0.1", "port": cluster.node(active).port}
    assert all("nope" not in topics_of(cluster.metadata(i)) for i in cluster.nodes)


def test_admin_requests_to_any_node_are_forwarded(cluster):
    active = cluster.active_controller()
    standby = next(i for i in cluster.voter_ids if i != active)
    url = cluster.node(standby).url
    assert requests.post(f"{url}/v1/topics", json={"name": "fwd", "partitions": 1, "replication_factor": 2},
                         timeout=10).status_code == 201
    # the answer comes once the forwarding node's own metadata shows the change
    assert requests.get(f"{url}/v1/topics/fwd", timeout=5).status_code == 200
    broker = cluster.node(5).url
    assert requests.post(f"{broker}/v1/topics/fwd/partitions", json={"count": 3}, timeout=10).status_code == 200
    assert requests.patch(f"{broker}/v1/topics/fwd/configs", json={"configs": {"retention.ms": "60000"}},
                          timeout=10).json()["configs"] == {"retention.ms": "60000"}
    dup = requests.post(f"{broker}/v1/topics", json={"name": "fwd"}, timeout=10)
    assert (dup.status_code, dup.json()["error_code"]) == (409, "TOPIC_ALREADY_EXISTS")
    cluster.wait_for_metadata(lambda m: len(topics_of(m).get("fwd", {}).get("partitions", ())) == 3,
                              what="3 partitions of fwd everywhere")
    assert requests.delete(f"{cluster.node(4).url}/v1/topics/fwd", timeout=10).status_code == 200
    cluster.wait_for_metadata(lambda m: "fwd" not in topics_of(m), what="fwd deleted everywhere")


def test_metadata_quorum_describe(cluster):
    active = cluster.active_controller()
    runner = CliRunner()
    result = runner.invoke(kraft_cli, ["metadata-quorum", "--bootstrap-server", cluster.node(4).bootstrap,
                                       "describe", "--status"])
    assert result.exit_code == 0, result.output
    lines = dict(line.split(":", 1) for line in result.output.strip().splitlines())
    assert list(lines) == ["ClusterId", "LeaderId", "LeaderEpoch", "HighWatermark", "MaxFollowerLag",
                           "MaxFollowerLagTimeMs", "CurrentVoters", "CurrentObservers"]
    assert int(lines["LeaderId"]) == active
    assert lines["CurrentVoters"].strip() == "[1,2,3]" and lines["CurrentObservers"].strip() == "[4,5]"
    assert lines["ClusterId"].strip() == cluster.node(4).health()["cluster_id"]

    def replication() -> dict[int, list[str]] | None:
        result = runner.invoke(kraft_cli, ["metadata-quorum", "--bootstrap-server", cluster.node(1).bootstrap,
                                           "describe", "--replication"])
        assert result.exit_code == 0, result.output
        header, *rows = [line.split() for line in result.output.strip().splitlines()]
        assert header == ["NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status"]
        table = {int(r[0]): r for r in rows}
        return table if all(r[2] == "0" for r in rows) else None

    table = wait_for(replication, 10, what="every replica caught up")
    assert {i: r[5] for i, r in table.items()} == {
        active: "Leader", **{v: "Follower" for v in (1, 2, 3) if v != active}, 4: "Observer", 5: "Observer"}
    assert len({r[1] for r in table.values()}) == 1  # one log end offset: everyone caught up


def test_killed_broker_is_fenced_and_loses_leaderships_then_rejoins(cluster):
    cluster.create_topic("kip841", partitions=4, replication_factor=2, via=1)
    cluster.wait_for_metadata(has_topic("kip841"))
    cluster.kill(4)
    observers = [1, 2, 3, 5]

    def moved(m: dict) -> bool:
        parts = topics_of(m)["kip841"]["partitions"]
        return (4 not in [b["node_id"] for b in m["brokers"]]
                and all(p["leader"] == 5 and p["isr"] == [5] for p in parts))
    cluster.wait_for_metadata(moved, nodes=observers, timeout=SESSION_TIMEOUT_MS / 1000 + 10,
                              what="broker 4 fenced, its leaderships on 5")
    cluster.restart(4)
    cluster.wait_ready()
    assert has_topic("kip841")(cluster.metadata(4))


def test_preferred_leader_election(cluster):
    cluster.create_topic("pref", partitions=2, replication_factor=2, via=5)
    preferred = {p["partition"]: p["replicas"][0]
                 for p in topics_of(cluster.wait_for_metadata(has_topic("pref"))[1])["pref"]["partitions"]}
    moved_away = next(p for p, b in preferred.items() if b == 4)
    # a controlled shutdown of broker 4 moves its leaderships to 5 at once
    cluster.node(4).stop()
    cluster.wait_for_metadata(lambda m: all(p["leader"] == 5 for p in topics_of(m)["pref"]["partitions"]),
                              nodes=[1, 5], timeout=10, what="leaders moved off 4")
    cluster.node(4).start()
    cluster.wait_ready()
    # 4 is back in the ISR once the leader sees it caught up (AlterPartition from the leader)
    cluster.wait_for_metadata(lambda m: 4 in topics_of(m)["pref"]["partitions"][moved_away]["isr"],
                              timeout=30, what="4 back in the ISR")
    result = CliRunner().invoke(kraft_cli, ["leader-election", "--bootstrap-server", cluster.node(2).bootstrap,
                                            "--election-type", "preferred", "--all-topic-partitions"])
    assert result.exit_code == 0, result.output
    assert f"pref-{moved_away}" in result.output and "Successfully completed" in result.output
    cluster.wait_for_metadata(lambda m: topics_of(m)["pref"]["partitions"][moved_away]["leader"] == 4,
                              what="preferred leader back")
    again = CliRunner().invoke(kraft_cli, ["leader-election", "--bootstrap-server", cluster.node(4).bootstrap,
                                           "--election-type", "preferred", "--topic", "pref",
                                           "--partition", str(moved_away)])
    assert again.exit_code == 0 and "Valid replica already elected" in again.output, again.output


def test_broker_restarts_from_its_snapshot_and_a_wiped_broker_catches_up(cluster):
    cluster.create_topic("before-wipe", partitions=2, replication_factor=1, via=5)
    cluster.wait_for_metadata(has_topic("before-wipe"))
    cluster.restart(5)  # clean: the metadata snapshot is written at shutdown and loaded at start
    assert "metadata snapshot at offset" in cluster.node(5).log_tail(200)
    cluster.wait_ready()
    cluster.kill(5)
    cluster.wipe(5)
    cluster.create_topic("while-wiped", partitions=1, replication_factor=1, via=4)
    cluster.node(5).start()
    cluster.wait_for_same_metadata(lambda m: {"before-wipe", "while-wiped"} <= set(topics_of(m)))
    cluster.wait_ready()
