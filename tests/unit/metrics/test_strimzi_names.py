"""The names Strimzi's Kafka, KRaft and Kafka Exporter dashboards and its Kafka alert rules query
(tests/fixtures/strimzi_metric_names.txt): each is served by a node's registry or listed in
kraft/metrics_coverage.py's UNSERVED with its reason, and docs/operations.md shows that list.
tests/prometheus checks the same against a live cluster."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kraft.controller.raft_transport import RaftChannelCounts
from kraft.controller.raft_quorum import QuorumStatus, VoterStatus
from kraft.metadata.records import Topic
from kraft.metrics import NodeMetrics
from kraft.metrics_coverage import UNSERVED, markdown_table
from test_metrics_collectors import (
    NODE, FakeController, FakeGroups, FakeLog, FakeRaftQuorum, FakeReplica, build, cluster, offsets,
    partition, with_broker,
)

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tests" / "prometheus"))
from prometheus_support import strimzi_names  # noqa: E402

PROMETHEUS_OWN = {"up"}  # Prometheus records it for every target it scrapes


def served_names(metrics: NodeMetrics) -> set[str]:
    """The names a scrape serves, as Prometheus stores them (counters with `_total`)."""
    text = generate_latest(metrics.registry).decode()
    return {s.name for family in text_string_to_metric_families(text) for s in family.samples}


class ChannelQuorum(FakeRaftQuorum):
    channel = RaftChannelCounts(incoming_bytes=10, outgoing_bytes=20, sent=3, received=4)


async def test_every_strimzi_name_is_served_or_listed_unserved() -> None:
    """A node that is broker and active controller, with a topic, a consumer group and a Raft
    quorum of three, serves every name that UNSERVED does not list, and none that it lists."""
    image = build(cluster((1, 2, 3)) + [Topic(name="a", topic_id="A", controller_epoch=1),
                                        partition("A", 0, (1, 2, 3), (1, 2, 3), 1)])
    metrics, _, loader = with_broker(image, {("a", 0): FakeReplica(log=FakeLog(high_watermark=5))})
    loader.publish(image)
    status = QuorumStatus(
        node_id=NODE, raft_state="Leader", leader_id=NODE, leader_epoch=3, high_watermark=9,
        last_applied_index=9, metadata_offset=image.offset, active_controller_id=NODE,
        controller_epoch=1, has_quorum=True,
        voters=tuple(VoterStatus(n, 9, 0, True, "Leader" if n == NODE else "Follower") for n in (1, 2, 3)))
    metrics.watch_controller(FakeController(image, True), ChannelQuorum(status))
    metrics.watch_groups(FakeGroups({"g": {"members": [{}], "offsets": [offsets("a", 0, 1, 5)]}}))
    metrics.watch_connections("PLAINTEXT", lambda: 2)
    await metrics.refresh()
    served = served_names(metrics) | PROMETHEUS_OWN

    names = set(strimzi_names())
    missing = sorted(names - served - set(UNSERVED))
    assert not missing, f"neither served nor in kraft/metrics_coverage.py's UNSERVED: {missing}"
    stale = sorted(set(UNSERVED) & served)
    assert not stale, f"served, yet listed in UNSERVED: {stale}"


def test_the_fixture_is_strimzis_list_and_unserved_names_are_in_it() -> None:
    names = strimzi_names()
    assert len(names) == 57
    assert {s for sources in names.values() for s in sources} == {
        "strimzi-kafka.json", "strimzi-kraft.json", "strimzi-kafka-exporter.json", "prometheus-rules.yaml"}
    assert not sorted(set(UNSERVED) - set(names)), "UNSERVED names no Strimzi dashboard or rule uses"
    for name, entry in UNSERVED.items():
        assert entry.reason.strip(), name
        assert not entry.reason.startswith("not yet served"), f"{name}: kraft has the concept, serve it"


def test_operations_doc_shows_the_unserved_names() -> None:
    doc = (REPO / "docs" / "operations.md").read_text()
    section = doc.split("### Names Kafka dashboards use that kraft does not serve", 1)[1]
    table = re.search(r"^\| metric \|.*?(?=\n\n|\n#|\Z)", section, re.S | re.M)
    assert table is not None, "no table under the section"
    assert table.group(0).strip() == markdown_table(), (
        "docs/operations.md's table differs from kraft/metrics_coverage.py: paste the output of "
        "`python -m kraft.metrics_coverage`")
    count = re.search(r"query (\d+)\s+metric names", section)
    assert count is not None and int(count.group(1)) == len(strimzi_names())


def test_connection_count_is_the_listeners_open_connections() -> None:
    open_connections = [3]
    metrics = NodeMetrics(NODE)
    metrics.watch_connections("SASL_SSL", lambda: open_connections[0])
    name = "kafka_server_socket_server_metrics_connection_count"
    labels = {"listener": "SASL_SSL", "networkProcessor": "0"}
    assert metrics.registry.get_sample_value(name, labels) == 3
    open_connections[0] = 0
    assert metrics.registry.get_sample_value(name, labels) == 0
