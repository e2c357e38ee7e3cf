"""The Kafka-style consumer: manual `assign` or group `subscribe`, `seek*`, `position`,
`offsets_for_times`, `poll`, iteration, and with a `group_id` committed offsets (`commit`,
`commit_async`, `committed`, auto commit).

`poll` sends one `POST /v1/fetch` (long poll) per partition leader with all its assigned
partitions, in parallel when there are several leaders, decodes the returned batches and buffers
what `max_records` does not return yet. Positions only advance past records handed to the caller.
In a group, a background thread heartbeats between polls (api/client/group.py) and `poll` applies
the assignment the coordinator answered by revoking (on_revoke, after an auto commit) and then
assigning (positions from the committed offsets, else auto_offset_reset; then on_assign). A
consumer that does not call `poll` for `max_poll_interval_ms` leaves the group; the next `poll`
rejoins.

kafka-python's habits work (docs/client.md has the table): `Consumer("clicks", group_id=...,
bootstrap_servers=B)` subscribes in the constructor; `subscribe("clicks")` takes one name or a
list; without a group_id a subscription takes every partition of its topics (kafka-python does
the same), following partitions added later; deserializers, pause/resume, topics(), highwater()
and commits of OffsetAndMetadata. A subscribed topic that does not exist is created by the broker
when auto.create.topics.enable (`allow_auto_create_topics`, default True as in kafka-python and
Kafka's consumer since 2.3).
"""

from __future__ import annotations

import logging
import math
import re
import socket
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Iterable, Iterator
from urllib.parse import quote

from kraft.api.client.cluster import METADATA_ERRORS, MetadataCache
from kraft.api.client.compat import check_unused_configs, deserializing
from kraft.api.client.security import pop_security
from kraft.api.client.fetcher import (
    ISOLATION_LEVELS, READ_COMMITTED, READ_UNCOMMITTED, fetch_body, records_from_batches,
)
from kraft.api.client.throttle import BrokerThrottle
from kraft.api.client.group import GroupCoordinatorClient, GroupMembership, HeartbeatThread
from kraft.api.client.retry import call_with_retries
from kraft.api.client.subscription import SubscriptionState
from kraft.api.client.transport import Transport
from kraft.api.client.types import (
    ConsumerGroupMetadata, ConsumerRecord, OffsetAndMetadata, OffsetAndTimestamp, TopicPartition,
)
from kraft.api.errors import KraftError

log = logging.getLogger("kraft.client.consumer")

PartitionsCallback = Callable[[set[TopicPartition]], None]
Offsets = dict[TopicPartition, int] | dict[TopicPartition, OffsetAndMetadata]


def _is_servers(arg: Any) -> bool:
    """Whether a first positional argument is bootstrap servers (the original signature) rather
    than a topic (kafka-python's): topic names cannot contain ':'."""
    if isinstance(arg, str):
        return ":" in arg
    return isinstance(arg, (list, tuple)) and bool(arg) and all(isinstance(a, str) and ":" in a for a in arg)


class _Buffered:
    __slots__ = ("records", "index", "next_offset")

    def __init__(self, records: list[ConsumerRecord], next_offset: int) -> None:
        self.records = records
        self.index = 0
        self.next_offset = next_offset


def offsets_path(tp: TopicPartition) -> str:
    return f"/v1/topics/{quote(tp.topic, safe='')}/partitions/{tp.partition}/offsets"


