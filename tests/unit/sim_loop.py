"""The skeleton the seeded simulations share (`replication/simulation.py`,
`controlplane/simulation.py`): a deterministic asyncio event loop on a simulated clock, and the
world around it (timers, a lossy network, a step counter that checks invariants after every step).

`SimLoop` is a real asyncio loop (FoundationDB's and TigerBeetle's way of running production
code under simulation): `time()` is the simulated clock, which jumps to the next timer when
nothing is ready; timers due at the same instant run in an order drawn from the seed (asyncio
leaves it undefined), or in the order they were set (the seed still decides the instants);
callbacks made ready run first-come first-served, as asyncio promises; `run_in_executor` (so
`asyncio.to_thread`) runs the function at once, on the loop's thread; there are no sockets. Every handle belongs to the process whose context
scheduled it (`PROCESS`, inherited by the tasks and callbacks that process creates): a handle of
a process that died (kill -9) never runs, and one of a paused process (SIGSTOP) waits until it
continues. After every handle the world's `after_step` runs (the invariants), and the first
exception a handle raises (an invariant, or kraft's code failing outside a task) stops the run
and is raised by `run_until`.
"""

from __future__ import annotations

import asyncio
import contextvars
import heapq
import inspect
import itertools
import math
import random
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Protocol, TypeVar

T = TypeVar("T")


class Process(Protocol):
    def alive(self) -> bool: ...

    def resumes_at_ms(self) -> int:
        """When a paused process continues (at or before now: it runs)."""
        ...


@dataclass(frozen=True, eq=False)
class Incarnation:
    """One incarnation of a simulated process: `owner` (a node, a broker) has `alive`,
    `incarnation` (one more at every restart) and, if it can be paused, `paused_until` (ms)."""

    owner: Any
    incarnation: int

    def alive(self) -> bool:
        return bool(self.owner.alive) and self.owner.incarnation == self.incarnation

    def resumes_at_ms(self) -> int:
        return int(getattr(self.owner, "paused_until", 0))


# the process a handle belongs to (None: the world: clients, the network, the fault injector)
PROCESS: contextvars.ContextVar[Process | None] = contextvars.ContextVar("sim_process", default=None)

# what asyncio reports when the garbage collector takes what a dead process left behind
_GC_REPORTS = ("never retrieved", "destroyed but it is pending")


_contexts: weakref.WeakKeyDictionary[Any, contextvars.Context] = weakref.WeakKeyDictionary()
_WORLD = contextvars.Context()


def context_of(process: Process | None) -> contextvars.Context:
    """The context of `process`'s handles (one per process: made once, it is cheap to reuse)."""
    if process is None:
        return _WORLD
    context = _contexts.get(process)
    if context is None:
        context = _contexts[process] = contextvars.Context()
        context.run(PROCESS.set, process)
    return context


def as_process(process: Process | None, run: Callable[[], T]) -> T:
    """`run()` as `process`: what it schedules (tasks, timers, callbacks) belongs to it."""
    if PROCESS.get() is process:
        return run()
    return context_of(process).run(run)


