"""A real Prometheus (Debian's package) scraping a live 3-node cluster under produce/consume load
and a consumer group, through deploy/'s file-SD config and alert rules:
- every metric and label that a Grafana panel or an alert rule uses exists in Prometheus, every
  panel query returns data, every rule evaluates cleanly;
- every metric name of Strimzi's Kafka, KRaft and Kafka Exporter dashboards and Kafka alert rules
  exists but those kraft/metrics_coverage.py lists as unserved (which do not);
- the values agree with what the test did (messages in = records sent, group lag = records left
  unconsumed, exactly one active controller);
- killing a broker raises the under-replicated count (and puts its alert in pending);
- promtool accepts deploy/'s configs and rules, and the rules' unit tests pass.
The tests share one cluster and run in file order; the kill comes last."""

from __future__ import annotations

import base64
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

sys.path.insert(0, str(Path(__file__).parent))

from kraft.api.client import Consumer, Producer  # noqa: E402
from harness import Cluster, wait_for  # noqa: E402
from kraft.log.batch import build_batch  # noqa: E402
from prometheus_support import (  # noqa: E402
    INSTALL_HINT, PROMETHEUS_BINARIES, PROMTOOL_BINARIES, RULE_TESTS, RULES, STATIC_CONFIG,
    FILE_SD_CONFIG, Prometheus, Query, alert_queries, alert_rules, find_binary, grouping_labels,
    legend_labels, matcher_labels, metric_names, panel_queries, strimzi_names, variable_queries,
)
from kraft.metrics_coverage import UNSERVED  # noqa: E402

pytestmark = [pytest.mark.prometheus, pytest.mark.cluster, pytest.mark.xdist_group("prometheus")]

TOPIC = "orders"
PARTITIONS = 3
RECORDS = 300  # produced, then consumed and committed by GROUP
LATE = 40  # produced after the commit: GROUP's lag
GROUP = "dashboards"
QUIET = "quiet"  # created, never written or read: its counters exist at 0
OVERRIDES = {
    "broker.session.timeout.ms": 2000, "broker.heartbeat.interval.ms": 300,
    "replica.lag.time.max.ms": 2000, "offsets.topic.num.partitions": 3,
    "group.consumer.heartbeat.interval.ms": 200,
}


@pytest.fixture(scope="module")
def prometheus_binary() -> str:
    binary = find_binary(PROMETHEUS_BINARIES)
    if binary is None:
        pytest.fail(f"no prometheus binary: the Prometheus tests {INSTALL_HINT}")
    return binary


@pytest.fixture(scope="module")
def promtool() -> str:
    binary = find_binary(PROMTOOL_BINARIES)
    if binary is None:
        pytest.fail(f"no promtool binary: the Prometheus tests {INSTALL_HINT}")
    return binary


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    with Cluster(tmp_path_factory.mktemp("cluster"), controllers=3, combined=True,
                 overrides=OVERRIDES) as c:
        c.start()
        yield c


@pytest.fixture(scope="module")
def prometheus(prometheus_binary: str, cluster: Cluster, tmp_path_factory: pytest.TempPathFactory):
    prom = Prometheus(prometheus_binary, tmp_path_factory.mktemp("prometheus"),
                      [n.bootstrap for n in cluster.nodes.values()])
    try:
        prom.wait_ready()
        prom.wait_targets_up(len(cluster.nodes))
        yield prom
    finally:
        prom.stop()


