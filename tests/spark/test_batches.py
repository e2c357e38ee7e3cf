"""The sink's per-partition batch builder (spark_connector/batches.py), without Spark: its batches
decode to the rows added, in order, cut at kraft.batch.size, with consecutive sequences; and the
source's ColumnBuilder reads them back column-wise."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.log.batch import decode_columns, iter_batches, new_row_packer
from kraft.spark_connector.arrow_rows import pack_rows
from kraft.spark_connector.batches import RECORD_OVERHEAD, PartitionBatches, row_ends
from kraft.spark_connector.schema import ColumnBuilder, arrow_schema, source_schema

_ROW = st.tuples(
    st.one_of(st.none(), st.binary(max_size=40)),
    st.one_of(st.none(), st.binary(max_size=200)),
    st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5))), max_size=2).map(tuple),
)


def _size(row: tuple) -> int:
    return len(row[0] or b"") + len(row[1] or b"")


@settings(max_examples=60, deadline=None)
@given(
    chunks=st.lists(st.lists(_ROW, max_size=30), min_size=1, max_size=5),
    batch_size=st.integers(min_value=1, max_value=600),
    compression=st.sampled_from(["none", "zstd"]),
    idempotent=st.booleans(),
)
def test_batches_hold_the_rows_in_order_cut_at_batch_size(chunks, batch_size, compression, idempotent):
    pid, epoch = (7, 3) if idempotent else (-1, -1)
    batches = PartitionBatches(batch_size, compression, pid, epoch)
    for i, rows in enumerate(chunks):
        if rows:
            keys, values, headers = (list(c) for c in zip(*rows))
            batches.add(values, row_ends(map(_size, rows)), 1_000 + i, keys, headers)
    records, count = batches.take()
    expected = [row for rows in chunks for row in rows]
    assert count == len(expected)
    decoded = []
    sequence = 0
    for pos, header in iter_batches(records):
        columns = decode_columns(records, pos)
        assert list(columns.offsets) == list(range(len(columns.offsets)))
        assert header.base_sequence == (sequence if idempotent else -1)
        assert header.producer_id == pid
        sizes = [len(k or b"") + len(v or b"") + RECORD_OVERHEAD for k, v in zip(columns.keys, columns.values)]
        assert sum(sizes[:-1]) < batch_size  # only the last row of a batch may cross batch.size
        sequence += len(sizes)
        decoded.extend(zip(columns.keys, columns.values, columns.headers))
    assert decoded == expected

    if not expected:
        return
    one = PartitionBatches(1 << 30, compression)  # one batch: the broker would give them offsets
    one.add([v for _, v, _ in expected], row_ends(map(_size, expected)), 5, [k for k, _, _ in expected],
            [h for _, _, h in expected])
    records, _ = one.take()
    builder = ColumnBuilder("t", 2, arrow_schema(source_schema(True)))
    builder.add_batch(records, 0, 1, len(expected))  # the range cuts the first record off
    table = builder.build().to_pydict()
    assert table["value"] == [v for _, v, _ in expected[1:]]
    assert table["key"] == [k for k, _, _ in expected[1:]]
    assert table["headers"] == [[{"key": k, "value": v} for k, v in h] for _, _, h in expected[1:]]
    assert table["offset"] == list(range(1, len(expected)))
    assert set(table["partition"]) <= {2} and set(table["topic"]) <= {"t"}


_PAYLOAD = st.one_of(st.none(), st.binary(max_size=300), st.sampled_from([b"x" * 0xFFFF, b"y" * 0x10000]))


@settings(max_examples=60, deadline=None)
@given(
    chunks=st.lists(st.lists(st.tuples(_PAYLOAD, _PAYLOAD), max_size=40), min_size=1, max_size=4),
    keyed=st.booleans(),
    batch_size=st.integers(min_value=1, max_value=200_000),
    first_timestamp=st.integers(min_value=0, max_value=1 << 41),
)
def test_rows_given_as_arrow_columns_make_the_bytes_msgpack_packs(chunks, keyed, batch_size, first_timestamp):
    """The Arrow-kernel packing (arrow_rows.py) against msgpack's, batch for batch: offset deltas
    across the msgpack int formats, bin 8/16 headers, nulls, timestamps, and the fallback for a key
    or value over 64 KiB."""
    by_arrow = PartitionBatches(batch_size, "none")
    by_msgpack = PartitionBatches(batch_size, "none")
    for i, rows in enumerate(chunks):
        if not rows:
            continue
        keys, values = (list(c) for c in zip(*rows))
        ends = row_ends(len(k or b"") * keyed + len(v or b"") for k, v in rows)
        timestamp = first_timestamp + 1_000 * i
        by_arrow.add(pa.array(values, pa.binary()), ends, timestamp, pa.array(keys, pa.binary()) if keyed else None)
        by_msgpack.add(values, ends, timestamp, keys if keyed else None)
    assert by_arrow.take() == by_msgpack.take()


def test_arrow_packing_covers_every_offset_delta_format():
    """Deltas 127/128 (fixint/uint 8), 255/256 (uint 8/16), 65535/65536 (uint 16/32)."""
    values = pa.array([b"v"] * 3)
    for first in (126, 254, 65534):
        packer = new_row_packer()
        for delta in range(first, first + 3):
            packer.pack((delta, 7, None, b"v", ()))
        assert bytes(pack_rows(first, 7, None, values)) == packer.bytes()


def test_take_leaves_the_builder_empty_and_sequences_go_on():
    batches = PartitionBatches(1 << 20, "none", 5, 0)
    batches.add([b"a", b"b"], row_ends([1, 1]), 1)
    first, count = batches.take()
    assert count == 2
    assert batches.take() == (b"", 0)
    batches.add([b"c"], row_ends([1]), 2)
    second, count = batches.take()
    assert count == 1
    [(pos, header)] = list(iter_batches(second))
    assert header.base_sequence == 2


def test_a_kafka_producers_v2_batch_builds_the_same_columns():
    """A partition a Kafka client wrote holds v2 batches as sent: the source reads them alike."""
    from kraft.log import kafka_batch

    rows = [(b"k%d" % i, b"v%d" % i, [("h", b"x")] if i % 2 else [], 1_700_000_000_000 + i) for i in range(4)]
    builder = ColumnBuilder("t", 0, arrow_schema(source_schema(True)))
    builder.add_batch(kafka_batch.build_batch(rows, base_offset=10), 0, 11, 14)
    table = builder.build().to_pydict()
    assert table["offset"] == [11, 12, 13]
    assert table["key"] == [b"k1", b"k2", b"k3"]
    assert table["headers"] == [[{"key": "h", "value": b"x"}], [], [{"key": "h", "value": b"x"}]]


def test_column_builder_offsets_with_gaps_and_ranges():
    """A compacted batch's offsets have gaps (a tuple), an uncompacted one's are a range: both
    come out as the records' offsets, cut to [lo, hi)."""
    from kraft.log.batch import encode_batch, frame_rows

    compacted = encode_batch([[0, 0, b"k", b"a", []], [3, 1, b"k", b"b", []], [7, 2, b"k", b"c", []]],
                             base_offset=100, last_offset_delta=7, base_timestamp=1_000, max_timestamp=1_002)
    packer = new_row_packer()
    for delta in range(3):
        packer.pack((delta, 0, None, b"v", ()))
    consecutive = frame_rows(packer.getbuffer(), 3, base_timestamp=5, max_timestamp=5, base_offset=108)
    builder = ColumnBuilder("t", 0, arrow_schema(source_schema(False)))
    builder.add_batch(compacted, 0, 103, 200)
    builder.add_batch(consecutive, 0, 0, 110)
    table = builder.build().to_pydict()
    assert len(builder) == 4
    assert table["offset"] == [103, 107, 108, 109]
    assert table["value"] == [b"b", b"c", b"v", b"v"]
    assert table["timestampType"] == [0, 0, 0, 0]
