"""The broker's lifecycle as an explicit state machine, with Kafka's states (`BrokerState`) and
a transition table; events come in, the state changes, an event that is illegal in the current
state raises `IllegalStateTransition` (h11's style: no limping on). Pure: no I/O, no clock, no
thread of its own; `BrokerLifecycle` feeds it what the controller answers.

- NOT_RUNNING: not started.
- STARTING: registering with the controller, or registered and catching up with the metadata log
  up to the registration (the controller's `is_caught_up`).
- RECOVERY: caught up but fenced: waiting for the controller to unfence it; also where a running
  broker goes when the controller fenced it (its session expired) until it is unfenced again.
- RUNNING: unfenced: it leads and follows partitions.
- PENDING_CONTROLLED_SHUTDOWN: asked the controller to fence it and move its leaderships away.
- SHUTTING_DOWN: stopping; nothing more is sent.

A broker the controller no longer knows by its epoch (STALE_BROKER_EPOCH) registers again: back to
STARTING from any live state.
"""

from __future__ import annotations

import enum


class BrokerState(enum.Enum):
    """Kafka's `org.apache.kafka.metadata.BrokerState` (the value is its name)."""

    NOT_RUNNING = "NOT_RUNNING"
    STARTING = "STARTING"
    RECOVERY = "RECOVERY"
    RUNNING = "RUNNING"
    PENDING_CONTROLLED_SHUTDOWN = "PENDING_CONTROLLED_SHUTDOWN"
    SHUTTING_DOWN = "SHUTTING_DOWN"


S = BrokerState
TRANSITIONS: dict[BrokerState, frozenset[BrokerState]] = {
    S.NOT_RUNNING: frozenset({S.STARTING, S.SHUTTING_DOWN}),
    S.STARTING: frozenset({S.RECOVERY, S.RUNNING, S.PENDING_CONTROLLED_SHUTDOWN, S.SHUTTING_DOWN}),
    S.RECOVERY: frozenset({S.STARTING, S.RUNNING, S.PENDING_CONTROLLED_SHUTDOWN, S.SHUTTING_DOWN}),
    S.RUNNING: frozenset({S.STARTING, S.RECOVERY, S.PENDING_CONTROLLED_SHUTDOWN, S.SHUTTING_DOWN}),
    S.PENDING_CONTROLLED_SHUTDOWN: frozenset({S.SHUTTING_DOWN}),
    S.SHUTTING_DOWN: frozenset(),
}
LIVE = frozenset({S.STARTING, S.RECOVERY, S.RUNNING})


class IllegalStateTransition(RuntimeError):
    def __init__(self, current: BrokerState, wanted: BrokerState) -> None:
        super().__init__(f"broker state {current.value} cannot become {wanted.value}")
        self.current = current
        self.wanted = wanted


class BrokerStateMachine:
    def __init__(self) -> None:
        self.state = BrokerState.NOT_RUNNING

    def _go(self, wanted: BrokerState) -> bool:
        """Moves to `wanted`; True when the state changed (staying put is no transition)."""
        if wanted is self.state:
            return False
        if wanted not in TRANSITIONS[self.state]:
            raise IllegalStateTransition(self.state, wanted)
        self.state = wanted
        return True

    # -- events -----------------------------------------------------------------------------------

    def start(self) -> bool:
        return self._go(S.STARTING)

    def on_heartbeat_answer(self, is_caught_up: bool, is_fenced: bool) -> bool:
        """The controller's answer to a heartbeat of the current registration. Ignored once a
        shutdown began (a late answer of an earlier heartbeat)."""
        if self.state not in LIVE:
            return False
        if not is_fenced:
            return self._go(S.RUNNING)
        return self._go(S.RECOVERY if is_caught_up else S.STARTING)

    def on_unknown_epoch(self) -> bool:
        """The controller does not know this registration (STALE_BROKER_EPOCH): register again."""
        if self.state not in LIVE:
            return False
        return self._go(S.STARTING)

    def begin_controlled_shutdown(self) -> bool:
        return self._go(S.PENDING_CONTROLLED_SHUTDOWN)

    def shut_down(self) -> bool:
        return self._go(S.SHUTTING_DOWN)
