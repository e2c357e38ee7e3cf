"""The client honours throttle_time_ms (api/client/throttle.py): the wait counts from when the
throttled request was sent, so a broker that held its answer back costs nothing more."""

from __future__ import annotations

from kraft.api.client.throttle import BrokerThrottle


def test_waits_the_rest_of_the_throttle_only() -> None:
    now = [100.0]
    slept: list[float] = []
    t = BrokerThrottle(clock=lambda: now[0], sleep=slept.append)
    t.note(1, 100.0, {"throttle_time_ms": 500})  # answered at once: wait it all
    t.wait(1)
    t.wait(2)  # another broker is not held back
    assert slept == [0.5]
    now[0] = 101.0
    t.note(1, 100.5, {"throttle_time_ms": 500})  # the broker held the answer back 0.5 s already
    t.wait(1)
    t.note(1, 101.0, {"partitions": []})  # no throttle reported
    t.note(1, 101.0, "not an answer")
    t.wait(1)
    assert slept == [0.5]
