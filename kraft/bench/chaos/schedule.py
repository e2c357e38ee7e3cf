"""The seeded fault schedule of a chaos run: the same seed, duration, fault list and node ids give
the same list of (fault, target, duration, variant, gap) events, so a run can be replayed.

One fault at a time (Kafka promises survival of any single failure, not of several at once):
each event starts `gap_s` after the cluster recovered from the previous one (after the warm-up,
for the first), never from a fixed clock, so slow recoveries on a loaded machine delay the
faults instead of leaving them out. Fault types are drawn from a shuffled bag: the first bag,
every requested type once, is always injected however long recoveries take; later bags only while
the run has time left before its cool-down. Durations and gaps shrink for short runs so that the
first bag fits in the run's time; `at_s` is an event's start if every recovery were instant.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from typing import Any

CONTROLLER = 0  # the target of a fault aimed at whichever node is the active controller then
FAULTS = ("kill", "stop", "partition", "disk-full", "torn-write", "slow-disk", "controller-disk-full", "log-dir")
WARMUP_S = 15.0  # the workload runs fault-free first (a tenth of a short run)
COOLDOWN_S = 30.0  # and fault-free at the end (a sixth of a short run), so every partition recovers
GAP_S = (12.0, 20.0)  # between a recovery and the next fault
MIN_DURATION_S = 1.0  # a fault shrunk for a short run still lasts this long (a torn write: none)
MIN_GAP_S = 2.0

# (min, max) seconds each fault lasts: a stop or a partition outlasts a short broker session.
_DURATION_S = {"kill": (2, 8), "stop": (4, 10), "partition": (5, 12), "disk-full": (5, 10),
               "torn-write": (0, 0), "slow-disk": (5, 15), "controller-disk-full": (5, 10), "log-dir": (5, 10)}


@dataclass(frozen=True)
class FaultEvent:
    at_s: float
    fault: str
    target: int  # a node id, or CONTROLLER
    duration_s: float
    variant: str  # partition: isolate | pair:N; torn-write: torn-active | flip-active | flip-closed;
    #               slow-disk: the fsync delay in ms; else ""
    gap_s: float = 0.0  # the pause after the previous recovery (the warm-up, for the first)
    first_round: bool = True  # of the first bag: injected whatever the run's time

    def describe(self) -> str:
        extra = f" {self.variant}" if self.variant else ""
        target = "the controller" if self.target == CONTROLLER else f"node {self.target}"
        return f"t={self.at_s:6.1f}s  {self.fault:<20} {target:<14} {self.duration_s:4.1f}s{extra}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def warmup_s(duration_s: float) -> float:
    return min(WARMUP_S, duration_s / 10)


def cooldown_s(duration_s: float) -> float:
    return min(COOLDOWN_S, duration_s / 6)


def make_schedule(seed: int, duration_s: float, faults: list[str], nodes: list[int],
                  gap_s: tuple[float, float] = GAP_S) -> list[FaultEvent]:
    unknown = sorted(set(faults) - set(FAULTS))
    if unknown:
        raise ValueError(f"unknown faults {unknown}; known: {', '.join(FAULTS)}")
    kinds = sorted(set(faults))
    if not kinds:
        return []
    rng = random.Random(seed)
    start, end = warmup_s(duration_s), duration_s - cooldown_s(duration_s)
    # the first bag's share of the run: shrink durations and gaps when they would not fit
    nominal = sum(sum(_DURATION_S[k]) / 2 + sum(gap_s) / 2 for k in kinds)
    scale = min(1.0, (end - start) / nominal)
    events: list[FaultEvent] = []
    bag: list[str] = []
    at, first_round, gap = start, True, start
    while first_round or at < end:
        if not bag:
            if events:
                first_round = False
                if at >= end:
                    break
            bag = list(kinds)
            rng.shuffle(bag)
        fault = bag.pop()
        low, high = _DURATION_S[fault]
        length = round(max(MIN_DURATION_S if high else 0.0, rng.uniform(low, high) * scale), 1)
        target = CONTROLLER if fault == "controller-disk-full" else rng.choice(nodes)
        variant = ""
        if fault == "partition":
            variant = rng.choice(["isolate", f"pair:{rng.choice([n for n in nodes if n != target])}"])
        elif fault == "torn-write":
            variant = rng.choice(["torn-active", "flip-active", "flip-closed"])
        elif fault == "slow-disk":
            variant = str(rng.choice([200, 500, 1000, 2000]))
        events.append(FaultEvent(round(at, 1), fault, target, length, variant, round(gap, 1), first_round))
        gap = max(MIN_GAP_S, rng.uniform(*gap_s) * scale)
        at += length + gap
    return events
