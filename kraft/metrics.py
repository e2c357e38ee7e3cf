"""The node's Prometheus metrics (design §10): every metric definition, named like Kafka's JMX
metrics in the jmx_exporter spelling (and kafka_exporter's for consumer groups), so existing
queries, dashboards and alerts carry over.

Two kinds:
- *pull*: collectors that read the node's state at scrape time (partition and leader counts,
  under-replicated / under-min-ISR / offline partitions, log sizes and offsets, controller and
  Raft state, consumer group lag), so they are never stale and cost nothing between scrapes.
- *push*: counters of events where Kafka counts them (messages and bytes in on the leader's
  append path, bytes out on fetch, failed produce/fetch, requests per API, Raft commit and
  election latency, ISR shrinks and expands from metadata changes).

`MetricsSink` is the push side with no-op methods: components hold `NULL_METRICS` by default, so
code paths without metrics work unchanged; `NodeMetrics` overrides them. Each node has its own
`CollectorRegistry` (never the global default), so several nodes in one process do not collide.
`metrics.topic.labels.enable=false` drops the topic and partition labels (large clusters).

Collectors run on the event loop (the scrape handler), like every writer of the state they read;
the consumer-group snapshot needs awaits and is refreshed by `refresh()` just before a scrape.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from kraft.broker.partition_state import PartitionStateReader, PartitionView
from kraft.metadata.delta import MetadataDelta
from kraft.metadata.image import MetadataImage
from kraft.metadata.records import NO_LEADER
from kraft.server.request_context import RequestContext
from kraft.server.request_metrics import request_name

log = logging.getLogger("kraft.metrics")

# Request and Raft latencies in ms (Kafka's unit), from sub-ms metadata calls to long polls.
LATENCY_BUCKETS_MS = (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
RAFT_STATES = ("leader", "candidate", "follower")
GROUP_REFRESH_TIMEOUT_S = 5.0
VIEW_SLICE = 256  # replica views a scrape's refresh takes per loop turn
# KIP-664: a transaction is late once open this much longer than transaction.max.timeout.ms (the
# coordinator's abort and its markers take a while; Kafka's ProducerStateManager constant)
LATE_TRANSACTION_BUFFER_MS = 5 * 60 * 1000
# Failures name topics from client input: ones this broker does not know share one label value,
# so bad requests cannot create series without bound.
UNKNOWN_TOPIC = "(unknown)"


class MetricsSink:
    """The push side of the metrics. Every method is a no-op here: the default of components
    built without metrics (`NULL_METRICS`); `NodeMetrics` counts."""

    def messages_in(self, topic: str, count: int, nbytes: int) -> None:
        """A produce request's batches appended on the leader (replication excluded)."""

    def fetched(self, results: Iterable[Any], replication: bool = False) -> None:
        """The answer of a fetch (results with `topic`, `records`, `error_code`): bytes out to
        consumers, or to followers when `replication`; failed partitions either way."""

    def replication_bytes_in(self, topic: str, nbytes: int) -> None:
        """Record bytes a follower appended from its leader."""

    def failed_produce(self, topic: str) -> None:
        """A produce to one partition failed."""

    def sequence_wait(self, topic: str) -> None:
        """An idempotent batch ahead of its producer's sequence waited for its predecessor."""

    def observe_request(self, ctx: RequestContext, error: str, seconds: float) -> None:
        """One request answered with `error` (a Kafka error name, NONE on success) after
        `seconds`, counted under its Kafka API (Produce, FetchConsumer, ...: `request_name`)."""

    def raft_commit(self, seconds: float) -> None:
        """A proposal to the metadata quorum committed after `seconds`."""

    def raft_state_changed(self, state: str) -> None:
        """This voter's Raft state is now `state` (Leader, Candidate or Follower)."""


NULL_METRICS = MetricsSink()


class _Guarded(Collector):
    """A pull collector whose failure costs its own metrics, never the whole scrape. `describe`
    is empty so registering never runs `collect` against a component that has not started."""

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        try:
            return list(self._collect())
        except Exception:
            log.exception("%s failed; its metrics are left out of this scrape", type(self).__name__)
            return []

    def _collect(self) -> Iterator[Metric]:
        raise NotImplementedError


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


