"""The replicated state machine of the controller quorum (kraft/controller/raft_state.py): apply is
deterministic, never raises on garbage, fences stale controller epochs and dedupes requests."""

from __future__ import annotations

import copy
import pickle
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.controller.raft_state import (
    MAX_REMEMBERED_REQUESTS,
    MetadataImageMachine,
    MetadataLogState,
    NoStateMachine,
    apply_batch,
    check_fencing,
    claim_record,
    validate_batch,
)
from kraft.metadata.image import MetadataImage


class Keys:
    """A pure state machine: the tuple of (offset, key) applied so far."""

    def initial_state(self) -> tuple:
        return ()

    def replay(self, state: tuple, entries: list[tuple[int, dict[str, Any]]]) -> tuple:
        if any(record.get("key") == "explode" for _, record in entries):
            raise ValueError("this batch cannot be replayed")
        return state + tuple((offset, record.get("key")) for offset, record in entries)


def put(key: Any, epoch: int, request_id: str | None = None) -> dict[str, Any]:
    return {"type": "TestPut", "key": key, "controller_epoch": epoch, "request_id": request_id}


def fresh() -> MetadataLogState:
    return MetadataLogState(app_state=Keys().initial_state())


def claimed(node_id: int = 1, epoch: int = 1) -> MetadataLogState:
    state = fresh()
    assert apply_batch(state, [claim_record(node_id, epoch)], Keys()).applied
    return state


# -- fencing, as a pure function --------------------------------------------------------------

def test_claim_must_name_the_next_epoch() -> None:
    assert check_fencing(None, 0, [claim_record(1, 1)]) is None
    assert check_fencing(2, 3, [claim_record(1, 4)]) is None
    assert "stale claim" in check_fencing(2, 3, [claim_record(1, 3)])
    assert "stale claim" in check_fencing(2, 3, [claim_record(1, 2)])
    assert check_fencing(2, 3, [claim_record(1, 6)]) is not None  # epochs move one at a time


def test_records_need_the_current_controller_epoch() -> None:
    assert check_fencing(1, 3, [put("a", 3)]) is None
    assert "fenced" in check_fencing(1, 3, [put("a", 2)])
    assert check_fencing(1, 3, [put("a", 4)]) is not None
    assert "no active controller" in check_fencing(None, 0, [put("a", 0)])


@given(st.integers(0, 50), st.integers(0, 50), st.integers(0, 50))
def test_fencing_accepts_exactly_the_current_epoch(current: int, written: int, claimed_epoch: int) -> None:
    assert (check_fencing(7, current, [put("k", written)]) is None) == (written == current)
    assert (check_fencing(7, current, [claim_record(2, claimed_epoch)]) is None) == (
        claimed_epoch == current + 1)


def test_a_late_claim_from_an_older_leader_is_ignored() -> None:
    # Leaders A then B both claim epoch 2 after epoch 1: the first applied wins, the other is stale.
    state = claimed(node_id=1, epoch=1)
    assert apply_batch(state, [claim_record(2, 2)], Keys()).applied
    outcome = apply_batch(state, [claim_record(3, 2)], Keys())
    assert outcome.status == "fenced" and outcome.controller_epoch == 2
    assert (state.controller_id, state.controller_epoch) == (2, 2)
    # The loser retries above the epoch it was told about.
    assert apply_batch(state, [claim_record(3, outcome.controller_epoch + 1)], Keys()).applied
    assert (state.controller_id, state.controller_epoch) == (3, 3)


def test_deposed_controller_writes_are_ignored() -> None:
    state = claimed(node_id=1, epoch=1)
    assert apply_batch(state, [put("a", 1)], Keys()).applied
    assert apply_batch(state, [claim_record(2, 2)], Keys()).applied
    before = copy.deepcopy(state)
    outcome = apply_batch(state, [put("late", 1, "r-late")], Keys())
    assert outcome.status == "fenced" and outcome.controller_id == 2
    assert state == before


# -- offsets, batches, dedupe -----------------------------------------------------------------

def test_every_record_gets_the_next_offset_and_batches_are_atomic() -> None:
    state = claimed()
    outcome = apply_batch(state, [put("a", 1, "r1"), put("b", 1, "r1"), put("c", 1, "r1")], Keys())
    assert (outcome.status, outcome.first_offset, outcome.last_offset) == ("applied", 1, 3)
    assert state.app_state == ((0, None), (1, "a"), (2, "b"), (3, "c"))
    # One bad record spoils the whole batch: nothing of it is applied.
    outcome = apply_batch(state, [put("d", 1), {"type": 5}], Keys())
    assert outcome.status == "invalid" and state.offset == 3


def test_a_retried_request_is_applied_once() -> None:
    state = claimed()
    first = apply_batch(state, [put("a", 1, "req"), put("b", 1, "req")], Keys())
    retry = apply_batch(state, [put("a", 1, "req"), put("b", 1, "req")], Keys())
    assert retry.status == "duplicate" and retry.last_offset == first.last_offset
    assert state.offset == first.last_offset


def test_remembered_requests_are_bounded_oldest_first() -> None:
    state = claimed()
    for i in range(MAX_REMEMBERED_REQUESTS + 5):
        apply_batch(state, [put(i, 1, f"r{i}")], NoStateMachine())
    assert len(state.request_ids) == MAX_REMEMBERED_REQUESTS
    assert "r0" not in state.request_ids and f"r{MAX_REMEMBERED_REQUESTS + 4}" in state.request_ids


