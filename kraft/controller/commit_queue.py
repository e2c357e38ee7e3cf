"""The active controller's write path: requests in, committed answers out, in groups.

Every request that may write is a `build(image) -> ControllerResult` (the pure handlers). They
queue here; one committer takes what queued meanwhile as a group, builds each request in order
against the image plus the records of the requests before it in the group (the same view a
one-at-a-time controller would give it: an AlterPartition after another of the same partition
sees its new partition epoch), proposes the group's records as one batch and answers everyone
once it is committed and published here. A commit costs a Raft round trip and an fsync on a
majority; under load that is 0.1-1 s, and one commit per request let dozens of AlterPartitions
after a broker restart (one per partition) queue for tens of seconds, heartbeats behind them
(Kafka's QuorumController likewise appends new records while earlier ones commit).

The log admits a batch once, deduplicating by its first record's request id (`log_rules`); every
record keeps its own request's id. So a request retried with an id whose first proposal had an
unknown outcome (a timeout) travels alone, first in its batch: if the first copy committed, the
log drops the retry. A request queued twice with the same id (a caller retrying while its first
copy waits) shares the first copy's answer.

Per-stage times of a group (queued, catching up, building, committing, publishing) are logged
when a request took longer than `SLOW_REQUEST_S`, so a slow control plane says where it spends
its time.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

from kraft.controller.errors import NotControllerError
from kraft.controller.handlers import ControllerResult
from kraft.controller.metadata_loader import MetadataLoader
from kraft.controller.quorum import Quorum
from kraft.metadata.delta import apply_records
from kraft.metadata.image import MetadataImage
from kraft.metadata.log_rules import MAX_RECORDS_PER_BATCH

log = logging.getLogger("kraft.controller.service")

MAX_REMEMBERED_RESPONSES = 1000
MAX_UNRESOLVED_IDS = 10_000
MAX_GROUP_REQUESTS = 1000
APPLY_TIMEOUT_S = 30.0  # from a commit to its publication here (the loader's slices)
SLOW_REQUEST_S = 1.0
SLOW_LOG_INTERVAL_S = 10.0

Build = Callable[[MetadataImage], ControllerResult]


@dataclass
class _Request:
    request_id: str | None  # the caller's; None: a new one is made
    build: Build
    in_thread: bool  # a pure build (may be CPU-heavy); False: it touches the service's state
    name: str
    answer: asyncio.Future[dict[str, Any]]
    queued_at: float = field(default_factory=time.monotonic)


@dataclass
class _Built:
    request: _Request
    request_id: str
    result: ControllerResult
    records: list[dict[str, Any]]
    after: MetadataImage  # the image with these records applied (at provisional offsets)


Outcome = _Built | dict[str, Any] | BaseException  # built; a retry's earlier answer; refused


@dataclass
class _Stages:
    """Where a group's time went (seconds)."""

    catch_up: float = 0.0
    build: float = 0.0
    commit: float = 0.0
    publish: float = 0.0


def _build_one(request: _Request, image: MetadataImage, epoch: int, request_id: str) -> _Built:
    """A request's result, its records stamped in their log form, and the image with them
    applied (the next request of the group validates against it)."""
    result = request.build(image)
    stamped = [r.stamped(epoch, request_id) for r in result.records]
    if stamped:
        _, image = apply_records(image, ((image.offset + 1 + i, r) for i, r in enumerate(stamped)))
    return _Built(request, request_id, result, [r.to_dict() for r in stamped], image)


