"""Which partitions a consumer reads and where it stands in each (pure).

A partition's position is the offset of the next record `poll` returns, or a pending reset
("earliest" / "latest") resolved by the consumer through the offsets route. Manual `assign` sets
the partitions today; group membership will set them through the same `assign` (the coordinator
hands out assignments), so the fetch path does not change.
"""

from __future__ import annotations

from typing import Iterable

from kraft.api.client.types import TopicPartition
from kraft.api.errors import KraftError

RESET_STRATEGIES = ("earliest", "latest", "none")


class SubscriptionState:
    def __init__(self, default_reset: str) -> None:
        if default_reset not in RESET_STRATEGIES:
            raise KraftError("INVALID_CONFIG", f"auto_offset_reset must be one of {', '.join(RESET_STRATEGIES)}, got {default_reset!r}")
        self.default_reset = default_reset
        self._positions: dict[TopicPartition, int | None] = {}
        self._resets: dict[TopicPartition, str] = {}

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Replaces the assignment; partitions kept from the old one keep their position."""
        new = [TopicPartition(tp.topic, int(tp.partition)) for tp in partitions]
        old_positions, old_resets = self._positions, self._resets
        self._positions = {tp: old_positions.get(tp) for tp in new}
        self._resets = {tp: old_resets[tp] for tp in new if tp in old_resets}

    def assignment(self) -> set[TopicPartition]:
        return set(self._positions)

    def _check(self, tp: TopicPartition) -> None:
        if tp not in self._positions:
            raise KraftError("INVALID_REQUEST", f"{tp.topic}-{tp.partition} is not assigned to this consumer")

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._check(tp)
        if offset < 0:
            raise KraftError("INVALID_REQUEST", f"cannot seek to negative offset {offset}")
        self._positions[tp] = offset
        self._resets.pop(tp, None)

    def request_reset(self, tp: TopicPartition, strategy: str) -> None:
        """Forgets the position; the consumer resolves `strategy` before the next fetch.
        Raises OFFSET_OUT_OF_RANGE when the strategy is "none"."""
        self._check(tp)
        if strategy == "none":
            raise KraftError("OFFSET_OUT_OF_RANGE", f"no valid position for {tp.topic}-{tp.partition} and auto_offset_reset is none")
        self._positions[tp] = None
        self._resets[tp] = strategy

    def position(self, tp: TopicPartition) -> int | None:
        self._check(tp)
        return self._positions[tp]

    def set_position(self, tp: TopicPartition, offset: int) -> None:
        """Advances after records were returned (the fetch path; not a user seek)."""
        if tp in self._positions:
            self._positions[tp] = offset

    def needs_reset(self) -> dict[TopicPartition, str]:
        """Partitions without a position and the strategy to resolve them with."""
        out = {}
        for tp, pos in self._positions.items():
            if pos is None:
                strategy = self._resets.get(tp, self.default_reset)
                if strategy == "none":
                    raise KraftError("OFFSET_OUT_OF_RANGE", f"no position for {tp.topic}-{tp.partition} and auto_offset_reset is none")
                out[tp] = strategy
        return out

    def fetchable(self) -> dict[TopicPartition, int]:
        return {tp: pos for tp, pos in self._positions.items() if pos is not None}
