"""The `Quorum` interface the controller writes through, and `LocalQuorum`, its single-node form.

A quorum orders metadata records (plain dicts) into the metadata log and fences controllers
inside it: the active controller is the node whose `ClaimController(node_id, epoch)` record was
applied last. Both quorums admit batches by the one rule of the metadata log
(`kraft.metadata.log_rules.admit`): a batch stamped with an older `controller_epoch` gets no
offset, and a request id already in the log's window is not written again.
- `propose(records, request_id=None)` commits the records atomically and contiguously (the
  records of one request are never interleaved with others), stamped with the active controller's
  epoch and `request_id` where they carry none; it returns the offset of the last record once
  every `on_commit` callback has seen it (for a request already committed: the offset it got
  then). Not the active controller: `NotControllerError`; a malformed batch: `InvalidBatchError`.
- `on_commit(callback(offset, record))`: every committed record, in offset order;
  `on_commit_batch(callback(entries))` the same, one committed batch (one `propose`, one list of
  (offset, record)) per call, so a consumer can apply a batch as a whole.
- `on_snapshot(callback(offset, state))`: the state was replaced wholesale (a snapshot loaded at
  start or installed from the leader); `state` is a `MetadataImage` at `offset`, or a pure
  function building it (for a consumer to run off the loop).
`RaftQuorum` (pysyncobj, `raft_quorum.py`) has the same surface; `LocalQuorum` is the one-voter
log for the embedded single node: an fsynced file (`log_store.py`, written from a thread so the
loop never blocks), replayed at `start()`, then the node claims the next controller epoch.
Snapshots of the applied image (from `set_snapshot_source`) bound the log.

A failed append (a full disk) commits nothing: the store cuts its partial frame away, the proposal
fails with `MetadataStorageError` (KAFKA_STORAGE_ERROR) and `storage_error` says why. The node
stays the controller and every later proposal tries the disk again, so the first one that can be
written ends the failure: no restart needed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from typing import Any, Callable, Protocol

from kraft.controller.errors import InvalidBatchError, MetadataStorageError, NotControllerError
from kraft.controller.log_store import MetadataLogStore, encode_batch
from kraft.metadata.image import MetadataImage
from kraft.metadata.log_rules import (
    CLAIM_CONTROLLER, RequestWindow, admit, claim_of, request_runs, validate_batch,
)
from kraft.metadata.records import ClaimController

log = logging.getLogger(__name__)

CommitCallback = Callable[[int, dict[str, Any]], None]
BatchCallback = Callable[[list[tuple[int, dict[str, Any]]]], None]
SnapshotCallback = Callable[[int, Any], None]


def stamp_proposal(records: list[dict[str, Any]], epoch: int, request_id: str | None,
                   node_id: int) -> list[dict[str, Any]]:
    """The batch a controller proposes: copies of `records` stamped with its epoch and the
    request id (a new one by default) where they carry none, checked against the log's shape
    rule. A record of another epoch: NotControllerError; a claim or a malformed batch:
    InvalidBatchError (nothing is proposed)."""
    request_id = request_id or uuid.uuid4().hex
    batch: list[Any] = []
    for record in records:
        stamped = dict(record) if isinstance(record, dict) else record
        if isinstance(stamped, dict):
            if stamped.get("type") == CLAIM_CONTROLLER:
                raise InvalidBatchError("controller claims are the quorum's own business")
            if stamped.setdefault("controller_epoch", epoch) != epoch:
                raise NotControllerError(f"record written for controller epoch {stamped['controller_epoch']}, "
                                         f"this controller's epoch is {epoch}", node_id)
            if stamped.get("request_id") is None:
                stamped["request_id"] = request_id
        batch.append(stamped)
    reason = validate_batch(batch)
    if reason is not None:
        raise InvalidBatchError(reason)
    return batch


class Quorum(Protocol):
    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def propose(self, records: list[dict[str, Any]], request_id: str | None = None) -> int: ...

    def on_commit(self, callback: CommitCallback) -> None: ...

    def on_commit_batch(self, callback: BatchCallback) -> None: ...

    def on_snapshot(self, callback: SnapshotCallback) -> None: ...

    def leader(self) -> int | None: ...

    def is_active_controller(self) -> bool: ...

    def active_controller(self) -> tuple[int, int] | None:
        """(node_id, controller_epoch) of the last applied claim."""
        ...

    @property
    def metadata_offset(self) -> int: ...

    @property
    def storage_error(self) -> str | None:
        """Why the metadata log cannot be written now (a full disk); None while it can."""
        ...


class LocalQuorum:
    def __init__(
        self, data_dir: str | os.PathLike[str], node_id: int, *, snapshot_interval_records: int = 20_000,
        log_recovery: str = "fail", cluster_id: Callable[[], str | None] = lambda: None,
    ) -> None:
        """`log_recovery` is `metadata.log.recovery`: "truncate" cuts a metadata log damaged in
        the middle at the damage instead of refusing to start (see `MetadataLogStore.load`).
        `cluster_id()`: the cluster id this node's claims carry (`ClaimController`)."""
        assert snapshot_interval_records > 0 and log_recovery in ("fail", "truncate")
        self.node_id = node_id
        self.log_recovery = log_recovery
        self._cluster_id = cluster_id
        self.snapshot_interval_records = snapshot_interval_records
        self._store = MetadataLogStore(data_dir)
        self._commit_callbacks: list[CommitCallback] = []
        self._batch_callbacks: list[BatchCallback] = []
        self._snapshot_callbacks: list[SnapshotCallback] = []
        self._snapshot_source: Callable[[], MetadataImage] | None = None
        self._lock = asyncio.Lock()
        self._next_offset = 0
        self._controller: tuple[int, int] | None = None
        self._request_ids = RequestWindow.EMPTY  # the window `log_rules.admit` reads, at the log's end
        self._since_snapshot = 0
        self._snapshot_task: asyncio.Task[None] | None = None
        self._running = False
        self._storage_error: OSError | None = None  # the last append failed with this

    @property
    def directory(self) -> os.PathLike[str]:
        return self._store.directory

    def on_commit(self, callback: CommitCallback) -> None:
        self._commit_callbacks.append(callback)

    def on_commit_batch(self, callback: BatchCallback) -> None:
        self._batch_callbacks.append(callback)

    def on_snapshot(self, callback: SnapshotCallback) -> None:
        self._snapshot_callbacks.append(callback)

    def set_snapshot_source(self, source: Callable[[], MetadataImage]) -> None:
        """Where snapshots come from: the applied image (its offset must be the log's last)."""
        self._snapshot_source = source

    def leader(self) -> int | None:
        return self.node_id if self._running else None

    def active_controller(self) -> tuple[int, int] | None:
        return self._controller

    def is_active_controller(self) -> bool:
        return self._running and self._controller is not None and self._controller[0] == self.node_id

    @property
    def storage_error(self) -> str | None:
        """Why the metadata log cannot be written now (None: the last append succeeded)."""
        return None if self._storage_error is None else str(self._storage_error)

    @property
    def metadata_offset(self) -> int:
        """Offset of the last committed record (-1: none)."""
        return self._next_offset - 1

    # -- lifecycle --------------------------------------------------------------------------------

    async def start(self) -> None:
        """Replay the snapshot and the log through the callbacks, then claim the next epoch."""
        assert not self._running
        loaded = await asyncio.to_thread(self._store.load, self.log_recovery == "truncate")
        if loaded.snapshot is not None:
            snapshot = loaded.snapshot
            if snapshot.controller_id is not None:
                self._controller = (snapshot.controller_id, snapshot.controller_epoch)
            self._request_ids = snapshot.request_ids
            for snapshot_callback in self._snapshot_callbacks:
                snapshot_callback(snapshot.offset, snapshot)
        self._deliver(loaded.entries)
        self._next_offset = loaded.last_offset + 1
        self._since_snapshot = len(loaded.entries)
        await asyncio.to_thread(self._store.open_for_append, self._next_offset)
        log.info("metadata log loaded: %d records after snapshot %s, next offset %d", len(loaded.entries),
                 None if loaded.snapshot is None else loaded.snapshot.offset, self._next_offset)
        self._running = True
        epoch = 1 if self._controller is None else self._controller[1] + 1
        claim = ClaimController(node_id=self.node_id, controller_epoch=epoch, cluster_id=self._cluster_id())
        await self._append([claim.to_dict()], claim=True)
        log.info("node %d is the active controller, epoch %d", self.node_id, epoch)

    async def close(self) -> None:
        if not self._running:
            return
        self._running = False
        async with self._lock:  # let an in-flight append finish
            if self._snapshot_task is not None:
                await asyncio.gather(self._snapshot_task, return_exceptions=True)
            await asyncio.to_thread(self._store.close)

    # -- proposals --------------------------------------------------------------------------------

    async def propose(self, records: list[dict[str, Any]], request_id: str | None = None) -> int:
        if not records:
            raise ValueError("propose needs at least one record")
        if not self.is_active_controller():
            raise NotControllerError(f"node {self.node_id} is not the active controller", None)
        assert self._controller is not None
        batch = stamp_proposal(records, self._controller[1], request_id, self.node_id)
        # Shielded: once the write started it must finish and be delivered, or later offsets
        # would be reused; a cancelled caller just stops waiting.
        return await asyncio.shield(asyncio.ensure_future(self._append(batch)))

    async def _append(self, records: list[dict[str, Any]], *, claim: bool = False) -> int:
        """Commit one batch if the log's rule admits it (as every Raft voter decides): a request
        already in the window answers its first offset and writes nothing (a retry after the
        caller gave up waiting), a fenced batch raises NotControllerError."""
        async with self._lock:
            controller_id, controller_epoch = self._controller or (None, 0)
            admission = admit(controller_id, controller_epoch, self._request_ids, records)
            if admission.status == "duplicate":
                return admission.duplicate_of
            if admission.status == "fenced":
                raise NotControllerError(admission.reason, controller_id)
            if not admission.applied or claim != (claim_of(records) is not None):
                raise InvalidBatchError(admission.reason or "controller claims are the quorum's own business")
            entries = [(self._next_offset + i, r) for i, r in enumerate(records)]
            data = encode_batch(self._next_offset, records)  # TypeError here (nothing written) for a bad record
            try:
                await asyncio.to_thread(self._store.append, data)
            except OSError as e:
                # nothing was committed (the store cut the partial frame): the offsets stay free
                if self._storage_error is None:  # log the transition, not every refused proposal
                    log.error("metadata log append failed: %s; metadata changes fail with "
                              "KAFKA_STORAGE_ERROR until a write succeeds", e)
                self._storage_error = e
                raise MetadataStorageError(f"metadata log append failed: {e}") from e
            if self._storage_error is not None:
                log.warning("metadata log is writable again (it failed with: %s)", self._storage_error)
                self._storage_error = None
            self._next_offset += len(entries)
            self._since_snapshot += len(entries)
            self._deliver(entries)
            if self._since_snapshot >= self.snapshot_interval_records:
                await self._start_snapshot()
            return entries[-1][0]

    def _deliver(self, entries: list[tuple[int, dict[str, Any]]]) -> None:
        """Hand admitted records (appended now, or replayed at start: admitted when written) to
        the callbacks, after noting their claim and request ids for `admit`."""
        if entries:  # contiguous offsets: one append's batch, or the log after the snapshot
            self._request_ids = self._request_ids.remembered(
                request_runs(entries[0][0], [record.get("request_id") for _, record in entries]))
        for offset, record in entries:
            if record.get("type") == CLAIM_CONTROLLER:
                self._controller = claim_of([record])
            for callback in self._commit_callbacks:
                try:
                    callback(offset, record)
                except Exception:  # one consumer's bug must not starve the others
                    log.exception("on_commit callback failed at offset %d", offset)
        for batch_callback in self._batch_callbacks if entries else ():
            try:
                batch_callback(entries)
            except Exception:
                log.exception("on_commit_batch callback failed at offsets %d-%d", entries[0][0], entries[-1][0])

    # -- snapshots --------------------------------------------------------------------------------

    async def snapshot(self) -> int | None:
        """Snapshot the applied image now and wait for it; its offset (None when not possible)."""
        async with self._lock:
            if self._snapshot_task is not None:
                await asyncio.gather(self._snapshot_task, return_exceptions=True)
            offset = await self._start_snapshot()
            task = self._snapshot_task
        if offset is not None and task is not None:
            await task
        return offset

    async def _start_snapshot(self) -> int | None:
        """Under the lock: roll the log at the image's next offset, write the snapshot in the background."""
        if self._snapshot_source is None or (self._snapshot_task is not None and not self._snapshot_task.done()):
            return None
        image = self._snapshot_source()
        if image.offset != self._next_offset - 1 or image.offset < 0:
            return None  # the image lags the log (or is empty): try again after the next append
        try:
            await asyncio.to_thread(self._store.roll, self._next_offset)
        except OSError as e:  # the records are committed; the snapshot waits for the next append
            log.error("metadata log roll at offset %d failed: %s", self._next_offset, e)
            return None
        self._since_snapshot = 0
        self._snapshot_task = asyncio.create_task(self._write_snapshot(image))
        return image.offset

    async def _write_snapshot(self, image: MetadataImage) -> None:
        try:
            path = await asyncio.to_thread(self._store.write_snapshot, image)
            log.info("metadata snapshot at offset %d written to %s", image.offset, path)
        except OSError as e:  # the log still holds everything: a missed snapshot is only a longer replay
            log.error("metadata snapshot at offset %d failed: %s", image.offset, e)
