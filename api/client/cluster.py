"""The client's view of the cluster: an immutable snapshot of `GET /v1/metadata` and a cache that
refreshes it on demand (after NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, network errors)
or when older than `metadata_max_age_ms`. Readers take `cache.snapshot` without locking.

A metadata request has a shorter timeout than a produce request, and a server that does not answer
is left for the next one (`Transport.request`): a refresh must find the new leaders while the old
leader is paused (accepts connections, never answers), or every retry waits for it to wake."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterable

from kraft.api.client.transport import Address, Transport
from kraft.api.client.types import BrokerInfo, PartitionInfo, TopicPartition, partition_info_from_wire
from kraft.api.errors import KraftError

METADATA_REQUEST_TIMEOUT_MS = 5000  # at most; never more than half the client's request timeout

# Errors after which the client's idea of leaders or topics may be stale.
METADATA_ERRORS = frozenset(
    {
        "NOT_LEADER_OR_FOLLOWER",
        "UNKNOWN_TOPIC_OR_PARTITION",
        "LEADER_NOT_AVAILABLE",
        "FENCED_LEADER_EPOCH",
        "UNKNOWN_LEADER_EPOCH",
        "NETWORK_EXCEPTION",
        "REQUEST_TIMED_OUT",
        "BROKER_NOT_AVAILABLE",
        "KAFKA_STORAGE_ERROR",
    }
)


@dataclass(frozen=True)
class ClusterSnapshot:
    cluster_id: str | None = None
    controller_id: int | None = None
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    topics: dict[str, tuple[PartitionInfo, ...]] = field(default_factory=dict)
    topic_ids: dict[str, str] = field(default_factory=dict)
    # Why a topic the client asked for is absent (the broker's topic_errors).
    topic_errors: dict[str, KraftError] = field(default_factory=dict)
    internal_topics: frozenset[str] = frozenset()

    @classmethod
    def from_wire(cls, body: dict[str, Any], only: Iterable[str] | None = None) -> ClusterSnapshot:
        wanted = None if only is None else set(only)
        brokers = {
            int(b["node_id"]): BrokerInfo(int(b["node_id"]), b["host"], int(b["port"]), b.get("rack"))
            for b in body.get("brokers", ())
        }
        topics: dict[str, tuple[PartitionInfo, ...]] = {}
        topic_ids: dict[str, str] = {}
        internal: set[str] = set()
        for t in body.get("topics", ()):
            if wanted is not None and t["name"] not in wanted:
                continue
            parts = sorted((partition_info_from_wire(p) for p in t.get("partitions", ())), key=lambda p: p.partition)
            topics[t["name"]] = tuple(parts)
            topic_ids[t["name"]] = str(t.get("topic_id", ""))
            if t.get("internal"):
                internal.add(t["name"])
        controller = body.get("controller_id")
        errors = {}
        for e in body.get("topic_errors", ()):
            fields = {k: v for k, v in e.items() if k != "name"}
            errors[e["name"]] = KraftError.from_dict(fields)
        return cls(
            cluster_id=body.get("cluster_id"),
            controller_id=None if controller is None or controller < 0 else int(controller),
            brokers=brokers,
            topics=topics,
            topic_ids=topic_ids,
            topic_errors=errors,
            internal_topics=frozenset(internal),
        )

    def partition_count(self, topic: str) -> int | None:
        parts = self.topics.get(topic)
        return len(parts) if parts else None

    def partitions_for(self, topic: str) -> list[TopicPartition]:
        return [TopicPartition(topic, p.partition) for p in self.topics.get(topic, ())]

    def leader_id(self, tp: TopicPartition) -> int | None:
        parts = self.topics.get(tp.topic)
        if parts is None or not 0 <= tp.partition < len(parts):
            return None
        leader = parts[tp.partition].leader
        return leader if leader in self.brokers else None

    def broker_address(self, node_id: int) -> Address | None:
        b = self.brokers.get(node_id)
        return None if b is None else (b.host, b.port)


class MetadataCache:
    """Refreshes the snapshot for the topics the client uses; one refresh at a time.

    With `allow_auto_create` the requests ask the broker to create missing topics (Kafka's
    allow_auto_topic_creation), as Kafka's producer does; the broker decides
    (auto.create.topics.enable) and says why when it does not."""

    def __init__(
        self, transport: Transport, retry_backoff_ms: int = 100, metadata_max_age_ms: int = 300_000,
        metadata_request_timeout_ms: int | None = None, allow_auto_create: bool = False,
    ) -> None:
        self._transport = transport
        self._allow_auto_create = allow_auto_create
        if metadata_request_timeout_ms is None:
            metadata_request_timeout_ms = min(METADATA_REQUEST_TIMEOUT_MS, int(transport.request_timeout_s * 500))
        self._timeout_s = max(metadata_request_timeout_ms, 1) / 1000
        self._retry_backoff_s = retry_backoff_ms / 1000
        self._max_age_s = metadata_max_age_ms / 1000
        self._topics: set[str] = set()
        self._lock = threading.Lock()
        self._update_requested = False
        self._last_refresh = float("-inf")
        self.snapshot = ClusterSnapshot()

    def add_topics(self, topics: Iterable[str]) -> None:
        new = set(topics) - self._topics
        if new:
            self._topics |= new
            self._update_requested = True

    def request_update(self) -> None:
        self._update_requested = True

    def maybe_refresh(self) -> None:
        """Refreshes when asked to (at most once per retry backoff) or when the snapshot is old.
        Errors are swallowed: the caller retries on its next round."""
        now = time.monotonic()
        due = self._update_requested and now - self._last_refresh >= self._retry_backoff_s
        if due or now - self._last_refresh >= self._max_age_s:
            try:
                self.refresh()
            except KraftError:
                self._last_refresh = time.monotonic()

    def refresh(self, all_topics: bool = False) -> ClusterSnapshot:
        """Fetches metadata for the tracked topics (or all); raises KraftError when no broker answers."""
        with self._lock:
            self._update_requested = False
            self._last_refresh = time.monotonic()
            topics = None if all_topics or not self._topics else sorted(self._topics)
            try:
                params = {"topics": ",".join(topics)} if topics else None
                if params and self._allow_auto_create:
                    params["allow_auto_topic_creation"] = "true"
                body = self._transport.request("GET", "/v1/metadata", params=params, timeout_s=self._timeout_s)
            except KraftError as e:
                if e.error_code != "UNKNOWN_TOPIC_OR_PARTITION" or topics is None:
                    self._update_requested = True
                    raise
                # Some tracked topic does not exist: ask for everything, keep what we track.
                body = self._transport.request("GET", "/v1/metadata", timeout_s=self._timeout_s)
            snapshot = ClusterSnapshot.from_wire(body or {}, only=topics)
            self._transport.set_known_brokers((b.host, b.port) for b in snapshot.brokers.values())
            self.snapshot = snapshot
            return snapshot

    def wait_for_topic(self, topic: str, timeout_s: float) -> int:
        """Partition count of `topic`, refreshing until it is known; raises
        UNKNOWN_TOPIC_OR_PARTITION after `timeout_s` (Kafka's max.block.ms behaviour), with the
        last error seen. With `allow_auto_create`, a topic the broker reports missing is an error
        at once, as is a creation that failed for good: the broker created it if it could, so
        waiting cannot help."""
        count = self.snapshot.partition_count(topic)
        if count:
            return count
        self.add_topics([topic])
        deadline = time.monotonic() + timeout_s
        last_error: KraftError | None = None
        while True:
            try:
                snapshot = self.refresh()
                count = snapshot.partition_count(topic)
                last_error = snapshot.topic_errors.get(topic)
                if last_error is not None and self._allow_auto_create and (
                        not last_error.retriable or last_error.error_code == "UNKNOWN_TOPIC_OR_PARTITION"):
                    raise last_error
            except KraftError as e:
                if not e.retriable or e is last_error:
                    raise
                last_error = e
            if count:
                return count
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                cause = f"; last error: {last_error}" if last_error is not None else ""
                raise KraftError(
                    "UNKNOWN_TOPIC_OR_PARTITION", f"topic {topic!r} not present in metadata after {timeout_s:g} s{cause}"
                ) from last_error
            time.sleep(min(self._retry_backoff_s, remaining))
