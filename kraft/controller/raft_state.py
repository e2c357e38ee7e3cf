"""The replicated state machine behind `RaftQuorum`: pure, deterministic, never raises.

It owns what every voter must agree on besides the application's own state: the metadata offset
of the last applied record, the active controller and its epoch (fencing inside the log), and a
bounded window of recent request ids (so a retried proposal is applied once). Which batch is
applied is decided by `kraft.metadata.log_rules.admit`, the one rule of the metadata log (the
image's replay trusts what it admitted). The application state (the metadata image) is folded in
by an injected pure `StateMachine`.

A log entry is one *batch*: the list of record dicts of one `propose` call, applied atomically.
Each record is a dict of builtins with `type`, `controller_epoch` and `request_id`, as
`kraft.metadata.records` writes them. No clock, no randomness, no I/O: every voter computes the same
result from the same entries, and a snapshot of `MetadataLogState` is the whole truth.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Protocol

from kraft.metadata.delta import apply_records
from kraft.metadata.image import MetadataImage
from kraft.metadata.log_rules import (
    CLAIM_CONTROLLER, MAX_RECORDS_PER_BATCH, MAX_REMEMBERED_REQUESTS, MAX_REQUEST_ID_LENGTH, RequestWindow, admit,
    batch_request_id, check_fencing, claim_of, is_int, request_runs, validate_batch,
)
from kraft.metadata.records import ClaimController

logger = logging.getLogger(__name__)

# The log's rule is defined once, in kraft.metadata.log_rules; its names are re-exported here.
__all__ = [
    "CLAIM_CONTROLLER", "MAX_RECORDS_PER_BATCH", "MAX_REMEMBERED_REQUESTS", "MAX_REQUEST_ID_LENGTH",
    "BatchOutcome", "MetadataImageMachine", "MetadataLogState", "NoStateMachine", "PendingImage", "StateMachine",
    "apply_batch", "apply_endpoint", "batch_request_id", "check_fencing", "claim_record", "validate_batch",
]


class StateMachine(Protocol):
    """The application's pure fold over committed batches (e.g. the metadata image).

    `replay` gets the (offset, record) entries of one applied batch and must return a new value
    rather than mutate `state`: the event loop reads a state handed out by a snapshot while the
    Raft thread keeps applying. It should not raise; if it does, the batch keeps its offsets but
    leaves the application state unchanged (on every voter alike).
    """

    def initial_state(self) -> Any: ...

    def replay(self, state: Any, entries: list[tuple[int, dict[str, Any]]]) -> Any: ...


class NoStateMachine:
    """Keeps no application state: consumers rebuild from `on_commit` and the log alone."""

    def initial_state(self) -> Any:
        return None

    def replay(self, state: Any, entries: list[tuple[int, dict[str, Any]]]) -> Any:
        return state


class PendingImage:
    """The controller's replicated application state: the last image the event loop folded
    (`base`) plus the committed entries after it, not yet folded.

    The Raft thread only appends entries (`MetadataImageMachine.replay`: work ∝ the batch, no
    record decoding), so a large batch never holds the Raft thread past an election timeout; the
    image is built once, on the loop, by `MetadataLoader` with `MetadataDelta` (the one replay
    rule brokers use too). Pickled (pysyncobj's dump, written in its forked child) as the folded
    image's snapshot form; unpickled lazily (the parse happens at the first `fold`, on the loop,
    not on the Raft thread that loads the dump)."""

    __slots__ = ("_base", "_raw", "base_offset", "chunks")

    def __init__(self, base: MetadataImage | None, chunks: tuple[tuple[tuple[int, dict[str, Any]], ...], ...] = (),
                 *, raw: dict[str, Any] | None = None) -> None:
        self._base = base
        self._raw = raw  # a snapshot's builtins, parsed at the first fold
        self.base_offset = base.offset if base is not None else int((raw or {}).get("offset", -1))
        self.chunks = chunks  # one tuple of (offset, record) per applied batch, in order

    @classmethod
    def from_snapshot(cls, raw: dict[str, Any]) -> "PendingImage":
        return cls(None, raw=raw)

    @property
    def offset(self) -> int:
        return self.chunks[-1][-1][0] if self.chunks else self.base_offset

    def extended(self, chunk: tuple[tuple[int, dict[str, Any]], ...]) -> "PendingImage":
        """This state with one more applied batch (shares everything else)."""
        pending = PendingImage(self._base, self.chunks + (chunk,), raw=self._raw)
        pending.base_offset = self.base_offset
        return pending

    def fold(self) -> MetadataImage:
        """The image at `offset` (the base with every pending entry replayed)."""
        base = self._base
        if base is None:
            base = self._base = MetadataImage.from_snapshot(self._raw)
            self._raw = None
        if not self.chunks:
            return base
        return apply_records(base, (e for chunk in self.chunks for e in chunk))[1]

    def __reduce__(self) -> tuple[Any, ...]:
        raw = self._raw if self._raw is not None and not self.chunks else self.fold().to_snapshot()
        return (PendingImage.from_snapshot, (raw,))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PendingImage) and self.fold() == other.fold()

    __hash__ = None  # type: ignore[assignment]


class MetadataImageMachine:
    """The controller's state machine: a `PendingImage` (`Quorum.on_snapshot` gets its image).

    `folded(image)` is how the loop hands back an image it built (any thread may call it: one
    reference assignment); the next `replay` on the Raft thread then drops the entries it covers.
    Every voter's state means the same image whatever its base, so the state stays deterministic.
    """

    def __init__(self) -> None:
        self._folded = MetadataImage.EMPTY

    def initial_state(self) -> PendingImage:
        return PendingImage(MetadataImage.EMPTY)

    def folded(self, image: MetadataImage) -> None:
        if image.offset > self._folded.offset:
            self._folded = image

    def replay(self, state: PendingImage, entries: list[tuple[int, dict[str, Any]]]) -> PendingImage:
        folded, chunks = self._folded, state.chunks
        if folded.offset > state.base_offset and chunks and folded.offset <= state.offset:
            cut = folded.offset
            chunks = tuple(c if c[0][0] > cut else tuple(e for e in c if e[0] > cut)
                           for c in chunks if c[-1][0] > cut)
            state = PendingImage(folded, chunks)
        return state.extended(tuple(entries))


@dataclass
class MetadataLogState:
    """Everything the replicated log determines. Mutated only by `apply_batch` (Raft thread)."""

    offset: int = -1  # metadata offset of the last applied record; the first record gets 0
    controller_id: int | None = None
    controller_epoch: int = 0
    # request_id -> offset of its last record, oldest first, bounded (`log_rules.RequestWindow`)
    request_ids: RequestWindow = RequestWindow.EMPTY
    app_state: Any = None
    # node_id -> (host, port) of each voter's client listener, where brokers and other nodes reach
    # its controller API; announced by the voters themselves, outside the metadata offsets.
    controller_endpoints: dict[int, tuple[str, int]] = field(default_factory=dict)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if not isinstance(self.request_ids, RequestWindow):  # a dump from before the window: an OrderedDict
            self.request_ids = RequestWindow.from_items(self.request_ids.items())


@dataclass(frozen=True)
class BatchOutcome:
    """What applying one batch did. `status`: "applied", "duplicate", "fenced" or "invalid"."""

    status: str
    reason: str = ""
    first_offset: int = -1
    last_offset: int = -1
    controller_id: int | None = None
    controller_epoch: int = 0

    @property
    def applied(self) -> bool:
        return self.status == "applied"


def claim_record(node_id: int, controller_epoch: int, cluster_id: str | None = None) -> dict[str, Any]:
    """The record a new Raft leader commits before it acts as the active controller."""
    return ClaimController(node_id=node_id, controller_epoch=controller_epoch, cluster_id=cluster_id).to_dict()


def apply_batch(state: MetadataLogState, batch: Any, machine: StateMachine) -> BatchOutcome:
    """Apply one committed batch to `state` in place. Deterministic; never raises.

    Invalid or fenced batches change nothing. A batch whose request id was already applied
    changes nothing and answers the offset it got the first time.
    """
    try:
        return _apply(state, batch, machine)
    except Exception as exc:  # a bug here must not stop the cluster from applying
        logger.exception("metadata batch could not be applied; treated as a no-op")
        return _outcome(state, "invalid", f"internal error: {type(exc).__name__}: {exc}")


def _outcome(state: MetadataLogState, status: str, reason: str = "",
             first_offset: int = -1, last_offset: int = -1) -> BatchOutcome:
    return BatchOutcome(status, reason, first_offset, last_offset,
                        state.controller_id, state.controller_epoch)


def _apply(state: MetadataLogState, batch: Any, machine: StateMachine) -> BatchOutcome:
    admission = admit(state.controller_id, state.controller_epoch, state.request_ids, batch)
    if admission.status == "duplicate":
        return _outcome(state, "duplicate", admission.reason, -1, admission.duplicate_of)
    if not admission.applied:
        if admission.status == "invalid":
            logger.warning("ignoring invalid metadata batch: %s", admission.reason)
        else:
            logger.info("ignoring metadata batch: %s", admission.reason)
        return _outcome(state, admission.status, admission.reason)

    first = state.offset + 1
    entries = list(zip(range(first, first + len(batch)), batch))
    state.offset += len(batch)
    claim = claim_of(batch)
    if claim is not None:
        state.controller_id, state.controller_epoch = claim
    try:
        state.app_state = machine.replay(state.app_state, entries)
    except Exception as exc:  # same batch, same code: every voter skips it alike
        logger.warning("batch at offsets %d-%d left the state unchanged: %s: %s",
                       first, state.offset, type(exc).__name__, exc)
    runs = request_runs(first, (r.get("request_id") for r in batch))
    if runs:
        state.request_ids = state.request_ids.remembered(runs)
    return _outcome(state, "applied", "", first, state.offset)


MAX_HOST_LENGTH = 255


def apply_endpoint(state: MetadataLogState, node_id: Any, host: Any, port: Any) -> bool:
    """Record a voter's announced client endpoint; False (nothing changed) when malformed.
    Deterministic and never raises, like `apply_batch`."""
    if not (is_int(node_id) and node_id >= 0 and isinstance(host, str)
            and 0 < len(host) <= MAX_HOST_LENGTH and is_int(port) and 0 < port < 65536):
        logger.warning("ignoring a malformed controller endpoint: %r %r %r", node_id, host, port)
        return False
    endpoints = getattr(state, "controller_endpoints", None)
    if endpoints is None:  # a state pickled before endpoints existed
        endpoints = state.controller_endpoints = {}
    endpoints[node_id] = (host, port)
    return True