class ReplicaManagerCollector(_Guarded):
    """kafka.server:type=ReplicaManager, kafka.log:type=Log and the broker's metadata offset,
    from the views of this broker's replicas (`PartitionStateReader.local_partitions`): a
    scrape's work is ∝ the local partitions, never the whole image (which gives only the
    metadata offset, the live brokers and, for a partition 0 led here, its topic's size).

    The replicas are the event loop's, so `refresh` (on the loop, before a scrape) takes their
    views `VIEW_SLICE` at a time with a loop turn between slices; the scrape then builds and
    encodes the families from those frozen views in a thread (at 50k local partitions with
    topic labels that is ~5 s of work, which on the loop stalled every request for as long).
    A collect without a refresh first (a direct registry read) reads the replicas itself."""

    def __init__(self, node_id: int, reader: PartitionStateReader,
                 image: Callable[[], MetadataImage], topic_labels: bool,
                 log_directories: Callable[[], list[tuple[str, bool]]] = lambda: [],
                 max_transaction_timeout_ms: int = 900_000,
                 wall_clock_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        """`log_directories()`: (path, online) of each log directory (kafka.log:type=LogManager);
        a transaction is late (KIP-664) once its producer's last batch timestamp is more than
        `max_transaction_timeout_ms` (transaction.max.timeout.ms) + LATE_TRANSACTION_BUFFER_MS
        before `wall_clock_ms()`."""
        self.node_id = node_id
        self.max_transaction_timeout_ms = max_transaction_timeout_ms
        self.wall_clock_ms = wall_clock_ms
        self.reader = reader
        self.image = image
        self.topic_labels = topic_labels
        self.log_directories = log_directories
        self._views: list[tuple[str, int, PartitionView]] | None = None  # taken by `refresh`

    async def refresh(self) -> None:
        views: list[tuple[str, int, PartitionView]] = []
        for item in self.reader.local_partitions():
            views.append(item)
            if len(views) % VIEW_SLICE == 0:
                await asyncio.sleep(0)
        self._views = views

    def _collect(self) -> Iterator[Metric]:
        views, self._views = self._views, None  # one scrape's views, never served twice
        image = self.image()
        prefix = "kafka_server_replicamanager_"
        counts = dict.fromkeys(("partitioncount", "leadercount", "underreplicatedpartitions",
                                "underminisrpartitioncount", "atminisrpartitioncount",
                                "offlinereplicacount", "partitionswithlatetransactionscount"), 0)
        late_before_ms = self.wall_clock_ms() - self.max_transaction_timeout_ms - LATE_TRANSACTION_BUFFER_MS
        max_lag = 0
        labels = ["topic", "partition"] if self.topic_labels else []
        size = GaugeMetricFamily("kafka_log_log_size", "Bytes of the partition's log.", labels=labels)
        segments = GaugeMetricFamily("kafka_log_log_numlogsegments", "Segments of the partition's log.",
                                     labels=labels)
        start = GaugeMetricFamily("kafka_log_log_logstartoffset", "Log start offset.", labels=labels)
        end = GaugeMetricFamily("kafka_log_log_logendoffset", "Log end offset.", labels=labels)
        under = GaugeMetricFamily("kafka_cluster_partition_underreplicated",
                                  "1 when this leader's partition has fewer in-sync replicas than "
                                  "replicas.", labels=labels)
        under_min = GaugeMetricFamily("kafka_cluster_partition_underminisr",
                                      "1 when this leader's partition has fewer in-sync replicas than "
                                      "min.insync.replicas.", labels=labels)
        at_min = GaugeMetricFamily("kafka_cluster_partition_atminisr",
                                   "1 when this leader's partition has exactly min.insync.replicas "
                                   "in-sync replicas.", labels=labels)
        replicas_count = GaugeMetricFamily("kafka_cluster_partition_replicascount",
                                           "Replicas of the partition (on its leader).", labels=labels)
        quarantined_doc = ("Corrupt regions of the partition's log that recovery or a read quarantined: "
                           "kept, never served (reads answer CORRUPT_MESSAGE).")
        quarantined = GaugeMetricFamily("kraft_log_quarantined_regions", quarantined_doc,
                                        labels=labels)
        lso_doc = ("High watermark minus last stable offset of a partition led here: records read_committed "
                   "readers wait for behind an open transaction.")
        lso_lag = GaugeMetricFamily("kraft_log_last_stable_offset_lag", lso_doc, labels=labels)
        total_size = total_segments = total_quarantined = total_lso_lag = 0
        dir_sizes: dict[str, int] = {}
        exporter = _ExporterGauges() if self.topic_labels else None
        for topic, index, view in self.reader.local_partitions() if views is None else views:
            if self.node_id not in view.replicas:
                continue
            counts["partitioncount"] += 1
            if view.offline:
                counts["offlinereplicacount"] += 1
            if view.has_log:
                dir_sizes[view.log_dir] = dir_sizes.get(view.log_dir, 0) + view.size_in_bytes
                total_size += view.size_in_bytes
                total_segments += view.segment_count
                total_quarantined += view.quarantined_count
                if self.topic_labels:
                    tp = [topic, str(index)]
                    size.add_metric(tp, view.size_in_bytes)
                    segments.add_metric(tp, view.segment_count)
                    start.add_metric(tp, view.log_start_offset)
                    end.add_metric(tp, view.log_end_offset)
                    quarantined.add_metric(tp, view.quarantined_count)
            if view.leader != self.node_id:
                continue
            counts["leadercount"] += 1
            if view.has_log:
                unstable = max(view.high_watermark - view.last_stable_offset, 0)
                total_lso_lag += unstable
                oldest = view.oldest_transaction_last_timestamp
                counts["partitionswithlatetransactionscount"] += oldest is not None and oldest < late_before_ms
                if self.topic_labels:
                    lso_lag.add_metric([topic, str(index)], unstable)
            isr = len(view.isr)
            lacking = isr < len(view.replicas)
            counts["underreplicatedpartitions"] += lacking
            counts["underminisrpartitioncount"] += isr < view.min_insync_replicas
            counts["atminisrpartitioncount"] += isr == view.min_insync_replicas
            if self.topic_labels:
                tp = [topic, str(index)]
                under.add_metric(tp, int(lacking))
                under_min.add_metric(tp, int(isr < view.min_insync_replicas))
                at_min.add_metric(tp, int(isr == view.min_insync_replicas))
                replicas_count.add_metric(tp, len(view.replicas))
            if exporter is not None:
                described = image.topic_by_name(topic) if index == 0 else None
                exporter.add(topic, index, view, None if described is None else len(described.partitions))
            max_lag = max(max_lag, view.max_follower_lag)
        docs = {
            "partitioncount": "Partitions with a replica on this broker.",
            "leadercount": "Partitions this broker leads.",
            "underreplicatedpartitions": "Partitions led here whose ISR is smaller than the replica set.",
            "underminisrpartitioncount": "Partitions led here whose ISR is below min.insync.replicas.",
            "atminisrpartitioncount": "Partitions led here whose ISR is exactly min.insync.replicas.",
            "offlinereplicacount": "Local replicas whose log could not be opened, could not record "
                                   "its role, or is on an offline log directory.",
            "partitionswithlatetransactionscount": "Partitions led here with a transaction open longer "
                                                   "than transaction.max.timeout.ms + 5 minutes (KIP-664: "
                                                   "a hanging transaction, see kraft transactions "
                                                   "find-hanging).",
        }
        for name, value in counts.items():
            yield _gauge(prefix + name, docs[name], value)
        yield from self._log_directories(dir_sizes)
        fetcher_lag = GaugeMetricFamily(
            "kafka_server_replicafetchermanager_maxlag",
            "Largest follower lag in messages (leader's log end minus follower's) over the "
            "partitions this broker leads.", labels=["clientid"])
        fetcher_lag.add_metric(["Replica"], max_lag)
        yield fetcher_lag
        yield _gauge("kafka_brokers", "Registered, unfenced brokers in this broker's metadata image "
                     "(kafka_exporter's name; every broker reports it: take the max).",
                     len(image.cluster.live_brokers()))
        if exporter is not None:
            yield from exporter.families()
        if self.topic_labels:
            yield from (size, segments, start, end, under, under_min, at_min, replicas_count, quarantined, lso_lag)
        else:
            yield _gauge("kafka_log_log_size", "Bytes of this broker's logs.", total_size)
            yield _gauge("kafka_log_log_numlogsegments", "Segments of this broker's logs.",
                         total_segments)
            yield _gauge("kraft_log_quarantined_regions", quarantined_doc, total_quarantined)
            yield _gauge("kraft_log_last_stable_offset_lag", lso_doc, total_lso_lag)
        yield _gauge("kafka_server_brokermetadatametrics_last_applied_record_offset",
                     "Offset of the last metadata record this broker applied.", image.offset)


    def _log_directories(self, sizes: dict[str, int]) -> Iterator[Metric]:
        """kafka.log:type=LogManager's OfflineLogDirectoryCount and LogDirectoryOffline, and the
        bytes of the logs each directory holds (kraft's: Kafka tells it through DescribeLogDirs)."""
        directories = self.log_directories()
        yield _gauge("kafka_log_logmanager_offlinelogdirectorycount", "Log directories offline on this "
                     "broker (an I/O error took them offline; they come back with a restart).",
                     sum(not online for _, online in directories))
        offline = GaugeMetricFamily("kafka_log_logmanager_logdirectoryoffline",
                                    "1 when the log directory is offline.", labels=["logdirectory"])
        size = GaugeMetricFamily("kraft_log_logmanager_logdirectorysize_bytes",
                                 "Bytes of the partition logs in the log directory.", labels=["logdirectory"])
        for path, online in directories:
            offline.add_metric([path], int(not online))
            size.add_metric([path], sizes.get(path, 0))
        yield offline
        yield size


class _ExporterGauges:
    """kafka_exporter's kafka_topic_* gauges, added by the partition's leader only, so a sum over
    the brokers counts each partition once (kafka_topic_partitions by the leader of partition 0)."""

    def __init__(self) -> None:
        tp = ["topic", "partition"]
        self.partitions = GaugeMetricFamily("kafka_topic_partitions", "Partitions of the topic "
                                            "(reported by the leader of partition 0).", labels=["topic"])
        self.current = GaugeMetricFamily("kafka_topic_partition_current_offset",
                                         "High watermark of the partition (on its leader).", labels=tp)
        self.oldest = GaugeMetricFamily("kafka_topic_partition_oldest_offset",
                                        "Log start offset of the partition (on its leader).", labels=tp)
        self.isr = GaugeMetricFamily("kafka_topic_partition_in_sync_replica",
                                     "In-sync replicas of the partition (on its leader).", labels=tp)
        self.leader = GaugeMetricFamily("kafka_topic_partition_leader",
                                        "Leader broker id of the partition (on its leader).", labels=tp)
        self.replicas = GaugeMetricFamily("kafka_topic_partition_replicas",
                                          "Replicas of the partition (on its leader).", labels=tp)
        self.under = GaugeMetricFamily("kafka_topic_partition_under_replicated_partition",
                                       "1 when the partition's ISR is smaller than its replica set "
                                       "(on its leader).", labels=tp)
        self.preferred = GaugeMetricFamily("kafka_topic_partition_leader_is_preferred",
                                           "1 when the partition's leader is its preferred replica, the "
                                           "first of its replicas (on its leader).", labels=tp)

    def add(self, topic: str, index: int, view: PartitionView, count: int | None) -> None:
        """A partition led here; `count`: its topic's partitions, for partition 0."""
        tp = [topic, str(index)]
        if count is not None:
            self.partitions.add_metric([topic], count)
        if view.has_log:
            self.current.add_metric(tp, view.high_watermark)
            self.oldest.add_metric(tp, view.log_start_offset)
        self.isr.add_metric(tp, len(view.isr))
        self.leader.add_metric(tp, view.leader)
        self.replicas.add_metric(tp, len(view.replicas))
        self.under.add_metric(tp, int(len(view.isr) < len(view.replicas)))
        self.preferred.add_metric(tp, int(view.leader == view.replicas[0]))

    def families(self) -> tuple[GaugeMetricFamily, ...]:
        return (self.partitions, self.current, self.oldest, self.isr, self.leader, self.replicas,
                self.under, self.preferred)


class ControllerCollector(_Guarded):
    """kafka.controller:type=KafkaController. The cluster-wide counts are reported by the active
    controller only (0 on standbys), so a sum over the cluster is the truth, as in Kafka."""

    def __init__(self, controller: Any, quorum: Any) -> None:
        self.controller = controller
        self.quorum = quorum

    def _collect(self) -> Iterator[Metric]:
        image: MetadataImage = self.controller.image
        active = bool(self.controller.is_active)
        prefix = "kafka_controller_kafkacontroller_"
        yield _gauge(prefix + "activecontrollercount",
                     "1 on the active controller, 0 elsewhere: summed over the cluster it is 1.",
                     int(active))
        values = dict.fromkeys(("offlinepartitionscount", "globaltopiccount", "globalpartitioncount",
                                "activebrokercount", "fencedbrokercount",
                                "preferredreplicaimbalancecount"), 0)
        if active:
            values.update(_cluster_counts(image))
        docs = {
            "offlinepartitionscount": "Partitions without a leader",
            "globaltopiccount": "Topics in the cluster",
            "globalpartitioncount": "Partitions in the cluster",
            "activebrokercount": "Registered, unfenced brokers",
            "fencedbrokercount": "Registered, fenced brokers",
            "preferredreplicaimbalancecount": "Partitions not led by their preferred replica",
        }
        for name, value in values.items():
            yield _gauge(prefix + name, docs[name] + " (on the active controller; 0 elsewhere).", value)
        yield _gauge(prefix + "lastappliedrecordoffset",
                     "Offset of the last metadata record applied to this controller's image.",
                     image.offset)
        yield _gauge(prefix + "lastcommittedrecordoffset",
                     "Offset of the last committed metadata record this controller knows.",
                     self.quorum.metadata_offset)
        info = GaugeMetricFamily("kafka_broker_info", "1 per registered, unfenced broker, with its id "
                                 "and client address (kafka_exporter's name; on the active controller "
                                 "only).", labels=["id", "address"])
        if active:
            for broker in image.cluster.live_brokers():
                endpoint = broker.endpoint()
                address = "" if endpoint is None else f"{endpoint.host}:{endpoint.port}"
                info.add_metric([str(broker.broker_id), address], 1)
        yield info


def _cluster_counts(image: MetadataImage) -> dict[str, int]:
    partitions = offline = imbalance = 0
    for topic in image.topics.by_name.values():
        for reg in topic.partitions.values():
            partitions += 1
            offline += reg.leader == NO_LEADER
            imbalance += reg.leader != NO_LEADER and reg.leader != reg.preferred_leader
    fenced = sum(1 for b in image.cluster.brokers.values() if b.fenced)
    return {
        "offlinepartitionscount": offline,
        "globaltopiccount": len(image.topics.by_name),
        "globalpartitioncount": partitions,
        "activebrokercount": len(image.cluster.brokers) - fenced,
        "fencedbrokercount": fenced,
        "preferredreplicaimbalancecount": imbalance,
    }


@dataclass(frozen=True)
class RaftView:
    """What the Raft gauges show, from `RaftQuorum.status()` or a one-voter `LocalQuorum`."""

    state: str  # leader, candidate or follower
    leader_id: int  # -1 when unknown
    epoch: int
    high_watermark: int
    log_end_offset: int
    unknown_voter_connections: int
    voted_id: int = -1  # Kafka's current-vote: -1 unless leading, a candidate, or voted with no leader known


def raft_view(quorum: Any, node_id: int) -> RaftView:
    """The Raft gauges of `quorum` (a started one: `status()` needs the Raft thread)."""
    status = getattr(quorum, "status", None)
    if status is None:  # the single voter's local log: it leads whenever it runs
        leader = quorum.leader()
        claim = quorum.active_controller()
        offset = quorum.metadata_offset
        return RaftView("leader" if leader == node_id else "follower",
                        -1 if leader is None else leader, claim[1] if claim else 0, offset, offset, 0,
                        node_id if leader == node_id else -1)
    s = status()
    own = next((v for v in s.voters if v.node_id == node_id), None)
    state = s.raft_state.lower()
    if state in ("leader", "candidate"):  # both voted for themselves
        voted = node_id
    else:  # Kafka's follower of a known leader shows no vote (-1), a voted one its vote
        voted = -1 if s.leader_id is not None or s.voted_id is None else s.voted_id
    return RaftView(
        state, -1 if s.leader_id is None else s.leader_id, s.leader_epoch,
        s.high_watermark, own.log_end_offset if own is not None else s.last_applied_index,
        sum(1 for v in s.voters if v.node_id != node_id and not v.connected), voted,
    )


# Kafka's sampled statistics: metrics.sample.window.ms (30 s) times metrics.num.samples (2).
SAMPLE_WINDOW_S = 30.0
SAMPLE_COUNT = 2


class SampledStat:
    """Kafka's windowed Avg, Max and Rate of one measurement (raft-metrics' commit-latency-avg,
    append-records-rate, ...): SAMPLE_COUNT samples of SAMPLE_WINDOW_S each, the oldest dropped as
    time moves on, so the figures cover the last 30 to 60 s. Avg and Max are NaN without a
    recording in that time, as Kafka's are; Rate is the sum over the time the samples cover, at
    least every window but the current one, as Kafka's Rate divides. Bounded by construction:
    SAMPLE_COUNT samples, whatever the number of recordings. `now` is a monotonic time in s."""

    def __init__(self, window_s: float = SAMPLE_WINDOW_S, count: int = SAMPLE_COUNT) -> None:
        assert window_s > 0 and count >= 2
        self.window_s = window_s
        self.count = count
        self._samples: deque[_Sample] = deque(maxlen=count)

    def record(self, value: float, now: float) -> None:
        if not self._samples or now >= self._samples[-1].start + self.window_s:
            self._samples.append(_Sample(now))
        sample = self._samples[-1]
        sample.events += 1
        sample.total += value
        sample.max = max(sample.max, value)

    def _live(self, now: float) -> list[_Sample]:
        return [s for s in self._samples if now - s.start < self.window_s * self.count]

    def avg(self, now: float) -> float:
        live = self._live(now)
        events = sum(s.events for s in live)
        return sum(s.total for s in live) / events if events else math.nan

    def max(self, now: float) -> float:
        return max((s.max for s in self._live(now)), default=math.nan)

    def rate(self, now: float) -> float:
        """Per second (Kafka's Rate with its default unit)."""
        live = self._live(now)
        elapsed = now - live[0].start if live else 0.0
        full_windows = int(elapsed // self.window_s)
        if full_windows < self.count - 1:  # a young or quiet stat: Kafka pads to count - 1 windows
            elapsed += (self.count - 1 - full_windows) * self.window_s
        return sum(s.total for s in live) / elapsed


@dataclass
class _Sample:
    start: float
    events: int = 0
    total: float = 0.0
    max: float = -math.inf


class RaftStats:
    """The sampled raft-metrics (commit and election latency in ms, records appended and fetched),
    recorded on the event loop by `NodeMetrics`' push side, read by `RaftCollector`."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.commit_latency_ms = SampledStat()
        self.election_latency_ms = SampledStat()
        self.append_records = SampledStat()
        self.fetch_records = SampledStat()


class RaftCollector(_Guarded):
    """kafka.server:type=raft-metrics gauges and the raft-channel-metrics counters (the latency
    histograms and record counters are pushed)."""

    def __init__(self, node_id: int, quorum: Any, stats: RaftStats | None = None) -> None:
        self.node_id = node_id
        self.quorum = quorum
        self.stats = stats or RaftStats()

    def _collect(self) -> Iterator[Metric]:
        view = raft_view(self.quorum, self.node_id)
        prefix = "kafka_server_raftmetrics_"
        state = GaugeMetricFamily(prefix + "current_state",
                                  "1 for this voter's current Raft state.", labels=["state"])
        for name in RAFT_STATES:
            state.add_metric([name], int(view.state == name))
        yield state
        yield _gauge(prefix + "current_leader", "Node id of the Raft leader (-1: unknown).",
                     view.leader_id)
        yield _gauge(prefix + "current_vote", "The voter this one voted for in the current epoch: "
                     "itself when leading or a candidate, -1 once a leader is known or with no vote.",
                     view.voted_id)
        yield _gauge(prefix + "current_epoch", "The Raft epoch (term).", view.epoch)
        yield _gauge(prefix + "high_watermark", "The Raft commit index.", view.high_watermark)
        yield _gauge(prefix + "log_end_offset", "This voter's Raft log end.", view.log_end_offset)
        yield _gauge(prefix + "number_unknown_voter_connections",
                     "Other voters this one is not connected to.", view.unknown_voter_connections)
        yield from self._sampled(prefix)
        yield from self._channel()

    def _sampled(self, prefix: str) -> Iterator[Metric]:
        stats, now = self.stats, self.stats.clock()
        window = f"over the last {SAMPLE_WINDOW_S * SAMPLE_COUNT:g} s"
        for name, stat, what in (("commit_latency", stats.commit_latency_ms,
                                  "from proposing metadata records to their commit, ms"),
                                 ("election_latency", stats.election_latency_ms,
                                  "spent as a candidate before a leader was known, ms")):
            yield _gauge(f"{prefix}{name}_avg", f"Average time {what}, {window} (NaN: none).",
                         stat.avg(now))
            yield _gauge(f"{prefix}{name}_max", f"Longest time {what}, {window} (NaN: none).",
                         stat.max(now))
        yield _gauge(prefix + "append_records_rate", f"Metadata records committed per second while "
                     f"this voter led, {window}.", stats.append_records.rate(now))
        yield _gauge(prefix + "fetch_records_rate", f"Metadata records committed per second while "
                     f"this voter followed, {window}.", stats.fetch_records.rate(now))

    def _channel(self) -> Iterator[Metric]:
        """Kafka's raft-channel-metrics: the Raft transport's traffic (pysyncobj's TCP links to the
        other voters; 0 for a single voter, which has none)."""
        channel = getattr(self.quorum, "channel", None)
        prefix = "kafka_server_raftchannelmetrics_"
        for name, attribute, doc in (
                ("incoming_byte", "incoming_bytes", "Bytes received from the other voters."),
                ("outgoing_byte", "outgoing_bytes", "Bytes sent to the other voters."),
                ("request", "sent", "Raft messages sent to the other voters."),
                ("response", "received", "Raft messages received from the other voters.")):
            yield CounterMetricFamily(prefix + name, doc,
                                      value=0 if channel is None else getattr(channel, attribute))


class LinuxIoCollector(_Guarded):
    """kafka.server:type=KafkaServer,name=linux-disk-{read,write}-bytes: the bytes this process
    made the block layer read and write, from /proc/self/io, as Kafka's LinuxIoMetricsCollector
    reads them (nothing where the file is missing: not Linux, or no access)."""

    def __init__(self, path: Path = Path("/proc/self/io")) -> None:
        self.path = path

    def _collect(self) -> Iterator[Metric]:
        try:
            text = self.path.read_text()
        except OSError:
            return
        fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
        prefix = "kafka_server_kafkaserver_linux_disk_"
        for name, doc in (("read_bytes", "Bytes this process read from disk (not the page cache)."),
                          ("write_bytes", "Bytes this process caused to be written to disk.")):
            if name in fields:
                yield _gauge(prefix + name, doc, int(fields[name]))


class ConnectionCountCollector(_Guarded):
    """kafka.server:type=socket-server-metrics,name=connection-count: the client listener's open
    connections. One event loop serves them all, so `networkProcessor` is always 0."""

    def __init__(self, listener: str, connections: Callable[[], int]) -> None:
        self.listener = listener
        self.connections = connections

    def _collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily("kafka_server_socket_server_metrics_connection_count",
                                   "Open connections of the client listener.",
                                   labels=["listener", "networkProcessor"])
        family.add_metric([self.listener, "0"], self.connections())
        yield family


@dataclass(frozen=True)
class GroupPartitionLag:
    group: str
    topic: str
    partition: int
    current_offset: int
    lag: int | None  # None when no local replica knows the partition's high watermark


@dataclass(frozen=True)
class GroupsSnapshot:
    members: dict[str, int]
    partitions: tuple[GroupPartitionLag, ...]


class GroupCollector(_Guarded):
    """kafka_exporter's consumer group metrics for the groups this broker coordinates, from the
    snapshot `refresh` takes through the coordinator's public API before each scrape."""

    def __init__(self, groups: Any, high_watermark: Callable[[str, int], int | None],
                 topic_labels: bool) -> None:
        self.groups = groups
        self.high_watermark = high_watermark
        self.topic_labels = topic_labels
        self.snapshot = GroupsSnapshot({}, ())

    async def refresh(self) -> None:
        members: dict[str, int] = {}
        partitions: list[GroupPartitionLag] = []
        for listed in (await self.groups.list_groups()).groups:
            group_id = listed.group_id
            try:
                described = await self.groups.describe_group(group_id)
            except Exception:  # moved or deleted since the listing: not ours to report
                continue
            members[group_id] = len(described.members)
            for o in described.offsets:
                if o.current_offset is None:
                    continue
                leo = o.log_end_offset
                if leo is None:
                    leo = self.high_watermark(o.topic, o.partition)
                lag = None if leo is None else max(0, leo - o.current_offset)
                partitions.append(GroupPartitionLag(group_id, o.topic, o.partition, o.current_offset, lag))
        self.snapshot = GroupsSnapshot(members, tuple(partitions))

    def _collect(self) -> Iterator[Metric]:
        snap = self.snapshot
        member_family = GaugeMetricFamily("kafka_consumergroup_members", "Members of the group.",
                                          labels=["consumergroup"])
        for group_id, count in sorted(snap.members.items()):
            member_family.add_metric([group_id], count)
        yield member_family
        labels = ["consumergroup", "topic", "partition"] if self.topic_labels else ["consumergroup"]
        current = GaugeMetricFamily("kafka_consumergroup_current_offset",
                                    "The group's committed offset.", labels=labels)
        lag = GaugeMetricFamily("kafka_consumergroup_lag",
                                "High watermark minus the group's committed offset.", labels=labels)
        if self.topic_labels:
            for p in snap.partitions:
                key = [p.group, p.topic, str(p.partition)]
                current.add_metric(key, p.current_offset)
                if p.lag is not None:
                    lag.add_metric(key, p.lag)
        else:  # one series per group: the sums over its partitions
            for group_id in sorted({p.group for p in snap.partitions}):
                mine = [p for p in snap.partitions if p.group == group_id]
                current.add_metric([group_id], sum(p.current_offset for p in mine))
                lag.add_metric([group_id], sum(p.lag or 0 for p in mine))
        yield current
        yield lag


TXN_STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort")


class TransactionCoordinatorCollector(_Guarded):
    """kafka.server:type=transaction-coordinator-metrics (partition-load-time-max/avg, ms, sampled
    as Kafka's), and kraft's own: the transactional ids coordinated here by state, the markers
    written and the transactions completed, by result (COMMIT/ABORT: rate() gives the commit and
    abort rates)."""

    def __init__(self, coordinator: Any, clock: Callable[[], float] = time.monotonic) -> None:
        self.coordinator = coordinator
        self.clock = clock

    def _collect(self) -> Iterator[Metric]:
        stats, now = self.coordinator.stats, self.clock()
        prefix = "kafka_server_transaction_coordinator_metrics_partition_load_time_"
        yield _gauge(prefix + "max", "Longest load of a __transaction_state partition in the last 30 to 60 s, "
                     "ms (NaN: none).", stats.load_time_ms.max(now))
        yield _gauge(prefix + "avg", "Average load of a __transaction_state partition in the last 30 to 60 s, "
                     "ms (NaN: none).", stats.load_time_ms.avg(now))
        states = GaugeMetricFamily("kraft_transaction_coordinator_transactional_ids",
                                   "Transactional ids coordinated here, by state.", labels=["state"])
        counts = dict.fromkeys(TXN_STATES, 0)
        for described in self.coordinator.list():
            counts[described.state] = counts.get(described.state, 0) + 1
        for state, count in counts.items():
            states.add_metric([state], count)
        yield states
        for name, doc, values in (
                ("kraft_transaction_coordinator_markers_written",
                 "Transaction markers the coordinator had written to partitions, by result.", stats.markers),
                ("kraft_transaction_coordinator_transactions_completed",
                 "Transactions the coordinator completed (CompleteCommit/CompleteAbort logged), by result.",
                 stats.completed)):
            family = CounterMetricFamily(name, doc, labels=["result"])
            for result, count in values.items():
                family.add_metric([result], count)
            yield family


class IsrChangeCounter:
    """Counts ISR shrinks and expands of the partitions this broker leads (before and after the
    change), Kafka's IsrShrinksPerSec / IsrExpandsPerSec, from each metadata delta: work ∝ the
    partitions the delta changed."""

    def __init__(self, node_id: int, shrinks: Counter, expands: Counter) -> None:
        self.node_id = node_id
        self.shrinks = shrinks
        self.expands = expands

    def on_delta(self, delta: MetadataDelta) -> None:
        for _name, _index, old, reg in delta.changed_partitions():
            if old is None or old is reg or not reg.leader == old.leader == self.node_id:
                continue
            if set(reg.isr) < set(old.isr):
                self.shrinks.inc()
            elif set(reg.isr) > set(old.isr):
                self.expands.inc()


class UncleanElectionCounter:
    """Kafka's UncleanLeaderElectionsPerSec, from each metadata delta: a partition whose new
    leader is this broker and was not in the ISR before (only an unclean election chooses such a
    leader), so every election is counted once, by its new leader. Work ∝ the delta."""

    def __init__(self, node_id: int, elections: Counter) -> None:
        self.node_id = node_id
        self.elections = elections

    def on_delta(self, delta: MetadataDelta) -> None:
        for _name, _index, old, reg in delta.changed_partitions():
            if (old is not None and old is not reg and reg.leader == self.node_id
                    and old.leader != reg.leader and reg.leader not in old.isr):
                self.elections.inc()


LOOP_LAG_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
LOOP_LAG_PROBE_S = 0.05


async def probe_event_loop_lag(histogram: Histogram, interval_s: float = LOOP_LAG_PROBE_S) -> None:
    """Forever: sleep `interval_s` and observe how late the loop woke us (the time a ready
    callback waits behind whatever holds the loop: a stall shows up as one large sample)."""
    while True:
        started = time.monotonic()
        await asyncio.sleep(interval_s)
        histogram.observe(max(0.0, time.monotonic() - started - interval_s))


class NodeMetrics(MetricsSink):
    """All metrics of one node, in its own registry. `watch_*` register the pull collectors of a
    component and make this the component's push sink (its `metrics` attribute, when it has one)."""

    def __init__(self, node_id: int, *, topic_labels: bool = True) -> None:
        self.node_id = node_id
        self.topic_labels = topic_labels
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self.registry.register(LinuxIoCollector())
        self.raft_stats = RaftStats()
        self._refreshers: list[Callable[[], Any]] = []
        self._replica_manager: Any = None
        self._candidate_since: float | None = None
        # labelled children, bound once: prometheus_client's `labels` (a lock, a tuple, a dict
        # look-up) cost each produce request several times over; a topic's go with the topic
        self._topic_children: dict[tuple[Counter, str], Counter] = {}
        self._request_children: dict[tuple[str, str], tuple[Counter, Counter, Histogram]] = {}

        by_topic = ("topic",) if topic_labels else ()

        def counter(name: str, doc: str, labels: tuple[str, ...] = ()) -> Counter:
            return Counter(name, doc, labels, registry=self.registry)

        topic_metrics = "kafka_server_brokertopicmetrics_"
        self._messages_in = counter(topic_metrics + "messagesin",
                                    "Messages appended by produce requests on the leader.", by_topic)
        self._bytes_in = counter(topic_metrics + "bytesin",
                                 "Record bytes appended by produce requests on the leader.", by_topic)
        self._bytes_out = counter(topic_metrics + "bytesout", "Record bytes sent to consumers.",
                                  by_topic)
        self._replication_bytes_in = counter(topic_metrics + "replicationbytesin",
                                             "Record bytes fetched from leaders.", by_topic)
        self._replication_bytes_out = counter(topic_metrics + "replicationbytesout",
                                              "Record bytes sent to followers.", by_topic)
        self._failed_produce = counter(topic_metrics + "failedproducerequests",
                                       "Failed produce requests (per partition).", by_topic)
        self._failed_fetch = counter(topic_metrics + "failedfetchrequests",
                                     "Failed fetch requests (per partition).", by_topic)
        self._sequence_waits = counter("kraft_produce_sequence_waits",
                                       "Idempotent batches that arrived ahead of their producer's sequence and "
                                       "waited for their predecessor.", by_topic)
        self._total_produce = counter(topic_metrics + "totalproducerequests",
                                      "Produce requests (per partition), failed ones included.", by_topic)
        self._total_fetch = counter(topic_metrics + "totalfetchrequests",
                                    "Fetch requests of consumers and followers (per partition), failed "
                                    "ones included.", by_topic)
        self._isr_shrinks = counter("kafka_server_replicamanager_isrshrinks",
                                    "ISR shrinks of partitions led here.")
        self._isr_expands = counter("kafka_server_replicamanager_isrexpands",
                                    "ISR expands of partitions led here.")
        self._requests = counter("kafka_network_requestmetrics_requests",
                                 "Requests per Kafka API.", ("request",))
        self._errors = counter("kafka_network_requestmetrics_errors",
                               "Answers per Kafka API and error name (NONE: success).",
                               ("request", "error"))
        self._total_time = Histogram("kafka_network_requestmetrics_totaltimems",
                                     "Total time of a request in ms.", ("request",),
                                     buckets=LATENCY_BUCKETS_MS, registry=self.registry)
        raft = "kafka_server_raftmetrics_"
        self._commit_latency = Histogram(raft + "commit_latency_ms",
                                         "Time from proposing to the metadata quorum to commit, ms.",
                                         buckets=LATENCY_BUCKETS_MS, registry=self.registry)
        self._election_latency = Histogram(raft + "election_latency_ms",
                                           "Time this voter spent as a candidate before a leader "
                                           "was known, ms.",
                                           buckets=LATENCY_BUCKETS_MS, registry=self.registry)
        self._append_records = counter(raft + "append_records",
                                       "Metadata records committed while this voter led.")
        self._fetch_records = counter(raft + "fetch_records",
                                      "Metadata records committed while this voter followed.")
        self._loop_lag = Histogram("kraft_event_loop_lag_seconds",
                                   f"How late the event loop runs a callback due now (a probe "
                                   f"every {LOOP_LAG_PROBE_S * 1000:g} ms), seconds.",
                                   buckets=LOOP_LAG_BUCKETS_S, registry=self.registry)
        self._isr_changes = IsrChangeCounter(node_id, self._isr_shrinks, self._isr_expands)
        self._unclean = UncleanElectionCounter(node_id, counter(
            "kafka_controller_controllerstats_uncleanleaderelections",
            "Unclean leader elections: counted by the new leader's broker (a sum over the nodes is "
            "the cluster's)."))
        # Kafka's BrokerTopicMetrics exist at 0 for every topic: created with the topic, removed
        # with it (on_delta), so rate() and the dashboards show 0 rather than no data.
        self._per_topic = (self._messages_in, self._bytes_in, self._bytes_out,
                           self._replication_bytes_in, self._replication_bytes_out,
                           self._failed_produce, self._failed_fetch, self._total_produce,
                           self._total_fetch, self._sequence_waits)

    def _topic(self, metric: Counter, topic: str) -> Counter:
        if not self.topic_labels:
            return metric
        child = self._topic_children.get((metric, topic))
        if child is None:
            child = self._topic_children[(metric, topic)] = metric.labels(topic)
        return child

    def _failed(self, metric: Counter, topic: str) -> None:
        rm = self._replica_manager
        known = rm is not None and rm.image.topic_by_name(topic) is not None
        self._topic(metric, topic if known else UNKNOWN_TOPIC).inc()

    # -- wiring -------------------------------------------------------------------------------

    def watch_connections(self, listener: str, connections: Callable[[], int]) -> None:
        self.registry.register(ConnectionCountCollector(listener, connections))

    def watch_broker(self, replica_manager: Any, max_transaction_timeout_ms: int = 900_000) -> None:
        """Replica manager and log gauges (ISR change counts come with `on_delta`);
        `max_transaction_timeout_ms` is transaction.max.timeout.ms (late transactions, KIP-664)."""
        self._replica_manager = replica_manager
        collector = ReplicaManagerCollector(self.node_id, replica_manager, lambda: replica_manager.image,
                                            self.topic_labels, replica_manager.log_directories,
                                            max_transaction_timeout_ms)
        self.registry.register(collector)
        self._refreshers.append(collector.refresh)
        _become_sink(replica_manager, self)

    def on_delta(self, delta: MetadataDelta) -> None:
        """The broker metadata publisher's last step: metrics that count metadata changes."""
        self._isr_changes.on_delta(delta)
        self._unclean.on_delta(delta)
        if self.topic_labels:
            self._topic_series(delta)

    def _topic_series(self, delta: MetadataDelta) -> None:
        """The per-topic counters of topics the delta removed go, those of topics it created (or
        gave partitions) appear at 0: work ∝ the delta."""
        created = {name for name, _index, old, _reg in delta.changed_partitions() if old is None}
        for topic in delta.deleted_topics.values():  # a re-created name starts again at 0
            for metric in self._per_topic:
                self._topic_children.pop((metric, topic.name), None)
                try:
                    metric.remove(topic.name)
                except KeyError:
                    pass
        for name in created:
            for metric in self._per_topic:
                metric.labels(name)

    def start_loop_probe(self) -> asyncio.Task[None]:
        """`kraft_event_loop_lag_seconds` on the running loop until the task is cancelled."""
        return asyncio.get_running_loop().create_task(probe_event_loop_lag(self._loop_lag))

    def watch_controller(self, controller: Any, quorum: Any) -> None:
        """Controller and Raft gauges; counts committed metadata records."""
        self.registry.register(ControllerCollector(controller, quorum))
        self.registry.register(RaftCollector(self.node_id, quorum, self.raft_stats))
        quorum.on_commit(lambda offset, record: self._count_metadata_record(quorum))
        _become_sink(quorum, self)

    def watch_groups(self, groups: Any) -> None:
        """Consumer group offsets, lag and members of the groups coordinated here."""
        collector = GroupCollector(groups, self._local_high_watermark, self.topic_labels)
        self.registry.register(collector)
        self._refreshers.append(collector.refresh)

    def watch_transactions(self, coordinator: Any) -> None:
        """The transaction coordinator's gauges and counters (its `stats`, its ids' states)."""
        self.registry.register(TransactionCoordinatorCollector(coordinator))

    async def refresh(self) -> None:
        """Updates the snapshots that need awaits; called by the scrape handler. A slow source
        keeps its previous snapshot rather than stalling the scrape."""
        for refresh in self._refreshers:
            try:
                await asyncio.wait_for(refresh(), GROUP_REFRESH_TIMEOUT_S)
            except Exception:
                log.exception("metrics refresh failed; serving the previous snapshot")

    def _local_high_watermark(self, topic: str, partition: int) -> int | None:
        reader: PartitionStateReader | None = self._replica_manager
        view = None if reader is None else reader.partition_state(topic, partition)
        return view.high_watermark if view is not None and view.has_log else None

    def _count_metadata_record(self, quorum: Any) -> None:
        leads = quorum.leader() == self.node_id
        (self._append_records if leads else self._fetch_records).inc()
        stats = self.raft_stats
        (stats.append_records if leads else stats.fetch_records).record(1, stats.clock())

    # -- push ---------------------------------------------------------------------------------

    def messages_in(self, topic: str, count: int, nbytes: int) -> None:
        self._topic(self._total_produce, topic).inc()
        self._topic(self._messages_in, topic).inc(count)
        self._topic(self._bytes_in, topic).inc(nbytes)

    def fetched(self, results: Iterable[Any], replication: bool = False) -> None:
        bytes_out = self._replication_bytes_out if replication else self._bytes_out
        for result in results:
            if result.error_code:
                self._failed(self._total_fetch, result.topic)
                self._failed(self._failed_fetch, result.topic)
                continue
            self._topic(self._total_fetch, result.topic).inc()
            if result.records:
                self._topic(bytes_out, result.topic).inc(len(result.records))

    def replication_bytes_in(self, topic: str, nbytes: int) -> None:
        self._topic(self._replication_bytes_in, topic).inc(nbytes)

    def failed_produce(self, topic: str) -> None:
        self._failed(self._total_produce, topic)
        self._failed(self._failed_produce, topic)

    def sequence_wait(self, topic: str) -> None:
        self._topic(self._sequence_waits, topic).inc()

    def observe_request(self, ctx: RequestContext, error: str, seconds: float) -> None:
        key = (request_name(ctx), error)  # both bounded: Kafka's API names, Kafka's error names
        children = self._request_children.get(key)
        if children is None:
            children = self._request_children[key] = (
                self._requests.labels(key[0]), self._errors.labels(*key), self._total_time.labels(key[0]))
        requests, errors, total_time = children
        requests.inc()
        errors.inc()
        total_time.observe(seconds * 1000)

    def raft_commit(self, seconds: float) -> None:
        self._commit_latency.observe(seconds * 1000)
        self.raft_stats.commit_latency_ms.record(seconds * 1000, self.raft_stats.clock())

    def raft_state_changed(self, state: str, now: float | None = None) -> None:
        """Election latency (Kafka's): from becoming a candidate to leading or following."""
        now = self.raft_stats.clock() if now is None else now
        state = state.lower()
        if state == "candidate":
            if self._candidate_since is None:  # a split vote starts another round: same election
                self._candidate_since = now
        elif self._candidate_since is not None:
            elapsed_ms = (now - self._candidate_since) * 1000
            self._election_latency.observe(elapsed_ms)
            self.raft_stats.election_latency_ms.record(elapsed_ms, now)
            self._candidate_since = None


def _become_sink(component: Any, metrics: NodeMetrics) -> None:
    """Components that push declare `metrics = NULL_METRICS`; others keep no attribute."""
    if isinstance(getattr(component, "metrics", None), MetricsSink):
        component.metrics = metrics