@pytest.fixture(scope="module")
def load(cluster: Cluster, prometheus: Prometheus) -> None:
    """RECORDS produced and consumed by GROUP (committed), LATE more produced; one failed produce,
    one failed fetch and one request error, so every panel has something to show."""
    bootstrap = [n.bootstrap for n in cluster.nodes.values()]
    cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
    cluster.create_topic(QUIET, partitions=2, replication_factor=3)
    produce(bootstrap, range(RECORDS))
    with Consumer(bootstrap, group_id=GROUP, auto_offset_reset="earliest", enable_auto_commit=False,
                  fetch_max_wait_ms=100) as consumer:
        consumer.subscribe([TOPIC])
        consumed = 0
        deadline = time.monotonic() + 30
        while consumed < RECORDS:
            assert time.monotonic() < deadline, f"consumed only {consumed} of {RECORDS}"
            consumed += sum(len(rs) for rs in consumer.poll(200).values())
        assert consumed == RECORDS
        consumer.commit()
    produce(bootstrap, range(RECORDS, RECORDS + LATE))
    node = cluster.nodes[1].url
    batch = base64.b64encode(build_batch([(None, b"x", (), int(time.time() * 1000))])).decode()
    failed = requests.post(f"{node}/v1/produce", json={"acks": 1, "partitions": [
        {"topic": TOPIC, "partition": 99, "records": batch}]}, timeout=10).json()
    assert failed["partitions"][0]["error_code"] == "UNKNOWN_TOPIC_OR_PARTITION"
    fetched = requests.post(f"{node}/v1/fetch", json={"max_wait_ms": 0, "partitions": [
        {"topic": TOPIC, "partition": 99, "fetch_offset": 0}]}, timeout=10).json()
    assert fetched["partitions"][0]["error_code"] == "UNKNOWN_TOPIC_OR_PARTITION"
    assert requests.get(f"{node}/v1/topics/no-such-topic", timeout=10).status_code == 404


def produce(bootstrap: list[str], numbers: range) -> None:
    with Producer(bootstrap, acks="all") as producer:
        for i in numbers:
            producer.send(TOPIC, value=f"record-{i}".encode(), partition=i % PARTITIONS)
        producer.flush(30)


def wait_value(prom: Prometheus, expr: str, expected: float, timeout: float = 30.0) -> None:
    seen: list[float | None] = []

    def matches() -> bool:
        seen.append(prom.scalar(expr))
        return seen[-1] == expected
    try:
        wait_for(matches, timeout, interval=0.25, what=expr)
    except TimeoutError:
        raise AssertionError(f"{expr} = {seen[-1] if seen else None}, expected {expected}") from None


def check_names_and_labels(prom: Prometheus, queries: list[Query]) -> list[str]:
    """Problems with the metric and label names `queries` use (empty: all exist)."""
    known = prom.metric_names()
    labels_of: dict[str, set[str]] = {}

    def labels(metric: str) -> set[str]:
        if metric not in labels_of:
            labels_of[metric] = prom.series_labels(metric)
        return labels_of[metric]

    problems = []
    for q in queries:
        names = metric_names(q.expr)
        if not names:
            problems.append(f"{q.where}: no metric in {q.expr!r}")
        for missing in sorted(names - known):
            problems.append(f"{q.where}: metric {missing} does not exist")
        for metric, used in matcher_labels(q.expr).items():
            for label in sorted(used - labels(metric)):
                problems.append(f"{q.where}: {metric} has no label {label}")
        available = set().union(*(labels(m) for m in names & known)) if names & known else set()
        for label in sorted(grouping_labels(q.expr) - available):
            problems.append(f"{q.where}: no metric of {q.expr!r} has label {label}")
    return problems


# -- the tests, in order ----------------------------------------------------------------------------


def test_every_dashboard_and_alert_name_exists(prometheus: Prometheus, load: None) -> None:
    queries = panel_queries() + alert_queries()
    problems: list[str] = []

    def all_exist() -> bool:
        problems[:] = check_names_and_labels(prometheus, queries)
        return not problems
    try:  # counters of the load appear after the next scrape
        wait_for(all_exist, 20, interval=0.5, what="dashboard and alert metrics")
    except TimeoutError:
        pytest.fail("\n".join(problems))


def test_every_dashboard_variable_has_values(prometheus: Prometheus, load: None) -> None:
    problems: list[str] = []

    def all_answer() -> bool:
        problems[:] = check_names_and_labels(prometheus, [q for q, _ in variable_queries()])
        for q, label in variable_queries():
            if not any(label in series for series in prometheus.api("series", **{"match[]": q.expr})):
                problems.append(f"{q.where}: no series of {q.expr} has label {label}")
        return not problems
    try:
        wait_for(all_answer, 20, interval=0.5, what="dashboard variables")
    except TimeoutError:
        pytest.fail("\n".join(problems))


