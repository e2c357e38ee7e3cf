"""The broker lifecycle: Kafka's states with a transition table (an illegal transition raises),
and the heartbeats on a thread of their own, so a busy node loop delays none of them."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from harness import wait_until  # tests/ is on sys.path (tests/conftest.py)
from kraft.broker.broker_state import TRANSITIONS, BrokerState, BrokerStateMachine, IllegalStateTransition
from kraft.broker.lifecycle import BrokerLifecycle, LifecycleChannel

S = BrokerState


def test_the_lifecycle_of_a_broker_in_kafkas_states() -> None:
    m = BrokerStateMachine()
    assert m.state is S.NOT_RUNNING
    m.start()
    assert m.on_heartbeat_answer(is_caught_up=False, is_fenced=True) is False  # still STARTING
    m.on_heartbeat_answer(is_caught_up=True, is_fenced=True)
    assert m.state is S.RECOVERY
    m.on_heartbeat_answer(is_caught_up=True, is_fenced=False)
    assert m.state is S.RUNNING
    m.on_heartbeat_answer(is_caught_up=True, is_fenced=True)  # the controller fenced it
    assert m.state is S.RECOVERY
    m.on_unknown_epoch()  # the controller forgot it: register again
    assert m.state is S.STARTING
    m.on_heartbeat_answer(is_caught_up=True, is_fenced=False)
    m.begin_controlled_shutdown()
    assert m.state is S.PENDING_CONTROLLED_SHUTDOWN
    assert m.on_heartbeat_answer(is_caught_up=True, is_fenced=False) is False  # a late answer
    m.shut_down()
    assert m.state is S.SHUTTING_DOWN


def test_an_illegal_transition_raises() -> None:
    m = BrokerStateMachine()
    with pytest.raises(IllegalStateTransition):
        m.begin_controlled_shutdown()  # not started
    m.shut_down()
    with pytest.raises(IllegalStateTransition):
        m.start()  # nothing comes back from SHUTTING_DOWN
    assert TRANSITIONS[S.SHUTTING_DOWN] == frozenset()
    assert all(S.NOT_RUNNING not in targets for targets in TRANSITIONS.values())


class Controller:
    """A controller that answers heartbeats on the lifecycle's thread, recording when."""

    def __init__(self) -> None:
        self.heartbeats: list[float] = []
        self.threads: set[str] = set()
        self.offline: list[tuple[list[str], list[tuple[str, int]]]] = []  # what each heartbeat reported
        self.epoch = 7

    async def register_broker(self, broker_id: int, incarnation_id: str, endpoints: Any, rack: Any, *,
                              cluster_id: Any = None, timeout_s: float | None = None) -> dict[str, Any]:
        return {"broker_id": broker_id, "broker_epoch": self.epoch}

    async def broker_heartbeat(self, broker_id: int, broker_epoch: int, offset: int, *, want_fence: bool = False,
                               want_shutdown: bool = False, offline_log_dirs: Any = (), offline_replicas: Any = (),
                               timeout_s: float | None = None) -> dict[str, Any]:
        self.heartbeats.append(time.monotonic())
        self.offline.append((list(offline_log_dirs), list(offline_replicas)))
        self.threads.add(threading.current_thread().name)
        return {"broker_id": broker_id, "broker_epoch": broker_epoch, "is_caught_up": True,
                "is_fenced": want_shutdown, "should_shutdown": want_shutdown}


async def test_heartbeats_go_on_while_the_node_loop_is_busy() -> None:
    controller = Controller()
    lifecycle = BrokerLifecycle(LifecycleChannel(controller), 1, ("127.0.0.1", 9092), None,
                                heartbeat_interval_ms=50, metadata_offset=lambda: 10)
    await lifecycle.start()
    try:
        assert await lifecycle.wait_unfenced(10)
        assert lifecycle.state == "RUNNING" and lifecycle.broker_epoch == 7
        before = len(controller.heartbeats)
        time.sleep(1.0)  # the node's loop does a second of CPU work and awaits nothing
        assert len(controller.heartbeats) - before >= 5  # about 20 at 50 ms; a loaded machine sends fewer
        assert controller.threads == {"broker-1-lifecycle"}
    finally:
        await lifecycle.stop(controlled=True)
    assert lifecycle.state == "SHUTTING_DOWN"