def test_a_batch_the_state_machine_rejects_still_takes_its_offsets() -> None:
    state = claimed()
    outcome = apply_batch(state, [put("explode", 1), put("lost", 1)], Keys())
    assert outcome.applied and (outcome.first_offset, outcome.last_offset) == (1, 2)
    assert state.app_state == ((0, None),)
    assert apply_batch(state, [put("fine", 1)], Keys()).first_offset == 3


def test_metadata_image_machine_keeps_the_image_at_the_log_offset() -> None:
    machine = MetadataImageMachine()
    state = MetadataLogState(app_state=machine.initial_state())
    assert apply_batch(state, [claim_record(3, 1)], machine).applied
    assert apply_batch(state, [{"type": "NoOp", "controller_epoch": 1, "request_id": "r"},
                               {"type": "NoOp", "controller_epoch": 1, "request_id": "r"}], machine).applied
    image = state.app_state.fold()
    assert isinstance(image, MetadataImage)
    assert (image.offset, image.controller_epoch) == (state.offset, 1) == (2, 1)
    # A snapshot carries the state through pickle (pysyncobj's dump format).
    assert pickle.loads(pickle.dumps(state)) == state


def test_metadata_image_machine_keeps_entries_until_the_loop_hands_the_image_back() -> None:
    """The Raft thread only appends a batch's entries (no decoding, no image build: its work is
    the batch's length); the loop's fold is handed back and the covered entries are dropped."""
    machine = MetadataImageMachine()
    state = MetadataLogState(app_state=machine.initial_state())
    assert apply_batch(state, [claim_record(3, 1)], machine).applied
    noop = {"type": "NoOp", "controller_epoch": 1, "request_id": None}
    for _ in range(3):
        assert apply_batch(state, [dict(noop), dict(noop)], machine).applied
    assert [len(c) for c in state.app_state.chunks] == [1, 2, 2, 2]
    folded = MetadataImage.EMPTY
    from kraft.metadata.delta import apply_records
    folded = apply_records(folded, [e for c in state.app_state.chunks[:2] for e in c])[1]
    assert folded.offset == 2
    machine.folded(folded)
    assert apply_batch(state, [dict(noop)], machine).applied
    assert state.app_state.base_offset == 2
    assert [c[0][0] for c in state.app_state.chunks] == [3, 5, 7]
    assert state.app_state.fold().offset == state.offset == 7
    assert pickle.loads(pickle.dumps(state)).app_state.fold() == state.app_state.fold()


def test_validate_batch_reasons() -> None:
    assert validate_batch([put("a", 1)]) is None
    assert "non-empty list" in validate_batch([])
    assert "non-empty list" in validate_batch({"type": "x"})
    assert "not a dict" in validate_batch([["x"]])
    assert "type" in validate_batch([{"controller_epoch": 1}])
    assert "controller_epoch" in validate_batch([{"type": "x", "controller_epoch": True}])
    assert "request_id" in validate_batch([put("a", 1, "")])
    assert "different controller epochs" in validate_batch([put("a", 1), put("b", 2)])
    assert "alone" in validate_batch([claim_record(1, 1), put("a", 1)])
    assert "node_id" in validate_batch([{**claim_record(1, 1), "node_id": "1"}])


# -- never raises, deterministic --------------------------------------------------------------

builtins = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5)
    | st.binary(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10,
)
record_like = st.fixed_dictionaries(
    {"type": st.sampled_from(["TestPut", "ClaimController", ""]) | builtins},
    optional={"controller_epoch": st.integers(-1, 4) | builtins, "request_id": st.sampled_from(
        ["r1", "r2", None, ""]) | builtins, "node_id": st.integers(-1, 3) | builtins,
        "key": st.text(max_size=3) | st.just("explode")},
)
batches = st.one_of(
    builtins,
    st.lists(record_like, max_size=4),
    st.builds(lambda n, e: [claim_record(n, e)], st.integers(0, 3), st.integers(0, 3)),
    st.builds(lambda k, e, r: [put(k, e, r)], st.text(max_size=3), st.integers(0, 3),
              st.sampled_from(["r1", "r2", "r3", None])),
)


@settings(max_examples=300)
@given(st.lists(batches, max_size=25))
def test_apply_never_raises_and_is_deterministic(sequence: list[Any]) -> None:
    a, b = fresh(), fresh()
    outcomes_a = [apply_batch(a, copy.deepcopy(batch), Keys()) for batch in sequence]
    outcomes_b = [apply_batch(b, copy.deepcopy(batch), Keys()) for batch in sequence]
    assert outcomes_a == outcomes_b
    assert a == b
    # Invariants: offsets only grow, epochs never go backwards, app state matches the offsets.
    last, epoch = -1, 0
    for outcome in outcomes_a:
        assert outcome.controller_epoch >= epoch
        epoch = outcome.controller_epoch
        if outcome.applied:
            assert outcome.first_offset == last + 1 and outcome.last_offset >= outcome.first_offset
            last = outcome.last_offset
        else:
            assert outcome.reason
    assert a.offset == last
    assert all(offset <= a.offset for offset, _ in a.app_state)
