"""LeaderEpochFileCache: Kafka's assign/truncate rules, end_offset_for, and the checkpoint file."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from kraft.log.epoch_cache import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochFileCache,
)


def _cache(*pairs: tuple[int, int]) -> LeaderEpochFileCache:
    cache = LeaderEpochFileCache(None)
    for epoch, offset in pairs:
        cache.assign(epoch, offset)
    return cache


def test_assign_rules() -> None:
    cache = _cache((1, 0), (1, 5), (2, 10))
    assert cache.entries == (EpochEntry(1, 0), EpochEntry(2, 10))
    cache.assign(2, 7)  # same epoch, earlier offset: replaces
    assert cache.entries == (EpochEntry(1, 0), EpochEntry(2, 7))
    cache.assign(3, 5)  # non-monotonic: drops the conflicting later entry
    assert cache.entries == (EpochEntry(1, 0), EpochEntry(3, 5))


def test_end_offset_for_kafka_cases() -> None:
    cache = _cache((2, 10), (4, 20), (7, 30))
    assert cache.end_offset_for(7, log_end_offset=42) == (7, 42)  # latest epoch: LEO
    assert cache.end_offset_for(4, 42) == (4, 30)
    assert cache.end_offset_for(5, 42) == (4, 30)  # unknown epoch: floor epoch, next start
    assert cache.end_offset_for(1, 42) == (1, 10)  # below every epoch
    assert cache.end_offset_for(8, 42) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
    assert cache.end_offset_for(UNDEFINED_EPOCH, 42) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
    assert _cache().end_offset_for(0, 5) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


def test_truncation_from_both_ends() -> None:
    cache = _cache((1, 0), (2, 10), (3, 20))
    cache.truncate_from_end(15)
    assert cache.entries == (EpochEntry(1, 0), EpochEntry(2, 10))
    cache.truncate_from_start(12)
    assert cache.entries == (EpochEntry(2, 12),)
    cache.truncate_from_start(5)
    assert cache.entries == (EpochEntry(2, 12),)


def test_checkpoint_survives_reload_and_bad_file_is_empty(tmp_path: Path) -> None:
    cache = LeaderEpochFileCache.load(tmp_path)
    cache.assign(3, 0)
    cache.assign(5, 100)
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n3 0\n5 100\n"
    assert LeaderEpochFileCache.load(tmp_path).entries == cache.entries
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n3\n1 1\n")
    assert LeaderEpochFileCache.load(tmp_path).entries == ()


@given(
    starts=st.lists(st.integers(1, 20), min_size=1, max_size=8, unique=True),
    gaps=st.lists(st.integers(1, 50), min_size=8, max_size=8),
    requested=st.integers(0, 25),
    extra=st.integers(0, 30),
)
def test_end_offset_for_matches_reference(starts, gaps, requested, extra) -> None:
    epochs = sorted(starts)
    offsets = [sum(gaps[: i + 1]) for i in range(len(epochs))]
    leo = offsets[-1] + extra
    cache = _cache(*zip(epochs, offsets))
    epoch, end = cache.end_offset_for(requested, leo)
    # Reference: the first offset written in an epoch above `requested` bounds it; the answered
    # epoch is the largest one <= requested (or requested itself when none is known).
    higher = [o for e, o in zip(epochs, offsets) if e > requested]
    lower = [e for e in epochs if e <= requested]
    if requested == epochs[-1]:
        assert (epoch, end) == (requested, leo)
    elif not higher:
        assert (epoch, end) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
    else:
        assert end == higher[0]
        assert epoch == (lower[-1] if lower else requested)
