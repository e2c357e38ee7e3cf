"""Incremental fetch sessions (KIP-227, Kafka's FetchSession / FetchSessionCache), for Fetch v7+.

A full fetch with epoch 0 opens a session: the broker remembers its partitions (fetch offset,
max bytes, leader epochs) and what it last answered for each (high watermark, last stable offset,
log start offset). Later fetches name the session and its next epoch and send only what changed
(partitions added or moved on, `forgotten_topics_data` to drop); the answer carries only the
partitions with records, an error, or a changed offset. Epoch -1 closes the session (a full,
sessionless fetch). A session is its principal's; at most `max.incremental.fetch.session.cache.slots`
(1000, Kafka's) are kept, the least recently used evicted first, and an evicted or unknown id is
FETCH_SESSION_ID_NOT_FOUND, after which the client starts a new one.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from dataclasses import dataclass, field

from kraft.errors import KraftError

INITIAL_EPOCH, FINAL_EPOCH, NO_SESSION = 0, -1, 0
MAX_SESSIONS = 1000

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

    def changed(self, tp: TopicPartition, answer: tuple[int, int, int], has_records: bool, error: bool) -> bool:
        """Whether the partition goes in an incremental answer; remembers what is sent."""
        part = self.partitions[tp]
        send = has_records or error or part.answered != answer
        if send:
            part.answered = answer
        return send


class FetchSessionCache:
    def __init__(self, max_sessions: int = MAX_SESSIONS, seed: int | None = None) -> None:
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self._random = random.Random(seed)

    def __len__(self) -> int:
        return len(self._sessions)

    def _new_id(self) -> int:
        while True:
            candidate = self._random.randint(1, 2**31 - 1)
            if candidate not in self._sessions:
                return candidate

    def open(self, principal: str, partitions: dict[TopicPartition, SessionPartition]) -> FetchSession:
        if len(self._sessions) >= self.max_sessions:
            self._sessions.popitem(last=False)  # the least recently used
        session = FetchSession(self._new_id(), principal, INITIAL_EPOCH + 1, OrderedDict(partitions))
        self._sessions[session.session_id] = session
        return session

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
