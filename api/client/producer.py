"""The Kafka-style producer: `send()` appends a record to a per-partition batch and returns a
future; a background `Sender` ships batches to partition leaders. Keyed records are placed with
Kafka's murmur2, keyless ones with the sticky partitioner.

Hot path: `send()` does type checks, one dict lookup for the topic's partitions, and, under a
lock, one msgpack `pack` of the record into its batch's buffer (`RecordAccumulator.try_append`);
batches are framed once, in the sender's I/O workers (docs/benchmarks.md has the profile).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Iterable, Iterator, Mapping, TypeVar

from kraft.api.client.accumulator import RECORD_OVERHEAD, RecordAccumulator
from kraft.api.client.cluster import ClusterSnapshot, MetadataCache
from kraft.api.client.compat import check_unused_configs, serializing
from kraft.api.client.security import pop_security
from kraft.api.client.futures import RecordFuture, RecordFutures
from kraft.api.client.idempotence import MAX_IN_FLIGHT_IDEMPOTENT
from kraft.api.client.sender import Sender, SenderConfig, now_ms
from kraft.api.client.transactions import PreparedTransaction, TransactionManager
from kraft.api.client.transport import Transport
from kraft.api.client.types import Headers, TopicPartition
from kraft.api.errors import KraftError
from kraft.api.partitioner import StickyPartitioner, partition_for_key
from kraft.log.batch import COMPRESSIONS, row_ends

MAX_TIMESTAMP = 2**63  # timestamps are int64 milliseconds, and never negative (as in Kafka)
_Appended = TypeVar("_Appended")


def _nones() -> Iterator[None]:
    while True:
        yield None

HeadersIn = Mapping[str, Any] | Iterable[tuple[str, Any]] | None


def parse_acks(acks: int | str) -> int:
    """Kafka's acks values: 0, 1, -1 / "all"."""
    text = str(acks).strip().lower()
    if text == "all":
        return -1
    if text in ("0", "1", "-1"):
        return int(text)
    raise KraftError("INVALID_REQUIRED_ACKS", f"acks must be 0, 1, -1 or all, got {acks!r}")


def to_bytes(data: Any, what: str) -> bytes | None:
    if data is None or data.__class__ is bytes:
        return data
    if isinstance(data, str):
        return data.encode()
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise KraftError("INVALID_RECORD", f"{what} must be bytes, str or None, not {type(data).__name__}")


def normalize_headers(headers: HeadersIn) -> Headers:
    if not headers:
        return ()
    items = headers.items() if isinstance(headers, Mapping) else headers
    out = []
    for item in items:
        try:
            k, v = item
        except (TypeError, ValueError):
            raise KraftError("INVALID_RECORD", f"a header must be a (str, bytes|str|None) pair, got {item!r}") from None
        if not isinstance(k, str):
            raise KraftError("INVALID_RECORD", f"header names must be str, got {k!r}")
        out.append((k, to_bytes(v, f"header {k!r}")))
    return tuple(out)


