"""The pull collectors and push counters of `kraft/metrics.py` against fakes of the components
they read (replica manager, controller, quorum, group coordinator) and real metadata images."""

from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterable

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics import MetricWrapperBase

from kraft.controller.raft_transport import RaftChannelCounts
from loop_turns import loop_turns
from kraft.controller.raft_quorum import QuorumStatus, VoterStatus
from kraft.metrics import (
    LATE_TRANSACTION_BUFFER_MS, NULL_METRICS, UNKNOWN_TOPIC, VIEW_SLICE, IsrChangeCounter, LinuxIoCollector, NodeMetrics, RaftCollector,
    RaftStats, ReplicaManagerCollector, SampledStat,
)
from kraft.broker.partition_state import PartitionView
from kraft.log.config import LogConfig
from kraft.metadata.delta import MetadataDelta, apply_records
from kraft.metadata.image import MetadataImage, PartitionRegistration
from kraft.server.groups import GroupSummary, ListGroupsResult
from kraft.server.request_context import RequestContext, node_context
from kraft.metadata.records import (
    ClaimController, Endpoint, FenceBroker, Partition, PartitionChange, RegisterBroker, RemoveTopic,
    Topic, UnfenceBroker,
)

NODE = 1


def build(records: Iterable[Any], image: MetadataImage = MetadataImage.EMPTY) -> MetadataImage:
    return apply_records(image, ((image.offset + 1 + i, r) for i, r in enumerate(records)))[1]


def cluster(brokers: Iterable[int] = (1, 2, 3), fenced: Iterable[int] = ()) -> list[Any]:
    records: list[Any] = [ClaimController(node_id=NODE, controller_epoch=1)]
    epochs = {}
    for b in brokers:
        epochs[b] = len(records)  # a broker's epoch is the offset of its registration
        records.append(RegisterBroker(broker_id=b, incarnation_id=f"i{b}", controller_epoch=1,
                                      endpoints=(Endpoint("HTTP", "127.0.0.1", 9000 + b),)))
        records.append(UnfenceBroker(broker_id=b, broker_epoch=epochs[b], controller_epoch=1))
    for b in fenced:
        records.append(FenceBroker(broker_id=b, broker_epoch=epochs[b], controller_epoch=1))
    return records


def partition(topic_id: str, p: int, replicas: tuple[int, ...], isr: tuple[int, ...], leader: int) -> Partition:
    return Partition(topic_id=topic_id, partition=p, replicas=replicas, isr=isr, leader=leader,
                     controller_epoch=1)


