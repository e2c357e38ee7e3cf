"""Server-side partition assignors (KIP-848): `range` and `uniform` (sticky) (pure).

An assignor maps each member's resolved subscription (topic names) to its *target* partitions.
Every partition of a subscribed topic goes to exactly one member subscribed to that topic; the
membership state machine then moves partitions towards the target without ever giving one to two
members at once.
"""

from __future__ import annotations

from typing import Callable, Mapping

TopicPartition = tuple[str, int]
Assignment = dict[str, frozenset[TopicPartition]]
Assignor = Callable[
    [Mapping[str, frozenset[str]], Mapping[str, int], Mapping[str, frozenset[TopicPartition]]],
    Assignment,
]


def _subscribers(members: Mapping[str, frozenset[str]], counts: Mapping[str, int]) -> dict[str, list[str]]:
    """topic -> sorted member ids subscribed to it (topics that exist only)."""
    out: dict[str, list[str]] = {}
    for member_id in sorted(members):
        for topic in members[member_id]:
            if counts.get(topic, 0) > 0:
                out.setdefault(topic, []).append(member_id)
    return out


def range_assign(
    members: Mapping[str, frozenset[str]],
    counts: Mapping[str, int],
    current: Mapping[str, frozenset[TopicPartition]],
) -> Assignment:
    """Kafka's RangeAssignor per topic: members sorted by id, each takes a contiguous range;
    the first `partitions % members` get one more."""
    out: dict[str, set[TopicPartition]] = {m: set() for m in members}
    for topic, subs in _subscribers(members, counts).items():
        n = counts[topic]
        per, extra = divmod(n, len(subs))
        start = 0
        for i, member_id in enumerate(subs):
            size = per + (1 if i < extra else 0)
            out[member_id].update((topic, p) for p in range(start, start + size))
            start += size
    return {m: frozenset(tps) for m, tps in out.items()}


def uniform_assign(
    members: Mapping[str, frozenset[str]],
    counts: Mapping[str, int],
    current: Mapping[str, frozenset[TopicPartition]],
) -> Assignment:
    """Kafka's UniformAssignor in spirit: balanced and sticky. Each member keeps what it had
    (when still valid), free partitions go to the eligible member with the fewest, then
    partitions move from the fullest to the emptiest eligible member until no move narrows the
    gap (with one subscription for all, counts differ by at most one)."""
    eligible: dict[TopicPartition, list[str]] = {}
    for topic, subs in _subscribers(members, counts).items():
        for p in range(counts[topic]):
            eligible[(topic, p)] = subs
    owned: dict[str, set[TopicPartition]] = {m: set() for m in members}
    taken: set[TopicPartition] = set()
    for member_id in sorted(members):
        for tp in sorted(current.get(member_id, frozenset())):
            if tp in eligible and member_id in eligible[tp] and tp not in taken:
                owned[member_id].add(tp)
                taken.add(tp)
    for tp in sorted(eligible):
        if tp not in taken:
            target = min(eligible[tp], key=lambda m: (len(owned[m]), m))
            owned[target].add(tp)
    # Balance: move one partition at a time from a member to an eligible one holding >= 2 fewer.
    # Every move lowers the sum of squared counts, so this ends; the bound is a guard.
    for _ in range(len(eligible) * max(1, len(members))):
        move = _best_move(owned, eligible)
        if move is None:
            break
        tp, source, dest = move
        owned[source].remove(tp)
        owned[dest].add(tp)
    return {m: frozenset(tps) for m, tps in owned.items()}


def _best_move(
    owned: Mapping[str, set[TopicPartition]], eligible: Mapping[TopicPartition, list[str]]
) -> tuple[TopicPartition, str, str] | None:
    for source in sorted(owned, key=lambda m: (-len(owned[m]), m)):
        best: tuple[int, str, TopicPartition] | None = None
        for tp in sorted(owned[source]):
            for dest in eligible[tp]:
                gap = len(owned[source]) - len(owned[dest])
                if gap >= 2 and (best is None or (-gap, dest) < (-best[0], best[1])):
                    best = (gap, dest, tp)
        if best is not None:
            return best[2], source, best[1]
    return None


ASSIGNORS: dict[str, Assignor] = {"range": range_assign, "uniform": uniform_assign}
DEFAULT_ASSIGNOR = "uniform"  # Kafka's default group.consumer.assignors starts with uniform
