"""Producer futures: one `ProduceResult` per batch, one light `RecordFuture` per record.

As in Kafka's client (`ProduceRequestResult` + `FutureRecordMetadata`), the synchronisation object
is per batch; a record's future only remembers its index in the batch, so `send()` stays cheap.
`RecordFuture` offers the `concurrent.futures.Future` reading API (`result`, `exception`, `done`,
`add_done_callback`) plus kafka-python's `get`, `add_callback`, `add_errback`, `succeeded`,
`failed`, `is_done` and `value`. Callbacks run in the producer's I/O thread: keep them short.
"""

from __future__ import annotations

import functools
import logging
import threading
from bisect import bisect_right
from typing import Any, Callable, Iterator, Sequence, overload

from kraft.api.client.types import RecordMetadata, TopicPartition
from kraft.api.errors import KraftError

log = logging.getLogger(__name__)


class ProduceResult:
    """The outcome of one batch: its base offset, or the error that failed it."""

    __slots__ = ("tp", "base_offset", "error", "sent_ns", "_event", "_callbacks", "_lock")

    def __init__(self, tp: TopicPartition) -> None:
        self.tp = tp
        self.base_offset = -1
        self.error: KraftError | None = None
        self.sent_ns = 0  # when its last request was sent (time.time_ns): kraft-bench --trace
        self._event = threading.Event()
        self._callbacks: list[Callable[[ProduceResult], None]] = []
        self._lock = threading.Lock()

    def done(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._event.wait(timeout)

    def complete(self, base_offset: int, error: KraftError | None = None) -> None:
        """Called once by the sender; runs callbacks in the calling thread (keep them short)."""
        with self._lock:
            if self._event.is_set():
                raise AssertionError(f"batch of {self.tp} completed twice")
            self.base_offset = base_offset
            self.error = error
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            self._run(cb)

    def _run(self, cb: Callable[[ProduceResult], None]) -> None:
        try:
            cb(self)
        except Exception:  # a user callback must not kill the sender thread (nor, run at once, the caller)
            log.exception("producer callback failed")

    def add_done_callback(self, fn: Callable[[ProduceResult], None]) -> None:
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(fn)
                return
        self._run(fn)


class RecordFuture:
    """The future `Producer.send` returns; resolves to `RecordMetadata` or raises `KraftError`."""

    __slots__ = ("produce_result", "index", "timestamp")

    def __init__(self, produce_result: ProduceResult, index: int, timestamp: int) -> None:
        self.produce_result = produce_result  # shared by every record of the batch
        self.index = index
        self.timestamp = timestamp

    def done(self) -> bool:
        return self.produce_result.done()

    def _metadata(self) -> RecordMetadata:
        r = self.produce_result
        offset = r.base_offset + self.index if r.base_offset >= 0 else -1
        return RecordMetadata(r.tp.topic, r.tp.partition, offset, self.timestamp)

    def result(self, timeout: float | None = None) -> RecordMetadata:
        if not self.produce_result.wait(timeout):
            raise KraftError("REQUEST_TIMED_OUT", f"record not acknowledged within {timeout} s")
        if self.produce_result.error is not None:
            raise self.produce_result.error
        return self._metadata()

    get = result  # kafka-python's name

    def exception(self, timeout: float | None = None) -> KraftError | None:
        if not self.produce_result.wait(timeout):
            raise KraftError("REQUEST_TIMED_OUT", f"record not acknowledged within {timeout} s")
        return self.produce_result.error

    def add_done_callback(self, fn: Callable[[RecordFuture], None]) -> None:
        self.produce_result.add_done_callback(lambda _r: fn(self))

    # -- kafka-python's Future ------------------------------------------------------------------

    @property
    def is_done(self) -> bool:
        return self.done()

    def succeeded(self) -> bool:
        return self.done() and self.produce_result.error is None

    def failed(self) -> bool:
        return self.done() and self.produce_result.error is not None

    @property
    def value(self) -> RecordMetadata | None:
        """The RecordMetadata once succeeded, else None (kafka-python's attribute)."""
        return self._metadata() if self.succeeded() else None

    def add_callback(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> RecordFuture:
        """Calls `fn(*args, record_metadata, **kwargs)` on success (at once if already succeeded)."""
        call = functools.partial(fn, *args, **kwargs) if args or kwargs else fn

        def on_done(result: ProduceResult) -> None:
            if result.error is None:
                call(self._metadata())

        self.produce_result.add_done_callback(on_done)
        return self

    def add_errback(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> RecordFuture:
        """Calls `fn(*args, exception, **kwargs)` on failure (at once if already failed)."""
        call = functools.partial(fn, *args, **kwargs) if args or kwargs else fn

        def on_done(result: ProduceResult) -> None:
            if result.error is not None:
                call(result.error)

        self.produce_result.add_done_callback(on_done)
        return self


class RecordFutures(Sequence[RecordFuture]):
    """`Producer.send_many`'s futures, one per record in order, made when read: it keeps one
    entry per run of consecutive records in one batch (a batch's worth of records at a time),
    not an object per record. Each record's future reports its own batch's outcome."""

    __slots__ = ("timestamp", "_starts", "_runs", "_count")

    def __init__(self, timestamp: int) -> None:
        self.timestamp = timestamp  # every record's
        self._starts: list[int] = []  # each run's first record, by position in the call
        self._runs: list[tuple[ProduceResult, int]] = []  # each run's batch and its first index in it
        self._count = 0

    def add(self, result: ProduceResult, first_index: int, count: int) -> None:
        """The next `count` records went to `result`'s batch at indexes from `first_index`."""
        runs = self._runs
        if runs and runs[-1][0] is result and runs[-1][1] + self._count - self._starts[-1] == first_index:
            self._count += count  # the previous run goes on
            return
        self._starts.append(self._count)
        runs.append((result, first_index))
        self._count += count

    def runs(self) -> Iterator[tuple[ProduceResult, int, int]]:
        """(batch result, first index in the batch, record count) of each run, in order."""
        ends = self._starts[1:] + [self._count]
        for (result, first), start, end in zip(self._runs, self._starts, ends):
            yield result, first, end - start

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, i: int) -> RecordFuture: ...

    @overload
    def __getitem__(self, i: slice) -> list[RecordFuture]: ...

    def __getitem__(self, i: int | slice) -> RecordFuture | list[RecordFuture]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._count))]
        if i < 0:
            i += self._count
        if not 0 <= i < self._count:
            raise IndexError("record index out of range")
        run = bisect_right(self._starts, i) - 1
        result, first = self._runs[run]
        return RecordFuture(result, first + i - self._starts[run], self.timestamp)

    def __iter__(self) -> Iterator[RecordFuture]:
        timestamp = self.timestamp
        for result, first, count in self.runs():
            for index in range(first, first + count):
                yield RecordFuture(result, index, timestamp)
