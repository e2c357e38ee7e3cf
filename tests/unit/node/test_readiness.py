"""The readiness rules of kraft/readiness.py, role by role."""

from __future__ import annotations

from kraft.readiness import MetadataProgress, Readiness, ReadinessCheck

CAUGHT_UP = MetadataProgress(10, 10)


def test_a_broker_is_ready_once_caught_up_registered_and_unfenced() -> None:
    check = ReadinessCheck()
    assert check.check(MetadataProgress(0, -1), active_controller=None, broker_state="STARTING") == Readiness(
        False, "no active controller known")
    assert check.check(MetadataProgress(0, -1), active_controller=1, broker_state="STARTING").reason == (
        "metadata log position of the active controller not yet known")
    assert check.check(MetadataProgress(4, 10), active_controller=1, broker_state="STARTING").reason == (
        "metadata log not caught up (applied 4 of 10)")
    assert check.check(CAUGHT_UP, active_controller=1, broker_state="STARTING").reason.startswith(
        "broker not yet registered")
    assert check.check(CAUGHT_UP, active_controller=1, broker_state="RECOVERY").reason.startswith(
        "broker registered but fenced")
    assert check.check(CAUGHT_UP, active_controller=1, broker_state="RUNNING") == Readiness(True)


def test_caught_up_is_latched_but_the_rest_is_judged_each_time() -> None:
    check = ReadinessCheck()
    assert check.check(CAUGHT_UP, active_controller=1, broker_state="RUNNING").ready
    # new records committed meanwhile do not take a running broker out of service
    assert check.check(MetadataProgress(10, 500), active_controller=1, broker_state="RUNNING").ready
    assert check.check(MetadataProgress(10, 500), active_controller=1, broker_state="RECOVERY").reason.startswith(
        "broker registered but fenced")
    assert not check.check(CAUGHT_UP, active_controller=None, broker_state="RUNNING").ready


def test_a_controller_needs_a_quorum_leader_and_the_active_controller() -> None:
    check = ReadinessCheck()
    assert check.check(CAUGHT_UP, active_controller=None, broker_state=None,
                       quorum_leader_known=False).reason == "the controller quorum has no leader"
    assert check.check(CAUGHT_UP, active_controller=None, broker_state=None).reason == "no active controller known"
    assert check.check(CAUGHT_UP, active_controller=2, broker_state=None).to_dict() == {"ready": True}
