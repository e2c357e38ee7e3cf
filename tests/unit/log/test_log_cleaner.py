"""Compaction: the last value per key survives with its original offset; tombstones expire."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.log import kafka_batch
from kraft.log.batch import build_batch, iter_batches
from log_testing import all_records, make_batch

COMPACT = dict(cleanup_policy="compact", segment_bytes=400, index_interval_bytes=50)


def _produce(log, entries: list[tuple[bytes, bytes | None]], ts: int = 0, per_batch: int = 3,
             v2: list[bool] | None = None) -> None:
    """Batches of `per_batch` entries; the i-th a Kafka producer's v2 batch where `v2[i]` says
    so (cycled), else kraft's."""
    for n, i in enumerate(range(0, len(entries), per_batch)):
        chunk = entries[i : i + per_batch]
        build = kafka_batch.build_batch if v2 and v2[n % len(v2)] else build_batch
        log.append_as_leader(build([(k, v, None, ts) for k, v in chunk]), 0, 0)


def _magics(log) -> dict[int, int]:
    """Base offset -> magic of every batch in the log."""
    magics, offset = {}, log.log_start_offset
    while offset < log.log_end_offset:
        chunk = log.read(offset, 10**6)
        magics.update((h.base_offset, h.magic) for _, h in iter_batches(chunk.records))
        offset = chunk.next_offset
    return magics


def _everything(log) -> list:
    records, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        chunk = log.read(offset, 10**6)
        records += all_records(chunk.records)
        offset = chunk.next_offset
    return records


@settings(max_examples=30, deadline=None)
@given(
    entries=st.lists(
        st.tuples(st.sampled_from([b"a", b"b", b"c", b"d", b"e"]), st.one_of(st.none(), st.binary(min_size=1, max_size=30))),
        min_size=1, max_size=60,
    ),
    drop_tombstones=st.booleans(),
    v2=st.lists(st.booleans(), min_size=1, max_size=8),
)
def test_last_value_per_key_survives(tmp_path_factory, entries, drop_tombstones, v2) -> None:
    """On a log written through both APIs (kraft's batches and Kafka's v2 ones, `v2`), each
    rewritten batch keeping its own format."""
    from kraft.log.config import LogConfig
    from kraft.log.partition_log import PartitionLog

    log = PartitionLog.open(
        tmp_path_factory.mktemp("c") / "t-0",
        LogConfig(**COMPACT, delete_retention_ms=0 if drop_tombstones else 10**9),
        0,
    )
    try:
        _produce(log, entries, v2=v2)
        log.high_watermark = log.log_end_offset
        before = _everything(log)
        magics = _magics(log)
        active_base = log.segments[-1].base_offset
        log.compact(now_ms=10)
        after = _everything(log)
        # the active segment is untouched; below it, exactly the last record per key survives
        assert [r for r in after if r.offset >= active_base] == [r for r in before if r.offset >= active_base]
        cleanable = [r for r in before if r.offset < active_base]
        last = {r.key: r for r in cleanable}
        expected = sorted(
            (r for r in last.values() if not (drop_tombstones and r.value is None)),
            key=lambda r: r.offset,
        )
        assert [r for r in after if r.offset < active_base] == expected
        assert log.log_end_offset == len(entries)
        assert _magics(log).items() <= magics.items()  # a kept batch keeps its base offset and format
        # the compacted log reopens cleanly and still serves the same records
        log.close()
        again = PartitionLog.open(log.directory, log.config, 0)
        assert _everything(again) == after
        again.close()
    finally:
        log.close()


def test_compaction_respects_high_watermark_and_lag(open_log) -> None:
    log = open_log(**COMPACT, min_compaction_lag_ms=1000)
    _produce(log, [(b"k", b"%d" % i) for i in range(40)], ts=500)
    log.high_watermark = log.log_end_offset
    assert log.compact(now_ms=1000).records_removed == 0  # too recent
    log.high_watermark = 0
    assert log.compact(now_ms=10**6).records_removed == 0  # nothing below the high watermark
    log.high_watermark = log.log_end_offset
    stats = log.compact(now_ms=10**6)
    assert stats.records_removed > 0 and stats.bytes_after < stats.bytes_before


def test_delete_policy_does_not_compact(open_log) -> None:
    log = open_log(segment_bytes=300)
    for _ in range(10):
        log.append_as_leader(make_batch(3), 0, 0)
    log.high_watermark = log.log_end_offset
    assert log.compact(now_ms=10**6).records_removed == 0


def test_compacted_batches_replicate_to_a_follower(open_log, tmp_path) -> None:
    from kraft.log.config import LogConfig
    from kraft.log.partition_log import PartitionLog

    leader = open_log(**COMPACT)
    _produce(leader, [(b"k%d" % (i % 3), b"v%d" % i) for i in range(30)], v2=[True, False])
    leader.high_watermark = leader.log_end_offset
    leader.compact(now_ms=10)
    follower = PartitionLog.open(tmp_path / "f-0", LogConfig(**COMPACT), 0)
    try:
        offset = leader.log_start_offset
        while offset < leader.log_end_offset:
            chunk = leader.read(offset, 10**6)
            follower.append_as_follower(chunk.records, now_ms=0)
            offset = chunk.next_offset
        assert _everything(follower) == _everything(leader)
        assert follower.log_end_offset == leader.log_end_offset
    finally:
        follower.close()