class SimLoop(asyncio.BaseEventLoop):
    """An asyncio loop whose clock is simulated; `_run_once` is asyncio's, with the simulated
    clock's jump instead of a selector, timers ordered by (when, a seeded draw or the order
    they were set) and each handle gated by its process."""

    def __init__(self, after_step: Callable[[], None], ties: random.Random | None = None) -> None:
        """`ties`: timers due at the same instant run in an order drawn from it (asyncio leaves
        that order undefined); None: in the order they were set."""
        super().__init__()
        self.now_s = 0.0
        self.now_ms = 0  # the same, rounded (read far more often than the clock moves)
        self._after_step = after_step
        self._timers: list[tuple[float, float, asyncio.Handle]] = []  # (when, seq, handle)
        self._seqs: Iterator[float] = itertools.count() if ties is None else iter(ties.random, None)
        self.failure: BaseException | None = None
        self.set_exception_handler(self._on_exception)
        self._tasks: weakref.WeakKeyDictionary[Any, list[asyncio.Task[Any]]] = weakref.WeakKeyDictionary()

    def time(self) -> float:
        return self.now_s

    def __del__(self) -> None:
        # not closed: a dead process's coroutines, closed when collected after the loop, may
        # still schedule callbacks (never run) instead of raising "Event loop is closed"
        pass

    def _write_to_self(self) -> None:
        pass

    def call_at(self, when: float, callback: Callable[..., Any], *args: Any,
                context: contextvars.Context | None = None) -> asyncio.TimerHandle:
        self._check_closed()
        timer = asyncio.TimerHandle(when, callback, args, self, context)
        heapq.heappush(self._timers, (when, next(self._seqs), timer))
        timer._scheduled = True
        return timer

    def create_task(self, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        task = super().create_task(coro, **kwargs)
        process = (kwargs.get("context") or contextvars.copy_context()).get(PROCESS)
        if process is not None:
            tasks = self._tasks.setdefault(process, [])
            tasks[:] = [t for t in tasks if not t.done()] if len(tasks) > 64 else tasks
            tasks.append(task)
        return task

    def killed(self, process: Process) -> None:
        """`process` died: its tasks never run again; those that never started are closed (no
        code runs), so that they are not reported as never awaited."""
        for task in self._tasks.pop(process, ()):
            coro = task.get_coro()
            if inspect.iscoroutine(coro) and inspect.getcoroutinestate(coro) == inspect.CORO_CREATED:
                coro.close()

    def run_in_executor(self, executor: Any, func: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """At once, on this thread (a thread's timing is not the seed's)."""
        future: asyncio.Future[T] = self.create_future()
        try:
            future.set_result(func(*args))
        except Exception as e:
            future.set_exception(e)
        return future

    def _run_once(self) -> None:
        ready, timers = self._ready, self._timers
        if not ready and not self._stopping:  # nothing to do now: the clock jumps to the next timer
            while timers and timers[0][2]._cancelled:
                heapq.heappop(timers)
            if not timers:
                raise RuntimeError("the simulation has nothing left to run")
            self._set_clock(timers[0][0])
        while timers and timers[0][0] <= self.now_s:
            handle = heapq.heappop(timers)[2]
            if not handle._cancelled:
                if isinstance(handle, asyncio.TimerHandle):  # else a paused process's ready callback
                    handle._scheduled = False
                ready.append(handle)
        for _ in range(len(ready)):
            handle = ready.popleft()
            if handle._cancelled:
                continue
            process = handle._context.get(PROCESS)  # type: ignore[attr-defined]
            if process is not None:
                if not process.alive():
                    continue  # killed: what it had scheduled is gone
                resume = process.resumes_at_ms() / 1000
                if resume > self.now_s:  # stopped: runs when continued
                    heapq.heappush(timers, (resume, next(self._seqs), handle))
                    continue
            handle._run()  # an exception goes to `_on_exception`
            try:
                self._after_step()
            except Exception as e:
                self._fail(e)

    def _set_clock(self, now_s: float) -> None:
        if now_s > self.now_s:
            self.now_s, self.now_ms = now_s, round(now_s * 1000)

    def _fail(self, error: BaseException) -> None:
        if self.failure is None:
            self.failure = error
        self.stop()

    def _on_exception(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if any(report in context.get("message", "") for report in _GC_REPORTS):
            return
        self._fail(context.get("exception") or RuntimeError(context.get("message")))

    def run_until(self, end_s: float) -> None:
        """Run every handle due at or before `end_s` (those set meanwhile too); the clock ends there."""
        stop = asyncio.TimerHandle(end_s, self.stop, (), self, _WORLD)
        heapq.heappush(self._timers, (end_s, math.inf, stop))
        try:
            self.run_forever()
        finally:
            stop.cancel()
        self._set_clock(end_s)
        if self.failure is not None:
            raise self.failure


class NetworkSettings(Protocol):
    drop: float
    duplicate: float
    max_delay_ms: int


class SimWorld:
    """A seeded world on a `SimLoop`: timers, a network that drops, duplicates and delays (so
    reorders) messages while `faults` is on, the step counter and the trace. Subclasses check
    their invariants in `after_step`."""

    def __init__(self, seed: int, network: NetworkSettings, trace: bool = False,
                 shuffle_ties: bool = False) -> None:
        """`shuffle_ties`: timers due at the same ms run in a seeded order (else in the order set)."""
        self.seed = seed
        self.rng = random.Random(seed)
        self.trace = trace
        self.network = network
        self.steps = 0
        self.faults = True  # off for the heal
        self.counts: dict[str, int] = {}
        self.loop = SimLoop(self._stepped, random.Random(f"{seed}:ties") if shuffle_ties else None)

    @property
    def now(self) -> int:
        """The simulated clock, in ms."""
        return self.loop.now_ms

    def _stepped(self) -> None:
        self.steps += 1
        self.after_step()

    def after_step(self) -> None:
        raise NotImplementedError

    def _at(self, time_ms: int, run: Callable[[], None], process: Process | None = None) -> None:
        """`run` at `time_ms`, as `process` (None: the world)."""
        self.loop.call_at(time_ms / 1000, run, context=context_of(process))

    def _every(self, interval: int, run: Callable[[], None], process: Process | None = None) -> None:
        """A timer of `process` (dies with it, waits while it is paused) or of the world, every
        `interval // 2`..`interval` ms."""
        def tick() -> None:
            run()
            self._at(self.now + self.rng.randint(interval // 2, interval), tick, process)
        self._at(self.now + self.rng.randint(1, interval), tick, process)

    def _delays(self, what: str, src: int, dst: int, lossy: bool = True) -> list[int]:
        """The delays of the copies of one message that arrive (none: dropped)."""
        s = self.network
        lossy = lossy and self.faults
        if lossy and self.rng.random() < s.drop:
            self._count("dropped")
            self._log(f"drop {what} {src}->{dst}")
            return []
        copies = 2 if lossy and self.rng.random() < s.duplicate else 1
        if copies == 2:
            self._count("duplicated")
        delays = []
        for _ in range(copies):
            delay = self.rng.randint(1, s.max_delay_ms) if self.faults else 1
            long_delay: float = getattr(s, "long_delay", 0.0)
            if lossy and long_delay and self.rng.random() < long_delay:
                delay = self.rng.randint(*getattr(s, "long_delay_ms"))
                self._count("held_up")
            delays.append(delay)
        return delays

    def run_until(self, end_ms: int) -> None:
        self.loop.run_until(end_ms / 1000)

    def _log(self, message: str) -> None:
        if self.trace:
            print(f"{self.now:>7} {message}")

    def _count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1
