"""A 3-node combined cluster (controller,broker on every node; real processes): it forms with one
active controller; kill -9 of the active controller elects another and metadata writes continue
with nothing committed lost; a SIGSTOPped controller that wakes cannot commit (epoch fencing);
a voter without the cluster's secret cannot join; a restarted and a wiped voter catch up."""

from __future__ import annotations

import threading
import time

import pytest
import requests

from harness import Cluster, wait_for
from security_support import node_request

pytestmark = pytest.mark.cluster

OVERRIDES = {"broker.session.timeout.ms": 2000, "broker.heartbeat.interval.ms": 300,
             "offsets.topic.replication.factor": 3}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with Cluster(tmp_path_factory.mktemp("combined"), controllers=3, combined=True, overrides=OVERRIDES) as c:
        c.start()
        yield c


def names(metadata: dict) -> set[str]:
    return {t["name"] for t in metadata["topics"]}


def create_until_ok(cluster: Cluster, name: str, via: list[int], timeout: float = 20.0) -> None:
    """Create through any of `via` (retrying while the quorum elects); TOPIC_ALREADY_EXISTS after
    an unknown outcome counts as created."""
    def attempt() -> bool:
        for node_id in via:
            try:
                r = requests.post(f"{cluster.node(node_id).url}/v1/topics",
                                  json={"name": name, "replication_factor": 1}, timeout=10)
            except requests.RequestException:
                continue
            if r.status_code == 201 or r.json().get("error_code") == "TOPIC_ALREADY_EXISTS":
                return True
        return False
    wait_for(attempt, timeout, interval=0.1, what=f"topic {name} created")


def test_combined_cluster_forms(cluster):
    active = cluster.active_controller()
    healths = cluster.healths()
    assert [i for i, h in healths.items() if h["active_controller"]] == [active]
    assert all(h["broker_state"] == "RUNNING" and h["roles"] == ["broker", "controller"] for h in healths.values())
    cluster.create_topic("combined", partitions=3, replication_factor=3, via=active % 3 + 1)
    cluster.wait_for_same_metadata(lambda m: "combined" in names(m))


def test_kill_active_controller_elects_a_new_one_and_loses_nothing(cluster):
    old = cluster.active_controller()
    others = [i for i in cluster.voter_ids if i != old]
    committed = [f"pre-{i}" for i in range(5)]
    for name in committed:
        create_until_ok(cluster, name, others)
    cluster.kill(old)
    killed_at = time.monotonic()
    create_until_ok(cluster, "post-failover", others)
    write_after_s = time.monotonic() - killed_at
    new = cluster.active_controller(exclude=(old,))
    assert new in others
    cluster.wait_for_same_metadata(lambda m: {*committed, "post-failover"} <= names(m))
    assert write_after_s < 15, write_after_s
    cluster.node(old).start()  # restart: replays its journal, then catches up
    cluster.wait_ready()
    assert {*committed, "post-failover"} <= names(cluster.metadata(old))


def test_woken_paused_controller_cannot_commit(cluster):
    old = cluster.active_controller()
    others = [i for i in cluster.voter_ids if i != old]
    cluster.pause(old)
    try:
        cluster.active_controller(timeout=20, exclude=(old,))
        create_until_ok(cluster, "during-pause", others)
    finally:
        cluster.resume(old)
    # right after waking, the old leader may still believe it leads: a write sent to it at once
    # must either be refused or, if acknowledged, be committed by the quorum (never lost)
    outcome: dict[str, requests.Response] = {}

    def stale_write() -> None:
        outcome["response"] = node_request(cluster.node(old).url, cluster.secret, old, "POST",
                                           "/v1/controller/topics", {"name": "stale-write"}, timeout=30, as_json=True)
    writer = threading.Thread(target=stale_write)
    writer.start()
    writer.join(35)
    new = cluster.active_controller(timeout=20)
    assert new != old or outcome["response"].status_code != 201
    agreed = cluster.wait_for_same_metadata(lambda m: "during-pause" in names(m))
    response = outcome["response"]
    if response.status_code == 201:
        assert "stale-write" in names(agreed)
    else:
        assert response.json()["error_code"] in ("NOT_CONTROLLER", "REQUEST_TIMED_OUT"), response.text
        if response.json()["error_code"] == "NOT_CONTROLLER":
            assert "stale-write" not in names(agreed)


def test_voter_without_the_secret_cannot_join(cluster):
    victim = next(i for i in cluster.voter_ids if i != cluster.active_controller())
    node = cluster.node(victim)
    node.stop()
    node.overrides["controller.quorum.secret"] = "not-the-cluster-secret"
    try:
        node.start()
        create_until_ok(cluster, "without-intruder", [i for i in cluster.voter_ids if i != victim])
        cluster.wait_for_metadata(lambda m: "without-intruder" in names(m),
                                  nodes=[i for i in cluster.voter_ids if i != victim])
        deadline = time.monotonic() + 3  # a bounded look for a negative: it must never catch up
        while time.monotonic() < deadline:
            assert "without-intruder" not in names(cluster.metadata(victim))
            assert not node.health()["active_controller"]
            time.sleep(0.2)
    finally:
        node.stop()
        node.overrides["controller.quorum.secret"] = cluster.secret
    node.start()
    cluster.wait_ready()
    assert "without-intruder" in names(cluster.metadata(victim))


def test_wiped_voter_rejoins_and_catches_up(cluster):
    victim = next(i for i in cluster.voter_ids if i != cluster.active_controller())
    cluster.kill(victim)
    cluster.wipe(victim)
    create_until_ok(cluster, "while-wiped", [i for i in cluster.voter_ids if i != victim])
    cluster.node(victim).start()
    cluster.wait_ready()
    cluster.wait_for_same_metadata(lambda m: "while-wiped" in names(m))