class CommitQueue:
    def __init__(self, quorum: Quorum, loader: MetadataLoader, active_epoch: Callable[[], int | None],
                 leader_id: Callable[[], int | None], node_id: int,
                 new_request_id: Callable[[], str] | None = None) -> None:
        self._quorum = quorum
        # the id of a request that carries none (a seeded simulation draws its own)
        self._new_request_id = new_request_id or (lambda: uuid.uuid4().hex)
        self._loader = loader
        self._active_epoch = active_epoch
        self._leader_id = leader_id
        self._node_id = node_id
        self._queue: list[_Request] = []
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}  # request id -> its answer
        self._responses: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._unresolved: OrderedDict[str, None] = OrderedDict()  # ids proposed with an unknown outcome
        self._task: asyncio.Task[None] | None = None
        self._last_slow_log = 0.0

    async def run(self, request_id: str | None, build: Build, *, in_thread: bool = True,
                  name: str = "request") -> dict[str, Any]:
        """Queue a request; its answer once its records (if any) are committed and published."""
        if request_id is not None and request_id in self._waiting:
            return await asyncio.shield(self._waiting[request_id])
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._queue.append(_Request(request_id, build, in_thread, name, answer))
        if request_id is not None:
            self._waiting[request_id] = answer
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._commit_loop())
        return await asyncio.shield(answer)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._fail(self._take_all(), NotControllerError(f"node {self._node_id} is closing", None))

    # -- the committer ----------------------------------------------------------------------------

    async def _commit_loop(self) -> None:
        while self._queue:
            try:
                await self._commit_group()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a bug must not leave callers waiting for ever
                log.exception("controller request group failed")
                self._fail(self._take_all(), e)

    def _take_all(self) -> list[_Request]:
        taken, self._queue = self._queue, []
        return taken

    def _take_group(self) -> list[_Request]:
        """The next group: everything queued, except that a request retrying an id with an
        unknown outcome goes alone (first in its batch, where the log's dedup sees it)."""
        group: list[_Request] = []
        while self._queue and len(group) < MAX_GROUP_REQUESTS:
            request = self._queue[0]
            if request.request_id in self._unresolved and group:
                break
            group.append(self._queue.pop(0))
            if request.request_id in self._unresolved:
                break
        return group

    def _fail(self, requests: list[_Request], error: BaseException) -> None:
        for request in requests:
            self._settle(request, error=error)

    def _settle(self, request: _Request, response: dict[str, Any] | None = None,
                error: BaseException | None = None) -> None:
        if request.request_id is not None and self._waiting.get(request.request_id) is request.answer:
            del self._waiting[request.request_id]
        if request.answer.done():
            return
        if error is not None:
            request.answer.set_exception(error)
        else:
            request.answer.set_result(response or {})

    async def _commit_group(self) -> None:
        stages = _Stages()
        started = time.monotonic()
        await self._loader.caught_up()
        stages.catch_up = time.monotonic() - started
        group = self._take_group()
        epoch = self._active_epoch()
        if epoch is None:
            self._fail(group, NotControllerError(f"node {self._node_id} is not the active controller",
                                                 self._leader_id()))
            return
        mark = time.monotonic()
        built = await self._build_group(group, self._loader.image, epoch)
        stages.build = time.monotonic() - mark
        records = [r for b in built for r in b.records]
        if records:
            mark = time.monotonic()
            try:
                # every record carries its request's id already; the batch is admitted by the first
                offset = await self._quorum.propose(records, built[0].request_id)
            except Exception as e:
                if getattr(e, "error_code", None) == "REQUEST_TIMED_OUT":  # the outcome is unknown
                    for b in built:
                        self._unresolved[b.request_id] = None
                    while len(self._unresolved) > MAX_UNRESOLVED_IDS:
                        self._unresolved.popitem(last=False)
                self._fail([b.request for b in built], e)
                return
            stages.commit = time.monotonic() - mark
            mark = time.monotonic()
            await self._loader.wait_for_offset(offset, APPLY_TIMEOUT_S)
            stages.publish = time.monotonic() - mark
            if self._loader.image.controller_epoch != epoch:
                # another controller claimed meanwhile: replay ignored our records
                self._fail([b.request for b in built], NotControllerError(
                    "controller epoch changed during the request", self._leader_id()))
                return
        image = self._loader.image
        for b in built:
            self._unresolved.pop(b.request_id, None)
            result = b.result
            response = result.response_from_image(image) if result.response_from_image else result.response
            self._responses[b.request_id] = response
            self._settle(b.request, response)
        while len(self._responses) > MAX_REMEMBERED_RESPONSES:
            self._responses.popitem(last=False)
        self._maybe_log_slow(group, started, stages)

    async def _build_group(self, group: list[_Request], image: MetadataImage, epoch: int) -> list[_Built]:
        """Each request against the image with the records of those before it; a request that
        fails validation is answered with its error and adds nothing. Consecutive pure builds
        share one thread hop (placing thousands of partitions is CPU work the loop must not
        wait on). Requests past the batch's record limit go back to the queue's head."""
        built: list[_Built] = []
        pending = list(group)
        budget = MAX_RECORDS_PER_BATCH
        while pending:
            kind = pending[0].in_thread
            size = next((n for n, r in enumerate(pending) if r.in_thread != kind), len(pending))
            run, pending = pending[:size], pending[size:]
            if kind:
                outcomes, rest = await asyncio.to_thread(self._build_run, run, image, epoch, budget, not built)
            else:
                outcomes, rest = self._build_run(run, image, epoch, budget, not built)
            for request, outcome in outcomes:
                if isinstance(outcome, _Built):
                    built.append(outcome)
                    budget -= len(outcome.records)
                    image = outcome.after
                elif isinstance(outcome, BaseException):
                    self._settle(request, error=outcome)
                else:
                    self._settle(request, outcome)
            if rest:
                self._queue[0:0] = rest + pending
                break
        return built

    def _build_run(self, requests: list[_Request], image: MetadataImage, epoch: int, budget: int,
                   first: bool) -> tuple[list[tuple[_Request, Outcome]], list[_Request]]:
        """Builds `requests` in order from `image`: their outcomes, and the requests left for the
        next group (the records would pass `budget`; a group's first request always goes)."""
        outcomes: list[tuple[_Request, Outcome]] = []
        for n, request in enumerate(requests):
            if request.request_id is not None and image.has_request(request.request_id):
                outcomes.append((request, self._responses.get(request.request_id)
                                 or {"request_id": request.request_id, "duplicate": True}))
                continue
            try:
                outcome = _build_one(request, image, epoch, request.request_id or self._new_request_id())
            except Exception as e:  # MetadataError and the like: this request's answer
                outcomes.append((request, e))
                continue
            if len(outcome.records) > budget and not first:
                return outcomes, requests[n:]
            first = False
            budget -= len(outcome.records)
            image = outcome.after
            outcomes.append((request, outcome))
        return outcomes, []

    def _maybe_log_slow(self, group: list[_Request], started: float, stages: _Stages) -> None:
        now = time.monotonic()
        oldest = min(r.queued_at for r in group) if group else now
        if now - oldest < SLOW_REQUEST_S or now - self._last_slow_log < SLOW_LOG_INTERVAL_S:
            return
        self._last_slow_log = now
        kinds = ", ".join(f"{n} x{c}" for n, c in Counter(r.name for r in group).most_common())
        log.warning("controller requests took up to %.2f s (%s): %.2f s queued, %.2f s catching up "
                    "with the metadata log, %.2f s building, %.2f s committing, %.2f s publishing; "
                    "%d more queued", now - oldest, kinds, started - oldest, stages.catch_up,
                    stages.build, stages.commit, stages.publish, len(self._queue))
