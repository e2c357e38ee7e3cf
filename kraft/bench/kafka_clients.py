"""The bench's workloads through the Kafka listener with Kafka's own clients (`--client
kafka-python|confluent-kafka`), beside kraft's Python client over HTTP (`--client kraft`), so the
two paths are measured by the same command on the same node. Each maps the bench's producer
flags to the client's settings (acks, batch size, linger, compression, idempotence, requests in
flight); ack latency is each record's send to its delivery report (for confluent-kafka,
librdkafka's own timing from the `produce()` call that queued it). Both clients are the `bench`
extra's (and the dev one's)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable

from kraft.api.client.types import TopicPartition
from kraft.bench.histogram import LatencyHistogram

if TYPE_CHECKING:
    from kraft.bench.trace import TracedRecord

KRAFT, KAFKA_PYTHON, CONFLUENT = "kraft", "kafka-python", "confluent-kafka"
CLIENTS = (KRAFT, KAFKA_PYTHON, CONFLUENT)
_POLL_EVERY = 1024  # confluent-kafka: serve delivery reports every this many sends


class _Acks:
    """Each record's ack latency (its own send to its delivery report) and the failures; with
    `trace`, each acknowledged record's way for `kraft-bench --trace` (TracedRecord: the client
    does not say when its request went out, so the send stage is the `send()` call's time)."""

    def __init__(self, topic: str, trace: bool) -> None:
        self.histogram = LatencyHistogram()
        self.failed = 0
        self.topic = topic
        self.traced: list[TracedRecord] | None = [] if trace else None

    def _acked(self, latency_s: float, partition: int, offset: int) -> None:
        self.histogram.record_us(round(latency_s * 1e6))
        if self.traced is not None:
            acked_ns = time.time_ns()
            sent_ns = acked_ns - round(latency_s * 1e9)
            self.traced.append((TopicPartition(self.topic, partition), offset, sent_ns, sent_ns, acked_ns))

    def callback(self, sent: float) -> Callable[..., None]:
        def done(error: Any, metadata: Any = None) -> None:
            if error is None:
                self._acked(time.perf_counter() - sent, metadata.partition, metadata.offset)
            else:
                self.failed += 1
        return done

    def delivered(self, error: Any, message: Any) -> None:
        """confluent-kafka's one delivery callback for every record: librdkafka times each record
        from its `produce()` call to now (`Message.latency`: to this report's serving, inside a
        `poll` or `flush`), so no closure per record is needed."""
        if error is None:
            self._acked(message.latency(), message.partition(), message.offset())
        else:
            self.failed += 1


def _bootstrap(bootstrap: str) -> str:
    return ",".join(h.removeprefix("http://").removeprefix("https://") for h in bootstrap.split(","))


def kafka_produce(client: str, bootstrap: str, topic: str, payload: bytes, num_records: int, *, acks: str,
                  batch_size: int, linger_ms: int, compression: str, idempotence: bool,
                  max_in_flight: int | None, throughput: int, progress: Callable[[int, int], None],
                  warmup_records: int = 0, measuring: Callable[[], None] = lambda: None,
                  trace: bool = False) -> tuple[float, LatencyHistogram, int, list[TracedRecord]]:
    """Sends `warmup_records`, then `num_records` copies of `payload` (paced to `throughput`
    records/s when > 0) with one producer, and waits for every delivery; `measuring()` is called
    between the two. The measured part's (elapsed seconds, ack latency, failed records, and with
    `trace` every acknowledged record's way). The warm-up shares the producer, as in Kafka's
    KIP-1052: a new idempotent librdkafka producer holds its first records until it has a
    producer id, up to half a second (its PID timer) when no broker connection was up yet."""
    acks_value = "all" if acks in ("all", "-1") else acks
    acks_seen = _Acks(topic, trace=False)
    if client == CONFLUENT:
        from confluent_kafka import Producer as ConfluentProducer

        producer: Any = ConfluentProducer({
            "bootstrap.servers": _bootstrap(bootstrap), "acks": acks_value, "linger.ms": linger_ms,
            "batch.size": batch_size, "compression.type": compression, "enable.idempotence": idempotence,
            "max.in.flight.requests.per.connection": max_in_flight or 5, "queue.buffering.max.messages": 1_000_000,
            "on_delivery": lambda error, message: acks_seen.delivered(error, message)})
        producer.list_topics(topic, timeout=30)  # metadata before the clock starts

        def send(value: bytes, sent: float) -> None:
            while True:
                try:
                    producer.produce(topic, value)
                    return
                except BufferError:  # the local queue is full: serve deliveries, then retry
                    producer.poll(0.01)

        flush = producer.flush
        close: Callable[[], None] = lambda: None
        # confluent-kafka times a record when its delivery report is served (`Message.latency()`
        # is read then), so a paced run waits in `poll`, which serves each report as it arrives:
        # a sleep would add the time to the next poll (up to _POLL_EVERY records) to every latency
        wait: Callable[[float], Any] = producer.poll
    elif client == KAFKA_PYTHON:
        from kafka import KafkaProducer

        producer = KafkaProducer(
            bootstrap_servers=_bootstrap(bootstrap).split(","), acks=acks_value if acks_value == "all" else int(acks_value),
            linger_ms=linger_ms, batch_size=batch_size, enable_idempotence=idempotence,
            compression_type=None if compression == "none" else compression,
            max_in_flight_requests_per_connection=max_in_flight or 5)
        producer.partitions_for(topic)

        def send(value: bytes, sent: float) -> None:
            done = acks_seen.callback(sent)
            producer.send(topic, value).add_callback(lambda metadata: done(None, metadata)).add_errback(done)

        flush, close, wait = producer.flush, producer.close, time.sleep
    else:
        raise ValueError(f"not a Kafka client: {client!r} (one of {KAFKA_PYTHON}, {CONFLUENT})")

    def run(count: int) -> float:
        clock = time.perf_counter
        interval = 1 / throughput if throughput > 0 else 0.0
        start = clock()
        for i in range(count):
            if interval:
                ahead = start + i * interval - clock()
                if ahead > 0:
                    wait(ahead)
            send(payload, clock())
            if i % _POLL_EVERY == 0:
                if client == CONFLUENT:
                    producer.poll(0)
                progress(i, i * len(payload))
        flush()
        return clock() - start

    try:
        if warmup_records:
            run(warmup_records)
        acks_seen = _Acks(topic, trace)
        measuring()
        elapsed = run(num_records)
    finally:
        close()
    return elapsed, acks_seen.histogram, acks_seen.failed, acks_seen.traced or []