class Consumer:
    """Not thread-safe (like Kafka's): use it from one thread (its heartbeat thread is internal)."""

    def __init__(
        self,
        *topics: str,
        bootstrap_servers: str | list[str] | None = None,
        key_deserializer: Callable[[bytes], Any] | None = None,
        value_deserializer: Callable[[bytes], Any] | None = None,
        auto_offset_reset: str = "latest",
        fetch_max_wait_ms: int = 500,
        fetch_min_bytes: int = 1,
        fetch_max_bytes: int = 52_428_800,
        max_partition_fetch_bytes: int = 1_048_576,
        max_poll_records: int = 500,
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
        consumer_timeout_ms: float | None = None,
        metadata_max_age_ms: int = 300_000,
        group_id: str | None = None,
        client_id: str | None = None,
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5_000,
        group_remote_assignor: str | None = None,
        max_poll_interval_ms: int = 300_000,
        allow_auto_create_topics: bool = True,
        default_offset_commit_callback: Callable[[Offsets, BaseException | None], None] | None = None,
        isolation_level: str = READ_UNCOMMITTED,
        **configs: Any,
    ) -> None:
        """`Consumer(*topics, **configs)` as kafka-python's KafkaConsumer; the original
        `Consumer("host:port", ...)` form works too (a first argument with ':' is the servers)."""
        security = pop_security(configs)
        check_unused_configs("consumer", configs)
        if bootstrap_servers is None:
            if topics and _is_servers(topics[0]):
                bootstrap_servers, topics = topics[0], topics[1:]
            else:
                bootstrap_servers = "127.0.0.1:9092"
        if not all(isinstance(t, str) for t in topics):
            raise KraftError("INVALID_CONFIG", f"topics must be names (str), got {topics!r}")
        if consumer_timeout_ms is not None and math.isinf(consumer_timeout_ms):
            consumer_timeout_ms = None  # kafka-python's default: float('inf')
        if max_poll_records <= 0 or fetch_max_wait_ms < 0:
            raise KraftError("INVALID_CONFIG", "max_poll_records must be > 0 and fetch_max_wait_ms >= 0")
        if group_id is not None and not group_id:
            raise KraftError("INVALID_CONFIG", "group_id must be a non-empty string")
        if auto_commit_interval_ms <= 0:
            raise KraftError("INVALID_CONFIG", "auto_commit_interval_ms must be > 0")
        if isolation_level not in ISOLATION_LEVELS:
            raise KraftError("INVALID_CONFIG", f"isolation_level must be one of {', '.join(ISOLATION_LEVELS)}, "
                                               f"got {isolation_level!r}")
        # read_committed: fetches stop at the last stable offset and leave aborted transactions
        # out, and "latest" (end_offsets, auto_offset_reset) is the last stable offset (Kafka's)
        self._isolation_level = isolation_level
        self._latest_key = "last_stable_offset" if isolation_level == READ_COMMITTED else "high_watermark"
        self._subs = SubscriptionState(auto_offset_reset)
        self._transport = Transport(bootstrap_servers, request_timeout_ms, security, client_id)
        self._metadata = MetadataCache(self._transport, retry_backoff_ms, metadata_max_age_ms,
                                       allow_auto_create=allow_auto_create_topics)
        self._key_deserializer = key_deserializer
        self._value_deserializer = value_deserializer
        self._default_commit_callback = default_offset_commit_callback
        self._paused: set[TopicPartition] = set()
        self._warned: set[str] = set()  # fetch error codes logged at WARNING since the last good fetch
        self._metadata_max_age_s = metadata_max_age_ms / 1000
        self._fetch_max_wait_ms = fetch_max_wait_ms
        self._fetch_min_bytes = fetch_min_bytes
        self._fetch_max_bytes = fetch_max_bytes
        self._partition_max_bytes = max_partition_fetch_bytes
        self._max_poll_records = max_poll_records
        self._request_timeout_s = request_timeout_ms / 1000
        self._backoff_s = retry_backoff_ms / 1000
        self._consumer_timeout_ms = consumer_timeout_ms
        self._buffer: dict[TopicPartition, _Buffered] = {}
        self.high_watermarks: dict[TopicPartition, int] = {}  # from the last fetch, for lag
        self._executor: ThreadPoolExecutor | None = None
        self._throttle = BrokerThrottle()  # throttle_time_ms of each broker's last fetch answers
        self.group_id = group_id
        self._group: GroupCoordinatorClient | None = None
        self._membership: GroupMembership | None = None
        self._heartbeats: HeartbeatThread | None = None
        if group_id is not None:
            self._group = GroupCoordinatorClient(self._transport, group_id, self._request_timeout_s, self._backoff_s)
            self._membership = GroupMembership(
                self._group, client_id or f"kraft-consumer-{socket.gethostname()}", group_remote_assignor,
                max_poll_interval_ms,
            )
        self._subscribed = False
        self._on_assign: PartitionsCallback | None = None
        self._on_revoke: PartitionsCallback | None = None
        self._auto_commit = enable_auto_commit and group_id is not None
        self._auto_commit_interval_s = auto_commit_interval_ms / 1000
        self._next_auto_commit = time.monotonic() + self._auto_commit_interval_s
        self._commit_executor: ThreadPoolExecutor | None = None
        # A subscription without group_id (topics, pattern): every partition, assigned here.
        self._local: tuple[tuple[str, ...], str | None] | None = None
        self._next_pattern_refresh = float("-inf")
        if topics:
            self.subscribe(topics)

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- assignment and positions -------------------------------------------------------------

    def partitions_for_topic(self, topic: str) -> list[TopicPartition]:
        self._metadata.wait_for_topic(topic, self._request_timeout_s)
        return self._metadata.snapshot.partitions_for(topic)

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        if self._subscribed:
            raise KraftError("INVALID_REQUEST", "the consumer is subscribed to a group: unsubscribe() before assign()")
        self._assign(partitions)

    def _assign(self, partitions: Iterable[TopicPartition]) -> None:
        self._subs.assign(partitions)
        assigned = self._subs.assignment()
        if self._membership is not None:
            self._membership.owned = frozenset(assigned)  # what the heartbeat thread reports
        for tp in list(self._buffer):
            if tp not in assigned:
                del self._buffer[tp]
        self._paused &= assigned
        self._metadata.add_topics(tp.topic for tp in assigned)

    def assignment(self) -> set[TopicPartition]:
        return self._subs.assignment()

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._subs.seek(tp, offset)
        self._buffer.pop(tp, None)

    def _reset(self, tps: tuple[TopicPartition, ...], strategy: str) -> None:
        for tp in tps or tuple(self._subs.assignment()):
            self._subs.request_reset(tp, strategy)
            self._buffer.pop(tp, None)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Seeks lazily (resolved on the next poll/position); no arguments: all assigned."""
        self._reset(partitions, "earliest")

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        self._reset(partitions, "latest")

    def pause(self, *partitions: TopicPartition) -> None:
        """Stops fetching and returning records of these assigned partitions until `resume`
        (positions stay; records already fetched wait in the buffer)."""
        for tp in partitions:
            self._subs.position(tp)  # INVALID_REQUEST when not assigned
        self._paused.update(partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self._paused.difference_update(partitions)

    def paused(self) -> set[TopicPartition]:
        return set(self._paused)

    def topics(self) -> set[str]:
        """Every topic of the cluster but the internal ones (kafka-python's exclude_internal_topics)."""
        answer = self._transport.request("GET", "/v1/metadata", timeout_s=self._request_timeout_s)
        return {t["name"] for t in (answer or {}).get("topics", ()) if not t.get("internal")}

    def highwater(self, tp: TopicPartition) -> int | None:
        """The high watermark of `tp` in the last fetch answer (None before one): the lag is
        highwater - position, without a request."""
        return self.high_watermarks.get(tp)

    def position(self, tp: TopicPartition) -> int:
        """The offset of the next record poll returns for `tp` (resolving a pending reset)."""
        pos = self._subs.position(tp)
        if pos is None:
            self._resolve_resets(raise_retriable=True)
            pos = self._subs.position(tp)
        assert pos is not None
        return pos

    # -- group membership ----------------------------------------------------------------------

    def _require_group(self) -> tuple[GroupCoordinatorClient, GroupMembership]:
        if self._group is None or self._membership is None:
            raise KraftError("INVALID_REQUEST", "this consumer has no group_id")
        return self._group, self._membership

    def subscribe(
        self,
        topics: str | Iterable[str] | re.Pattern[str] | None = None,
        pattern: str | None = None,
        listener: Any = None,
        *,
        on_assign: PartitionsCallback | None = None,
        on_revoke: PartitionsCallback | None = None,
    ) -> None:
        """Joins the group with a topic name, a list or a regular expression (`pattern`, or a
        compiled pattern as `topics`); partitions arrive with the heartbeats `poll` sends. Without
        a group_id, every partition of the topics is assigned by `poll`. `on_revoke` is called
        with the partitions taken away (before they go: commit there), `on_assign` with the
        partitions given; kafka-python's `listener` (a ConsumerRebalanceListener with
        on_partitions_revoked / on_partitions_assigned) works as well."""
        if isinstance(topics, re.Pattern):
            topics, pattern = None, topics.pattern
        elif isinstance(topics, str):
            topics = [topics]  # kafka-python takes one name; iterating it would give its letters
        if listener is not None:
            on_assign = on_assign or listener.on_partitions_assigned
            on_revoke = on_revoke or listener.on_partitions_revoked
        names = tuple(dict.fromkeys(topics or ()))
        if not all(isinstance(n, str) for n in names):
            raise KraftError("INVALID_REQUEST", f"topics must be names (str), got {names!r}")
        if not names and pattern is None:
            raise KraftError("INVALID_REQUEST", "subscribe needs topics or a pattern")
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as e:
                raise KraftError("INVALID_REQUEST", f"pattern {pattern!r} is not a regular expression: {e}") from None
        if not self._subscribed and self._subs.assignment():
            raise KraftError("INVALID_REQUEST", "the consumer has assigned partitions: assign([]) before subscribe()")
        self._subscribed = True
        self._on_assign, self._on_revoke = on_assign, on_revoke
        if self._membership is None:
            self._local = (names, pattern)
            self._next_pattern_refresh = float("-inf")
            self._metadata.add_topics(names)
            return
        membership = self._membership
        membership.subscribe(names, pattern)
        self._metadata.add_topics(names)
        if self._heartbeats is None:
            self._heartbeats = HeartbeatThread(membership)
            self._heartbeats.start()

    def subscription(self) -> set[str]:
        if self._local is not None:
            return set(self._local[0])
        return set(self._membership.topics) if self._subscribed and self._membership else set()

    def unsubscribe(self) -> None:
        """Gives the partitions back (on_revoke, auto commit) and leaves the group."""
        if not self._subscribed:
            return
        if self._local is not None:
            self._revoke(self._subs.assignment(), commit=False)
            self._local, self._subscribed = None, False
            return
        _, membership = self._require_group()
        self._stop_heartbeats()
        self._revoke(self._subs.assignment(), commit=True)
        membership.leave()
        self._subscribed = False

    def _stop_heartbeats(self) -> None:
        if self._heartbeats is not None:
            self._heartbeats.stop()
            self._heartbeats = None

    def _group_poll(self) -> None:
        """Applies the heartbeat thread's latest answer, else heartbeats when due and applies
        that answer."""
        if not self._subscribed:
            return
        if self._local is not None:
            self._local_poll(*self._local)
            return
        _, membership = self._require_group()
        membership.last_poll = time.monotonic()
        result = membership.take_pending()
        if result is None:
            if not membership.heartbeat_due():
                return
            result = membership.heartbeat(self._subs.assignment())
        if result.lost:
            # Fenced: the coordinator gave these away already; no commit, just drop them.
            self._revoke(self._subs.assignment(), commit=False)
            return
        if result.assignment is None:
            return
        current = self._subs.assignment()
        revoked = current - result.assignment
        added = result.assignment - current
        if revoked:
            self._revoke(revoked, commit=True)
            membership.request_heartbeat()  # tell the coordinator they are released
        if added:
            self._add_partitions(added)

    def _local_poll(self, names: tuple[str, ...], pattern: str | None) -> None:
        """A subscription without a group: every partition of the topics (matching `pattern`),
        from metadata; a topic that grows is followed when the metadata is refreshed."""
        if pattern is not None and time.monotonic() >= self._next_pattern_refresh:
            self._next_pattern_refresh = time.monotonic() + self._metadata_max_age_s
            self._refresh_or_raise(all_topics=True)
            snapshot = self._metadata.snapshot
            self._metadata.add_topics(t for t in snapshot.topics
                                      if t not in snapshot.internal_topics and re.fullmatch(pattern, t))
        if not self._metadata.snapshot.brokers:
            self._refresh_or_raise()  # first contact: an unreachable cluster is an error now
        self._metadata.maybe_refresh()
        snapshot = self._metadata.snapshot
        topics = [t for t in snapshot.topics if t in names or (
            pattern is not None and t not in snapshot.internal_topics and re.fullmatch(pattern, t))]
        wanted = {tp for t in topics for tp in snapshot.partitions_for(t)}
        current = self._subs.assignment()
        if wanted == current:
            return
        self._revoke(current - wanted, commit=False)
        added = wanted - current
        if added:
            self._assign(self._subs.assignment() | added)
            if self._on_assign is not None:
                self._on_assign(set(added))

    def _refresh_or_raise(self, all_topics: bool = False) -> None:
        try:
            self._metadata.refresh(all_topics)
        except KraftError as e:
            if not e.retriable:
                raise

    def _revoke(self, revoked: set[TopicPartition], commit: bool) -> None:
        if not revoked:
            return
        if commit and self._auto_commit:
            self._commit_quietly({tp: pos for tp, pos in self._positions().items() if tp in revoked})
        if self._on_revoke is not None:
            self._on_revoke(set(revoked))
        self._assign(self._subs.assignment() - revoked)

    def _add_partitions(self, added: set[TopicPartition]) -> None:
        group, _ = self._require_group()
        self._assign(self._subs.assignment() | added)
        committed = group.committed(added)
        for tp, offset in committed.items():
            if offset is not None:
                self._subs.seek(tp, offset)
        if self._on_assign is not None:
            self._on_assign(set(added))

    # -- commits --------------------------------------------------------------------------------

    def _positions(self) -> dict[TopicPartition, int]:
        return self._subs.fetchable()

    def _commit_offsets(self, offsets: Offsets) -> None:
        """Commits as the member (its current epoch), or with epoch -1 for an assign-only consumer
        (a simple group)."""
        group, membership = self._require_group()
        if self._subscribed:
            membership.commit(offsets)
        else:
            group.commit(offsets, "", -1)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """The group and this member, for `Producer.send_offsets_to_transaction`."""
        if self.group_id is None:
            raise KraftError("INVALID_REQUEST", "a consumer without a group_id has no group metadata")
        m = self._membership
        return ConsumerGroupMetadata(self.group_id, m.member_epoch if m else -1, m.member_id if m else "")

    def commit(self, offsets: Offsets | None = None) -> None:
        """Commits `offsets` (the next offset to read, per partition: an int or kafka-python's
        OffsetAndMetadata), or the positions of every assigned partition; waits for the
        coordinator's answer."""
        self._require_group()
        to_commit = self._positions() if offsets is None else dict(offsets)
        if not to_commit:
            return
        self._commit_offsets(to_commit)

    def commit_async(
        self, offsets: Offsets | None = None,
        callback: Callable[[Offsets, BaseException | None], None] | None = None,
    ) -> Future[None]:
        """Like `commit`, in the background; the future (and `callback`, else
        default_offset_commit_callback) get the outcome."""
        self._require_group()
        callback = callback or self._default_commit_callback
        to_commit = self._positions() if offsets is None else dict(offsets)
        if self._commit_executor is None:
            self._commit_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kraft-consumer-commit")
        future = self._commit_executor.submit(self._commit_offsets, to_commit)
        if callback is not None:
            future.add_done_callback(lambda f: callback(to_commit, f.exception()))
        return future

    def committed(self, tp: TopicPartition, metadata: bool = False) -> int | OffsetAndMetadata | None:
        """The group's committed offset of `tp` (None when nothing is committed); with
        `metadata` (kafka-python's flag), the OffsetAndMetadata."""
        group, _ = self._require_group()
        committed = group.committed_with_metadata([tp])[tp]
        if committed is None or metadata:
            return committed
        return committed.offset

    def _commit_quietly(self, offsets: dict[TopicPartition, int]) -> None:
        """Auto commit: a failure is logged, not raised (the next one covers it)."""
        if not offsets:
            return
        try:
            self._commit_offsets(offsets)
        except KraftError as e:
            log.warning("auto commit of group %s failed: %s", self.group_id, e)

    def _maybe_auto_commit(self) -> None:
        if self._subscribed and self._membership is not None and not self._membership.joined:
            return  # out of the group (joining, fenced, left): these positions are not ours to commit
        if self._auto_commit and time.monotonic() >= self._next_auto_commit:
            self._next_auto_commit = time.monotonic() + self._auto_commit_interval_s
            self._commit_quietly(self._positions())

    # -- offsets lookups -----------------------------------------------------------------------

    def _offsets_once(self, tp: TopicPartition, timestamp: int | None = None) -> dict[str, Any]:
        snapshot = self._metadata.snapshot
        leader = snapshot.leader_id(tp)
        address = None if leader is None else snapshot.broker_address(leader)
        params = {"isolation_level": self._isolation_level}
        if timestamp is not None:
            params["timestamp"] = str(timestamp)
        return self._transport.request("GET", offsets_path(tp), params=params, address=address)

    def _partition_offsets(self, tp: TopicPartition, timestamp: int | None = None) -> dict[str, Any]:
        return call_with_retries(
            lambda: self._offsets_once(tp, timestamp),
            timeout_s=self._request_timeout_s,
            backoff_s=self._backoff_s,
            on_retry=lambda e: self._metadata.request_update() if e.error_code in METADATA_ERRORS else None,
        )

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: int(self._partition_offsets(tp)["log_start_offset"]) for tp in partitions}

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The end a consumer can read to in each partition: the high watermark, or for
        read_committed the last stable offset (Kafka's)."""
        return {tp: int(self._partition_offsets(tp)[self._latest_key]) for tp in partitions}

    def offsets_for_times(self, timestamps: dict[TopicPartition, int]) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The earliest offset whose timestamp is >= the given one, per partition (None: no such
        record)."""
        out: dict[TopicPartition, OffsetAndTimestamp | None] = {}
        for tp, ts in timestamps.items():
            answer = self._partition_offsets(tp, ts)
            offset = answer.get("offset")
            out[tp] = None if offset is None else OffsetAndTimestamp(int(offset), int(answer.get("timestamp") or -1))
        return out

    def _resolve_resets(self, raise_retriable: bool = False) -> None:
        for tp, strategy in self._subs.needs_reset().items():
            try:
                answer = self._partition_offsets(tp) if raise_retriable else self._offsets_once(tp)
            except KraftError as e:
                if raise_retriable or not e.retriable:
                    raise
                self._metadata.request_update()
                continue
            key = "log_start_offset" if strategy == "earliest" else self._latest_key
            self._subs.seek(tp, int(answer[key]))

    # -- fetching ------------------------------------------------------------------------------

    def _drain(self, max_records: int) -> dict[TopicPartition, list[ConsumerRecord]]:
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        left = max_records
        for tp in list(self._buffer):
            if tp in self._paused:
                continue
            buf = self._buffer[tp]
            taken = buf.records[buf.index : buf.index + left]
            if taken:
                out[tp] = taken
                left -= len(taken)
                buf.index += len(taken)
                self._subs.set_position(tp, taken[-1].offset + 1)
            if buf.index >= len(buf.records):
                del self._buffer[tp]
                self._subs.set_position(tp, buf.next_offset)
            if left <= 0:
                break
        return out

    def _fetch_round(self, max_wait_ms: int) -> None:
        """One long-poll fetch from every leader of assigned partitions that have nothing buffered."""
        if not self._subs.assignment():
            if not self._subscribed:
                raise KraftError("INVALID_REQUEST", "the consumer has no assigned partitions")
            time.sleep(min(self._backoff_s, max_wait_ms / 1000))  # waiting for an assignment
            return
        self._metadata.maybe_refresh()
        self._resolve_resets()
        snapshot = self._metadata.snapshot
        by_leader: dict[int, dict[TopicPartition, int]] = {}
        for tp, pos in self._subs.fetchable().items():
            if tp in self._buffer or tp in self._paused:
                continue
            leader = snapshot.leader_id(tp)
            if leader is None:
                self._metadata.request_update()
            else:
                by_leader.setdefault(leader, {})[tp] = pos
        if not by_leader:
            time.sleep(min(self._backoff_s, max_wait_ms / 1000))
            return
        bodies = {
            node: fetch_body(positions, max_wait_ms, self._fetch_min_bytes, self._fetch_max_bytes,
                             self._partition_max_bytes, self._isolation_level)
            for node, positions in by_leader.items()
        }
        timeout_s = max_wait_ms / 1000 + self._request_timeout_s

        def fetch(node: int) -> Any:
            address = snapshot.broker_address(node)
            try:
                self._throttle.wait(node)
                sent_at = time.monotonic()
                answer = self._transport.request("POST", "/v1/fetch", bodies[node], address=address,
                                                 timeout_s=timeout_s)
                self._throttle.note(node, sent_at, answer)
                return answer
            except KraftError as e:
                return e

        if len(bodies) == 1:
            answers = {node: fetch(node) for node in bodies}
        else:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=8, thread_name_prefix="kraft-consumer-fetch")
            answers = dict(zip(bodies, self._executor.map(fetch, bodies)))
        errors = []
        for node, answer in answers.items():
            if isinstance(answer, KraftError):
                errors.append(answer)
            else:
                self._handle_fetch(by_leader[node], answer or {})
        for e in errors:
            if e.error_code not in METADATA_ERRORS:
                raise e
            self._warn_retry(e)
            self._metadata.request_update()
        if errors and not self._buffer:
            time.sleep(min(self._backoff_s, max_wait_ms / 1000))

    def _handle_fetch(self, positions: dict[TopicPartition, int], answer: dict[str, Any]) -> None:
        for p in answer.get("partitions", ()):
            tp = TopicPartition(p["topic"], int(p["partition"]))
            fetch_offset = positions.get(tp)
            if fetch_offset is None or tp in self._buffer:
                continue  # not asked for
            code = p.get("error_code")
            if code == "OFFSET_OUT_OF_RANGE":
                self._subs.request_reset(tp, self._subs.default_reset)
                continue
            if code in METADATA_ERRORS:
                self._warn_retry(KraftError(code, f"{tp.topic}-{tp.partition}: {p.get('message') or 'fetch failed'}"))
                self._metadata.request_update()
                continue
            if code:  # the application decides (a CORRUPT_MESSAGE: seek past it), as Kafka's consumer raises
                raise KraftError(code, f"fetch of {tp.topic}-{tp.partition} at offset {fetch_offset} failed: "
                                       f"{p.get('message') or code}", topic=tp.topic, partition=tp.partition,
                                 offset=fetch_offset)
            if p.get("high_watermark") is not None:
                self.high_watermarks[tp] = int(p["high_watermark"])
            try:
                aborted = p.get("aborted_transactions")
                records, next_offset = records_from_batches(
                    tp, p.get("records") or b"", fetch_offset,
                    None if aborted is None else [(a["producer_id"], a["first_offset"]) for a in aborted])
            except Exception as e:  # CorruptRecordError and friends carry a Kafka name
                raise KraftError(getattr(e, "error_code", "CORRUPT_MESSAGE"),
                                 f"{tp.topic}-{tp.partition} at offset {fetch_offset}: {e}", topic=tp.topic,
                                 partition=tp.partition, offset=fetch_offset) from e
            if self._key_deserializer is not None or self._value_deserializer is not None:
                records = [self._deserialized(r) for r in records]
            if records or next_offset != fetch_offset:
                self._buffer[tp] = _Buffered(records, next_offset)
            self._warned.clear()

    def _warn_retry(self, error: KraftError) -> None:
        """Fetch errors the consumer retries on its own (stale leaders, a broker away): the first
        of each cause at WARNING, so a consumer that gets nothing says why."""
        if error.error_code in self._warned:
            log.debug("fetch retried after %s", error)
            return
        self._warned.add(error.error_code)
        log.warning("fetch failed, retrying: %s (further retries after %s are logged at DEBUG)",
                    error, error.error_code)

    def _deserialized(self, r: ConsumerRecord) -> ConsumerRecord:
        return r._replace(key=deserializing(self._key_deserializer, r.topic, r.key),
                          value=deserializing(self._value_deserializer, r.topic, r.value))

    def poll(self, timeout_ms: int = 0, max_records: int | None = None) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records from the positions on, at most `max_records` (default max_poll_records); waits up
        to `timeout_ms` for some to arrive."""
        limit = max_records or self._max_poll_records
        deadline = time.monotonic() + timeout_ms / 1000
        self._maybe_auto_commit()
        while True:
            self._group_poll()
            out = self._drain(limit)
            if out:
                return out
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            self._fetch_round(max(0, min(self._fetch_max_wait_ms, remaining_ms)))
            if not self._buffer and time.monotonic() >= deadline:
                return {}

    def __iter__(self) -> Iterator[ConsumerRecord]:
        return self

    def __next__(self) -> ConsumerRecord:
        """Blocks for the next record; stops after `consumer_timeout_ms` without one (if set)."""
        deadline = None if self._consumer_timeout_ms is None else time.monotonic() + self._consumer_timeout_ms / 1000
        self._maybe_auto_commit()
        while True:
            self._group_poll()
            got = self._drain(1)
            if got:
                return next(iter(got.values()))[0]
            wait_ms = self._fetch_max_wait_ms
            if deadline is not None:
                remaining_ms = int((deadline - time.monotonic()) * 1000)
                if remaining_ms <= 0:
                    raise StopIteration
                wait_ms = min(wait_ms, remaining_ms)
            self._fetch_round(wait_ms)

    def close(self, autocommit: bool = True) -> None:
        """Leaves the group cleanly (auto commit unless `autocommit` is False, on_revoke, leave
        heartbeat), then closes."""
        self._auto_commit = self._auto_commit and autocommit
        try:
            if self._subscribed:
                self.unsubscribe()
            elif self._auto_commit and self._subs.assignment():
                self._commit_quietly(self._positions())
        finally:
            self._stop_heartbeats()
            if self._commit_executor is not None:
                self._commit_executor.shutdown(wait=True)
                self._commit_executor = None
            self._close_transport()

    def _close_transport(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        self._transport.close()
