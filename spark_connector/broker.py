"""The connector's HTTP conversation with kraft brokers (docs/internals.md §5).

`GET /v1/metadata` for partitions and leaders, `GET .../offsets` for log start / high watermark (or
last stable offset, read_committed) / timestamp lookups, and the msgpack batch routes `POST /v1/fetch` and `POST /v1/produce` sent to the
partition leader. Retriable errors (leader moved, broker down) refresh the metadata and retry until
a deadline; a broker that cannot be reached (connection refused, reset or timed out: a restart) is
such an error, as a disconnect is for Kafka's clients, so the metadata and health calls too are
retried for up to the request timeout, with a backoff growing from 50 ms to 1 s (Kafka's
`reconnect.backoff.ms` to `reconnect.backoff.max.ms`). Requests go through the Python client's
`Transport` (http.client keep-alive connections): it reads an 8 MiB fetch answer in one piece,
where `requests` iterates over it in 10 KiB chunks, a third of the source's Python time per record
(docs/benchmarks.md, issue 25). A `BrokerClient` owns its connections: create it where it is used
(inside Spark's `read()`/`write()` or on the driver), never pickle it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence, TypeVar

from kraft.api.client.fetcher import READ_COMMITTED, READ_UNCOMMITTED
from kraft.api.client.security import PLAINTEXT, ClientSecurity
from kraft.api.client.transport import Transport, parse_address
from kraft.api.errors import KraftError
from kraft.spark_connector.offsets import TopicPartition

log = logging.getLogger(__name__)
T = TypeVar("T")
_UNREACHABLE = frozenset({"NETWORK_EXCEPTION", "REQUEST_TIMED_OUT"})
_RETRY_BACKOFF_S = (0.05, 0.1, 0.2, 0.5, 1.0)  # Kafka's reconnect.backoff.ms 50 -> .max.ms 1000


@dataclass(frozen=True)
class PartitionMeta:
    partition: int
    leader: int | None  # None: offline


@dataclass(frozen=True)
class ClusterView:
    brokers: dict[int, str]  # node_id -> "host:port"
    topics: dict[str, tuple[PartitionMeta, ...]]
    internal: frozenset[str]

    def partitions(self, topic: str) -> tuple[PartitionMeta, ...]:
        return self.topics.get(topic, ())


@dataclass(frozen=True)
class ListedOffsets:
    log_start_offset: int
    end_offset: int  # latest: the high watermark, or for read_committed the last stable offset
    offset: int | None = None  # the timestamp lookup's answer; None when no record is that late


@dataclass(frozen=True)
class FetchedPartition:
    records: bytes
    high_watermark: int
    log_start_offset: int
    # read_committed: (producer id, first offset) of the aborted transactions the records overlap
    aborted: list[tuple[int, int]] | None = None


class BrokerClient:
    def __init__(self, bootstrap_servers: Sequence[str], request_timeout_ms: int = 30_000,
                 security: ClientSecurity = PLAINTEXT, isolation_level: str = READ_UNCOMMITTED) -> None:
        """`isolation_level` (Kafka's): read_committed fetches stop at the last stable offset
        and answer the aborted transactions to leave out, and latest is the last stable offset."""
        self._bootstrap = list(bootstrap_servers)
        self._isolation_level = isolation_level
        self._timeout_s = request_timeout_ms / 1000
        self._transport = Transport(self._bootstrap, request_timeout_ms, security)
        self._view: ClusterView | None = None

    def close(self) -> None:
        self._transport.close()

    # -- plumbing ---------------------------------------------------------------------------

    def _call(self, server: str, method: str, path: str, body: Any = None,
              params: dict[str, Any] | None = None, timeout_s: float | None = None) -> Any:
        try:
            address = parse_address(server)
        except ValueError as e:
            raise KraftError("INVALID_CONFIG", str(e)) from None
        return self._transport.request(method, path, body, params=params, address=address,
                                       timeout_s=timeout_s or self._timeout_s)

    def retrying(self, action: Callable[[], T], deadline_s: float) -> T:
        """Runs `action`, retrying retriable errors with fresh metadata until `deadline_s`
        (time.monotonic)."""
        attempt = 0
        while True:
            try:
                return action()
            except KraftError as e:
                if not e.retriable or time.monotonic() >= deadline_s:
                    raise
                log.info("retrying after %s", e)
                time.sleep(_RETRY_BACKOFF_S[min(attempt, len(_RETRY_BACKOFF_S) - 1)])
                attempt += 1
                self._view = None

    # -- metadata ---------------------------------------------------------------------------

    def metadata(self, refresh: bool = False) -> ClusterView:
        """All topics, their partitions and leaders; cached until `refresh` or a retried error.
        Asked of any broker, retried while none answers for up to the request timeout."""
        if self._view is None or refresh:
            answer = self.retrying(lambda: self._ask_any("/v1/metadata"), time.monotonic() + self._timeout_s)
            brokers = {b["node_id"]: f"{b['host']}:{b['port']}" for b in answer["brokers"]}
            topics = {
                t["name"]: tuple(sorted(
                    (PartitionMeta(p["partition"], p.get("leader")) for p in t["partitions"]),
                    key=lambda p: p.partition,
                ))
                for t in answer["topics"]
            }
            internal = frozenset(t["name"] for t in answer["topics"] if t.get("internal"))
            self._view = ClusterView(brokers, topics, internal)
        return self._view

    def _ask_any(self, path: str) -> Any:
        """`GET path` of the first server that answers (the known brokers, then the bootstrap
        ones); NETWORK_EXCEPTION (retriable) naming each failure when none does. A server that
        does not answer in time counts as unreachable (a paused node accepts connections)."""
        errors = []
        for server in self._servers():
            try:
                return self._call(server, "GET", path)
            except KraftError as e:
                if e.error_code not in _UNREACHABLE:
                    raise
                errors.append(e.message)
        raise KraftError("NETWORK_EXCEPTION", f"no broker answered GET {path}: {'; '.join(errors)}")

    def _servers(self) -> list[str]:
        known = list(self._view.brokers.values()) if self._view else []
        return known + [s for s in self._bootstrap if s not in known]

    def leader(self, tp: TopicPartition) -> str:
        view = self.metadata()
        for p in view.partitions(tp[0]):
            if p.partition == tp[1]:
                if p.leader is None or p.leader not in view.brokers:
                    raise KraftError("LEADER_NOT_AVAILABLE", f"{tp[0]}-{tp[1]} has no leader")
                return view.brokers[p.leader]
        raise KraftError("UNKNOWN_TOPIC_OR_PARTITION", f"{tp[0]}-{tp[1]} does not exist")

    # -- routes -----------------------------------------------------------------------------

    def list_offsets(self, tp: TopicPartition, timestamp: int | None = None) -> ListedOffsets:
        """Asks the partition's leader; retriable errors (a dead leader, an election under way)
        are retried with fresh metadata for up to the request timeout."""
        params: dict[str, Any] = {"isolation_level": self._isolation_level}
        if timestamp is not None:
            params["timestamp"] = timestamp
        latest = "last_stable_offset" if self._isolation_level == READ_COMMITTED else "high_watermark"

        def ask() -> ListedOffsets:
            answer = self._call(self.leader(tp), "GET", f"/v1/topics/{tp[0]}/partitions/{tp[1]}/offsets",
                                params=params)
            return ListedOffsets(answer["log_start_offset"], answer[latest], answer.get("offset"))
        return self.retrying(ask, time.monotonic() + self._timeout_s)

    def fetch(self, tp: TopicPartition, fetch_offset: int, max_bytes: int, max_wait_ms: int) -> FetchedPartition:
        body = {
            "max_wait_ms": max_wait_ms,
            "min_bytes": 1,
            "max_bytes": max_bytes,
            "isolation_level": self._isolation_level,
            "partitions": [{"topic": tp[0], "partition": tp[1], "fetch_offset": fetch_offset,
                            "partition_max_bytes": max_bytes}],
        }
        answer = self._call(self.leader(tp), "POST", "/v1/fetch", body,
                            timeout_s=self._timeout_s + max_wait_ms / 1000)
        part = answer["partitions"][0]
        if part.get("error_code"):
            raise KraftError(part["error_code"], part.get("message", ""), log_start_offset=part.get("log_start_offset"),
                             high_watermark=part.get("high_watermark"))
        aborted = part.get("aborted_transactions")
        return FetchedPartition(bytes(part.get("records") or b""), part["high_watermark"], part["log_start_offset"],
                                None if aborted is None else [(a["producer_id"], a["first_offset"]) for a in aborted])

    def produce(self, server: str, entries: list[dict[str, Any]], acks: str, timeout_ms: int) -> list[dict[str, Any]]:
        """Sends `entries` ({"topic","partition","records", ...}) to one broker; returns the
        per-partition answers in order (each may carry an error_code)."""
        body = {"acks": acks, "timeout_ms": timeout_ms, "partitions": entries}
        answer = self._call(server, "POST", "/v1/produce", body, timeout_s=self._timeout_s + timeout_ms / 1000)
        return list(answer["partitions"])

    def health(self) -> dict[str, Any]:
        """Any broker's `GET /v1/health`, retried while none answers for up to the request timeout."""
        return self.retrying(lambda: self._ask_any("/v1/health"), time.monotonic() + self._timeout_s)
