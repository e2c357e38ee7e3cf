"""The fencings of a chaos run, read from the nodes' logs: every `broker N missed heartbeats ...:
fencing it` line an active controller wrote (`kraft.controller.service`), as history events
(`fenced`: `t` in the history's seconds, the `broker` fenced, the controller `node` that fenced
it). The checker attributes each to a fault or counts it as one no fault caused.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Iterator

# the node log format (kraft/logging.py): `2026-11-23T03:30:00.123Z LEVEL node=N logger: message`
_FENCED = re.compile(rb"^(\S+Z) \w+ node=(\d+) \S+ broker (\d+) missed heartbeats for \d+ ms: fencing it")


def _epoch_s(stamp: bytes) -> float:
    return datetime.fromisoformat(stamp.decode().replace("Z", "+00:00")).timestamp()


def fencings_logged(logs: Iterable[Path], wall_start: float) -> Iterator[dict[str, Any]]:
    """`fenced` events, in time order, from node logs; `wall_start` is the history's time 0."""
    found = []
    for path in logs:
        try:
            with open(path, "rb") as f:
                for line in f:
                    match = _FENCED.match(line)
                    if match:
                        found.append({"t": round(_epoch_s(match[1]) - wall_start, 3),
                                      "broker": int(match[3]), "node": int(match[2])})
        except OSError:
            continue
    yield from sorted(found, key=lambda e: e["t"])
