"""The fetch session cache (KIP-227): epochs, ownership, forgetting, eviction of the least
recently used, and the partitions an incremental answer carries."""

import pytest

from kraft.errors import KraftError
from kraft.kafka.apis.fetch_sessions import FetchSessionCache, SessionPartition


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


def test_the_least_recently_used_session_is_evicted_at_the_bound() -> None:
    cache = FetchSessionCache(max_sessions=2, seed=1)
    first, second = cache.open("User:a", {}), cache.open("User:a", {})
    cache.resume(first.session_id, 1, "User:a")  # first is now the most recently used
    cache.open("User:a", {})
    assert len(cache) == 2
    with pytest.raises(KraftError):
        cache.resume(second.session_id, 1, "User:a")
    cache.close(first.session_id)
    assert len(cache) == 1
