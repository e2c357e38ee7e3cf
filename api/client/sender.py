"""The producer's background sender: drains ready batches from the accumulator, sends one
`POST /v1/produce` per partition leader (all its ready partitions in one request), completes the
batch futures with offsets, retries retriable errors after `retry_backoff_ms` within
`delivery_timeout_ms`.

At most `max_in_flight` requests are in flight per leader (Kafka's
max.in.flight.requests.per.connection), each from its own I/O worker over that worker's
connection, so a record need not wait for the request before it to be answered. With 1 (the
default without idempotence) a partition's batches, retries included, reach the log in order.
With `idempotence` (default 5, at most 5: the broker keeps the last 5 batches of a producer to
recognise retries), the sender first gets a producer id (`POST /v1/producers/init`), gives each
batch its sequence when first drained, and follows `api/client/idempotence.py` on sequence
errors: the broker appends a partition's batches only in sequence order and answers
OUT_OF_ORDER_SEQUENCE_NUMBER to one that overtook its predecessor, which is retried once
nothing else of its partition is in flight, in sequence order (the accumulator's rule), so
order holds through retries and leader changes; a duplicate answer is a success with the
original offsets (-1 when the broker no longer knows them). The I/O worker that got an answer
drains and sends that leader's next batches itself, so a busy leader costs no thread hand-off
per request (docs/benchmarks.md).
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any

import msgpack

from kraft.api.client.accumulator import ProducerBatch, RecordAccumulator
from kraft.api.client.cluster import METADATA_ERRORS, MetadataCache
from kraft.api.client.idempotence import IdempotenceState
from kraft.api.client.transactions import TransactionManager
from kraft.api.client.throttle import BrokerThrottle
from kraft.api.client.packed_body import PackedBody, bin_header
from kraft.api.client.transport import Address, Transport
from kraft.api.client.types import TopicPartition
from kraft.api.errors import KraftError

log = logging.getLogger(__name__)

# msgpack's C packer runs under the GIL: the I/O workers may share it
_body_packer = msgpack.Packer(use_bin_type=True)
_PARTITION_HEADER = _body_packer.pack_map_header(3)
_IDLE_WAIT_S = 1.0  # upper bound of a sender wait, so metadata ages and close are noticed


def now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


@dataclass(frozen=True)
class SenderConfig:
    acks: int
    compression_type: str
    retries: int
    retry_backoff_ms: int
    request_timeout_ms: int
    delivery_timeout_ms: int
    max_request_size: int
    idempotence: bool = False
    max_in_flight: int = 1  # requests per leader
    # a TransactionManager's: batches carry the transactional bit, requests the id (the broker
    # refuses transactional batches without an id the principal may Write, as Kafka does)
    transactional_id: str | None = None


def produce_body(batches: list[ProducerBatch], config: SenderConfig) -> tuple[PackedBody, dict[TopicPartition, list[ProducerBatch]]]:
    """The `POST /v1/produce` body for drained batches, and the batches grouped by partition in
    the order they are concatenated (pure). The body is the msgpack of {acks, timeout_ms,
    partitions: [{topic, partition, records}], transactional_id?} with each partition's batches
    as parts of their own after its `records` bin header: sent without being joined (one copy of
    the records less per request)."""
    by_tp: dict[TopicPartition, list[ProducerBatch]] = {}
    for batch in batches:
        by_tp.setdefault(batch.tp, []).append(batch)
    transactional = config.transactional_id is not None
    pack = _body_packer.pack
    parts = [_body_packer.pack_map_header(4 if transactional else 3) + pack("acks") + pack(config.acks)
             + pack("timeout_ms") + pack(config.request_timeout_ms) + pack("partitions")
             + _body_packer.pack_array_header(len(by_tp))]
    for tp, in_tp in by_tp.items():
        records = [b.encode(config.compression_type, transactional) for b in in_tp]
        parts.append(_PARTITION_HEADER + pack("topic") + pack(tp.topic) + pack("partition") + pack(tp.partition)
                     + pack("records") + bin_header(sum(map(len, records))))
        parts += records
    if transactional:
        parts.append(pack("transactional_id") + pack(config.transactional_id))
    return PackedBody(parts), by_tp


def partition_outcomes(
    answer: Any, by_tp: dict[TopicPartition, list[ProducerBatch]], acks: int
) -> dict[TopicPartition, int | KraftError]:
    """Maps a produce answer to a base offset or an error per partition (pure). acks=0 has no
    offsets: -1."""
    entries: dict[TopicPartition, dict[str, Any]] = {}
    for p in (answer or {}).get("partitions", ()):
        entries[TopicPartition(p["topic"], int(p["partition"]))] = p
    out: dict[TopicPartition, int | KraftError] = {}
    for tp in by_tp:
        entry = entries.get(tp)
        if acks == 0:
            out[tp] = -1
        elif entry is None:
            out[tp] = KraftError("UNKNOWN_SERVER_ERROR", f"produce answer has no entry for {tp.topic}-{tp.partition}")
        elif entry.get("error_code"):
            out[tp] = KraftError(entry["error_code"], entry.get("message") or "")
        elif entry.get("base_offset") is None:
            out[tp] = -1
        else:
            out[tp] = int(entry["base_offset"])
    return out


class SendOrder:
    """Per leader, requests are written in the order they were drained: one drained after
    another waits until that one is written (not answered). Each request in flight has its own
    I/O worker and connection, so without this a later batch of a partition could reach the
    broker first and be refused as out of sequence (then retried: correct, but slower)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._drained: dict[int, int] = {}  # tickets handed out per leader
        self._written: dict[int, int] = {}  # tickets below this are written (or gave up) per leader

    def ticket(self, node: int) -> int:
        """The next request's place for `node`: take it where the batches are drained."""
        with self._cond:
            ticket = self._drained.get(node, 0)
            self._drained[node] = ticket + 1
            return ticket

    def wait_turn(self, node: int, ticket: int, timeout_s: float) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._written.get(node, 0) >= ticket, timeout_s)

    def written(self, node: int, ticket: int) -> None:
        """The request holding `ticket` was written, or will not be: the next one may go."""
        with self._cond:
            if self._written.get(node, 0) <= ticket:
                self._written[node] = ticket + 1
                self._cond.notify_all()


