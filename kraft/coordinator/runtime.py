"""CoordinatorRuntime: the shards of one internal topic's partitions this broker leads, each
served by one task from a bounded queue (Kafka's `CoordinatorRuntime`, on one event loop).

Per partition (a *context*):
- **load**: on election a fresh shard replays the partition (`loader`); meanwhile requests get
  COORDINATOR_LOAD_IN_PROGRESS (`active` lets a caller wait for the load instead). A new
  election of the same partition first lets the previous context's append in flight finish.
- **write**: `write(partition, name, operation)` queues the handler (at most `max_queued`
  waiting: more are refused with COORDINATOR_LOAD_IN_PROGRESS, which clients retry without
  looking the coordinator up again). The partition's task runs the handlers one at a time: the
  handler returns records and a response; the records are appended in one batch with acks=all,
  which returns once the high watermark passed them (an event of the replica); only then are they
  replayed into the shard, its timers changed and the caller answered. Until then the next
  handler waits, so every handler sees committed state only and a failed append leaves nothing to
  roll back: the request fails with the append's error (`partition_writer.append_error`).
- **transactions**: a result naming a `producer` is appended as that producer's transactional
  batch (a coordinator's write for it: no sequences); an `end_transaction` result writes its
  COMMIT/ABORT marker instead of records and replays it (`replay_end_transaction`).
- **consistency**: the shard knows the offset its next record must get. An append that lands
  elsewhere, or a failed append after which the log end moved (its records may yet commit),
  means the log holds what the shard does not: the context reloads from the log.
- **timers**: a due timer queues its operation like a request (`timer`); an operation that fails
  is tried again after `timer_retry_ms`.
- **resignation**: queued requests fail with NOT_COORDINATOR, timers are cancelled, a load is
  cancelled; an append in flight finishes (what it committed is answered: the next leader
  replays it).
Reads need no queue: `active(partition)` returns the shard, whose state is committed state.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Iterator, TypeVar

from kraft.errors import KraftError
from kraft.server.records import ProduceEntry
from kraft.coordinator.loader import LoaderSettings, load
from kraft.coordinator.partition_writer import PartitionWriter, append_error
from kraft.coordinator.result import (
    CoordinatorRecord, CoordinatorResult, CoordinatorShard, Operation,
)
from kraft.coordinator.timer import CoordinatorTimer, LoopScheduler, Scheduler, TimerEntry
from kraft.log.batch import build_batch

log = logging.getLogger("kraft.coordinator")

S = TypeVar("S", bound=CoordinatorShard)
T = TypeVar("T")

_NOTHING: CoordinatorResult[None] = CoordinatorResult((), None)


class CoordinatorState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"
    FAILED = "failed"  # the load failed: NOT_COORDINATOR until the next election
    CLOSED = "closed"


@dataclass(frozen=True)
class RuntimeSettings:
    write_timeout_ms: int = 30_000  # an append waits this long for the ISR
    max_queued: int = 1024  # requests waiting per partition
    timer_retry_ms: int = 500  # a timer operation that failed runs again after this
    loader: LoaderSettings = LoaderSettings()


@dataclass(eq=False)
class _Pending:
    name: str
    operation: Operation[Any, Any]
    future: asyncio.Future[Any]


@dataclass(eq=False)
class _Context(Generic[S]):
    partition: int
    leader_epoch: int
    shard: S
    state: CoordinatorState = CoordinatorState.LOADING
    settled: asyncio.Event = field(default_factory=asyncio.Event)  # set when it leaves LOADING
    queue: deque[_Pending] = field(default_factory=deque)
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    next_offset: int = -1  # the offset the next appended record must get
    timer: CoordinatorTimer | None = None
    task: asyncio.Task[None] | None = None


def _settle(future: asyncio.Future[Any], result: Any = None, error: BaseException | None = None) -> None:
    if future.done():
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)


def _replay(shard: CoordinatorShard, result: CoordinatorResult[Any], base_offset: int) -> None:
    """What the runtime appended at `base_offset`, replayed as a load would replay it."""
    if result.end_transaction is not None:
        shard.replay_end_transaction(result.end_transaction.producer_id, result.end_transaction.commit)
        return
    producer_id = -1 if result.producer is None else result.producer.producer_id
    for i, (key, value) in enumerate(result.records):
        shard.replay(CoordinatorRecord(base_offset + i, key, value, producer_id))


class CoordinatorRuntime(Generic[S]):
    def __init__(self, topic: str, writer: PartitionWriter, new_shard: Callable[[int], S],
                 clock: Callable[[], int], settings: RuntimeSettings = RuntimeSettings(),
                 scheduler: Scheduler | None = None) -> None:
        """`new_shard(partition)`: an empty shard to load; `clock()`: now in ms, handed to the
        handlers and the timers."""
        self.topic = topic
        self.writer = writer
        self.new_shard = new_shard
        self.clock = clock
        self.settings = settings
        self.scheduler = scheduler or LoopScheduler()
        self._contexts: dict[int, _Context[S]] = {}
        self._closed = False
        # each finished load's duration in seconds (the coordinators' partition-load-time metrics)
        self.on_load: Callable[[float], None] = lambda seconds: None

    # -- elections and resignations -----------------------------------------------------------

    def on_election(self, partition: int, leader_epoch: int) -> None:
        """This broker now leads `topic-partition` at `leader_epoch`: load its shard, unless
        already loaded (or loading) at that epoch."""
        if self._closed:
            return
        ctx = self._contexts.get(partition)
        if ctx is not None and ctx.leader_epoch == leader_epoch:
            return
        previous = None
        if ctx is not None:
            self._unload(ctx, KraftError("NOT_COORDINATOR", f"{self.topic}-{partition} has a new leader epoch"))
            previous = ctx.task
        self._start(partition, leader_epoch, previous)

    def on_resignation(self, partition: int) -> None:
        ctx = self._contexts.pop(partition, None)
        if ctx is None:
            return
        self._unload(ctx, self.not_coordinator(partition))
        log.info("no longer coordinator of %s-%d", self.topic, partition)

    async def close(self) -> None:
        self._closed = True
        contexts = list(self._contexts.values())
        self._contexts.clear()
        for ctx in contexts:
            self._unload(ctx, KraftError("NOT_COORDINATOR", "this broker is shutting down"))
            if ctx.task is not None:
                ctx.task.cancel()
        await asyncio.gather(*(c.task for c in contexts if c.task is not None), return_exceptions=True)

    def _start(self, partition: int, leader_epoch: int, previous: asyncio.Task[None] | None) -> None:
        ctx: _Context[S] = _Context(partition, leader_epoch, self.new_shard(partition))
        ctx.timer = CoordinatorTimer(self.scheduler, self.clock, lambda entry: self._timer_due(ctx, entry))
        self._contexts[partition] = ctx
        ctx.task = asyncio.get_running_loop().create_task(
            self._serve(ctx, previous), name=f"coordinator {self.topic}-{partition}")

    def _unload(self, ctx: _Context[S], error: KraftError) -> None:
        """Timers cancelled, queued requests failed with `error`, a load cancelled; an append in
        flight finishes and the task then ends."""
        loading = ctx.state is CoordinatorState.LOADING
        ctx.state = CoordinatorState.CLOSED
        assert ctx.timer is not None
        ctx.timer.cancel_all()
        ctx.shard.on_unloaded()
        while ctx.queue:
            _settle(ctx.queue.popleft().future, error=error)
        ctx.wakeup.set()
        ctx.settled.set()
        if loading and ctx.task is not None:
            ctx.task.cancel()

    def _reload(self, ctx: _Context[S], reason: str) -> None:
        """The shard no longer matches the log: load it again (at the same leader epoch)."""
        if self._contexts.get(ctx.partition) is not ctx:
            return
        log.warning("%s-%d: %s; loading it again", self.topic, ctx.partition, reason)
        self._unload(ctx, KraftError("COORDINATOR_LOAD_IN_PROGRESS", f"{self.topic}-{ctx.partition} is loading again"))
        self._start(ctx.partition, ctx.leader_epoch, ctx.task)

    # -- requests -----------------------------------------------------------------------------

    async def active(self, partition: int, timeout_s: float) -> S:
        """The loaded shard of `partition` (waiting up to `timeout_s` for its load): its state is
        committed state, to read. NOT_COORDINATOR when this broker does not lead it,
        COORDINATOR_LOAD_IN_PROGRESS when the load takes longer."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            ctx = self._contexts.get(partition)
            if ctx is None or ctx.state is CoordinatorState.FAILED:
                raise self.not_coordinator(partition)
            if ctx.state is CoordinatorState.ACTIVE:
                return ctx.shard
            try:
                async with asyncio.timeout(max(0.0, deadline - loop.time())):
                    await ctx.settled.wait()
            except TimeoutError:
                raise KraftError("COORDINATOR_LOAD_IN_PROGRESS",
                                 f"{self.topic}-{partition} is still loading") from None

    def is_coordinator(self, partition: int) -> bool:
        """Whether this broker was elected for `partition` (loaded or not)."""
        return partition in self._contexts

    def active_shard(self, partition: int) -> S | None:
        """The loaded shard of `partition`, None when it is not loaded here."""
        ctx = self._contexts.get(partition)
        return ctx.shard if ctx is not None and ctx.state is CoordinatorState.ACTIVE else None

    def active_shards(self) -> Iterator[tuple[int, S]]:
        return ((p, ctx.shard) for p, ctx in list(self._contexts.items())
                if ctx.state is CoordinatorState.ACTIVE)

    async def write(self, partition: int, name: str, operation: Operation[S, T]) -> T:
        """Runs `operation` in the partition's turn and answers its response once its records
        are committed and replayed; raises what the handler raised, or the append's error."""
        ctx = self._contexts.get(partition)
        if ctx is None or ctx.state is CoordinatorState.FAILED:
            raise self.not_coordinator(partition)
        if ctx.state is CoordinatorState.LOADING:
            raise KraftError("COORDINATOR_LOAD_IN_PROGRESS", f"{self.topic}-{partition} is still loading")
        pending = _Pending(name, operation, asyncio.get_running_loop().create_future())
        self._enqueue(ctx, pending)
        result: T = await pending.future
        return result

    async def write_all(self, name: str, operation: Operation[S, T]) -> list[T | BaseException]:
        """`operation` on every loaded partition, each in its own turn."""
        partitions = [p for p, _ in self.active_shards()]
        return await asyncio.gather(*(self.write(p, name, operation) for p in partitions),
                                    return_exceptions=True)

    def _enqueue(self, ctx: _Context[S], pending: _Pending) -> None:
        if len(ctx.queue) >= self.settings.max_queued:
            raise KraftError("COORDINATOR_LOAD_IN_PROGRESS", f"{self.topic}-{ctx.partition} has "
                             f"{len(ctx.queue)} requests waiting: retry later")
        ctx.queue.append(pending)
        ctx.wakeup.set()

    def not_coordinator(self, partition: int) -> KraftError:
        """The error of a request for a partition this broker does not serve."""
        return KraftError("NOT_COORDINATOR", f"this broker does not coordinate {self.topic}-{partition}")

    # -- the partition's task -----------------------------------------------------------------

    async def _serve(self, ctx: _Context[S], previous: asyncio.Task[None] | None) -> None:
        try:
            if previous is not None:
                await asyncio.wait([previous])  # its last append has landed or failed
            summary = await load(self.writer, self.topic, ctx.partition, ctx.shard,
                                 self.settings.loader)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("loading %s-%d failed: NOT_COORDINATOR until it is elected again",
                          self.topic, ctx.partition)
            self._fail(ctx)
            return
        assert ctx.state is CoordinatorState.LOADING and ctx.timer is not None, ctx.state
        ctx.next_offset = summary.next_offset
        ctx.state = CoordinatorState.ACTIVE
        ctx.timer.apply(ctx.shard.on_loaded(self.clock()))
        ctx.settled.set()
        log.info("loaded %s-%d at leader epoch %d: %d records in %.3f s", self.topic, ctx.partition,
                 ctx.leader_epoch, summary.records, summary.seconds)
        self.on_load(summary.seconds)
        try:
            while ctx.state is CoordinatorState.ACTIVE:
                if not ctx.queue:
                    ctx.wakeup.clear()
                    await ctx.wakeup.wait()
                    continue
                pending = ctx.queue.popleft()
                try:
                    await self._run(ctx, pending)
                finally:  # cancelled by close(), or failed: its caller is not left waiting
                    _settle(pending.future, error=self.not_coordinator(ctx.partition))
        except Exception:
            log.exception("%s-%d: the coordinator failed: NOT_COORDINATOR until it is elected again",
                          self.topic, ctx.partition)
            self._fail(ctx)

    def _fail(self, ctx: _Context[S]) -> None:
        """Nothing is served from `ctx` until the partition's next election (Kafka's FAILED).
        Called from the context's own task, which ends."""
        ctx.state = CoordinatorState.CLOSED  # not LOADING: `_unload` must not cancel this task
        self._unload(ctx, self.not_coordinator(ctx.partition))
        ctx.state = CoordinatorState.FAILED

    async def _run(self, ctx: _Context[S], pending: _Pending) -> None:
        if pending.future.done():
            return  # its caller went away before its turn
        now = self.clock()
        try:
            result = pending.operation(ctx.shard, now)
        except Exception as e:
            _settle(pending.future, error=e)
            return
        if result.records or result.end_transaction is not None:
            try:
                base_offset = await self._append(ctx.partition, result, now)
            except KraftError as e:
                _settle(pending.future, error=e)
                await self._check_log_end(ctx)
                return
            if ctx.state is not CoordinatorState.ACTIVE:
                _settle(pending.future, result.response)  # committed; the next leader replays it
                return
            if base_offset != ctx.next_offset:
                _settle(pending.future, result.response)
                self._reload(ctx, f"a write landed at offset {base_offset}, the shard expected {ctx.next_offset}")
                return
            try:
                _replay(ctx.shard, result, base_offset)
            except Exception as e:
                log.exception("%s-%d: replaying %s failed", self.topic, ctx.partition, pending.name)
                _settle(pending.future, error=KraftError("UNKNOWN_SERVER_ERROR", f"replay failed: {e}"))
                self._reload(ctx, "a replay failed")
                return
            ctx.next_offset = base_offset + max(1, len(result.records))
        assert ctx.timer is not None
        ctx.timer.apply(result.timers)
        _settle(pending.future, result.response)

    async def _append(self, partition: int, result: CoordinatorResult[Any], now_ms: int) -> int:
        """Appends the result's records in one batch (the producer's transactional batch when it
        names one), or its transaction marker; the first offset written."""
        timeout_ms = self.settings.write_timeout_ms
        marker = result.end_transaction
        if marker is not None:
            try:
                return await self.writer.write_txn_marker(
                    self.topic, partition, marker.producer_id, marker.producer_epoch,
                    marker.coordinator_epoch, marker.commit, timeout_ms)
            except KraftError as e:
                raise append_error(self.topic, partition, e.error_code, e.message) from None
        producer = result.producer
        records = [(key, value, (), now_ms) for key, value in result.records]
        batch = build_batch(records) if producer is None else build_batch(
            records, producer_id=producer.producer_id, producer_epoch=producer.producer_epoch,
            transactional=True)
        [answer] = await self.writer.produce([ProduceEntry(self.topic, partition, batch)], acks=-1,
                                             timeout_ms=timeout_ms, coordinator=producer is not None)
        if answer.error_code:
            raise append_error(self.topic, partition, answer.error_code, answer.message)
        return answer.base_offset

    async def _check_log_end(self, ctx: _Context[S]) -> None:
        """After a failed append: if the log end moved (appended, not committed: the records may
        yet commit), the shard cannot know its state from here on."""
        try:
            log_end = (await self.writer.offsets(self.topic, ctx.partition)).log_end_offset
        except KraftError as e:
            log_end, why = None, str(e)
        else:
            why = f"the log end is {log_end} after a failed append, the shard expected {ctx.next_offset}"
        if ctx.state is CoordinatorState.ACTIVE and log_end != ctx.next_offset:
            self._reload(ctx, why)

    # -- timers -------------------------------------------------------------------------------

    def _timer_due(self, ctx: _Context[S], entry: TimerEntry) -> None:
        if self._contexts.get(ctx.partition) is not ctx or ctx.state is not CoordinatorState.ACTIVE:
            return
        assert ctx.timer is not None
        timer = ctx.timer

        def run(shard: S, now_ms: int) -> CoordinatorResult[Any]:
            if not timer.take(entry):
                return _NOTHING  # rescheduled or cancelled while it waited for its turn
            result: CoordinatorResult[Any] = entry.operation(shard, now_ms)
            return result

        pending = _Pending(f"timer {entry.key!r}", run, asyncio.get_running_loop().create_future())
        try:
            self._enqueue(ctx, pending)
        except KraftError:  # the queue is full: later
            timer.schedule(entry.key, self.clock() + self.settings.timer_retry_ms, entry.operation)
            return
        pending.future.add_done_callback(lambda done: self._timer_done(ctx, entry, done))

    def _timer_done(self, ctx: _Context[S], entry: TimerEntry, done: asyncio.Future[Any]) -> None:
        error = None if done.cancelled() else done.exception()
        if error is None or ctx.state is not CoordinatorState.ACTIVE:
            return
        assert ctx.timer is not None
        if entry.key in ctx.timer:
            return  # scheduled anew meanwhile
        log.info("%s-%d: timer %r failed (%s); it runs again in %d ms", self.topic, ctx.partition,
                 entry.key, error, self.settings.timer_retry_ms)
        ctx.timer.schedule(entry.key, self.clock() + self.settings.timer_retry_ms, entry.operation)