def scrape(metrics: NodeMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a text-format scrape: (name, sorted labels) -> value."""
    text = generate_latest(metrics.registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text) for s in family.samples
    }


def value(samples: dict, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


# -- fakes of the components the collectors read ---------------------------------------------


@dataclass
class FakeLog:
    log_start_offset: int = 0
    log_end_offset: int = 0
    high_watermark: int = 0
    size_in_bytes: int = 0
    segments: tuple = (object(),)
    quarantined: tuple = ()
    oldest_transaction_last_timestamp: int | None = None


@dataclass
class FakeReplica:
    config: LogConfig = field(default_factory=LogConfig)
    log: FakeLog | None = field(default_factory=FakeLog)
    open_error: BaseException | None = None
    storage_error: OSError | None = None
    follower_leos: dict[int, int] = field(default_factory=dict)

    @property
    def offline(self) -> bool:
        return self.open_error is not None or self.storage_error is not None


class FakeReplicaManager:
    """A `PartitionStateReader` over fake replicas, their registrations from the image."""

    def __init__(self, image: MetadataImage, replicas: dict[tuple[str, int], FakeReplica]) -> None:
        self.image = image
        self.replicas = replicas
        self.metrics = NULL_METRICS

    def log_directories(self) -> list[tuple[str, bool]]:
        return [("/data", True), ("/disk2", False)]  # every log in the first; the second failed

    def local_partitions(self) -> Iterable[tuple[str, int, PartitionView]]:
        for (topic, p), replica in list(self.replicas.items()):  # as the replica manager: a copy
            yield topic, p, self._view(topic, p, replica)

    def partition_state(self, topic: str, p: int) -> PartitionView | None:
        replica = self.replicas.get((topic, p))
        return None if replica is None else self._view(topic, p, replica)

    def _view(self, topic: str, p: int, replica: FakeReplica) -> PartitionView:
        # a registration the image lacks: a partition led here alone
        reg = self.image.partition(topic, p) or PartitionRegistration((NODE,), (NODE,), NODE)
        plog = replica.log
        args = (reg.leader, reg.leader_epoch, reg.replicas, reg.isr, reg.leader == NODE,
                replica.offline, replica.config.min_insync_replicas)
        if plog is None:
            return PartitionView(*args)
        lags = [plog.log_end_offset - leo for m, leo in replica.follower_leos.items() if m in reg.replicas]
        return PartitionView(*args, True, plog.log_start_offset, plog.log_end_offset,
                             plog.high_watermark, plog.size_in_bytes, len(plog.segments),
                             len(plog.quarantined), max(lags, default=0), "/data",
                             oldest_transaction_last_timestamp=plog.oldest_transaction_last_timestamp)


class FakeLoader:
    """Hands the metrics each image's delta from the previous one, as the broker publisher does."""

    def __init__(self, metrics: NodeMetrics) -> None:
        self.metrics = metrics
        self.image = MetadataImage.EMPTY

    def publish(self, image: MetadataImage) -> None:
        delta, self.image = MetadataDelta.from_snapshot(self.image, image), image
        self.metrics.on_delta(delta)


@dataclass
class FakeController:
    image: MetadataImage
    is_active: bool


class FakeLocalQuorum:
    """The LocalQuorum surface (no `status()`)."""

    def __init__(self, leader: int | None, epoch: int, offset: int) -> None:
        self._leader, self._epoch, self.metadata_offset = leader, epoch, offset
        self.callbacks: list[Any] = []

    def leader(self) -> int | None:
        return self._leader

    def active_controller(self) -> tuple[int, int] | None:
        return None if self._leader is None else (self._leader, self._epoch)

    def on_commit(self, callback: Any) -> None:
        self.callbacks.append(callback)


class FakeRaftQuorum(FakeLocalQuorum):
    def __init__(self, status: QuorumStatus) -> None:
        super().__init__(status.leader_id, status.controller_epoch, status.metadata_offset)
        self._status = status
        self.metrics = NULL_METRICS

    def status(self) -> QuorumStatus:
        return self._status


def with_broker(image: MetadataImage, replicas: dict, **kwargs: Any) -> tuple[NodeMetrics, FakeReplicaManager, FakeLoader]:
    metrics = NodeMetrics(NODE, **kwargs)
    rm = FakeReplicaManager(image, replicas)
    loader = FakeLoader(metrics)
    metrics.watch_broker(rm)
    return metrics, rm, loader


# -- replica manager and log ---------------------------------------------------------------


def test_partitions_with_late_transactions_count_the_led_ones_open_past_the_max_timeout() -> None:
    """KIP-664's PartitionsWithLateTransactionsCount: on the leader, a transaction whose producer
    last wrote more than transaction.max.timeout.ms + 5 minutes ago (Kafka's buffer)."""
    image = build(cluster() + [
        Topic(name="a", topic_id="A", controller_epoch=1),
        partition("A", 0, (1, 2), (1, 2), 1),
        partition("A", 1, (1, 2), (1, 2), 1),
        partition("A", 2, (1, 2), (1, 2), 1),
        partition("A", 3, (2, 1), (2, 1), 2),
    ])
    replicas = {
        ("a", 0): FakeReplica(log=FakeLog(oldest_transaction_last_timestamp=39_999)),  # late
        ("a", 1): FakeReplica(log=FakeLog(oldest_transaction_last_timestamp=40_000)),  # exactly the limit
        ("a", 2): FakeReplica(log=FakeLog()),  # none open
        ("a", 3): FakeReplica(log=FakeLog(oldest_transaction_last_timestamp=0)),  # followed: its leader counts it
    }
    registry = CollectorRegistry()
    registry.register(ReplicaManagerCollector(NODE, FakeReplicaManager(image, replicas), lambda: image, True,
                                              max_transaction_timeout_ms=60_000,
                                              wall_clock_ms=lambda: 100_000 + LATE_TRANSACTION_BUFFER_MS))
    assert registry.get_sample_value("kafka_server_replicamanager_partitionswithlatetransactionscount") == 1


def test_replica_manager_counts_follow_the_image_and_local_replicas() -> None:
    image = build(cluster() + [
        Topic(name="a", topic_id="A", controller_epoch=1),
        partition("A", 0, (1, 2, 3), (1, 2, 3), 1),  # led here, fully replicated
        partition("A", 1, (1, 2, 3), (1,), 1),  # led here, ISR shrunk below min ISR 2
        partition("A", 2, (2, 1, 3), (2, 1), 2),  # followed here
        partition("A", 3, (2, 3), (2, 3), 2),  # not on this broker
        Topic(name="b", topic_id="B", controller_epoch=1),
        partition("B", 0, (1, 2), (1, 2), 1),  # its log failed to open
    ])
    min_isr_2 = LogConfig(min_insync_replicas=2)
    replicas = {
        ("a", 0): FakeReplica(min_isr_2, FakeLog(3, 120, 120, 4096, (1, 2)), follower_leos={2: 120, 3: 100}),
        ("a", 1): FakeReplica(min_isr_2, FakeLog(0, 50, 50, 1000), follower_leos={2: 45}),
        ("a", 2): FakeReplica(min_isr_2, FakeLog(0, 7, 7, 10, quarantined=(object(),))),
        ("b", 0): FakeReplica(log=None, open_error=OSError("disk")),
    }
    metrics, _, _ = with_broker(image, replicas)
    s = scrape(metrics)
    rm = "kafka_server_replicamanager_"
    assert value(s, rm + "partitioncount") == 4
    assert value(s, rm + "leadercount") == 3
    assert value(s, rm + "underreplicatedpartitions") == 1
    assert value(s, rm + "underminisrpartitioncount") == 1
    assert value(s, rm + "atminisrpartitioncount") == 0
    assert value(s, rm + "offlinereplicacount") == 1
    assert value(s, "kafka_server_replicafetchermanager_maxlag", clientid="Replica") == 20
    assert value(s, "kafka_log_log_size", topic="a", partition="0") == 4096
    assert value(s, "kafka_log_log_numlogsegments", topic="a", partition="0") == 2
    assert value(s, "kafka_log_log_logstartoffset", topic="a", partition="0") == 3
    assert value(s, "kafka_log_log_logendoffset", topic="a", partition="2") == 7
    assert value(s, "kafka_cluster_partition_underreplicated", topic="a", partition="1") == 1
    assert value(s, "kafka_cluster_partition_underreplicated", topic="a", partition="0") == 0
    assert value(s, "kafka_cluster_partition_underminisr", topic="a", partition="1") == 1
    assert value(s, "kafka_cluster_partition_underminisr", topic="a", partition="0") == 0
    assert value(s, "kafka_cluster_partition_atminisr", topic="a", partition="0") == 0  # ISR 3, min 2
    assert value(s, "kafka_cluster_partition_replicascount", topic="a", partition="0") == 3
    assert value(s, "kafka_topic_partition_leader_is_preferred", topic="a", partition="0") == 1
    assert ("kafka_cluster_partition_replicascount", (("partition", "2"), ("topic", "a"))) not in s  # followed
    assert value(s, "kraft_log_quarantined_regions", topic="a", partition="2") == 1
    assert value(s, "kraft_log_quarantined_regions", topic="a", partition="0") == 0
    assert ("kafka_log_log_size", (("partition", "3"), ("topic", "a"))) not in s
    assert value(s, "kafka_server_brokermetadatametrics_last_applied_record_offset") == image.offset
    assert value(s, "kafka_log_logmanager_offlinelogdirectorycount") == 1
    assert value(s, "kafka_log_logmanager_logdirectoryoffline", logdirectory="/disk2") == 1
    assert value(s, "kafka_log_logmanager_logdirectoryoffline", logdirectory="/data") == 0
    assert value(s, "kraft_log_logmanager_logdirectorysize_bytes", logdirectory="/data") == 4096 + 1000 + 10
    assert value(s, "kraft_log_logmanager_logdirectorysize_bytes", logdirectory="/disk2") == 0


async def test_a_scrape_takes_the_replica_views_on_the_loop_in_slices() -> None:
    """Counts loop turns, not time: `refresh` (on the loop, before a scrape) takes the views of
    1,000 local replicas with the loop running between slices of `VIEW_SLICE`; the scrape after
    it (the route encodes in a thread) shows those views, once: the next one reads afresh."""
    image = build(cluster((1,)) + [Topic(name="a", topic_id="A", controller_epoch=1)]
                  + [partition("A", p, (1,), (1,), 1) for p in range(1000)])
    replicas = {("a", p): FakeReplica(log=FakeLog(0, p, p, size_in_bytes=p)) for p in range(1000)}
    metrics, _, _ = with_broker(image, replicas)
    direct = scrape(metrics)
    async with loop_turns() as turns:
        await metrics.refresh()
    assert turns() >= 1000 // VIEW_SLICE - 1
    replicas[("a", 7)].log = FakeLog(0, 70, 70, size_in_bytes=70)  # after the views were taken
    refreshed = await asyncio.to_thread(scrape, metrics)
    assert value(refreshed, "kafka_log_log_size", topic="a", partition="7") == 7
    assert {k: v for k, v in refreshed.items() if k[0].startswith("kafka_log")} == {
        k: v for k, v in direct.items() if k[0].startswith("kafka_log")}
    assert value(scrape(metrics), "kafka_log_log_size", topic="a", partition="7") == 70


def test_topic_labels_off_aggregates_per_broker() -> None:
    image = build(cluster((1,)) + [Topic(name="a", topic_id="A", controller_epoch=1),
                                   partition("A", 0, (1,), (1,), 1), partition("A", 1, (1,), (1,), 1)])
    replicas = {("a", 0): FakeReplica(log=FakeLog(size_in_bytes=100, segments=(1, 2))),
                ("a", 1): FakeReplica(log=FakeLog(size_in_bytes=50))}
    metrics, _, _ = with_broker(image, replicas, topic_labels=False)
    metrics.messages_in("a", 3, 300)
    s = scrape(metrics)
    assert value(s, "kafka_log_log_size") == 150
    assert value(s, "kafka_log_log_numlogsegments") == 3
    assert value(s, "kraft_log_quarantined_regions") == 0
    assert value(s, "kafka_server_brokertopicmetrics_messagesin_total") == 3
    assert not any("topic" in dict(labels) for _, labels in s)
    assert not any(name == "kafka_log_log_logendoffset" for name, _ in s)


def test_kafka_exporter_topic_gauges_come_from_the_partition_leader_only() -> None:
    image = build(cluster((1, 2, 3), fenced=(3,)) + [
        Topic(name="a", topic_id="A", controller_epoch=1),
        partition("A", 0, (1, 2, 3), (1, 2), 1),  # led here, under-replicated
        partition("A", 1, (2, 1, 3), (2, 1, 3), 2),  # followed here: its leader reports it
        partition("A", 2, (1, 2), (1, 2), 1),  # led here
    ])
    replicas = {("a", 0): FakeReplica(log=FakeLog(5, 120, 110)),
                ("a", 1): FakeReplica(log=FakeLog(0, 9, 9)),
                ("a", 2): FakeReplica(log=FakeLog(0, 3, 3))}
    metrics, _, _ = with_broker(image, replicas)
    s = scrape(metrics)
    assert value(s, "kafka_brokers") == 2
    assert value(s, "kafka_topic_partitions", topic="a") == 3
    t = "kafka_topic_partition_"
    assert value(s, t + "current_offset", topic="a", partition="0") == 110  # the high watermark
    assert value(s, t + "oldest_offset", topic="a", partition="0") == 5
    assert value(s, t + "in_sync_replica", topic="a", partition="0") == 2
    assert value(s, t + "replicas", topic="a", partition="0") == 3
    assert value(s, t + "leader", topic="a", partition="2") == NODE
    assert value(s, t + "under_replicated_partition", topic="a", partition="0") == 1
    assert value(s, t + "under_replicated_partition", topic="a", partition="2") == 0
    assert not any(labels == (("partition", "1"), ("topic", "a")) and name.startswith(t)
                   for name, labels in s)
    # a broker that leads no partition 0 does not report the topic's partition count
    follower = NodeMetrics(2)
    follower.watch_broker(FakeReplicaManager(image, replicas))
    s = scrape(follower)
    assert value(s, t + "leader", topic="a", partition="1") == 2
    assert not any(name == "kafka_topic_partitions" for name, _ in s)
    off, _, _ = with_broker(image, replicas, topic_labels=False)
    assert not any(name.startswith("kafka_topic_") for name, _ in scrape(off))


def test_per_topic_counters_exist_at_zero_from_creation_to_deletion() -> None:
    base = build(cluster((1,)))
    metrics, rm, loader = with_broker(base, {})
    loader.publish(base)
    t = "kafka_server_brokertopicmetrics_"
    names = ("messagesin", "bytesin", "bytesout", "replicationbytesin", "replicationbytesout",
             "failedproducerequests", "failedfetchrequests", "totalproducerequests", "totalfetchrequests")
    created = build([Topic(name="a", topic_id="A", controller_epoch=1), partition("A", 0, (1,), (1,), 1),
                     Topic(name="b", topic_id="B", controller_epoch=1), partition("B", 0, (2,), (2,), 2)],
                    base)
    rm.image = created
    loader.publish(created)
    s = scrape(metrics)
    for name in names:  # every topic, led here or not
        assert value(s, t + name + "_total", topic="a") == 0
        assert value(s, t + name + "_total", topic="b") == 0
    metrics.failed_produce("a")
    assert value(scrape(metrics), t + "failedproducerequests_total", topic="a") == 1
    deleted = build([RemoveTopic(topic_id="A", controller_epoch=1)], created)
    rm.image = deleted
    loader.publish(deleted)
    s = scrape(metrics)
    assert not any(dict(labels).get("topic") == "a" for _, labels in s)
    assert value(s, t + "failedfetchrequests_total", topic="b") == 0
    recreated = build([Topic(name="a", topic_id="A2", controller_epoch=1),
                       partition("A2", 0, (1,), (1,), 1)], deleted)
    rm.image = recreated
    loader.publish(recreated)
    assert value(scrape(metrics), t + "failedproducerequests_total", topic="a") == 0
    metrics.failed_produce("a")  # the bound child of the deleted topic's series is not reused
    assert value(scrape(metrics), t + "failedproducerequests_total", topic="a") == 1


def test_per_topic_counters_follow_delta_records_not_just_snapshots() -> None:
    image = build(cluster((1,)))
    metrics, _, _ = with_broker(image, {})
    delta = MetadataDelta(image)
    for offset, rec in enumerate([Topic(name="c", topic_id="C", controller_epoch=1),
                                  partition("C", 0, (1,), (1,), 1)], image.offset + 1):
        delta.replay(rec, offset)
    metrics.on_delta(delta)
    assert value(scrape(metrics), "kafka_server_brokertopicmetrics_failedfetchrequests_total",
                 topic="c") == 0
    labels_off = NodeMetrics(NODE, topic_labels=False)
    labels_off.on_delta(delta)
    assert value(scrape(labels_off), "kafka_server_brokertopicmetrics_failedfetchrequests_total") == 0


# -- push counters ----------------------------------------------------------------------------


@dataclass
class Result:
    topic: str
    records: bytes = b""
    error_code: str | None = None


def test_push_counters_count_per_topic_and_bound_unknown_topics() -> None:
    image = build(cluster((1,)) + [Topic(name="a", topic_id="A", controller_epoch=1),
                                   partition("A", 0, (1,), (1,), 1)])
    metrics, _, _ = with_broker(image, {})
    metrics.messages_in("a", 5, 500)
    metrics.messages_in("a", 2, 20)
    metrics.fetched([Result("a", b"x" * 70), Result("a", error_code="OFFSET_OUT_OF_RANGE"),
                     Result("nope", error_code="UNKNOWN_TOPIC_OR_PARTITION"), Result("a")])
    for name in ("bogus-1", "bogus-2", "a"):
        metrics.failed_produce(name)
    metrics.replication_bytes_in("a", 9)
    metrics.fetched([Result("a", b"y" * 11), Result("a", error_code="NOT_LEADER_OR_FOLLOWER")],
                    replication=True)
    s = scrape(metrics)
    t = "kafka_server_brokertopicmetrics_"
    assert value(s, t + "messagesin_total", topic="a") == 7
    assert value(s, t + "bytesin_total", topic="a") == 520
    assert value(s, t + "bytesout_total", topic="a") == 70
    assert value(s, t + "failedfetchrequests_total", topic="a") == 2
    assert value(s, t + "failedfetchrequests_total", topic=UNKNOWN_TOPIC) == 1
    assert value(s, t + "failedproducerequests_total", topic=UNKNOWN_TOPIC) == 2
    assert value(s, t + "failedproducerequests_total", topic="a") == 1
    assert value(s, t + "replicationbytesin_total", topic="a") == 9
    assert value(s, t + "replicationbytesout_total", topic="a") == 11
    # every partition's produce and fetch, failed ones included, consumers' and followers'
    assert value(s, t + "totalproducerequests_total", topic="a") == 3
    assert value(s, t + "totalproducerequests_total", topic=UNKNOWN_TOPIC) == 2
    assert value(s, t + "totalfetchrequests_total", topic="a") == 5
    assert value(s, t + "totalfetchrequests_total", topic=UNKNOWN_TOPIC) == 1


def request(api: str, node_id: int | None = None) -> RequestContext:
    if node_id is not None:
        return node_context(node_id, "127.0.0.1", "CLIENT").for_api(api)
    return RequestContext("User:alice", "127.0.0.1", "CLIENT", api=api)


def test_request_metrics_count_errors_and_latency_in_ms() -> None:
    metrics = NodeMetrics(NODE)
    metrics.observe_request(request("Produce"), "NONE", 0.004)
    metrics.observe_request(request("Produce"), "NOT_LEADER_OR_FOLLOWER", 0.2)
    s = scrape(metrics)
    assert value(s, "kafka_network_requestmetrics_requests_total", request="Produce") == 2
    assert value(s, "kafka_network_requestmetrics_errors_total", request="Produce", error="NONE") == 1
    assert value(s, "kafka_network_requestmetrics_errors_total", request="Produce",
                 error="NOT_LEADER_OR_FOLLOWER") == 1
    assert value(s, "kafka_network_requestmetrics_totaltimems_sum", request="Produce") == pytest.approx(204)
    assert value(s, "kafka_network_requestmetrics_totaltimems_bucket", request="Produce", le="5.0") == 1


def test_request_and_topic_metrics_bind_their_labels_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """prometheus_client's `labels` (a lock and a look-up) ran three times per answered request
    and three times per produced partition: the children are bound at their first use."""
    metrics = NodeMetrics(NODE)
    calls = []
    real = MetricWrapperBase.labels

    def counted(self: MetricWrapperBase, *values: str) -> MetricWrapperBase:
        calls.append(values)
        return real(self, *values)

    monkeypatch.setattr(MetricWrapperBase, "labels", counted)
    for _ in range(3):
        metrics.observe_request(request("Produce"), "NONE", 0.001)
        metrics.messages_in("t", 1, 10)
    assert len(calls) == 6  # requests, errors, total time; messages, bytes, produce requests of the topic
    s = scrape(metrics)
    assert value(s, "kafka_network_requestmetrics_requests_total", request="Produce") == 3
    assert value(s, "kafka_server_brokertopicmetrics_messagesin_total", topic="t") == 3


def test_a_fetch_counts_as_kafkas_request_metrics_name_it() -> None:
    """Kafka's RequestMetrics: a replica's Fetch is FetchFollower, a client's FetchConsumer."""
    metrics = NodeMetrics(NODE)
    metrics.observe_request(request("Fetch"), "NONE", 0.001)
    metrics.observe_request(request("Fetch", node_id=2), "NONE", 0.001)
    metrics.observe_request(request("Fetch", node_id=3), "NONE", 0.001)
    s = scrape(metrics)
    assert value(s, "kafka_network_requestmetrics_requests_total", request="FetchConsumer") == 1
    assert value(s, "kafka_network_requestmetrics_requests_total", request="FetchFollower") == 2
    assert ("kafka_network_requestmetrics_requests_total", (("request", "Fetch"),)) not in s


def test_nodes_in_one_process_have_separate_registries() -> None:
    first, second = NodeMetrics(1), NodeMetrics(2)
    first.observe_request(request("Metadata"), "NONE", 0.001)
    assert value(scrape(first), "kafka_network_requestmetrics_requests_total", request="Metadata") == 1
    assert ("kafka_network_requestmetrics_requests_total", (("request", "Metadata"),)) not in scrape(second)
    assert any(name == "process_cpu_seconds_total" for name, _ in scrape(second))


def test_null_metrics_accept_every_push() -> None:
    NULL_METRICS.messages_in("t", 1, 1)
    NULL_METRICS.fetched([Result("t", b"x")])
    NULL_METRICS.failed_produce("t")
    NULL_METRICS.observe_request(request("Produce"), "NONE", 0.1)
    NULL_METRICS.raft_commit(0.1)
    NULL_METRICS.raft_state_changed("Leader")


# -- ISR changes -------------------------------------------------------------------------------


def test_isr_shrinks_and_expands_counted_for_partitions_led_here() -> None:
    metrics, _, loader = with_broker(MetadataImage.EMPTY, {})
    image = build(cluster() + [Topic(name="a", topic_id="A", controller_epoch=1),
                               partition("A", 0, (1, 2, 3), (1, 2, 3), 1),
                               partition("A", 1, (2, 1, 3), (2, 1, 3), 2)])
    loader.publish(image)
    steps = [
        PartitionChange(topic_id="A", partition=0, isr=(1, 2), controller_epoch=1),  # shrink
        PartitionChange(topic_id="A", partition=1, isr=(2, 1), controller_epoch=1),  # led elsewhere
        PartitionChange(topic_id="A", partition=0, isr=(1,), controller_epoch=1),  # shrink
        PartitionChange(topic_id="A", partition=0, isr=(1, 3), controller_epoch=1),  # expand
        PartitionChange(topic_id="A", partition=0, isr=(2,), leader=2, controller_epoch=1),  # moved
    ]
    for record in steps:
        image = build([record], image)
        loader.publish(image)
    s = scrape(metrics)
    assert value(s, "kafka_server_replicamanager_isrshrinks_total") == 2
    assert value(s, "kafka_server_replicamanager_isrexpands_total") == 1


@given(st.lists(st.sets(st.sampled_from([2, 3, 4])), max_size=12))
def test_isr_counter_counts_every_strict_change(isrs: list[set[int]]) -> None:
    """Leader 1 keeps leading while followers leave and join: each step that only removes
    members is one shrink, each that only adds is one expand, a swap is neither."""
    metrics = NodeMetrics(NODE)
    counter = IsrChangeCounter(NODE, metrics._isr_shrinks, metrics._isr_expands)
    image = build(cluster((1, 2, 3, 4)) + [Topic(name="a", topic_id="A", controller_epoch=1),
                                           partition("A", 0, (1, 2, 3, 4), (1, 2, 3, 4), 1)])
    counter.on_delta(MetadataDelta.from_snapshot(MetadataImage.EMPTY, image))
    previous, shrinks, expands = {1, 2, 3, 4}, 0, 0
    for followers in isrs:
        isr = {1} | followers
        shrinks += isr < previous
        expands += isr > previous
        delta, image = apply_records(image, [(image.offset + 1, PartitionChange(
            topic_id="A", partition=0, isr=tuple(sorted(isr)), controller_epoch=1))])
        counter.on_delta(delta)
        previous = isr
    s = scrape(metrics)
    assert value(s, "kafka_server_replicamanager_isrshrinks_total") == shrinks
    assert value(s, "kafka_server_replicamanager_isrexpands_total") == expands


# -- controller and Raft -------------------------------------------------------------------------


def test_controller_counts_on_the_active_controller_only() -> None:
    image = build(cluster((1, 2, 3), fenced=(3,)) + [
        Topic(name="a", topic_id="A", controller_epoch=1),
        partition("A", 0, (1, 2), (1, 2), 1),
        partition("A", 1, (2, 1), (1,), 1),  # not on its preferred leader
        Topic(name="b", topic_id="B", controller_epoch=1),
        partition("B", 0, (3,), (3,), -1),  # offline
    ])
    quorum = FakeLocalQuorum(NODE, 4, image.offset)
    active = NodeMetrics(NODE)
    active.watch_controller(FakeController(image, True), quorum)
    s = scrape(active)
    c = "kafka_controller_kafkacontroller_"
    assert value(s, c + "activecontrollercount") == 1
    assert value(s, c + "globaltopiccount") == 2
    assert value(s, c + "globalpartitioncount") == 3
    assert value(s, c + "offlinepartitionscount") == 1
    assert value(s, c + "activebrokercount") == 2
    assert value(s, c + "fencedbrokercount") == 1
    assert value(s, c + "preferredreplicaimbalancecount") == 1
    assert value(s, c + "lastappliedrecordoffset") == image.offset
    assert value(s, c + "lastcommittedrecordoffset") == image.offset

    # kafka_exporter's broker list: the unfenced brokers, once, by the active controller
    assert {dict(labels)["id"]: dict(labels)["address"] for name, labels in s if name == "kafka_broker_info"} == {
        "1": "127.0.0.1:9001", "2": "127.0.0.1:9002"}

    standby = NodeMetrics(2)
    standby.watch_controller(FakeController(image, False), FakeLocalQuorum(NODE, 4, image.offset))
    s = scrape(standby)
    assert value(s, c + "activecontrollercount") == 0
    assert value(s, c + "globalpartitioncount") == 0
    assert value(s, c + "lastappliedrecordoffset") == image.offset
    assert not any(name == "kafka_broker_info" for name, _ in s)


def test_unclean_elections_are_counted_by_the_new_leader() -> None:
    base = build(cluster((1, 2, 3)) + [Topic(name="a", topic_id="A", controller_epoch=1),
                                       partition("A", 0, (2, 1), (2,), 2),
                                       partition("A", 1, (2, 1), (2, 1), 2)])
    here, _, here_loader = with_broker(base, {})
    there, _, there_loader = with_broker(base, {})
    there.node_id = there._unclean.node_id = 2
    for loader in (here_loader, there_loader):
        loader.publish(base)
    # 2 fails: A-0's ISR held only 2, so A-0 goes offline; A-1 elects 1 from its ISR (clean)
    offline = build([PartitionChange(topic_id="A", partition=0, leader=-1, controller_epoch=1),
                     PartitionChange(topic_id="A", partition=1, leader=1, isr=(1,), controller_epoch=1)], base)
    # then A-0 elects 1, which was not in its ISR: unclean
    elected = build([PartitionChange(topic_id="A", partition=0, leader=1, isr=(1,), controller_epoch=1)], offline)
    for image in (offline, elected):
        for loader in (here_loader, there_loader):
            loader.publish(image)
    name = "kafka_controller_controllerstats_uncleanleaderelections_total"
    assert value(scrape(here), name) == 1
    assert value(scrape(there), name) == 0


def test_raft_gauges_of_a_local_quorum() -> None:
    metrics = NodeMetrics(NODE)
    quorum = FakeLocalQuorum(NODE, 3, 41)
    metrics.watch_controller(FakeController(MetadataImage.EMPTY, True), quorum)
    for offset in range(3):
        quorum.callbacks[0](offset, {})
    s = scrape(metrics)
    r = "kafka_server_raftmetrics_"
    assert value(s, r + "current_state", state="leader") == 1
    assert value(s, r + "current_state", state="follower") == 0
    assert value(s, r + "current_leader") == NODE
    assert value(s, r + "current_epoch") == 3
    assert value(s, r + "high_watermark") == 41
    assert value(s, r + "append_records_total") == 3
    assert value(s, r + "fetch_records_total") == 0


def test_raft_gauges_of_a_raft_follower_and_its_push_sink() -> None:
    status = QuorumStatus(
        node_id=2, raft_state="Follower", leader_id=1, leader_epoch=7, high_watermark=90,
        last_applied_index=88, metadata_offset=60, active_controller_id=1, controller_epoch=3,
        has_quorum=True, voters=(VoterStatus(1, -1, -1, True, "Leader"),
                                 VoterStatus(2, 88, -1, True, "Follower"),
                                 VoterStatus(3, -1, -1, False, "Follower")))
    quorum = FakeRaftQuorum(status)
    metrics = NodeMetrics(2)
    metrics.watch_controller(FakeController(MetadataImage.EMPTY, False), quorum)
    assert quorum.metrics is metrics
    quorum.callbacks[0](0, {})
    s = scrape(metrics)
    r = "kafka_server_raftmetrics_"
    assert value(s, r + "current_state", state="follower") == 1
    assert value(s, r + "current_leader") == 1
    assert value(s, r + "current_epoch") == 7
    assert value(s, r + "high_watermark") == 90
    assert value(s, r + "log_end_offset") == 88
    assert value(s, r + "number_unknown_voter_connections") == 1
    assert value(s, r + "fetch_records_total") == 1


def test_sampled_stat_is_kafkas_avg_max_and_rate_over_two_windows() -> None:
    stat = SampledStat(window_s=30, count=2)
    assert math.isnan(stat.avg(0)) and math.isnan(stat.max(0))
    assert stat.rate(0) == 0
    stat.record(10, now=100)
    stat.record(30, now=110)
    assert stat.avg(110) == 20 and stat.max(110) == 30
    assert stat.rate(110) == 40 / 40  # 10 s covered, padded by one window as Kafka's Rate does
    stat.record(5, now=135)  # a second sample
    assert stat.avg(135) == 15 and stat.max(135) == 30
    assert stat.rate(150) == 45 / 50
    assert stat.avg(165) == 5 and stat.max(165) == 5  # the first sample is 60 s old: dropped
    assert math.isnan(stat.avg(200)) and stat.rate(200) == 0
    for t in range(1000):  # bounded: two samples whatever the recordings
        stat.record(1, now=300 + t * 0.01)
    assert len(stat._samples) <= 2 and stat.avg(310) == 1 and stat.rate(310) == 1000 / 40


def test_raft_sampled_gauges_and_current_vote() -> None:
    clock = [1000.0]
    status = QuorumStatus(
        node_id=1, raft_state="Leader", leader_id=1, leader_epoch=7, high_watermark=90,
        last_applied_index=90, metadata_offset=60, active_controller_id=1, controller_epoch=3,
        has_quorum=True, voters=(VoterStatus(1, 90, 0, True, "Leader"),))
    quorum = FakeRaftQuorum(status)
    metrics = NodeMetrics(1)
    metrics.raft_stats.clock = lambda: clock[0]
    metrics.watch_controller(FakeController(MetadataImage.EMPTY, True), quorum)
    r = "kafka_server_raftmetrics_"
    s = scrape(metrics)
    assert math.isnan(value(s, r + "commit_latency_avg")) and math.isnan(value(s, r + "commit_latency_max"))
    assert value(s, r + "append_records_rate") == 0 and value(s, r + "fetch_records_rate") == 0
    assert value(s, r + "current_vote") == 1  # a leader voted for itself
    metrics.raft_commit(0.010)
    metrics.raft_commit(0.030)
    for offset in range(60):
        quorum.callbacks[0](offset, {})
    metrics.raft_state_changed("Candidate", now=clock[0])
    metrics.raft_state_changed("Leader", now=clock[0] + 0.5)
    clock[0] += 1
    s = scrape(metrics)
    assert value(s, r + "commit_latency_avg") == pytest.approx(20)
    assert value(s, r + "commit_latency_max") == pytest.approx(30)
    assert value(s, r + "election_latency_avg") == pytest.approx(500)
    assert value(s, r + "append_records_rate") == pytest.approx(60 / 31)
    assert value(s, r + "fetch_records_rate") == 0
    clock[0] += 61
    assert math.isnan(value(scrape(metrics), r + "commit_latency_avg"))


@pytest.mark.parametrize("state,leader,voted,shown", [
    ("Candidate", None, 1, 1),  # candidates vote for themselves
    ("Follower", None, 3, 3),  # voted, no leader known yet
    ("Follower", 3, 3, -1),  # Kafka's follower of a known leader shows no vote
    ("Follower", None, None, -1),
])
def test_current_vote_follows_kafkas_rule(state: str, leader: int | None, voted: int | None, shown: int) -> None:
    status = QuorumStatus(1, state, leader, 2, 0, 0, 0, leader, 1, leader is not None, (), voted_id=voted)
    metrics = NodeMetrics(1)
    metrics.registry.register(RaftCollector(1, FakeRaftQuorum(status), RaftStats()))
    assert value(scrape(metrics), "kafka_server_raftmetrics_current_vote") == shown


def test_raft_channel_counters_come_from_the_quorums_transport() -> None:
    status = QuorumStatus(1, "Follower", 2, 2, 0, 0, 0, 2, 1, True, ())
    quorum = FakeRaftQuorum(status)
    quorum.channel = RaftChannelCounts(incoming_bytes=100, outgoing_bytes=50, sent=7, received=9)
    metrics = NodeMetrics(1)
    metrics.registry.register(RaftCollector(1, quorum))
    s = scrape(metrics)
    c = "kafka_server_raftchannelmetrics_"
    assert [value(s, c + n) for n in ("incoming_byte_total", "outgoing_byte_total", "request_total",
                                      "response_total")] == [100, 50, 7, 9]
    local = NodeMetrics(1)  # a single voter has no Raft transport: nothing moved
    local.registry.register(RaftCollector(1, FakeLocalQuorum(1, 1, 0)))
    assert value(scrape(local), c + "incoming_byte_total") == 0


def test_linux_disk_bytes_from_proc_self_io(tmp_path: Path) -> None:
    io = tmp_path / "io"
    io.write_text("rchar: 5\nwchar: 6\nsyscr: 1\nsyscw: 1\nread_bytes: 4096\nwrite_bytes: 8192\n"
                  "cancelled_write_bytes: 0\n")
    metrics = NodeMetrics(NODE)
    metrics.registry.register(LinuxIoCollector(io))  # beside the node's own (/proc/self/io)
    k = "kafka_server_kafkaserver_linux_disk_"
    samples = [s for f in LinuxIoCollector(io).collect() for s in f.samples]
    assert {s.name: s.value for s in samples} == {k + "read_bytes": 4096, k + "write_bytes": 8192}
    assert list(LinuxIoCollector(tmp_path / "missing").collect()) == []


def test_election_latency_runs_from_candidate_to_a_known_leader() -> None:
    metrics = NodeMetrics(NODE)
    metrics.raft_state_changed("Follower", now=0.0)
    metrics.raft_state_changed("Candidate", now=10.0)
    metrics.raft_state_changed("Candidate", now=10.4)  # split vote: a new round, same election
    metrics.raft_state_changed("Leader", now=10.75)
    metrics.raft_state_changed("Follower", now=20.0)
    metrics.raft_commit(0.012)
    s = scrape(metrics)
    r = "kafka_server_raftmetrics_"
    assert value(s, r + "election_latency_ms_count") == 1
    assert value(s, r + "election_latency_ms_sum") == pytest.approx(750)
    assert value(s, r + "commit_latency_ms_sum") == pytest.approx(12)


def test_a_failing_collector_costs_only_its_own_metrics(caplog: pytest.LogCaptureFixture) -> None:
    class Broken(FakeRaftQuorum):
        def status(self) -> QuorumStatus:
            raise AssertionError("not started")

    metrics = NodeMetrics(NODE)
    quorum = Broken(QuorumStatus(1, "Leader", 1, 1, 0, 0, 0, 1, 1, True, ()))
    metrics.registry.register(RaftCollector(NODE, quorum))
    with caplog.at_level(logging.ERROR, logger="kraft.metrics"):
        s = scrape(metrics)
    assert not any(name.startswith("kafka_server_raftmetrics_current") for name, _ in s)
    assert any(name == "process_cpu_seconds_total" for name, _ in s)
    assert "RaftCollector failed" in caplog.text


# -- consumer groups ---------------------------------------------------------------------------


class FakeGroups:
    def __init__(self, groups: dict[str, dict[str, Any]]) -> None:
        self.groups = groups

    async def list_groups(self) -> ListGroupsResult:
        return ListGroupsResult(tuple(GroupSummary(g, "Stable", "consumer", 0, NODE)
                                      for g in [*self.groups, "vanished"]))

    async def describe_group(self, group_id: str) -> SimpleNamespace:
        """The description's members and offsets (GroupDescription's fields the collector reads)."""
        if group_id not in self.groups:
            raise LookupError(group_id)
        described = self.groups[group_id]
        return SimpleNamespace(members=described["members"],
                               offsets=[SimpleNamespace(**o) for o in described["offsets"]])


def offsets(topic: str, p: int, current: int | None, leo: int | None) -> dict[str, Any]:
    return {"topic": topic, "partition": p, "current_offset": current, "log_end_offset": leo}


async def test_group_lag_from_the_coordinator_and_local_high_watermarks() -> None:
    groups = FakeGroups({
        "g1": {"members": [{}, {}], "offsets": [offsets("a", 0, 10, 25), offsets("a", 1, 4, None),
                                                 offsets("a", 2, None, 9)]},
        "g2": {"members": [], "offsets": [offsets("a", 0, 30, 25), offsets("b", 0, 1, None)]},
    })
    image = build(cluster((1,)) + [Topic(name="a", topic_id="A", controller_epoch=1),
                                   partition("A", 1, (1,), (1,), 1)])
    metrics, _, _ = with_broker(image, {("a", 1): FakeReplica(log=FakeLog(high_watermark=6))})
    metrics.watch_groups(groups)
    assert not any(name == "kafka_consumergroup_lag" for name, _ in scrape(metrics))
    await metrics.refresh()
    s = scrape(metrics)
    assert value(s, "kafka_consumergroup_members", consumergroup="g1") == 2
    assert value(s, "kafka_consumergroup_members", consumergroup="g2") == 0
    lag = {(dict(l)["consumergroup"], dict(l)["topic"], dict(l)["partition"]): v
           for (n, l), v in s.items() if n == "kafka_consumergroup_lag"}
    # a committed offset past the high watermark is no lag; b-0's high watermark is unknown here
    assert lag == {("g1", "a", "0"): 15, ("g1", "a", "1"): 2, ("g2", "a", "0"): 0}
    assert value(s, "kafka_consumergroup_current_offset", consumergroup="g2", topic="b", partition="0") == 1

    groups.groups["g1"]["offsets"][0]["current_offset"] = 25
    await metrics.refresh()
    assert value(scrape(metrics), "kafka_consumergroup_lag", consumergroup="g1", topic="a", partition="0") == 0


async def test_group_metrics_without_topic_labels_sum_per_group() -> None:
    groups = FakeGroups({"g": {"members": [{}], "offsets": [offsets("a", 0, 1, 5), offsets("a", 1, 2, 4)]}})
    metrics = NodeMetrics(NODE, topic_labels=False)
    metrics.watch_groups(groups)
    await metrics.refresh()
    s = scrape(metrics)
    assert value(s, "kafka_consumergroup_lag", consumergroup="g") == 6
    assert value(s, "kafka_consumergroup_current_offset", consumergroup="g") == 3
