"""Incremental fetch sessions (KIP-227, Kafka's FetchSession / FetchSessionCache), for Fetch v7+.

A full fetch with epoch 0 opens a session: the broker remembers its partitions (fetch offset,
max bytes, leader epochs) and what it last answered for each (high watermark, last stable offset,
log start offset). Later fetches name the session and its next epoch and send only what changed
(partitions added or moved on, `forgotten_topics_data` to drop); the answer carries only the
partitions with records, an error, or a changed offset. Epoch -1 closes the session (a full,
sessionless fetch). A session is its principal's; an evicted or unknown id is
FETCH_SESSION_ID_NOT_FOUND, after which the client starts a new one.

At most `max.incremental.fetch.session.cache.slots` (1000, Kafka's) are kept. A full cache makes
room as Kafka's FetchSessionCache.tryEvict does: the least recently used session goes if it was
unused for EVICTION_S (Kafka's 120 s), else the smallest session older than EVICTION_S goes if the
new one has more partitions; otherwise no session is opened and the fetch is answered sessionless
(session id 0), which the client takes as "full fetches from now on". So a client opening a session
per request cannot evict the sessions of consumers that use theirs (an LRU cache let it).
"""

from __future__ import annotations

import random
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable

from kraft.errors import KraftError

INITIAL_EPOCH, FINAL_EPOCH, NO_SESSION = 0, -1, 0
MAX_SESSIONS = 1000
EVICTION_S = 120.0  # Kafka's min.incremental.fetch.session.eviction.ms

TopicPartition = tuple[str, int]


@dataclass
class SessionPartition:
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int
    last_fetched_epoch: int
    answered: tuple[int, int, int] | None = None  # (high watermark, LSO, log start) last sent


@dataclass
class FetchSession:
    session_id: int
    principal: str
    epoch: int  # the epoch the next fetch must name
    partitions: OrderedDict[TopicPartition, SessionPartition] = field(default_factory=OrderedDict)
    created: float = 0.0
    last_used: float = 0.0

    def changed(self, tp: TopicPartition, answer: tuple[int, int, int], has_records: bool, error: bool) -> bool:
        """Whether the partition goes in an incremental answer; remembers what is sent."""
        part = self.partitions[tp]
        send = has_records or error or part.answered != answer
        if send:
            part.answered = answer
        return send


class FetchSessionCache:
    def __init__(self, max_sessions: int = MAX_SESSIONS, seed: int | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()  # least recently used first
        self._random = random.Random(seed)
        self._clock = clock

    def __len__(self) -> int:
        return len(self._sessions)

    def _new_id(self) -> int:
        while True:
            candidate = self._random.randint(1, 2**31 - 1)
            if candidate not in self._sessions:
                return candidate

    def open(self, principal: str, partitions: dict[TopicPartition, SessionPartition]) -> FetchSession | None:
        """A new session, or None when the cache is full and none may be evicted for it."""
        now = self._clock()
        if len(self._sessions) >= self.max_sessions and not self._evict_for(len(partitions), now):
            return None
        session = FetchSession(self._new_id(), principal, INITIAL_EPOCH + 1, OrderedDict(partitions), now, now)
        self._sessions[session.session_id] = session
        return session

    def _evict_for(self, size: int, now: float) -> bool:
        """Kafka's tryEvict for an unprivileged session of `size` partitions."""
        if not self._sessions:
            return False
        oldest = next(iter(self._sessions.values()))
        if now - oldest.last_used > EVICTION_S:
            del self._sessions[oldest.session_id]
            return True
        settled = [s for s in self._sessions.values() if now - s.created > EVICTION_S]
        if not settled:
            return False
        smallest = min(settled, key=lambda s: (len(s.partitions), s.session_id))
        if size <= len(smallest.partitions):
            return False
        del self._sessions[smallest.session_id]
        return True

    def close(self, session_id: int) -> None:
        self._sessions.pop(session_id, None)

    def resume(self, session_id: int, epoch: int, principal: str) -> FetchSession:
        """The session for an incremental fetch at `epoch`; Kafka's errors when it cannot be."""
        session = self._sessions.get(session_id)
        if session is None or session.principal != principal:
            raise KraftError("FETCH_SESSION_ID_NOT_FOUND", f"no fetch session {session_id}")
        if epoch != session.epoch:
            raise KraftError("INVALID_FETCH_SESSION_EPOCH",
                             f"fetch session {session_id} expects epoch {session.epoch}, not {epoch}")
        self._sessions.move_to_end(session_id)
        session.last_used = self._clock()
        return session

    @staticmethod
    def update(session: FetchSession, changed: dict[TopicPartition, SessionPartition],
               forgotten: list[TopicPartition]) -> None:
        for tp in forgotten:
            session.partitions.pop(tp, None)
        for tp, part in changed.items():
            previous = session.partitions.get(tp)
            if previous is not None:
                part.answered = previous.answered
            session.partitions[tp] = part
        session.epoch = session.epoch + 1 if session.epoch < 2**31 - 1 else 1  # Kafka wraps to 1
