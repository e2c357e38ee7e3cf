"""An in-memory `Quorum` for controller tests: commits at once, and fails or deposes on demand.

Like the Raft quorum, it gives offsets only to batches the metadata log's admission rule
(`log_rules.admit`: fencing, request dedup) lets in; replay trusts what it commits."""

from __future__ import annotations

import uuid
from typing import Any, Callable

from kraft.controller.errors import NotControllerError
from kraft.metadata.log_rules import RequestWindow, admit, claim_of, request_runs
from kraft.metadata.records import ClaimController


class FakeQuorum:
    def __init__(self, node_id: int = 1) -> None:
        self.node_id = node_id
        self.log: list[dict[str, Any]] = []
        self.proposals: list[list[dict[str, Any]]] = []
        self.fail_next: Exception | None = None  # raised before anything is committed
        self.lose_answer_next: Exception | None = None  # raised after the commit: outcome unknown
        self._commit: list[Callable[[int, dict[str, Any]], None]] = []
        self._snapshot: list[Callable[[int, Any], None]] = []
        self._controller: tuple[int, int] | None = None
        self._admitted: tuple[int | None, int, RequestWindow] = (None, 0, RequestWindow.EMPTY)

    def on_commit(self, callback: Callable[[int, dict[str, Any]], None]) -> None:
        self._commit.append(callback)

    def on_snapshot(self, callback: Callable[[int, Any], None]) -> None:
        self._snapshot.append(callback)

    def leader(self) -> int | None:
        return None if self._controller is None else self._controller[0]

    def active_controller(self) -> tuple[int, int] | None:
        return self._controller

    def is_active_controller(self) -> bool:
        return self._controller is not None and self._controller[0] == self.node_id

    @property
    def metadata_offset(self) -> int:
        return len(self.log) - 1

    async def start(self) -> None:
        self.claim(self.node_id)

    async def close(self) -> None:
        self._controller = None

    def claim(self, node_id: int) -> None:
        """`node_id` becomes the active controller (another node's claim deposes us)."""
        epoch = 1 if self._controller is None else self._controller[1] + 1
        self._controller = (node_id, epoch)
        self._append([ClaimController(node_id=node_id, controller_epoch=epoch).to_dict()])

    async def propose(self, records: list[dict[str, Any]], request_id: str | None = None) -> int:
        if not self.is_active_controller():
            raise NotControllerError("fake: not the active controller", self.leader())
        if self.fail_next is not None:
            error, self.fail_next = self.fail_next, None
            raise error
        request_id = request_id or uuid.uuid4().hex
        batch = [{**r, "request_id": r.get("request_id") or request_id} for r in records]
        self.proposals.append(batch)
        offset = self._append(batch)
        if self.lose_answer_next is not None:
            error, self.lose_answer_next = self.lose_answer_next, None
            raise error
        return offset

    def _append(self, batch: list[dict[str, Any]]) -> int:
        controller_id, epoch, window = self._admitted
        admission = admit(controller_id, epoch, window, batch)
        if admission.status == "duplicate":
            return admission.duplicate_of
        if not admission.applied:  # fenced: the Raft quorum answers NOT_CONTROLLER too
            raise NotControllerError(f"fake: {admission.reason}", self.leader())
        first = len(self.log)
        claim = claim_of(batch) or (controller_id, epoch)
        self._admitted = (*claim, window.remembered(request_runs(first, (r.get("request_id") for r in batch))))
        for record in batch:
            self.log.append(record)
            for callback in self._commit:
                callback(len(self.log) - 1, record)
        return len(self.log) - 1
