"""The seeded fault schedule of a chaos run: the same seed, duration, fault list and node ids give
the same list of (time, fault, target, duration, variant) events, so a run can be replayed.

One fault at a time (Kafka promises survival of any single failure, not of several at once):
each event is planned after the previous one's duration plus a recovery gap; the runner starts an
event at its planned time or once the cluster has recovered from the previous one, whichever is
later. Fault types are drawn from a shuffled bag, so every type requested is exercised before any
repeats.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from typing import Any

FAULTS = ("kill", "stop", "partition", "disk-full", "torn-write", "slow-disk")
WARMUP_S = 15.0  # the workload runs fault-free first (a tenth of a short run)
COOLDOWN_S = 30.0  # and fault-free at the end (a sixth of a short run), so every partition recovers

# (min, max) seconds each fault lasts: a stop or a partition outlasts a short broker session.
_DURATION_S = {"kill": (2, 8), "stop": (4, 10), "partition": (5, 12), "disk-full": (5, 10),
               "torn-write": (0, 0), "slow-disk": (5, 15)}


@dataclass(frozen=True)
class FaultEvent:
    at_s: float
    fault: str
    target: int
    duration_s: float
    variant: str  # partition: isolate | pair:N; torn-write: torn-active | flip-active | flip-closed;
    #               slow-disk: the fsync delay in ms; else ""

    def describe(self) -> str:
        extra = f" {self.variant}" if self.variant else ""
        return f"t={self.at_s:6.1f}s  {self.fault:<10} node {self.target}  {self.duration_s:4.1f}s{extra}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def make_schedule(seed: int, duration_s: float, faults: list[str], nodes: list[int],
                  gap_s: tuple[float, float] = (12.0, 20.0)) -> list[FaultEvent]:
    unknown = sorted(set(faults) - set(FAULTS))
    if unknown:
        raise ValueError(f"unknown faults {unknown}; known: {', '.join(FAULTS)}")
    if not faults:
        return []
    rng = random.Random(seed)
    events: list[FaultEvent] = []
    bag: list[str] = []
    at = min(WARMUP_S, duration_s / 10)
    while at < duration_s - min(COOLDOWN_S, duration_s / 6):
        if not bag:
            bag = sorted(set(faults))
            rng.shuffle(bag)
        fault = bag.pop()
        target = rng.choice(nodes)
        low, high = _DURATION_S[fault]
        length = round(rng.uniform(low, high), 1)
        variant = ""
        if fault == "partition":
            variant = rng.choice(["isolate", f"pair:{rng.choice([n for n in nodes if n != target])}"])
        elif fault == "torn-write":
            variant = rng.choice(["torn-active", "flip-active", "flip-closed"])
        elif fault == "slow-disk":
            variant = str(rng.choice([200, 500, 1000, 2000]))
        events.append(FaultEvent(round(at, 1), fault, target, length, variant))
        at += length + rng.uniform(*gap_s)
    return events
