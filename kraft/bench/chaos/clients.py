"""The client side of a replication chaos run: an acks=all producer that remembers what was
acknowledged, a consumer that remembers every offset it was shown, and the audit comparing both
with the partition's final log. Used by `kraft-bench chaos` and the cluster tests; the faults
themselves (kill -9, SIGSTOP, restarts) are the caller's.

The audit (pure): an acknowledged record is *lost* when its value is not at the offset it was
acknowledged with; a value present at more than one offset is *duplicated* (a producer retry of a
write whose answer was lost: allowed without idempotence, but counted); a consumer offset whose
value differs from the final log's was *truncated after being served* (must never happen).
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable

from kraft.api.client import Consumer, KraftError, Producer, TopicPartition


@dataclass(frozen=True)
class ChaosReport:
    acked: int
    lost: int
    duplicated: int
    truncated_seen: int  # offsets a consumer saw whose record later changed
    log_records: int
    lost_examples: tuple[tuple[bytes, int], ...] = ()

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.truncated_seen == 0


def audit(acked: dict[bytes, int], log: Iterable[tuple[int, bytes]],
          seen: dict[int, bytes]) -> ChaosReport:
    """`acked`: value -> acknowledged offset; `log`: the final (offset, value) records;
    `seen`: offset -> value as consumers read them during the run."""
    at = dict(log)
    counts = Counter(at.values())
    lost = [(v, o) for v, o in acked.items() if at.get(o) != v]
    truncated = [o for o, v in seen.items() if at.get(o) != v]
    return ChaosReport(
        acked=len(acked), lost=len(lost), duplicated=sum(c - 1 for c in counts.values() if c > 1),
        truncated_seen=len(truncated), log_records=len(at), lost_examples=tuple(lost[:5]),
    )


@dataclass
class AckedProducer:
    """Sends unique values to one partition with acks=all and unlimited retries until stopped."""

    bootstrap: str
    topic: str
    partition: int = 0
    prefix: bytes = b"chaos"  # values are prefix-NNNNNNNN: unique across concurrent producers
    acked: dict[bytes, int] = field(default_factory=dict)
    failed: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _acked_changed: threading.Condition = field(default_factory=threading.Condition)

    def start(self) -> "AckedProducer":
        self._thread = threading.Thread(target=self._run, name="chaos-producer", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        producer = Producer(self.bootstrap, acks="all", linger_ms=2, retry_backoff_ms=50,
                            request_timeout_ms=5_000, delivery_timeout_ms=120_000)
        n = 0
        try:
            while not self._stop.is_set():
                value = b"%s-%08d" % (self.prefix, n)
                n += 1
                future = producer.send(self.topic, value=value, partition=self.partition)
                future.produce_result.add_done_callback(
                    lambda r, f=future, v=value: self._done(f, v))
                if n % 50 == 0:
                    producer.flush(130)
                    self._stop.wait(0.01)  # at most ~5000 records/s: a run stays small to audit
        finally:
            producer.close(130)

    def _done(self, future: object, value: bytes) -> None:
        try:
            offset = future.get(0).offset  # type: ignore[attr-defined]
        except KraftError:
            with self._acked_changed:
                self.failed += 1
            return
        with self._acked_changed:
            self.acked[value] = offset
            self._acked_changed.notify_all()

    def wait_acked_more(self, count: int, timeout_s: float) -> None:
        """Returns once `count` more records are acknowledged; TimeoutError after `timeout_s`
        (e.g. while a paused old leader holds the producer: acks must go on without it)."""
        with self._acked_changed:
            target = len(self.acked) + count
            if not self._acked_changed.wait_for(lambda: len(self.acked) >= target, timeout_s):
                raise TimeoutError(f"{len(self.acked) - target + count} of {count} more records "
                                   f"acknowledged in {timeout_s:g} s ({self.failed} failed)")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(180)


@dataclass
class WatchingConsumer:
    """Reads the partition from the beginning for the whole run, remembering offset -> value."""

    bootstrap: str
    topic: str
    partition: int = 0
    seen: dict[int, bytes] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> "WatchingConsumer":
        self._thread = threading.Thread(target=self._run, name="chaos-consumer", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        consumer = Consumer(self.bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=200,
                            request_timeout_ms=5_000)
        consumer.assign([TopicPartition(self.topic, self.partition)])
        try:
            while not self._stop.is_set():
                try:
                    for records in consumer.poll(200).values():
                        for r in records:
                            self.seen[r.offset] = r.value
                except KraftError:
                    continue  # leader moving: the consumer refreshes its metadata and retries
        finally:
            consumer.close()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)


# how a read of a quarantined offset names the range (`log/segment.py`, `LogSegment.find_batch`)
_QUARANTINED = re.compile(r"quarantined corrupt range \[(\d+), (\d+)\)")


def quarantined_range(error: KraftError) -> tuple[int, int] | None:
    """The offsets [start, end) a CORRUPT_MESSAGE answer names as quarantined (never served by
    that replica), else None."""
    found = _QUARANTINED.search(str(error)) if error.error_code == "CORRUPT_MESSAGE" else None
    return None if found is None else (int(found[1]), int(found[2]))


def read_partition(bootstrap: str, topic: str, partition: int, end: int, timeout_s: float = 60.0,
                   quarantined: list[tuple[int, int]] | None = None,
                   isolation_level: str = "read_uncommitted") -> list[tuple[int, bytes]]:
    """Every record below offset `end` (the high watermark; at read_committed, the last stable
    offset), read through the leader. A range the leader has quarantined (it answers
    CORRUPT_MESSAGE naming it) is stepped over as a Kafka consumer's application would (seek past
    its end), and appended to `quarantined` (clipped to `end`): its records are missing from the
    answer, so an audit counts the acknowledged ones lost."""
    consumer = Consumer(bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100,
                        consumer_timeout_ms=int(timeout_s * 1000), isolation_level=isolation_level)
    tp = TopicPartition(topic, partition)
    consumer.assign([tp])
    out: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + timeout_s
    position = 0
    try:
        while position < end:
            if time.monotonic() > deadline:
                raise TimeoutError(f"read {len(out)} records of {topic}-{partition}, not up to {end}")
            try:
                polled = consumer.poll(500)
                position = consumer.position(tp)
            except KraftError as e:
                skipped = quarantined_range(e)
                if skipped is not None and skipped[0] <= consumer.position(tp) < skipped[1]:
                    if quarantined is not None:
                        quarantined.append((skipped[0], min(skipped[1], end)))
                    consumer.seek(tp, skipped[1])
                    position = skipped[1]
                    continue
                if not e.retriable:
                    raise
                continue  # the leader is moving: the consumer refreshes its metadata
            out += [(r.offset, r.value) for rs in polled.values() for r in rs if r.offset < end]
    finally:
        consumer.close()
    return out
