"""The simulation's in-memory log agrees with the real PartitionLog: the same random sequence of
leader and follower appends, transactional writes and markers, truncations, epoch assignments,
high-watermark and log-start moves and reads gives the same offsets, epoch cache, last stable
offset, answers (read_committed's aborted transactions too) and bytes on both."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.log.batch import build_batch, stamp
from kraft.log.config import LogConfig
from kraft.log.partition_log import PartitionLog
from tests.unit.replication.memory_log import MemoryLog

CONFIG = LogConfig(segment_bytes=600)  # several segments, so truncations cross them


def producer_batch(count: int, tag: int) -> bytes:
    return build_batch([(None, b"v%d-%d" % (tag, i), [], 1_700_000_000_000) for i in range(count)])


def replicated_batch(base_offset: int, epoch: int, count: int, tag: int) -> bytes:
    buf = bytearray(producer_batch(count, tag))
    stamp(buf, 0, base_offset, epoch)
    return bytes(buf)


OPS = st.lists(st.one_of(
    st.tuples(st.just("leader"), st.integers(0, 2), st.integers(1, 3)),
    st.tuples(st.just("follower"), st.integers(0, 2), st.integers(1, 3), st.integers(0, 2)),
    st.tuples(st.just("truncate"), st.integers(-6, 2)),
    st.tuples(st.just("truncate_fully"), st.integers(0, 30)),
    st.tuples(st.just("assign"), st.integers(0, 8), st.integers(0, 30)),
    st.tuples(st.just("hw"), st.integers(0, 30)),
    st.tuples(st.just("start"), st.integers(0, 30)),
    st.tuples(st.just("read"), st.integers(0, 30), st.sampled_from([1, 150, 1 << 20]),
              st.one_of(st.none(), st.integers(0, 30))),
    st.tuples(st.just("txn"), st.integers(0, 1), st.integers(1, 3)),
    st.tuples(st.just("marker"), st.integers(0, 1), st.booleans()),
), max_size=30)


def transactional_batch(log: PartitionLog, pid: int, count: int, tag: int) -> bytes:
    entry = log._producer_state.entry(pid)
    sequence = entry.last_sequence + 1 if entry is not None else 0
    return build_batch([(None, b"t%d-%d" % (tag, i), [], 1_700_000_000_000) for i in range(count)],
                       producer_id=pid, producer_epoch=0, base_sequence=sequence, transactional=True)


def outcome(call: Callable[[], Any]) -> Any:
    try:
        result = call()
    except Exception as e:
        return ("raised", type(e).__name__)
    return getattr(result, "records", result) if not isinstance(result, bool) else result


def state(log: Any) -> tuple[Any, ...]:
    cache = log.leader_epoch_cache
    return (log.log_start_offset, log.high_watermark, log.log_end_offset,
            [(e.epoch, e.start_offset) for e in cache.entries],
            [log.end_offset_for_epoch(e) for e in range(-1, 10)],
            log.read(log.log_start_offset, 1 << 20).records, log.last_stable_offset,
            outcome(lambda: log.read(log.log_start_offset, 1 << 20, read_committed=True).aborted_transactions))


@settings(max_examples=100, deadline=None)
@given(OPS)
def test_memory_log_matches_partition_log(ops: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        real = PartitionLog.open(Path(tmp) / "t-0", CONFIG, 0)
        memory = MemoryLog(CONFIG)
        for tag, op in enumerate(ops):
            kind = op[0]
            calls: list[Callable[[Any], Any]]
            if kind == "leader":
                epoch = (real.leader_epoch_cache.latest_epoch or 0) + op[1]
                calls = [lambda log: log.append_as_leader(producer_batch(op[2], tag), epoch, 0)]
            elif kind == "follower":
                epoch = (real.leader_epoch_cache.latest_epoch or 0) + op[1]
                data = replicated_batch(real.log_end_offset + op[3], epoch, op[2], tag)
                calls = [lambda log: log.append_as_follower(data, 0)]
            elif kind == "truncate":
                calls = [lambda log: log.truncate_to(log.log_end_offset + op[1])]
            elif kind == "truncate_fully":
                calls = [lambda log: log.truncate_fully_and_start_at(op[1], 0)]
            elif kind == "assign":
                calls = [lambda log: log.assign_epoch_start(op[1], op[2])]
            elif kind == "hw":
                calls = [lambda log: setattr(log, "high_watermark", op[1])]
            elif kind == "start":
                calls = [lambda log: log.maybe_increment_log_start_offset(op[1])]
            elif kind == "txn":
                epoch = real.leader_epoch_cache.latest_epoch or 0
                data = transactional_batch(real, 10 + op[1], op[2], tag)
                calls = [lambda log: log.verify_transaction(10 + op[1], 0),
                         lambda log: log.append_as_leader(data, epoch, 0)]
            elif kind == "marker":
                epoch = real.leader_epoch_cache.latest_epoch or 0
                # the batches' time: a marker stamped 0 would roll the real log by segment.ms
                calls = [lambda log: log.append_control(10 + op[1], 0, 0, op[2], epoch, 1_700_000_000_000)]
            else:
                calls = [lambda log: log.read(op[1], op[2], op[3])]
            for call in calls:
                expected, got = outcome(lambda: call(real)), outcome(lambda: call(memory))
                if kind in ("leader", "follower", "txn", "marker"):  # LogAppendInfo: compare the offsets
                    expected, got = (getattr(x, "first_offset", x) for x in (expected, got))
                assert got == expected, (op, expected, got)
            assert state(memory) == state(real), (op, state(real), state(memory))
        real.close()