def test_a_quiet_topic_has_its_counters_at_zero(prometheus: Prometheus, load: None) -> None:
    """Kafka's JMX has the per-topic counters at 0: panels of a healthy cluster show 0, not no data."""
    for name in ("messagesin", "bytesin", "bytesout", "failedproducerequests", "failedfetchrequests"):
        metric = f"kafka_server_brokertopicmetrics_{name}_total"
        wait_value(prometheus, f'sum({metric}{{topic="{QUIET}"}})', 0)
        wait_value(prometheus, f'count({metric}{{topic="{QUIET}"}})', 3)  # on every broker
        wait_value(prometheus, f'count(sum by (topic) (rate({metric}{{topic="{QUIET}"}}[1m])))', 1)


def test_kafka_exporter_names_count_each_partition_once(prometheus: Prometheus, load: None) -> None:
    wait_value(prometheus, "max(kafka_brokers)", 3)
    wait_value(prometheus, f'sum(kafka_topic_partitions{{topic="{TOPIC}"}})', PARTITIONS)
    wait_value(prometheus, f'sum(kafka_topic_partitions{{topic="{QUIET}"}})', 2)
    wait_value(prometheus, f'count(kafka_topic_partition_leader{{topic="{TOPIC}"}})', PARTITIONS)
    wait_value(prometheus, f'sum(kafka_topic_partition_current_offset{{topic="{TOPIC}"}})', RECORDS + LATE)
    wait_value(prometheus, f'sum(kafka_topic_partition_oldest_offset{{topic="{TOPIC}"}})', 0)
    wait_value(prometheus, f'sum(kafka_topic_partition_replicas{{topic="{TOPIC}"}})', 3 * PARTITIONS)
    wait_value(prometheus, f'sum(kafka_topic_partition_in_sync_replica{{topic="{TOPIC}"}})', 3 * PARTITIONS)
    wait_value(prometheus, f'sum(kafka_topic_partition_under_replicated_partition{{topic="{TOPIC}"}})', 0)


def test_every_panel_query_returns_data(prometheus: Prometheus, load: None) -> None:
    pending: dict[Query, str] = {}

    def all_answer() -> bool:
        pending.clear()
        for q in panel_queries():
            result = prometheus.query(q.expr)
            if not result:
                pending[q] = "no data"
                continue
            for series in result:
                missing = legend_labels(q.legend) - set(series["metric"])
                if missing:
                    pending[q] = f"legend labels {sorted(missing)} missing from {series['metric']}"
        return not pending
    try:  # rates need two samples in their window
        wait_for(all_answer, 30, interval=0.5, what="every panel query answering")
    except TimeoutError:
        pytest.fail("\n".join(f"{q.where}: {q.expr!r}: {why}" for q, why in pending.items()))


def test_every_alert_rule_evaluates_and_a_healthy_cluster_raises_none(prometheus: Prometheus,
                                                                     load: None) -> None:
    expected = {rule["alert"] for rule in alert_rules()}

    def evaluated() -> dict[str, dict] | None:
        rules = {r["name"]: r for g in prometheus.api("rules")["groups"] for r in g["rules"]}
        done = set(rules) == expected and all(r["health"] == "ok" for r in rules.values())
        return rules if done else None
    rules = wait_for(evaluated, 20, interval=0.5, what="every alert rule evaluated without error")
    raised = {name: r["state"] for name, r in rules.items() if r["state"] != "inactive"}
    assert raised == {}


def test_values_agree_with_the_load(prometheus: Prometheus, load: None) -> None:
    wait_value(prometheus, f'sum(kafka_server_brokertopicmetrics_messagesin_total{{topic="{TOPIC}"}})',
               RECORDS + LATE)
    wait_value(prometheus, "sum(kafka_controller_kafkacontroller_activecontrollercount)", 1)
    wait_value(prometheus, "count(kafka_controller_kafkacontroller_activecontrollercount == 1)", 1)
    wait_value(prometheus, "sum(kafka_controller_kafkacontroller_activebrokercount)", 3)
    wait_value(prometheus, "sum(kafka_controller_kafkacontroller_globaltopiccount)", 3)  # + QUIET, __consumer_offsets
    wait_value(prometheus, f'sum(kafka_consumergroup_current_offset{{consumergroup="{GROUP}"}})', RECORDS)
    wait_value(prometheus, f'sum(kafka_consumergroup_lag{{consumergroup="{GROUP}"}})', LATE)
    wait_value(prometheus, f'sum(kafka_server_brokertopicmetrics_failedproducerequests_total{{topic="{TOPIC}"}})', 1)
    wait_value(prometheus, "count(kafka_server_raftmetrics_current_state{state=\"leader\"} == 1)", 1)
    leaders = prometheus.query("kafka_server_raftmetrics_current_leader")
    assert len({float(s["value"][1]) for s in leaders}) == 1, leaders  # every voter names one leader
    # every record is replicated to the 2 followers of its partition: bytes in twice over
    replicated = prometheus.scalar(f'sum(kafka_server_brokertopicmetrics_replicationbytesin_total{{topic="{TOPIC}"}})')
    produced = prometheus.scalar(f'sum(kafka_server_brokertopicmetrics_bytesin_total{{topic="{TOPIC}"}})')
    assert produced and replicated == 2 * produced
    assert prometheus.scalar('sum(kafka_network_requestmetrics_requests_total{request="FetchFollower"})') > 0


