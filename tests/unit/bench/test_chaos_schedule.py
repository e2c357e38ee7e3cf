"""The chaos fault schedule: the same seed gives the same events, every requested fault type is
drawn before any repeats and fits in even a one-minute run, one fault at a time, each waiting its
gap after the previous recovery."""

from __future__ import annotations

import pytest

from kraft.bench.chaos.schedule import CONTROLLER, FAULTS, cooldown_s, make_schedule, warmup_s


def test_same_seed_same_schedule_other_seed_another():
    first = make_schedule(42, 600, list(FAULTS), [1, 2, 3])
    assert first == make_schedule(42, 600, list(FAULTS), [1, 2, 3])
    assert first != make_schedule(43, 600, list(FAULTS), [1, 2, 3])
    assert [e.describe() for e in first] == [e.describe() for e in make_schedule(42, 600, list(FAULTS), [1, 2, 3])]


def test_every_fault_type_before_a_repeat_and_one_at_a_time():
    events = make_schedule(7, 600, list(FAULTS), [1, 2, 3])
    first = [e for e in events if e.first_round]
    assert first == events[:len(FAULTS)] and {e.fault for e in first} == set(FAULTS)
    assert events[0].at_s == events[0].gap_s == warmup_s(600)
    assert len(events) > len(FAULTS)  # ten minutes: more than one round
    assert all(e.at_s < 600 - cooldown_s(600) for e in events)
    for before, after in zip(events, events[1:]):
        assert after.at_s == pytest.approx(before.at_s + before.duration_s + after.gap_s, abs=0.2)
        assert after.gap_s >= 2
    for e in events:
        if e.fault == "controller-disk-full":
            assert e.target == CONTROLLER  # whichever node is the active controller then
        else:
            assert e.target in (1, 2, 3)
        if e.fault == "partition":
            assert e.variant == "isolate" or (e.variant.startswith("pair:") and int(e.variant[5:]) != e.target)


@pytest.mark.parametrize("seed", range(20))
def test_a_one_minute_run_fits_every_requested_type(seed: int):
    events = make_schedule(seed, 60, list(FAULTS), [1, 2, 3])
    first = [e for e in events if e.first_round]
    assert sorted(e.fault for e in first) == sorted(FAULTS)
    last = first[-1]
    assert last.at_s + last.duration_s <= 60 - cooldown_s(60) + 1  # planned inside the run
    assert all(e.duration_s >= 1 for e in first if e.fault != "torn-write")


def test_only_the_requested_faults():
    events = make_schedule(1, 300, ["kill", "stop"], [1, 2, 3])
    assert {e.fault for e in events} == {"kill", "stop"}
    assert make_schedule(1, 300, [], [1, 2, 3]) == []
    with pytest.raises(ValueError, match="unknown faults"):
        make_schedule(1, 300, ["meteor"], [1, 2, 3])
