"""The metadata log's admission rule: which proposed batches get metadata offsets (pure, one copy).

A log entry is one *batch*: the record dicts of one proposal, applied atomically. `admit` decides,
from the log's fencing state (the active controller and its epoch) and its window of recent
request ids, whether a batch is applied, or ignored as malformed, fenced or a duplicate:
- shape (`validate_batch`): a non-empty list of at most `MAX_RECORDS_PER_BATCH` dicts, each with a
  string `type`, one shared non-negative `controller_epoch`, a `request_id` that is a short string
  or None; a `ClaimController` travels alone, its `cluster_id` a short string or None.
- fencing (`check_fencing`): a claim names exactly the next epoch (an older leader's late claim is
  stale); any other batch needs a claimed controller and its epoch (a deposed controller's writes
  are stale).
- dedup: a batch whose request id (its first record's) is in the window was applied already; it
  answers the offset the request got then.

The Raft state machine (`kraft.controller.raft_state`) applies this per batch on the Raft thread,
reading only the dict fields above. Only admitted batches get offsets, so everything downstream
(the controller's `MetadataLoader`, standbys, brokers) replays already-admitted records and
`MetadataDelta` trusts them: it applies claims and remembers request ids with the same
`RequestWindow`, so `image.request_ids` is the window the rule reads, at the image's offset.

Replicated semantics: every voter must use the same rule and the same limits. The window keeps
the `MAX_REMEMBERED_REQUESTS` most recently *first seen* request ids (FIFO; a request seen again
only moves its offset), each with the offset of its last record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping, Sequence

from immutables import Map

from kraft.metadata.records import ClaimController

CLAIM_CONTROLLER = ClaimController.type
# All three are part of the replicated semantics: every voter must use the same values.
MAX_RECORDS_PER_BATCH = 100_000
MAX_REMEMBERED_REQUESTS = 10_000
MAX_REQUEST_ID_LENGTH = 256
MAX_CLUSTER_ID_LENGTH = 256

_EMPTY: Map = Map()


class RequestWindow(Mapping[str, int]):
    """The bounded window of recent request ids -> offset of the last record of each, oldest
    first: a persistent value (two HAMTs), so a new window shares all but what changed, and
    remembering is O(log n) per request plus O(1) per id evicted, never a copy of the window."""

    __slots__ = ("_offsets", "_order", "_head", "_tail", "_hash")

    def __init__(self, _offsets: Map = _EMPTY, _order: Map = _EMPTY, _head: int = 0, _tail: int = 0) -> None:
        self._offsets = _offsets  # request id -> (offset, sequence number)
        self._order = _order  # sequence number -> request id, for sequence numbers head..tail-1
        self._head = _head
        self._tail = _tail
        self._hash: int | None = None

    EMPTY: "RequestWindow"

    @classmethod
    def from_items(cls, items: Iterable[Sequence[Any]]) -> "RequestWindow":
        """A window holding (request id, offset) pairs, oldest first (a snapshot's form); the
        newest `MAX_REMEMBERED_REQUESTS` are kept. Built in bulk, not by one `set` per id."""
        pairs = [(str(r), int(o)) for r, o in items]
        ids = dict(pairs)
        if len(ids) != len(pairs) or len(ids) > MAX_REMEMBERED_REQUESTS:  # not a window's own form
            return cls.EMPTY.remembered(pairs)
        return cls(Map({r: (o, s) for s, (r, o) in enumerate(pairs)}), Map(enumerate(ids)), 0, len(pairs))

    def __getitem__(self, request_id: str) -> int:
        return self._offsets[request_id][0]

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._offsets

    def __len__(self) -> int:
        return len(self._offsets)

    def __iter__(self) -> Iterator[str]:
        order = self._order
        return (order[s] for s in range(self._head, self._tail))

    def remembered(self, runs: Iterable[tuple[str, int]]) -> "RequestWindow":
        """This window after the (request id, offset) of admitted records, in offset order
        (`request_runs` gives them for a batch; consecutive records of one request may come
        as one pair with the last offset: the result is the same)."""
        offsets = self._offsets.mutate()
        order = self._order.mutate()
        head, tail = self._head, self._tail
        for request_id, offset in runs:
            known = offsets.get(request_id)
            if known is not None:
                offsets[request_id] = (offset, known[1])
                continue
            offsets[request_id] = (offset, tail)
            order[tail] = request_id
            tail += 1
            if tail - head > MAX_REMEMBERED_REQUESTS:
                del offsets[order.pop(head)]
                head += 1
        return RequestWindow(offsets.finish(), order.finish(), head, tail)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RequestWindow):
            return self._offsets == other._offsets and list(self) == list(other)
        if isinstance(other, Mapping):
            return len(self) == len(other) and all(other.get(r, None) == o for r, o in self.items())
        return NotImplemented

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(tuple(self.items()))
        return self._hash

    def __reduce__(self) -> tuple[Any, ...]:
        # builtins in the pickle (pysyncobj's dump), so a dump does not depend on this class's layout
        return (RequestWindow.from_items, ([[r, o] for r, o in self.items()],))

    def __repr__(self) -> str:
        return f"RequestWindow({list(self.items())!r})"


RequestWindow.EMPTY = RequestWindow()


def request_runs(first_offset: int, request_ids: Iterable[Any]) -> list[tuple[str, int]]:
    """(request id, offset of its last record) per run of consecutive records of one request, for
    records at offsets first_offset, first_offset + 1, ...; records without a request id are skipped."""
    runs: list[tuple[str, int]] = []
    last = None
    for offset, request_id in enumerate(request_ids, first_offset):
        if isinstance(request_id, str) and request_id:
            if request_id == last:
                runs[-1] = (request_id, offset)
            else:
                runs.append((request_id, offset))
                last = request_id
    return runs


@dataclass(frozen=True)
class Admission:
    """The rule's answer for one batch. `status`: "applied", "invalid", "fenced" or "duplicate"
    (then `duplicate_of` is the offset of the last record of the request's first application)."""

    status: str
    reason: str = ""
    duplicate_of: int = -1

    @property
    def applied(self) -> bool:
        return self.status == "applied"


ADMITTED = Admission("applied")


def admit(controller_id: int | None, controller_epoch: int, window: Mapping[str, int], batch: Any) -> Admission:
    """Whether `batch` gets offsets, given the log's claimed controller, epoch and request window."""
    reason = validate_batch(batch)
    if reason is not None:
        return Admission("invalid", reason)
    reason = check_fencing(controller_id, controller_epoch, batch)
    if reason is not None:
        return Admission("fenced", reason)
    request_id = batch_request_id(batch)
    if request_id is not None:
        last = window.get(request_id)
        if last is not None:
            return Admission("duplicate", f"request {request_id} already applied", last)
    return ADMITTED


def claim_of(batch: list[dict[str, Any]]) -> tuple[int, int] | None:
    """(node_id, controller_epoch) an admitted batch claims, or None."""
    first = batch[0]
    return (first["node_id"], first["controller_epoch"]) if first["type"] == CLAIM_CONTROLLER else None


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def validate_batch(batch: Any) -> str | None:
    """Why `batch` is malformed, or None. Shape only; fencing is `check_fencing`."""
    if not isinstance(batch, list) or not batch:
        return "a batch is a non-empty list of records"
    if len(batch) > MAX_RECORDS_PER_BATCH:
        return f"a batch holds at most {MAX_RECORDS_PER_BATCH} records, got {len(batch)}"
    epoch = None
    for i, record in enumerate(batch):
        if not isinstance(record, dict):
            return f"record {i} is a {type(record).__name__}, not a dict"
        if not isinstance(record.get("type"), str) or not record["type"]:
            return f"record {i} has no string `type`"
        if not is_int(record.get("controller_epoch")) or record["controller_epoch"] < 0:
            return f"record {i} has no non-negative integer `controller_epoch`"
        request_id = record.get("request_id")
        if request_id is not None and (
            not isinstance(request_id, str) or not 0 < len(request_id) <= MAX_REQUEST_ID_LENGTH
        ):
            return f"record {i} has a bad `request_id` (a string of 1-{MAX_REQUEST_ID_LENGTH} chars or null)"
        if epoch is not None and record["controller_epoch"] != epoch:
            return "the records of a batch carry different controller epochs"
        epoch = record["controller_epoch"]
    claims = [r for r in batch if r["type"] == CLAIM_CONTROLLER]
    if claims:
        if len(batch) != 1:
            return f"a {CLAIM_CONTROLLER} record travels alone in its batch"
        if not is_int(claims[0].get("node_id")) or claims[0]["node_id"] < 0:
            return f"{CLAIM_CONTROLLER} needs a non-negative integer `node_id`"
        cluster_id = claims[0].get("cluster_id")
        if cluster_id is not None and not (isinstance(cluster_id, str) and 0 < len(cluster_id) <= MAX_CLUSTER_ID_LENGTH):
            return f"{CLAIM_CONTROLLER} has a bad `cluster_id` (a string of 1-{MAX_CLUSTER_ID_LENGTH} chars or null)"
    return None


def batch_request_id(batch: list[dict[str, Any]]) -> str | None:
    """The request a batch answers: the first request id its records carry."""
    return next((r["request_id"] for r in batch if r.get("request_id") is not None), None)


def check_fencing(controller_id: int | None, controller_epoch: int,
                  batch: list[dict[str, Any]]) -> str | None:
    """Why a well-formed batch must be ignored under the current controller, or None.

    A claim must name exactly the next epoch (an older leader's late claim is stale); any other
    batch must come from the current controller's epoch (a deposed controller's writes are stale).
    """
    epoch = batch[0]["controller_epoch"]
    if batch[0]["type"] == CLAIM_CONTROLLER:
        if epoch != controller_epoch + 1:
            kind = "stale claim" if epoch <= controller_epoch else "claim skips epochs"
            return (f"{kind}: epoch {epoch} by node {batch[0]['node_id']}, the current "
                    f"epoch is {controller_epoch}")
        return None
    if controller_id is None:
        return "no active controller has claimed an epoch yet"
    if epoch != controller_epoch:
        return (f"fenced: written in controller epoch {epoch}, the active controller is node "
                f"{controller_id} in epoch {controller_epoch}")
    return None