def test_every_strimzi_name_is_served_or_listed_unserved(prometheus: Prometheus, load: None) -> None:
    expected = set(strimzi_names()) - set(UNSERVED)
    problems: list[str] = []

    def as_listed() -> bool:
        known = prometheus.metric_names()
        problems[:] = ([f"{name}: not in Prometheus, nor in kraft/metrics_coverage.py's UNSERVED"
                        for name in sorted(expected - known)]
                       + [f"{name}: in Prometheus, yet listed in UNSERVED" for name in sorted(set(UNSERVED) & known)])
        return not problems
    try:
        wait_for(as_listed, 20, interval=0.5, what="Strimzi's metric names")
    except TimeoutError:
        pytest.fail("\n".join(problems))
    # what Strimzi's KRaft dashboard shows of a healthy quorum of three
    wait_value(prometheus, "count(kafka_server_raftmetrics_current_vote == -1)", 2)  # followers
    assert prometheus.scalar("max(kafka_server_raftmetrics_current_vote)") == prometheus.scalar(
        'max(kafka_server_raftmetrics_current_leader)')
    for name in ("incoming_byte", "outgoing_byte", "request", "response"):
        wait_value(prometheus, f"count(kafka_server_raftchannelmetrics_{name}_total > 0)", 3)
    wait_value(prometheus, "sum(kafka_broker_info)", 3)
    for name in ("totalproducerequests", "totalfetchrequests"):
        assert prometheus.scalar(f'sum(kafka_server_brokertopicmetrics_{name}_total{{topic="{TOPIC}"}})') > 0


def test_promtool_accepts_the_deploy_files(promtool: str) -> None:
    for args in (["check", "config", str(STATIC_CONFIG)], ["check", "config", str(FILE_SD_CONFIG)],
                 ["check", "rules", str(RULES)], ["test", "rules", str(RULE_TESTS)]):
        done = subprocess.run([promtool, *args], capture_output=True, text=True, timeout=60,
                              cwd=RULE_TESTS.parent if args[0] == "test" else None)
        assert done.returncode == 0, f"promtool {' '.join(args)}:\n{done.stdout}{done.stderr}"


def test_a_killed_broker_raises_under_replicated_partitions(cluster: Cluster, prometheus: Prometheus,
                                                            load: None) -> None:
    assert prometheus.scalar("sum(kafka_server_replicamanager_underreplicatedpartitions)") == 0
    active = cluster.active_controller()
    victim = next(i for i in cluster.nodes if i != active)
    cluster.kill(victim)
    wait_for(lambda: (prometheus.scalar("sum(kafka_server_replicamanager_underreplicatedpartitions)") or 0) > 0,
             30, interval=0.25, what="under-replicated partitions after the kill")
    wait_value(prometheus, "sum(kafka_controller_kafkacontroller_fencedbrokercount)", 1)
    wait_value(prometheus, f'up{{instance="{cluster.nodes[victim].bootstrap}"}}', 0)

    def alert_states() -> dict[str, str]:
        return {a["labels"]["alertname"]: a["state"] for a in prometheus.api("alerts")["alerts"]}
    states = wait_for(lambda: (s := alert_states()).get("KraftUnderReplicatedPartitions") and s,
                      20, interval=0.5, what="the under-replicated alert pending")
    assert states["KraftUnderReplicatedPartitions"] == "pending"  # for: 5m
    assert "KraftNoActiveController" not in states
