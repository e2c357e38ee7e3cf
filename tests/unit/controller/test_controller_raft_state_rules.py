"""One replay rule: the Raft state machine (kraft/controller/raft_state.py) and the image's replay
(MetadataDelta, on standbys and brokers) agree on fencing and request dedup, because the rule
exists once (metadata/log_rules.py) and replay trusts the offsets it admitted."""

from __future__ import annotations

import pickle
from collections import OrderedDict
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraft.controller import raft_state
from kraft.controller.raft_state import MetadataImageMachine, MetadataLogState, apply_batch, claim_record
from kraft.metadata import delta, log_rules
from kraft.metadata.delta import apply_records
from kraft.metadata.image import MetadataImage
from kraft.metadata.log_rules import RequestWindow
from kraft.metadata.records import NoOp, Topic


def test_the_rule_has_one_implementation() -> None:
    for name in ("validate_batch", "check_fencing", "batch_request_id", "admit", "MAX_REMEMBERED_REQUESTS",
                 "MAX_RECORDS_PER_BATCH", "MAX_REQUEST_ID_LENGTH"):
        assert getattr(raft_state, name) is getattr(log_rules, name), name
    # replay neither fences nor dedupes again, and keeps no window of its own size
    assert not any(hasattr(delta.MetadataDelta, n) for n in ("_check_fencing", "_check_duplicate"))
    assert not hasattr(delta, "MAX_REMEMBERED_REQUESTS")


def noops(epoch: int, request_id: str | None, n: int) -> list[dict[str, Any]]:
    return [NoOp(controller_epoch=epoch, request_id=request_id).to_dict() for _ in range(n)]


batches = st.one_of(
    st.builds(lambda node, epoch: [claim_record(node, epoch)], st.integers(0, 2), st.integers(0, 4)),
    st.builds(noops, st.integers(0, 4), st.sampled_from(["r1", "r2", "r3", None]), st.integers(1, 3)),
    st.builds(lambda epoch, rid, name: [Topic(name=name, topic_id=f"id-{name}", controller_epoch=epoch,
                                              request_id=rid).to_dict()],
              st.integers(0, 4), st.sampled_from(["r4", "r5", None]), st.sampled_from(["x", "y"])),
    st.just([{"type": "NoOp"}]),  # malformed: no controller epoch
)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(batches, max_size=30))
def test_raft_state_and_the_image_agree_on_random_batches(sequence: list[list[dict[str, Any]]]) -> None:
    machine = MetadataImageMachine()
    state = MetadataLogState(app_state=machine.initial_state())
    admitted: list[tuple[int, dict[str, Any]]] = []  # what gets offsets: all brokers ever see
    for batch in sequence:
        outcome = apply_batch(state, batch, machine)
        if outcome.applied:
            admitted += zip(range(outcome.first_offset, outcome.last_offset + 1), batch)
        elif outcome.status == "duplicate":
            assert log_rules.batch_request_id(batch) in state.request_ids
    controller_image = state.app_state.fold()  # the active controller's and standbys' image
    broker_image = apply_records(MetadataImage.EMPTY, admitted)[1]  # a broker replaying the fetched records
    assert controller_image == broker_image
    assert (broker_image.offset, broker_image.controller_id, broker_image.controller_epoch) == (
        state.offset, state.controller_id, state.controller_epoch)
    assert broker_image.request_ids == state.request_ids  # the window the rule reads, at this offset
    # and both decide the next batch alike: the image's window answers what the Raft state answers
    for request_id in ("r1", "r2", "r3", "r4", "r5"):
        batch = noops(state.controller_epoch, request_id, 1)
        by_state = log_rules.admit(state.controller_id, state.controller_epoch, state.request_ids, batch)
        by_image = log_rules.admit(broker_image.controller_id, broker_image.controller_epoch,
                                   broker_image.request_ids, batch)
        assert by_state == by_image


def test_a_dump_from_before_the_persistent_window_loads() -> None:
    """pysyncobj dumps pickled the window as an OrderedDict: it loads as a RequestWindow, in order."""
    state = MetadataLogState(offset=7, controller_id=1, controller_epoch=1)
    old = OrderedDict((f"r{i}", i) for i in range(3))
    state.__dict__["request_ids"] = old  # what an older dump carries
    loaded = pickle.loads(pickle.dumps(state))
    assert isinstance(loaded.request_ids, RequestWindow) and list(loaded.request_ids.items()) == list(old.items())
    assert apply_batch(loaded, noops(1, "r1", 1), raft_state.NoStateMachine()).status == "duplicate"


def test_the_state_pickles_its_window_as_builtins() -> None:
    state = MetadataLogState(app_state=MetadataImageMachine().initial_state())
    assert apply_batch(state, [claim_record(1, 1)], MetadataImageMachine()).applied
    assert apply_batch(state, noops(1, "r", 2), MetadataImageMachine()).applied
    dump = pickle.dumps(state)
    assert b"immutables" not in dump and pickle.loads(dump) == state
