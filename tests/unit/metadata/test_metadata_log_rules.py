"""The metadata log's one admission rule (metadata/log_rules.py): fencing, dedup, the request window."""

from __future__ import annotations

import pickle

from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.metadata.log_rules import (
    MAX_REMEMBERED_REQUESTS, RequestWindow, admit, check_fencing, claim_of, request_runs,
)
from kraft.metadata.records import ClaimController, NoOp


def claim(node: int, epoch: int) -> list[dict]:
    return [ClaimController(node_id=node, controller_epoch=epoch).to_dict()]


def noop(epoch: int, request_id: str | None = None, n: int = 1) -> list[dict]:
    return [NoOp(controller_epoch=epoch, request_id=request_id).to_dict() for _ in range(n)]


def test_a_claim_names_exactly_the_next_epoch() -> None:
    assert admit(None, 0, RequestWindow.EMPTY, claim(1, 1)).applied
    assert "stale claim" in admit(2, 3, RequestWindow.EMPTY, claim(1, 3)).reason
    assert admit(2, 3, RequestWindow.EMPTY, claim(1, 5)).status == "fenced"  # epochs move one at a time
    assert claim_of(claim(4, 2)) == (4, 2) and claim_of(noop(2)) is None


def test_writes_need_the_claimed_controllers_epoch() -> None:
    assert admit(1, 3, RequestWindow.EMPTY, noop(3)).applied
    assert admit(1, 3, RequestWindow.EMPTY, noop(2)).status == "fenced"  # a deposed controller's write
    assert "no active controller" in admit(None, 0, RequestWindow.EMPTY, noop(0)).reason
    assert admit(1, 3, RequestWindow.EMPTY, [{"type": "NoOp"}]).status == "invalid"


def test_a_known_request_is_a_duplicate_answering_its_first_offset() -> None:
    window = RequestWindow.EMPTY.remembered(request_runs(5, ["r1", "r1", "r1"]))
    assert dict(window) == {"r1": 7}
    outcome = admit(1, 1, window, noop(1, "r1", 3))
    assert (outcome.status, outcome.duplicate_of) == ("duplicate", 7)
    # a retry right after the original is still a duplicate (a per-record rule would call it a continuation)
    assert admit(1, 1, window, noop(1, "r1")).status == "duplicate"
    assert admit(1, 1, window, noop(1, "r2")).applied and admit(1, 1, window, noop(1)).applied


def test_request_runs_collapse_a_request_and_skip_records_without_one() -> None:
    assert request_runs(10, ["a", "a", None, "a", "b", None]) == [("a", 13), ("b", 14)]
    assert request_runs(0, [None, ""]) == []


def test_the_window_is_bounded_fifo_and_a_seen_request_keeps_its_place() -> None:
    window = RequestWindow.EMPTY.remembered([("a", 1), ("b", 2), ("a", 3)])
    assert list(window.items()) == [("a", 3), ("b", 2)]
    full = window.remembered((f"r{i}", 10 + i) for i in range(MAX_REMEMBERED_REQUESTS))
    assert len(full) == MAX_REMEMBERED_REQUESTS and "a" not in full and "b" not in full
    assert next(iter(full)) == "r0" and full[f"r{MAX_REMEMBERED_REQUESTS - 1}"] == 10 + MAX_REMEMBERED_REQUESTS - 1
    # persistent: the old windows are unchanged
    assert list(window) == ["a", "b"] and len(RequestWindow.EMPTY) == 0


def test_the_window_pickles_as_builtins_and_loads_an_older_snapshots_window() -> None:
    window = RequestWindow.EMPTY.remembered([("a", 1), ("b", 2)])
    assert pickle.loads(pickle.dumps(window)) == window and hash(pickle.loads(pickle.dumps(window))) == hash(window)
    assert b"immutables" not in pickle.dumps(window)
    # snapshots of the older code kept 5,000 ids ordered by recency: they load whole, in order
    older = [[f"r{i}", i] for i in range(5000)]
    assert list(RequestWindow.from_items(older).items()) == [tuple(p) for p in older]
    # a malformed list (repeats, too long) means what remembering it in order means
    odd = [["x", 1], ["y", 2], ["x", 3]] + [[f"z{i}", 4 + i] for i in range(MAX_REMEMBERED_REQUESTS)]
    assert RequestWindow.from_items(odd) == RequestWindow.EMPTY.remembered([(r, o) for r, o in odd])


@settings(max_examples=200)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 3)), max_size=30),
       st.integers(1, 5))
def test_remembering_in_any_grouping_gives_the_same_window(runs: list[tuple[str, int]], split: int) -> None:
    whole = RequestWindow.EMPTY.remembered(runs)
    stepped = RequestWindow.EMPTY
    for start in range(0, len(runs), split):
        stepped = stepped.remembered(runs[start:start + split])
    assert stepped == whole and RequestWindow.from_items(list(whole.items())) == whole
    reference: dict[str, int] = {}  # a plain dict keeps first-insertion order, as the window does
    for request_id, offset in runs:
        reference[request_id] = offset
    assert list(whole.items()) == list(reference.items())


def test_check_fencing_is_the_rule_admit_applies() -> None:
    batch = noop(2)
    assert check_fencing(1, 3, batch) == admit(1, 3, RequestWindow.EMPTY, batch).reason


def test_a_claims_cluster_id_is_a_short_string_or_none() -> None:
    named = [ClaimController(node_id=1, controller_epoch=1, cluster_id="Ssz8oSmwSsy2DmjTKEDvnA").to_dict()]
    assert admit(None, 0, RequestWindow.EMPTY, named).applied
    for bad in (7, "", "x" * 257):
        reason = admit(None, 0, RequestWindow.EMPTY, [{**named[0], "cluster_id": bad}]).reason
        assert "bad `cluster_id`" in reason, bad
