"""Requests that wait on a group's committed state (a classic JoinGroup until the join
completes, a follower's SyncGroup until the leader's assignment is stored): one event per
(partition, group), set when a record of the group is replayed or the partition's shard is
unloaded. A waiter reads the state, and only if it must wait takes the event, in one turn of the
loop, so no change between the two is missed.
"""

from __future__ import annotations

import asyncio


class GroupWaits:
    def __init__(self) -> None:
        self._events: dict[tuple[int, str], asyncio.Event] = {}

    def event(self, partition: int, group_id: str) -> asyncio.Event:
        """Set at the next change of the group (or unload of its partition)."""
        return self._events.setdefault((partition, group_id), asyncio.Event())

    def changed(self, partition: int, group_id: str) -> None:
        event = self._events.pop((partition, group_id), None)
        if event is not None:
            event.set()

    def unloaded(self, partition: int) -> None:
        for key in [k for k in self._events if k[0] == partition]:
            self._events.pop(key).set()