class Sender:
    def __init__(
        self,
        accumulator: RecordAccumulator,
        lock: threading.Lock,
        space: threading.Condition,
        metadata: MetadataCache,
        transport: Transport,
        config: SenderConfig,
        transactions: TransactionManager | None = None,
    ) -> None:
        """`transactions`: a transactional producer's; its producer id comes from
        init_transactions and each partition joins the transaction before its first batch."""
        self._acc = accumulator
        self._txn = transactions
        self._lock = lock
        self._space = space  # notified when buffer memory is released
        self._metadata = metadata
        self._transport = transport
        self._config = config
        self._idempotence = IdempotenceState() if config.idempotence else None  # guarded by _lock
        self._wakeup = threading.Event()
        self._in_flight: dict[int, int] = {}  # requests in flight per leader (guarded by _lock)
        self._in_flight_batches: dict[TopicPartition, int] = {}  # batches in flight per partition (same)
        self._order = SendOrder()
        self._flushes = 0
        self._closing = False
        self._force_close = False  # fail what is left instead of sending it
        self._warned: set[str] = set()  # error codes retried and logged at WARNING since the last success
        self._executor = ThreadPoolExecutor(max_workers=16, thread_name_prefix="kraft-producer-io")
        self._throttle = BrokerThrottle()
        self._thread = threading.Thread(target=self._run, name="kraft-producer-sender", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wakeup(self) -> None:
        self._wakeup.set()

    def leader_busy(self, leader: int | None) -> bool:
        """Every request `leader` may have is in flight (lock held): the I/O worker answered
        first drains its next batches (`_produce`), so a new batch for it needs no wake-up."""
        return leader is not None and self._in_flight.get(leader, 0) >= self._config.max_in_flight

    def begin_flush(self) -> None:
        with self._lock:
            self._flushes += 1
        self._wakeup.set()

    def end_flush(self) -> None:
        with self._lock:
            self._flushes -= 1

    def close(self, force: bool) -> None:
        """Stops after everything queued is sent (or, with `force`, failed)."""
        with self._lock:
            self._closing = True
            self._force_close = force
        self._wakeup.set()
        self._thread.join()
        self._executor.shutdown(wait=True)

    def _run(self) -> None:
        while True:
            try:
                if self._run_once():
                    return
            except Exception:  # the sender must survive anything; batches expire by timeout
                log.exception("producer sender loop failed")
                self._wakeup.wait(self._config.retry_backoff_ms / 1000)

    def _run_once(self) -> bool:
        """One round; True when closing and nothing is left to send."""
        self._metadata.maybe_refresh()
        have_producer_id = self._ensure_producer_id() and self._add_to_transaction()
        snapshot = self._metadata.snapshot
        now = now_ms()
        with self._lock:
            self._wakeup.clear()
            if self._closing and not self._acc.has_queued() and not self._in_flight:
                return True
            expired = self._acc.expire(now, self._config.delivery_timeout_ms)
            aborted = self._acc.abort_all() if self._force_close else []
            for batch in expired:
                if self._idempotence is not None and batch.sequence is not None and self._txn is None:
                    self._idempotence.bump_epoch(batch.sequence)  # its sequences never arrive
            full = [n for n, count in self._in_flight.items() if count >= self._config.max_in_flight]
            check = self._acc.ready(now, snapshot.leader_id, full, self._closing or self._flushes > 0,
                                    self._in_flight_batches)
            if have_producer_id and self._txn is not None and self._txn.unadded(self._acc.queued_partitions()):
                have_producer_id = False  # a batch for a new partition came meanwhile: add it first
            nodes = check.ready_nodes if have_producer_id else frozenset()
            drained = self._acc.drain(nodes, snapshot.leader_id, self._config.max_request_size, now,
                                      self._in_flight_batches)
            self._assign_sequences(drained)
            tickets = {}
            for node, batches in drained.items():
                self._in_flight[node] = self._in_flight.get(node, 0) + 1
                self._count_in_flight(batches, 1)
                tickets[node] = self._order.ticket(node)
        for batch in expired:
            self._settle(batch, -1, self._expired_error(batch))
        for batch in aborted:
            self._settle(batch, -1, KraftError("REQUEST_TIMED_OUT", "producer closed before the record was sent"))
        if check.unknown_leader_topics:
            self._metadata.add_topics(check.unknown_leader_topics)
            self._metadata.request_update()
        for node, batches in drained.items():
            self._executor.submit(self._produce, node, snapshot.broker_address(node), batches, tickets[node])
        wait_ms = _IDLE_WAIT_S * 1000
        if check.next_ready_ms is not None:
            wait_ms = min(wait_ms, check.next_ready_ms - now)
        if check.unknown_leader_topics or not have_producer_id:
            wait_ms = min(wait_ms, self._config.retry_backoff_ms)
        if wait_ms > 0 and not drained:
            self._wakeup.wait(wait_ms / 1000)
        return False

    def _expired_error(self, batch: ProducerBatch) -> KraftError:
        """REQUEST_TIMED_OUT for a batch past delivery_timeout_ms, naming the error its retries
        got (NOT_ENOUGH_REPLICAS, ...): the cause, not just the timeout."""
        tp = f"{batch.tp.topic}-{batch.tp.partition}"
        message = f"{tp}: delivery timeout ({self._config.delivery_timeout_ms} ms) expired"
        cause: KraftError | None = batch.last_error
        if cause is None:
            return KraftError("REQUEST_TIMED_OUT", f"{message} before the record was sent")
        error = KraftError("REQUEST_TIMED_OUT", f"{message} after {batch.attempts} attempts; last error: {cause}",
                           last_error_code=cause.error_code)
        error.__cause__ = cause
        return error

    def _log_retry(self, tp: TopicPartition, error: KraftError, batches: int) -> None:
        """The first retry after each cause at WARNING (what an operator must see: e.g.
        NOT_ENOUGH_REPLICAS while acks=all waits), the repeats at DEBUG."""
        if error.error_code in self._warned:
            log.debug("retrying %d batches of %s-%s after %s", batches, tp.topic, tp.partition, error)
            return
        self._warned.add(error.error_code)
        log.warning("produce to %s-%s failed, retrying for up to delivery_timeout_ms=%d: %s "
                    "(further retries after %s are logged at DEBUG)",
                    tp.topic, tp.partition, self._config.delivery_timeout_ms, error, error.error_code)

    def _ensure_producer_id(self) -> bool:
        """Whether batches may be drained: always without idempotence; otherwise once a
        producer id is known (fetched here, retried next round on failure)."""
        if self._idempotence is None or self._idempotence.producer is not None:
            return True
        if self._txn is not None:
            return False  # init_transactions sets it
        try:
            answer = self._transport.request("POST", "/v1/producers/init", {},
                                             timeout_s=self._config.request_timeout_ms / 1000)
        except KraftError as e:
            log.debug("no producer id yet: %s", e)
            return False
        with self._lock:
            if self._idempotence.producer is None:
                self._idempotence.set_producer(int(answer["producer_id"]), int(answer["producer_epoch"]))
        return True

    def set_producer(self, producer_id: int, producer_epoch: int) -> None:
        """The transactional producer's id and epoch (init_transactions): sequences restart."""
        assert self._idempotence is not None
        with self._lock:
            self._idempotence.set_producer(producer_id, producer_epoch)
        self._wakeup.set()

    def _add_to_transaction(self) -> bool:
        """Whether batches may be drained: every partition with a queued batch is in the
        transaction (added here first). A refused partition fails the queued batches (the
        transaction must be aborted); a retriable error waits for the next round."""
        if self._txn is None:
            return True
        with self._lock:
            queued = self._acc.queued_partitions()
        if not self._txn.unadded(queued):
            return True
        try:
            self._txn.add_partitions(queued)
            return True
        except KraftError as e:
            if e.retriable:
                log.debug("partitions not added to the transaction yet: %s", e)
                return False
            with self._lock:
                failed = self._acc.abort_all()
            for batch in failed:
                self._settle(batch, -1, e)
            return False

    def _assign_sequences(self, drained: dict[int, list[ProducerBatch]]) -> None:
        """Sequences for batches drained for the first time, in drain order, and whether each
        goes out behind an unacknowledged batch (lock held)."""
        if self._idempotence is None:
            return
        for batches in drained.values():
            for batch in batches:
                if batch.sequence is None:
                    batch.sequence = self._idempotence.assign(batch.tp, batch.record_count)
                batch.sent_behind_unacked = self._idempotence.behind_unacked(batch.tp, batch.sequence)

    def _produce(self, node: int, address: Address | None, batches: list[ProducerBatch], ticket: int) -> None:
        """Runs in an I/O worker: sends `batches`, then, while `node` has more sendable batches,
        drains and sends those too before giving the node back to the sender thread. Each
        thread hand-off costs a wait for the GIL (up to the 5 ms switch interval while the
        application's thread is busy in send()), so a busy leader is served without one."""
        try:
            while batches:
                self._produce_once(node, address, batches, ticket)
                batches, address, ticket = self._drain_node(node)
        finally:
            with self._lock:
                self._in_flight[node] -= 1
                if not self._in_flight[node]:
                    del self._in_flight[node]
            self._wakeup.set()

    def _count_in_flight(self, batches: list[ProducerBatch], step: int) -> None:
        """Adds `step` per batch to its partition's count of batches in flight (lock held)."""
        counts = self._in_flight_batches
        for batch in batches:
            count = counts.get(batch.tp, 0) + step
            if count:
                counts[batch.tp] = count
            else:
                del counts[batch.tp]

    def _drain_node(self, node: int) -> tuple[list[ProducerBatch], Address | None, int]:
        """The sendable batches led by `node` now (none when closing by force), and their
        request's ticket."""
        snapshot = self._metadata.snapshot
        now = now_ms()
        with self._lock:
            if self._force_close:
                return [], None, -1
            if self._txn is not None and self._txn.unadded(self._acc.queued_partitions()):
                return [], None, -1  # the sender thread adds them to the transaction first
            check = self._acc.ready(now, snapshot.leader_id, (), self._closing or self._flushes > 0,
                                    self._in_flight_batches)
            if node not in check.ready_nodes:
                return [], None, -1
            drained = self._acc.drain((node,), snapshot.leader_id, self._config.max_request_size, now,
                                      self._in_flight_batches).get(node, [])
            self._assign_sequences({node: drained})
            self._count_in_flight(drained, 1)
            ticket = self._order.ticket(node) if drained else -1
        return drained, snapshot.broker_address(node), ticket

    def _produce_once(self, node: int, address: Address | None, batches: list[ProducerBatch], ticket: int) -> None:
        landed = False  # the batches no longer count as in flight
        written = partial(self._order.written, node, ticket)
        try:
            body, by_tp = produce_body(batches, self._config)
            try:
                if address is None:
                    raise KraftError("LEADER_NOT_AVAILABLE", f"broker {node} is not in the metadata")
                self._throttle.wait(node)
                timeout_s = self._config.request_timeout_ms / 1000 + 5
                self._order.wait_turn(node, ticket, timeout_s)
                sent_at = time.monotonic()
                sent_ns = time.time_ns()
                for batch in batches:
                    batch.result.sent_ns = sent_ns
                answer = self._transport.request("POST", "/v1/produce", body, address=address,
                                                 timeout_s=timeout_s, on_sent=written)
                self._throttle.note(node, sent_at, answer)
                outcomes = partition_outcomes(answer, by_tp, self._config.acks)
            except KraftError as e:
                outcomes = {tp: e for tp in by_tp}
            with self._lock:
                self._count_in_flight(batches, -1)
                landed = True
            for tp, outcome in outcomes.items():
                self._handle(by_tp[tp], outcome)
        except Exception as e:  # e.g. a codec error: fail these batches, keep the sender alive
            log.exception("produce request to broker %s failed", node)
            if not landed:
                with self._lock:
                    self._count_in_flight(batches, -1)
            for batch in batches:
                if not batch.result.done():
                    self._settle(batch, -1, KraftError("UNKNOWN_SERVER_ERROR", f"{type(e).__name__}: {e}"))
        finally:
            written()  # when it was never written, the next request need not wait for it

    def _handle(self, batches: list[ProducerBatch], outcome: int | KraftError) -> None:
        idempotence = self._idempotence
        if isinstance(outcome, int):
            self._warned.clear()
            base = outcome
            for batch in batches:
                if idempotence is not None and batch.sequence is not None:
                    with self._lock:
                        idempotence.on_acked(batch.tp, batch.sequence, batch.record_count)
                self._settle(batch, base, None)
                if base >= 0:
                    base += batch.record_count
            return
        if outcome.error_code in METADATA_ERRORS:
            self._metadata.request_update()
        now = now_ms()
        with self._lock:
            retry = [
                b for b in batches
                if (outcome.retriable or (
                    idempotence is not None and b.sequence is not None
                    and idempotence.should_retry(outcome.error_code, b.sequence, b.sent_behind_unacked)))
                and not self._force_close
                and b.attempts <= self._config.retries
                and now - b.created_ms < self._config.delivery_timeout_ms
            ]
            if idempotence is not None and self._txn is None:  # a transaction aborts instead
                for b in batches:
                    if b not in retry and b.sequence is not None:
                        idempotence.on_error(outcome.error_code, b.sequence)
        retrying = set(retry)
        if retry:
            self._log_retry(retry[0].tp, outcome, len(retry))
            for b in retry:
                b.last_error = outcome
            # a sequence error behind an unacknowledged batch waits for that batch (the
            # accumulator's rule), not for the backoff
            backoff = self._config.retry_backoff_ms if outcome.retriable else 0
            with self._lock:
                self._acc.reenqueue(retry, now + backoff)
        for batch in batches:
            if batch not in retrying:
                self._settle(batch, -1, outcome)

    def _settle(self, batch: ProducerBatch, base_offset: int, error: KraftError | None) -> None:
        with self._lock:
            self._acc.deallocate(batch)
            self._space.notify_all()
        if error is not None and self._txn is not None:
            error = self._txn.fail(error)  # the transaction can only be aborted now
        batch.result.complete(base_offset, error)
