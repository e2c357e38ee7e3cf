"""Sparse offset and time indexes: lookups agree with a linear scan, truncation, reload, corruption."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.log.errors import CorruptRecordError
from kraft.log.index import OffsetIndex, TimeIndex


def _linear_floor(entries: list[tuple[int, int]], key: int) -> tuple[int, int] | None:
    below = [e for e in entries if e[0] <= key]
    return below[-1] if below else None


@settings(max_examples=50, deadline=None)
@given(
    gaps=st.lists(st.integers(1, 1000), min_size=0, max_size=40),
    targets=st.lists(st.integers(0, 50_000), min_size=1, max_size=10),
    data=st.data(),
)
def test_offset_index_lookup_matches_linear_scan(tmp_path_factory, gaps, targets, data) -> None:
    base = data.draw(st.integers(0, 10**12))
    path = tmp_path_factory.mktemp("idx") / "x.index"
    index = OffsetIndex(path, base, 1 << 20)
    entries = []
    offset, position = base, 0
    for gap in gaps:
        offset += gap
        position += gap * 3
        index.append(offset, position)
        entries.append((offset, position))
    for t in targets:
        expected = _linear_floor(entries, base + t) or (base, 0)
        assert index.lookup(base + t) == expected
    index.close()
    reloaded = OffsetIndex(path, base, 1 << 20)
    reloaded.sanity_check()
    assert [reloaded.lookup(base + t) for t in targets] == [index.lookup(base + t) for t in targets]
    cut = base + data.draw(st.integers(0, 50_000))
    reloaded.truncate_to(cut)
    assert all(o < cut for o, _ in [reloaded.last_entry or (base - 1, 0)])
    assert len(reloaded) == len([e for e in entries if e[0] < cut])
    reloaded.close()


@settings(max_examples=50, deadline=None)
@given(
    stamps=st.lists(st.tuples(st.integers(-5, 1000), st.integers(1, 50)), max_size=40),
    targets=st.lists(st.integers(-10, 30_000), min_size=1, max_size=10),
)
def test_time_index_lookup_matches_linear_scan(tmp_path_factory, stamps, targets) -> None:
    index = TimeIndex(tmp_path_factory.mktemp("tidx") / "x.timeindex", 100, 1 << 20)
    entries: list[tuple[int, int]] = []
    ts, offset = 0, 100
    for step, gap in stamps:
        ts += step
        offset += gap
        index.maybe_append(ts, offset)
        if not entries or ts > entries[-1][0]:
            entries.append((ts, offset))
    for t in targets:
        assert index.lookup(t) == _linear_floor(entries, t)
    index.close()


def test_full_index_and_key_order(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "a.index", 0, 16)
    index.append(1, 10)
    with pytest.raises(ValueError):
        index.append(1, 20)
    index.append(2, 20)
    assert index.is_full
    with pytest.raises(ValueError):
        index.append(3, 30)
    index.close()


def test_torn_index_file_fails_sanity_check(tmp_path: Path) -> None:
    path = tmp_path / "a.index"
    index = OffsetIndex(path, 0, 1024)
    index.append(5, 100)
    index.close()
    with path.open("ab") as f:
        f.write(b"\x00\x00\x00")
    torn = OffsetIndex(path, 0, 1024)
    with pytest.raises(CorruptRecordError):
        torn.sanity_check()
    torn.reset()
    torn.sanity_check()
    assert len(torn) == 0 and path.stat().st_size == 0
    torn.close()


def test_out_of_order_index_file_fails_sanity_check(tmp_path: Path) -> None:
    path = tmp_path / "a.index"
    path.write_bytes(b"\x00\x00\x00\x05\x00\x00\x00\x10" + b"\x00\x00\x00\x03\x00\x00\x00\x20")
    index = OffsetIndex(path, 0, 1024)
    with pytest.raises(CorruptRecordError):
        index.sanity_check()
    index.close()