def drain(poll: Callable[[int], tuple[int, int]], num_records: int, timeout_ms: int,
          progress: Callable[[int, int], None]) -> tuple[int, int, float]:
    """Calls `poll(records still wanted) -> (records, bytes)` until `num_records` arrived or
    `timeout_ms` passed without any: (records, bytes, seconds from the start to the last record)."""
    records = nbytes = 0
    start = last = time.monotonic()
    while records < num_records:
        count, size = poll(num_records - records)
        now = time.monotonic()
        if not count:
            if (now - last) * 1000 >= timeout_ms:
                break
            continue
        last = now
        records, nbytes = records + count, nbytes + size
        progress(records, nbytes)
    return records, nbytes, last - start


def kafka_consume(client: str, bootstrap: str, topic: str, num_records: int, timeout_ms: int,
                  progress: Callable[[int, int], None],
                  isolation_level: str = "read_uncommitted") -> tuple[int, int, float]:
    """Reads `topic` from the beginning (its partitions assigned, no group) at `isolation_level`
    until `num_records` arrived or `timeout_ms` passed without any: (records, key and value
    bytes, seconds from the start to the last record)."""
    if client == CONFLUENT:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        # queued.min.messages as librdkafka's own rdkafka_performance sets it: with the default
        # (100,000) a consumer whose application drains slower than the broker answers finds its
        # queue full and backs off fetch.queue.backoff.ms (1 s) each time, which measures that
        # pause, not the broker (docs/benchmarks.md, issue 23's consume section)
        consumer: Any = Consumer({"bootstrap.servers": _bootstrap(bootstrap), "group.id": "kraft-bench",
                                  "enable.auto.commit": False, "isolation.level": isolation_level,
                                  "queued.min.messages": 1_000_000})
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])

        def poll(wanted: int) -> tuple[int, int]:
            got = [m for m in consumer.consume(min(wanted, 10_000), 0.5) if m.error() is None]
            return len(got), sum(len(m.key() or b"") + len(m.value() or b"") for m in got)
    elif client == KAFKA_PYTHON:
        from kafka import KafkaConsumer, TopicPartition as KafkaTopicPartition

        consumer = KafkaConsumer(bootstrap_servers=_bootstrap(bootstrap).split(","), enable_auto_commit=False,
                                 auto_offset_reset="earliest", max_poll_records=10_000,
                                 isolation_level=isolation_level)
        assigned = [KafkaTopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(assigned)
        consumer.seek_to_beginning(*assigned)

        def poll(wanted: int) -> tuple[int, int]:
            got = [r for batch in consumer.poll(timeout_ms=500, max_records=wanted).values() for r in batch]
            return len(got), sum(len(r.key or b"") + len(r.value or b"") for r in got)
    else:
        raise ValueError(f"not a Kafka client: {client!r} (one of {KAFKA_PYTHON}, {CONFLUENT})")
    try:
        return drain(poll, num_records, timeout_ms, progress)
    finally:
        consumer.close()
