"""The fetch session cache (KIP-227): epochs, ownership, forgetting, Kafka's eviction rule, and the partitions an incremental answer carries."""

import pytest

from kraft.errors import KraftError
from kraft.kafka.apis.fetch_sessions import EVICTION_S, FetchSessionCache, SessionPartition


def part(offset: int = 0) -> SessionPartition:
    return SessionPartition(offset, 1 << 20, -1, -1)


def test_a_session_moves_epoch_by_epoch_and_belongs_to_its_principal() -> None:
    cache = FetchSessionCache(seed=1)
    session = cache.open("User:alice", {("t", 0): part()})
    assert session.session_id != 0 and session.epoch == 1
    assert cache.resume(session.session_id, 1, "User:alice") is session
    with pytest.raises(KraftError, match="expects epoch 1") as wrong:
        cache.resume(session.session_id, 2, "User:alice")
    assert wrong.value.error_code == "INVALID_FETCH_SESSION_EPOCH"
    with pytest.raises(KraftError) as other:
        cache.resume(session.session_id, 1, "User:mallory")
    assert other.value.error_code == "FETCH_SESSION_ID_NOT_FOUND"


def test_updates_add_move_and_forget_partitions_keeping_what_was_answered() -> None:
    cache = FetchSessionCache(seed=1)
    session = cache.open("User:a", {("t", 0): part(), ("t", 1): part()})
    assert session.changed(("t", 0), (5, 5, 0), has_records=False, error=False)
    assert not session.changed(("t", 0), (5, 5, 0), has_records=False, error=False)  # nothing new
    assert session.changed(("t", 0), (5, 5, 0), has_records=True, error=False)  # records always go
    cache.update(session, {("t", 0): part(5), ("u", 0): part()}, [("t", 1)])
    assert list(session.partitions) == [("t", 0), ("u", 0)] and session.partitions[("t", 0)].fetch_offset == 5
    assert not session.changed(("t", 0), (5, 5, 0), has_records=False, error=False)
    assert session.epoch == 2


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_full_cache_evicts_a_session_unused_past_the_eviction_time_least_recently_used_first() -> None:
    clock = Clock()
    cache = FetchSessionCache(max_sessions=2, seed=1, clock=clock)
    first, second = cache.open("User:a", {}), cache.open("User:a", {})
    clock.now += EVICTION_S + 1
    cache.resume(first.session_id, 1, "User:a")  # first is used, second is stale
    assert cache.open("User:a", {}) is not None
    assert len(cache) == 2
    with pytest.raises(KraftError):
        cache.resume(second.session_id, 1, "User:a")
    cache.close(first.session_id)
    assert len(cache) == 1


def test_sessions_opened_per_request_do_not_evict_sessions_in_use() -> None:
    """Kafka's tryEvict: a client opening a session on every fetch (an LRU cache let it evict
    everyone's) gets none while the others are used; the fetch is answered sessionless."""
    clock = Clock()
    cache = FetchSessionCache(max_sessions=3, seed=1, clock=clock)
    consumers = [cache.open("User:c", {("t", p): part()}) for p in range(3)]
    for _ in range(10):
        assert cache.open("User:mallory", {("x", 0): part()}) is None
    clock.now += EVICTION_S + 1
    for session in consumers:  # in use: not stale, but now old enough to make room for a bigger one
        session = cache.resume(session.session_id, session.epoch, "User:c")
        session.epoch += 1
    assert cache.open("User:mallory", {("x", 0): part()}) is None  # not more partitions than any
    bigger = cache.open("User:b", {("t", 0): part(), ("t", 1): part()})
    assert bigger is not None and len(cache) == 3
    found = []
    for session in consumers:
        try:
            found.append(cache.resume(session.session_id, session.epoch, "User:c"))
        except KraftError:
            pass
    assert len(found) == 2  # the smallest settled session (lowest id of the equal ones) made room
