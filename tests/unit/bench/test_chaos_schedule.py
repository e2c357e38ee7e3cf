"""The chaos fault schedule: the same seed gives the same events, every requested fault type is
drawn before any repeats, one fault at a time inside the run."""

from __future__ import annotations

import pytest

from kraft.bench.chaos.schedule import COOLDOWN_S, FAULTS, WARMUP_S, make_schedule


def test_same_seed_same_schedule_other_seed_another():
    first = make_schedule(42, 600, list(FAULTS), [1, 2, 3])
    assert first == make_schedule(42, 600, list(FAULTS), [1, 2, 3])
    assert first != make_schedule(43, 600, list(FAULTS), [1, 2, 3])
    assert [e.describe() for e in first] == [e.describe() for e in make_schedule(42, 600, list(FAULTS), [1, 2, 3])]


def test_every_fault_type_before_a_repeat_and_one_at_a_time():
    events = make_schedule(7, 600, list(FAULTS), [1, 2, 3])
    assert {e.fault for e in events[:len(FAULTS)]} == set(FAULTS)
    assert events[0].at_s == WARMUP_S
    assert all(e.at_s < 600 - COOLDOWN_S for e in events)
    for before, after in zip(events, events[1:]):
        assert after.at_s > before.at_s + before.duration_s
    for e in events:
        assert e.target in (1, 2, 3)
        if e.fault == "partition":
            assert e.variant == "isolate" or (e.variant.startswith("pair:") and int(e.variant[5:]) != e.target)


def test_only_the_requested_faults():
    events = make_schedule(1, 300, ["kill", "stop"], [1, 2, 3])
    assert {e.fault for e in events} == {"kill", "stop"}
    assert make_schedule(1, 300, [], [1, 2, 3]) == []
    with pytest.raises(ValueError, match="unknown faults"):
        make_schedule(1, 300, ["meteor"], [1, 2, 3])