class Producer:
    """Thread-safe; one instance per process is usually enough.

    Defaults follow Kafka's producer except `batch_size` (64 KiB: records here are cheaper to
    batch than to send), `retries` (bounded by `delivery_timeout_ms`, as in Kafka), and
    `enable_idempotence`, off because it needs `acks="all"` and the default here is acks=1.

    `enable_idempotence=True` (Kafka's enable.idempotence; docs/idempotence.md): a retried batch
    whose first answer was lost is written once, in order. The producer gets a producer id from
    the cluster, numbers each partition's batches, keeps up to
    `max_in_flight_requests_per_connection` requests in flight per leader (default 5, at most 5,
    as Kafka's) and sends a retried batch alone for its partition once nothing before it is in
    flight, so a partition's records are written in order through retries. A duplicate is a
    success with the original offsets (-1 when the broker no longer has them); sequence errors
    are retried or bump the epoch as Kafka's client does. Without idempotence the default is one
    request in flight per leader, which keeps order without sequence numbers; more may reorder a
    partition's batches when one is retried (or overtakes another: each request in flight has
    its own connection), as Kafka warns for max.in.flight.requests.per.connection > 1.

    kafka-python's keywords work (`key_serializer`, `value_serializer`, `client_id`, ...;
    docs/client.md has the table): `KafkaProducer(**configs)` code runs with the class renamed.
    A topic that does not exist is created by the broker on the first send when
    auto.create.topics.enable (`allow_auto_create_topics`, as Kafka's producer asks for it), else
    `send` raises UNKNOWN_TOPIC_OR_PARTITION at once with the broker's reason."""

    def __init__(
        self,
        bootstrap_servers: str | list[str] = "127.0.0.1:9092",
        *,
        client_id: str | None = None,
        key_serializer: Callable[[Any], Any] | None = None,
        value_serializer: Callable[[Any], Any] | None = None,
        acks: int | str | None = None,
        linger_ms: int = 5,
        batch_size: int = 16384 * 4,
        compression_type: str | None = "none",
        retries: int = 2_147_483_647,
        retry_backoff_ms: int = 100,
        max_request_size: int = 1_048_576,
        delivery_timeout_ms: int = 120_000,
        request_timeout_ms: int = 30_000,
        buffer_memory: int = 32 * 1024 * 1024,
        max_block_ms: int = 60_000,
        metadata_max_age_ms: int = 300_000,
        enable_idempotence: bool = False,
        max_in_flight_requests_per_connection: int | None = None,
        allow_auto_create_topics: bool = True,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60_000,
        **configs: Any,
    ) -> None:
        security = pop_security(configs)
        if transactional_id is not None:
            enable_idempotence = True  # a transactional producer is idempotent, as in Kafka
        if acks is None:
            acks = "all" if enable_idempotence else 1
        check_unused_configs("producer", configs)
        compression_type = compression_type or "none"  # kafka-python's default is None
        if compression_type not in COMPRESSIONS:
            raise KraftError("INVALID_CONFIG", f"compression_type must be one of {', '.join(COMPRESSIONS)}, got {compression_type!r}")
        if batch_size <= 0 or linger_ms < 0 or max_request_size <= 0 or retries < 0:
            raise KraftError("INVALID_CONFIG", "batch_size and max_request_size must be > 0, linger_ms and retries >= 0")
        if enable_idempotence and (parse_acks(acks) != -1 or retries == 0):
            raise KraftError("INVALID_CONFIG", "enable_idempotence needs acks='all' and retries > 0, as in Kafka")
        max_in_flight = max_in_flight_requests_per_connection
        if max_in_flight is None:
            max_in_flight = MAX_IN_FLIGHT_IDEMPOTENT if enable_idempotence else 1
        if max_in_flight < 1 or (enable_idempotence and max_in_flight > MAX_IN_FLIGHT_IDEMPOTENT):
            raise KraftError("INVALID_CONFIG", f"max_in_flight_requests_per_connection must be >= 1 and, with "
                                               f"enable_idempotence, <= {MAX_IN_FLIGHT_IDEMPOTENT} (the batches a broker "
                                               f"keeps per producer to recognise a retry), as in Kafka; got {max_in_flight}")
        self.client_id = client_id or "kraft-producer"
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer
        self._transport = Transport(bootstrap_servers, request_timeout_ms, security, self.client_id)
        self._metadata = MetadataCache(self._transport, retry_backoff_ms, metadata_max_age_ms,
                                       allow_auto_create=allow_auto_create_topics)
        self._acc = RecordAccumulator(batch_size, linger_ms, one_batch_per_partition=enable_idempotence)
        self._txn = None if transactional_id is None else TransactionManager(
            self._transport, transactional_id, transaction_timeout_ms, max_block_ms / 1000, retry_backoff_ms / 1000)
        self._lock = threading.Lock()
        self._space = threading.Condition(self._lock)
        self._sticky = StickyPartitioner()
        self._sticky_tps: dict[str, TopicPartition] = {}  # the sticky partition per topic (lock held)
        self._wake = False  # a new batch opened: yield to the sender once the lock is released
        self._wake_sender = False  # ... and its leader has a request to spare: wake the sender too
        self._topics: dict[str, tuple[ClusterSnapshot, int, list[TopicPartition]]] = {}
        self._max_record_size = min(max_request_size, buffer_memory)
        self._buffer_memory = buffer_memory
        self._max_block_s = max_block_ms / 1000
        self._closed = False
        # `send` may take its fast path: nothing to serialize, no transaction to check
        self._plain = key_serializer is None and value_serializer is None and self._txn is None
        self._sender = Sender(
            self._acc, self._lock, self._space, self._metadata, self._transport,
            SenderConfig(
                acks=parse_acks(acks),
                compression_type=compression_type,
                retries=retries,
                retry_backoff_ms=retry_backoff_ms,
                request_timeout_ms=request_timeout_ms,
                delivery_timeout_ms=delivery_timeout_ms,
                max_request_size=max_request_size,
                idempotence=enable_idempotence,
                max_in_flight=max_in_flight,
                transactional_id=transactional_id,
            ),
            self._txn,
        )
        self._sender.start()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def partitions_for(self, topic: str) -> list[int]:
        return list(range(self._topic_state(topic)[1]))

    def _topic_state(self, topic: str) -> tuple[ClusterSnapshot, int, list[TopicPartition]]:
        """(snapshot, partition count, TopicPartitions) of `topic`, cached per metadata snapshot so
        `send` does one dict lookup; waits up to max_block_ms for an unknown topic."""
        snapshot = self._metadata.snapshot
        count = snapshot.partition_count(topic)
        if not count:
            count = self._metadata.wait_for_topic(topic, self._max_block_s)
            snapshot = self._metadata.snapshot
        state = self._topics.get(topic)
        tps = state[2] if state is not None and len(state[2]) == count else [TopicPartition(topic, p) for p in range(count)]
        state = self._topics[topic] = (snapshot, count, tps)
        self._sticky_tps.pop(topic, None)
        return state

    # -- transactions (docs/transactions.md) ----------------------------------------------------

    def _transactions(self) -> TransactionManager:
        if self._txn is None:
            raise KraftError("INVALID_TXN_STATE", "this producer has no transactional_id")
        return self._txn

    def init_transactions(self) -> None:
        """Registers the transactional id with its coordinator: gets the producer id and a new
        epoch, fencing any older producer of the same id (its open transaction is aborted)."""
        pid, epoch = self._transactions().init()
        self._sender.set_producer(pid, epoch)

    def begin_transaction(self) -> None:
        self._transactions().begin()

    def send_offsets_to_transaction(self, offsets: dict[TopicPartition, Any], consumer_group_metadata: Any) -> None:
        """Commits the consumer's `offsets` (ints or OffsetAndMetadata: the next offset to read)
        as part of the transaction: the group sees them only if it commits.
        `consumer_group_metadata`: `consumer.group_metadata()` or the group id."""
        group_id = getattr(consumer_group_metadata, "group_id", consumer_group_metadata)
        if not isinstance(group_id, str) or not group_id:
            raise KraftError("INVALID_REQUEST", f"a group id is needed, got {consumer_group_metadata!r}")
        self._transactions().send_offsets(offsets, group_id)

    def commit_transaction(self) -> None:
        """Sends what is queued, then commits: every record of the transaction becomes visible
        to read_committed consumers, with its offsets. Raises TransactionAbortableError when a
        send failed (abort then) and TransactionFatalError when the producer was fenced."""
        self._flushed_transaction().end(commit=True)

    def _flushed_transaction(self) -> TransactionManager:
        """The transaction, every record of it sent and acknowledged."""
        txn = self._transactions()
        txn.check_sendable()
        self.flush(self._max_block_s)  # REQUEST_TIMED_OUT past max_block_ms: call it again
        txn.check_sendable()  # a record failed meanwhile: the transaction can only abort
        return txn

    def prepare_transaction(self) -> PreparedTransaction | None:
        """Sends what is queued and leaves the transaction open for another process to end
        (KIP-939's prepareTransaction; `Admin.end_transaction` commits or aborts it): what it
        needs, or None when the transaction holds nothing. The producer can only be
        re-initialised afterwards (which aborts the transaction if it is still open)."""
        return self._flushed_transaction().prepare()

    def abort_transaction(self) -> None:
        """Sends what is queued, then aborts: read_committed consumers never see the records."""
        txn = self._transactions()
        self.flush(self._max_block_s)
        txn.end(commit=False)

    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: HeadersIn = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> RecordFuture:
        """Queues a record (kafka-python's argument order); the future resolves to RecordMetadata
        or raises KraftError. A topic unknown to the client is looked up first (and created by
        the broker when it allows), for up to max_block_ms."""
        if (value.__class__ is bytes and key is None and headers is None and partition is None
                and timestamp_ms is None and self._plain):
            future = self._try_send_plain(topic, value)
            if future is not None:
                return future
        if self._txn is not None:
            self._txn.check_sendable()
        key, value, hdrs, size, timestamp_ms = self._prepare(topic, value, key, headers, timestamp_ms)
        state = self._state(topic)
        with self._lock:
            future = self._append(topic, state, partition, key, value, hdrs, timestamp_ms, size)
            if not self._wake:
                return future
            wake_sender, self._wake, self._wake_sender = self._wake_sender, False, False
        self._woken(wake_sender)
        return future

    def _try_send_plain(self, topic: str, value: bytes) -> RecordFuture | None:
        """The commonest send, a keyless bytes value into the open batch of its topic's sticky
        partition, with the same checks as `send`'s but no call per step (an eighth of `send`'s
        CPU at 100 B); None when anything else is needed (a new batch, a
        metadata change, a full buffer, an error to raise): `send` takes over then."""
        size = len(value) + RECORD_OVERHEAD
        if size > self._max_record_size or self._closed:
            return None
        state = self._topics.get(topic)
        if state is None or state[0] is not self._metadata.snapshot:
            return None
        timestamp_ms = time.time_ns() // 1_000_000
        with self._lock:
            acc = self._acc
            tp = self._sticky_tps.get(topic)
            if tp is None or acc.buffered_bytes + size > self._buffer_memory:
                return None
            return acc.try_append(tp, None, value, (), timestamp_ms, size)

    def send_many(
        self,
        topic: str,
        values: Iterable[Any],
        keys: Iterable[Any] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> RecordFutures:
        """Queues `values` (with `keys`, paired in order, when given) as `send` would one by one,
        for an application that already holds many records: the topic's metadata is looked up and
        the producer's lock taken once, and the records share one timestamp (now, unless given).
        Every record is checked before any is queued (a bad one raises as `send` would, naming
        its position). Returns their futures in order, each reporting its own record's outcome.
        Keyless bytes values (no serializer) are packed a batch at a time, in one pass."""
        if self._txn is not None:
            self._txn.check_sendable()
        if timestamp_ms is None:
            timestamp_ms = time.time_ns() // 1_000_000
        if not isinstance(values, list):
            values = list(values)
        if keys is None and partition is None and self._key_serializer is None and self._value_serializer is None:
            ends = self._plain_ends(values, timestamp_ms)
            if ends is not None:
                return self._send_values(topic, values, ends, timestamp_ms)
        prepared = []
        for position, (value, key) in enumerate(zip(values, keys if keys is not None else _nones())):
            try:
                prepared.append(self._prepare(topic, value, key, None, timestamp_ms))
            except KraftError as e:
                raise KraftError(e.error_code, f"record {position}: {e.message}") from None
        state = self._state(topic)
        futures = RecordFutures(timestamp_ms)
        with self._lock:
            append, add = self._append, futures.add
            for key, value, hdrs, size, ts in prepared:
                future = append(topic, state, partition, key, value, hdrs, ts, size)
                add(future.produce_result, future.index, 1)
            woke, wake_sender, self._wake, self._wake_sender = self._wake, self._wake_sender, False, False
        if woke:
            self._woken(wake_sender)
        return futures

    def _plain_ends(self, values: list[Any], timestamp_ms: int) -> list[int] | None:
        """`row_ends` of `values` when `send_many` may pack them a batch at a time: all bytes,
        none too large, a valid timestamp, an open producer; None: the per-record path (which
        raises for what is wrong)."""
        if (not values or self._closed or timestamp_ms.__class__ is not int
                or not 0 <= timestamp_ms < MAX_TIMESTAMP or set(map(type, values)) != {bytes}):
            return None
        sizes = list(map(len, values))
        if max(sizes) + RECORD_OVERHEAD > self._max_record_size:
            return None
        return row_ends(sizes)

    def _send_values(self, topic: str, values: list[bytes], ends: list[int], timestamp_ms: int) -> RecordFutures:
        """Keyless `values` into the sticky partition's batches, a batch's worth per pack, moving
        on to another partition when one needs a new batch, as `send` one by one would (KIP-480)."""
        snapshot, count, tps = self._state(topic)
        futures = RecordFutures(timestamp_ms)
        acc = self._acc
        start, n = 0, len(values)
        with self._lock:
            while start < n:
                first = ends[start] - (ends[start - 1] if start else 0)
                if acc.buffered_bytes + first > self._buffer_memory:
                    self._wait_for_space(first)
                room = self._buffer_memory - acc.buffered_bytes
                tp = self._sticky_tps.get(topic)
                appended = None if tp is None else acc.try_append_values(tp, values, ends, start, timestamp_ms, room)
                if appended is None:
                    appended = self._append_sticky(
                        snapshot, topic, count, tps,
                        lambda tp: acc.try_append_values(tp, values, ends, start, timestamp_ms, room),
                        lambda tp: acc.append_values_new_batch(tp, values, ends, start, timestamp_ms, room, now_ms()))
                result, index, stop = appended
                futures.add(result, index, stop - start)
                start = stop
            woke, wake_sender, self._wake, self._wake_sender = self._wake, self._wake_sender, False, False
        if woke:
            self._woken(wake_sender)
        return futures

    def _state(self, topic: str) -> tuple[ClusterSnapshot, int, list[TopicPartition]]:
        state = self._topics.get(topic)
        if state is None or state[0] is not self._metadata.snapshot:
            state = self._topic_state(topic)
        return state

    def _prepare(self, topic: str, value: Any, key: Any, headers: HeadersIn,
                 timestamp_ms: int | None) -> tuple[bytes | None, bytes | None, Headers, int, int]:
        """A record checked and serialized: (key, value, headers, size, timestamp)."""
        if self._closed:
            raise KraftError("INVALID_REQUEST", "cannot send after the producer is closed")
        if self._value_serializer is not None:
            value = serializing(self._value_serializer, topic, value)
        if self._key_serializer is not None:
            key = serializing(self._key_serializer, topic, key)
        if value.__class__ is not bytes:
            value = to_bytes(value, "value")
        if key is not None and key.__class__ is not bytes:
            key = to_bytes(key, "key")
        size = (len(key) if key else 0) + (len(value) if value else 0) + RECORD_OVERHEAD
        if headers:
            hdrs = normalize_headers(headers)
            size += sum(len(k) + len(v or b"") + 4 for k, v in hdrs)
        else:
            hdrs = ()
        if size > self._max_record_size:
            raise KraftError("MESSAGE_TOO_LARGE", f"the record is {size} bytes, more than max_request_size/buffer_memory")
        if timestamp_ms is None:
            timestamp_ms = time.time_ns() // 1_000_000
        elif timestamp_ms.__class__ is not int or not 0 <= timestamp_ms < MAX_TIMESTAMP:
            raise KraftError("INVALID_TIMESTAMP", f"timestamp_ms must be an int in [0, 2**63), got {timestamp_ms!r}")
        return key, value, hdrs, size, timestamp_ms

    def _append(
        self, topic: str, state: tuple[ClusterSnapshot, int, list[TopicPartition]], partition: int | None,
        key: bytes | None, value: bytes | None, hdrs: Headers, timestamp_ms: int, size: int,
    ) -> RecordFuture:
        """Appends one prepared record to its partition's batch (lock held); sets `_wake` when a
        new batch opened."""
        snapshot, count, tps = state
        if partition is not None:
            if partition.__class__ is not int or not 0 <= partition < count:
                raise KraftError("UNKNOWN_TOPIC_OR_PARTITION", f"partition {partition!r} of {topic!r} does not exist ({count} partitions)")
            tp = tps[partition]
        elif key is not None:
            tp = tps[partition_for_key(key, count)]
        else:
            tp = None
        acc = self._acc
        if acc.buffered_bytes + size > self._buffer_memory:
            self._wait_for_space(size)
        if tp is None:
            tp = self._sticky_tps.get(topic)
            future = None if tp is None else acc.try_append(tp, key, value, hdrs, timestamp_ms, size)
            if future is None:
                future = self._append_sticky(
                    snapshot, topic, count, tps, lambda tp: acc.try_append(tp, key, value, hdrs, timestamp_ms, size),
                    lambda tp: acc.append_new_batch(tp, key, value, hdrs, timestamp_ms, size, now_ms()))
            return future
        future = acc.try_append(tp, key, value, hdrs, timestamp_ms, size)
        if future is None:
            future = acc.append_new_batch(tp, key, value, hdrs, timestamp_ms, size, now_ms())
            self._opened(snapshot, tp)
        return future

    def _opened(self, snapshot: ClusterSnapshot, tp: TopicPartition) -> None:
        """A new batch of `tp` opened (lock held). The sender is woken for it only when its
        leader has a request to spare: with every request in flight, the I/O worker that gets
        an answer drains the leader's next batches itself and wakes the sender after, so a
        wake-up now would only cost the sender thread a round (at 1 KiB records, a quarter of
        the client's CPU)."""
        self._wake = True
        if not self._sender.leader_busy(snapshot.leader_id(tp)):
            self._wake_sender = True

    def _woken(self, wake_sender: bool) -> None:
        if wake_sender:
            self._sender.wakeup()
        # A new batch means the previous one is complete: yield the GIL so the sender's threads
        # run now, not after the 5 ms switch interval of a caller that sends in a tight loop
        # (without this the buffer fills up and acks=1 latency is ~0.5 s at full speed).
        time.sleep(0)

    def _append_sticky(
        self, snapshot: ClusterSnapshot, topic: str, count: int, tps: list[TopicPartition],
        attempt: Callable[[TopicPartition], _Appended | None], open_new: Callable[[TopicPartition], _Appended],
    ) -> _Appended:
        """Keyless records whose sticky partition has no room (lock held): KIP-480 moves on to
        another partition when the sticky one needs a new batch. `attempt` appends to a
        partition's open batch (None: no room), `open_new` to a new batch of it."""
        p = self._sticky.partition(topic, count)
        appended = attempt(tps[p])
        if appended is None:
            p = self._sticky.on_new_batch(topic, count, p)
            appended = attempt(tps[p])
            if appended is None:
                appended = open_new(tps[p])
                self._opened(snapshot, tps[p])
        self._sticky_tps[topic] = tps[p]
        return appended

    def _wait_for_space(self, size: int) -> None:
        """Blocks (lock held by the caller) until buffer memory frees up, like Kafka's max.block.ms."""
        deadline = time.monotonic() + self._max_block_s
        self._acc.space_waiters += 1
        self._sender.wakeup()
        try:
            while self._acc.buffered_bytes + size > self._buffer_memory:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise KraftError("REQUEST_TIMED_OUT", f"no buffer memory freed within {self._max_block_s:g} s")
                self._space.wait(remaining)
        finally:
            self._acc.space_waiters -= 1

    def flush(self, timeout: float | None = None) -> None:
        """Sends everything queued now and waits for it; raises REQUEST_TIMED_OUT on timeout.
        Record errors are reported through their futures, not here."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self._sender.begin_flush()
        try:
            with self._lock:
                pending = [b.result for b in self._acc.incomplete]
            for result in pending:
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not result.wait(remaining):
                    raise KraftError("REQUEST_TIMED_OUT", f"flush did not complete within {timeout} s")
        finally:
            self._sender.end_flush()

    def close(self, timeout: float | None = None) -> None:
        """Flushes (up to `timeout`), then stops the sender; records still queued then fail."""
        if self._closed:
            return
        self._closed = True
        try:
            self.flush(timeout)
            force = False
        except KraftError:
            force = True
        self._sender.close(force)
        self._transport.close()
