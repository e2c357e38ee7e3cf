"""A batch's msgpack rows built by Arrow kernels from Arrow columns, without a Python object per record.

A kraft batch's rows are msgpack arrays `[offset delta, timestamp delta, key, value, headers]`
(`kraft.log.batch.new_row_packer`). Without headers, and with keys and values under 64 KiB, a row
is a concatenation of pieces that tables and the Arrow columns already hold: the array marker and
offset delta (a table indexed by delta), the timestamp delta (one for every row of a call), the
key's and the value's bin headers (a table indexed by length), their bytes, and the empty headers
array. One Arrow `take` interleaves the pieces into one buffer, the bytes msgpack would pack
(tests/spark/test_batches.py compares them), at a seventh of the CPU of packing Python objects.
"""

from __future__ import annotations

import msgpack
import pyarrow as pa
import pyarrow.compute as pc

_MAX_LENGTH = 0xFFFF  # bin 8 and bin 16 headers are tabled; longer keys or values are packed by msgpack
_MAX_ROWS = 1 << 20  # offset deltas tabled at most; a larger batch is packed by msgpack
_ROW_MARKER = b"\x95"  # fixarray of 5
_NIL = b"\xc0"
_NO_HEADERS = b"\x90"  # fixarray of 0

_bin_headers: pa.Array | None = None  # [n] -> msgpack's bin header for n bytes
_row_prefixes = pa.array([], pa.binary())  # [d] -> the row marker and offset delta d
_positions: dict[int, tuple[pa.Array, pa.Array]] = {}  # k -> ([m] -> m // k, [m] -> m % k)


def _bin_header_table() -> pa.Array:
    global _bin_headers
    if _bin_headers is None:
        _bin_headers = pa.array([b"\xc4" + bytes((n,)) for n in range(0x100)]
                                + [b"\xc5" + n.to_bytes(2, "big") for n in range(0x100, _MAX_LENGTH + 1)], pa.binary())
    return _bin_headers


def _row_prefix_table(rows: int) -> pa.Array:
    """At least `rows` entries, grown by doubling (a batch's deltas are 0..count-1)."""
    global _row_prefixes
    have = len(_row_prefixes)
    if have < rows:
        grown = max(rows, 2 * have, 1024)
        _row_prefixes = pa.concat_arrays([_row_prefixes, pa.array(
            [_ROW_MARKER + msgpack.packb(d) for d in range(have, grown)], pa.binary())])
    return _row_prefixes


def _interleaving(k: int, n: int) -> pa.Array:
    """The `take` indices that interleave k arrays of n concatenated: element m of the result is
    array m % k's element m // k, at (m % k) * n + m // k of the concatenation."""
    rows, pieces = _positions.get(k) or (pa.array([], pa.int64()), pa.array([], pa.int64()))
    if len(rows) < k * n:
        size = max(k * n, 2 * len(rows))
        rows = pa.array([m // k for m in range(size)], pa.int64())
        pieces = pa.array([m % k for m in range(size)], pa.int64())
        _positions[k] = rows, pieces
    return pc.add(pc.multiply(pieces.slice(0, k * n), n), rows.slice(0, k * n))


def _fits(column: pa.Array) -> bool:
    if column.type != pa.binary():
        return False
    longest = pc.max(pc.binary_length(column)).as_py()
    return longest is None or longest <= _MAX_LENGTH


def _bin(column: pa.Array) -> list[pa.Array]:
    """A binary column's pieces: msgpack bin headers (nil for a null) and the bytes."""
    headers = pc.fill_null(pc.take(_bin_header_table(), pc.binary_length(column)), pa.scalar(_NIL, pa.binary()))
    return [headers, pc.fill_null(column, pa.scalar(b"", pa.binary()))]


def _repeat(data: bytes, n: int) -> pa.Array:
    return pa.repeat(pa.scalar(data, pa.binary()), n)


def pack_rows(first_delta: int, timestamp_delta: int, keys: pa.Array | None,
              values: pa.Array) -> memoryview | None:
    """The rows of `values` (and `keys`, None: none) with offset deltas from `first_delta`, as
    `new_row_packer` packs them; None when they do not qualify (see above): pack them with msgpack."""
    n = len(values)
    if n == 0 or first_delta + n > _MAX_ROWS or not _fits(values) or (keys is not None and not _fits(keys)):
        return None
    middle = msgpack.packb(timestamp_delta) + (_NIL if keys is None else b"")
    pieces = [_row_prefix_table(first_delta + n).slice(first_delta, n), _repeat(middle, n),
              *([] if keys is None else _bin(keys)), *_bin(values), _repeat(_NO_HEADERS, n)]
    rows = pa.concat_arrays(pieces).take(_interleaving(len(pieces), n))
    _, offsets, data = rows.buffers()
    offsets = memoryview(offsets).cast("i")  # int32 (binary, not large_binary)
    return memoryview(data)[offsets[rows.offset]:offsets[rows.offset + len(rows)]]
