"""Broker sessions on the active controller: soft state, never written to the metadata log.

Sans-I/O: time comes in as `now_ms`. A broker's session starts when it registers or when this
controller becomes active (`reset`: after a failover every broker gets a fresh session before it
can be fenced), and is renewed by each heartbeat; it expires after `session_timeout_ms` of the
controller's own running time: a stall of the controller (`credit_stall`) extends every session.
"""

from __future__ import annotations

from typing import Iterable


class BrokerHeartbeatManager:
    def __init__(self, session_timeout_ms: int) -> None:
        assert session_timeout_ms > 0
        self.session_timeout_ms = session_timeout_ms
        self._last_contact_ms: dict[int, int] = {}

    def touch(self, broker_id: int, now_ms: int) -> None:
        self._last_contact_ms[broker_id] = max(now_ms, self._last_contact_ms.get(broker_id, now_ms))

    def reset(self, broker_ids: Iterable[int], now_ms: int) -> None:
        """Fresh sessions for exactly these brokers."""
        self._last_contact_ms = {b: now_ms for b in broker_ids}

    def credit_stall(self, duration_ms: int) -> None:
        """This controller did not run for `duration_ms` (its clock went on): that time does not
        count against any session, whose heartbeats could not be read meanwhile."""
        self._last_contact_ms = {b: last + duration_ms for b, last in self._last_contact_ms.items()}

    def remove(self, broker_id: int) -> None:
        self._last_contact_ms.pop(broker_id, None)

    def is_alive(self, broker_id: int, now_ms: int) -> bool:
        last = self._last_contact_ms.get(broker_id)
        return last is not None and now_ms - last <= self.session_timeout_ms

    def expired(self, broker_ids: Iterable[int], now_ms: int) -> list[int]:
        """Of `broker_ids`, those whose session timed out; a broker seen for the first time gets a
        fresh session instead (it may have registered with an earlier controller)."""
        result = []
        for b in broker_ids:
            if b not in self._last_contact_ms:
                self._last_contact_ms[b] = now_ms
            elif not self.is_alive(b, now_ms):
                result.append(b)
        return result