async def test_a_failed_log_directory_is_reported_at_once() -> None:
    """KIP-858: the heartbeat names the offline log directories and their replicas, and a
    failure sends one at once rather than at the next interval (Kafka's
    propagateDirectoryFailure)."""
    controller = Controller()
    lifecycle = BrokerLifecycle(LifecycleChannel(controller), 1, ("127.0.0.1", 9092), None,
                                heartbeat_interval_ms=60_000, metadata_offset=lambda: 10)
    report: tuple[tuple[str, ...], tuple[tuple[str, int], ...]] = ((), ())
    lifecycle.offline_report = lambda: report
    await lifecycle.start()
    try:
        assert await lifecycle.wait_unfenced(10)  # the next heartbeat is a minute away
        report = (("dir-b",), (("t", 0), ("t", 3)))
        lifecycle.heartbeat_now()
        await wait_until(lambda: controller.offline[-1] != ([], []), 10, what="a heartbeat after the failure")
        assert controller.offline[-1] == (["dir-b"], [("t", 0), ("t", 3)])
    finally:
        await lifecycle.stop(controlled=False)


class CatchingUpController(Controller):
    """Unfences the broker at the first heartbeat whose metadata offset holds its registration
    (the offset of its RegisterBroker record is its epoch), as the real controller does."""

    async def broker_heartbeat(self, broker_id: int, broker_epoch: int, offset: int, **kw: Any) -> dict[str, Any]:
        answer = await super().broker_heartbeat(broker_id, broker_epoch, offset, **kw)
        caught_up = offset >= broker_epoch
        return {**answer, "is_caught_up": caught_up, "is_fenced": not caught_up}


async def test_a_broker_heartbeats_as_soon_as_its_metadata_holds_its_registration(monkeypatch) -> None:
    """Kafka's setReadyToUnfence: the heartbeat that gets a starting broker unfenced goes out when
    its published metadata reaches its registration, not at the next interval. Both intervals are
    a minute here, so only that event can unfence it within the wait below."""
    monkeypatch.setattr("kraft.broker.lifecycle.STARTUP_HEARTBEAT_MS", 60_000)
    controller = CatchingUpController()
    published = [0]
    lifecycle = BrokerLifecycle(LifecycleChannel(controller), 1, ("127.0.0.1", 9092), None,
                                heartbeat_interval_ms=60_000, metadata_offset=lambda: published[0])
    await lifecycle.start()
    try:
        await wait_until(lambda: len(controller.heartbeats) == 1, 10, what="the first heartbeat")
        assert lifecycle.fenced and lifecycle.state == "STARTING"
        lifecycle.on_metadata_offset(3)  # not yet at the registration (epoch 7): no heartbeat
        published[0] = controller.epoch
        lifecycle.on_metadata_offset(controller.epoch)
        assert await lifecycle.wait_unfenced(30)
        assert lifecycle.state == "RUNNING" and len(controller.heartbeats) == 2
    finally:
        await lifecycle.stop(controlled=False)


async def test_a_heartbeat_asked_for_as_the_broker_stops_does_not_keep_it_running() -> None:
    """The heartbeat loop waited for its next heartbeat with Python 3.11's asyncio.wait_for, which
    returns the inner result, dropping the cancellation, when the inner wait completes in the same
    turn as the cancel: a wake-up (heartbeat_now: a new registration published, a failed log
    directory) in the turn `stop` set its event kept the loop heartbeating after `stop` cancelled
    it, and `stop` waited forever for the thread (seen as a node whose teardown hung). Here the
    wake-up and the stop are set in one callback on the lifecycle's loop, the turn that loses the
    cancellation."""
    lifecycle = BrokerLifecycle(LifecycleChannel(Controller()), 1, ("127.0.0.1", 9092), None,
                                heartbeat_interval_ms=60_000, metadata_offset=lambda: 10)
    await lifecycle.start()
    assert await lifecycle.wait_unfenced(10)
    loop, wake, stopping = lifecycle._loop, lifecycle._wake, lifecycle._stopping
    assert loop is not None and wake is not None and stopping is not None
    loop.call_soon_threadsafe(lambda: (wake.set(), stopping.set()))
    await asyncio.wait_for(lifecycle.stop(controlled=False), 30)
    assert lifecycle.state == "SHUTTING_DOWN"
