"""The four batch codecs, by Kafka's attribute codes, for both batch formats (pure).

kraft's own batches (magic 0x4B) and Kafka's RecordBatch v2 (magic 2) compress their records with
the same codes and the same bytes: none 0, gzip 1, snappy 2, lz4 3, zstd 4. What each code means
on the wire is Kafka's (the Java client's `CompressionType` and librdkafka agree):
- gzip: a gzip stream (RFC 1952); concatenated members are read as one, as GZIPInputStream does.
- snappy: xerial's framing (SnappyOutputStream: a 16-byte header, then length-prefixed raw snappy
  blocks); raw snappy without the header is read too, as xerial's SnappyInputStream and
  librdkafka do.
- lz4: one LZ4 frame (the v2 format's; the old broken header checksum was only for magic 0/1),
  written with Kafka's settings: 64 KiB independent blocks, no content size.
- zstd: one zstd frame.

`decompressed_size(code, payload, limit)` counts what a payload decompresses to a chunk at a time,
holding at most one chunk, and stops once the count passes `limit`: the produce-time check of a
compressed batch against max.message.bytes, which must not itself inflate a bomb.
`decompress(code, payload, max_bytes)` never produces (nor, for the frames that declare their
size, allocates) more than `max_bytes`: a payload that would is refused as CorruptRecordError, so a
small batch cannot expand into all of a broker's memory.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from typing import Iterator

import cramjam
import lz4.frame
import zstandard

from kraft.log.errors import CorruptRecordError, InvalidRecordError

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

# codec name (the producer's compression.type) -> attribute code
CODES: dict[str, int] = {"none": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}
NAMES: dict[int, str] = {code: name for name, code in CODES.items()}

# xerial's SnappyOutputStream: magic, then format version 1 and minimum compatible version 1
_XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
_XERIAL_MAGIC = _XERIAL_HEADER[:8]
_XERIAL_BLOCK = 32 * 1024  # SnappyOutputStream's default block size
_BLOCK_LENGTH = struct.Struct(">i")


def name(code: int) -> str:
    """The codec's name; InvalidRecordError for a code no codec has (5-7)."""
    try:
        return NAMES[code]
    except KeyError:
        raise InvalidRecordError(f"unsupported compression code {code}") from None


def compress(code: int, data: bytes | bytearray | memoryview) -> bytes:
    """`data` compressed with codec `code`, in Kafka's wire form (see the module doc)."""
    if code == NONE:
        return bytes(data)
    if code == ZSTD:
        return zstandard.compress(data)
    if code == LZ4:
        return lz4.frame.compress(
            data, block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False, store_size=False
        )
    if code == GZIP:
        return gzip.compress(data, compresslevel=6)
    if code == SNAPPY:
        return _xerial_compress(memoryview(data))
    raise InvalidRecordError(f"unsupported compression code {code}")


def decompress(code: int, payload: bytes | bytearray | memoryview, max_bytes: int) -> bytes | memoryview:
    """`payload` decompressed with codec `code`, at most `max_bytes` long. Raises
    CorruptRecordError for a payload that is malformed, truncated or would exceed `max_bytes`,
    InvalidRecordError for an unknown code. Code 0 returns `payload` itself."""
    if code == NONE:
        return payload
    decoder = _DECODERS.get(code)
    if decoder is None:
        raise InvalidRecordError(f"unsupported compression code {code}")
    try:
        out = decoder(payload, max_bytes)
    except _TooLarge:
        raise CorruptRecordError(
            f"{NAMES[code]} payload decompresses to more than {max_bytes} bytes"
        ) from None
    except (zstandard.ZstdError, cramjam.DecompressionError, RuntimeError, zlib.error, ValueError) as e:
        raise CorruptRecordError(f"cannot decompress {NAMES[code]} payload: {e}") from e
    if len(out) > max_bytes:
        raise CorruptRecordError(f"{NAMES[code]} payload decompresses to more than {max_bytes} bytes")
    return out


class _TooLarge(Exception):
    pass


_COUNT_CHUNK = 64 * 1024


def decompressed_size(code: int, payload: bytes | bytearray | memoryview, limit: int) -> int:
    """The length of `payload` decompressed with codec `code`, counted a chunk at a time and no
    further than past `limit` (the answer is then larger than `limit`). Raises CorruptRecordError
    for a malformed payload (a truncated stream is counted as far as it goes), InvalidRecordError
    for an unknown code."""
    if code == NONE:
        return len(payload)
    if code not in _DECODERS:
        raise InvalidRecordError(f"unsupported compression code {code}")
    size = 0
    try:
        for chunk_size in _chunk_sizes(code, memoryview(payload)):
            size += chunk_size
            if size > limit:
                break
    except (zstandard.ZstdError, cramjam.DecompressionError, RuntimeError, zlib.error, ValueError) as e:
        raise CorruptRecordError(f"cannot decompress {NAMES[code]} payload: {e}") from e
    return size


def _chunk_sizes(code: int, payload: memoryview) -> Iterator[int]:
    if code == ZSTD:
        reader = zstandard.ZstdDecompressor().stream_reader(payload)
        while chunk := reader.read(_COUNT_CHUNK):
            yield len(chunk)
    elif code == LZ4:
        lz4_stream = lz4.frame.LZ4FrameDecompressor()
        chunk = lz4_stream.decompress(payload, max_length=_COUNT_CHUNK)
        while chunk:
            yield len(chunk)
            if lz4_stream.eof or lz4_stream.needs_input:
                return
            chunk = lz4_stream.decompress(b"", max_length=_COUNT_CHUNK)
    elif code == GZIP:
        data: bytes | memoryview = payload
        while data:  # one pass per gzip member
            gzip_stream = zlib.decompressobj(wbits=31)
            chunk = gzip_stream.decompress(data, _COUNT_CHUNK)
            while chunk:
                yield len(chunk)
                if gzip_stream.eof:
                    break
                chunk = gzip_stream.decompress(gzip_stream.unconsumed_tail, _COUNT_CHUNK)
            data = gzip_stream.unused_data
    else:  # snappy: each raw block declares its length, which is what decompressing it makes
        for block in _snappy_blocks(payload):
            yield cramjam.snappy.decompress_raw_len(block)


def _snappy_blocks(view: memoryview) -> Iterator[memoryview]:
    """The raw snappy blocks of a xerial-framed payload, or the payload itself when it is raw."""
    if view[:8] != _XERIAL_MAGIC:
        yield view
        return
    if len(view) < len(_XERIAL_HEADER):
        raise ValueError("truncated xerial snappy header")
    pos = len(_XERIAL_HEADER)
    while pos < len(view):
        if len(view) - pos < _BLOCK_LENGTH.size:
            raise ValueError("truncated xerial snappy block length")
        (length,) = _BLOCK_LENGTH.unpack_from(view, pos)
        pos += _BLOCK_LENGTH.size
        if length < 0 or pos + length > len(view):
            raise ValueError(f"xerial snappy block of {length} bytes overruns the payload")
        yield view[pos:pos + length]
        pos += length


def _gzip(payload: bytes | bytearray | memoryview, max_bytes: int) -> bytes:
    out = bytearray()
    data: bytes | bytearray | memoryview = payload
    while True:  # one pass per gzip member
        stream = zlib.decompressobj(wbits=31)
        # zlib grows its output block by block and stops at max_length (0 would mean unbounded)
        out += stream.decompress(data, max_bytes + 1 - len(out))
        if len(out) > max_bytes:
            raise _TooLarge
        if not stream.eof:
            raise ValueError("truncated gzip stream")
        data = stream.unused_data
        if not data:
            return bytes(out)


def _lz4(payload: bytes | bytearray | memoryview, max_bytes: int) -> bytes:
    stream = lz4.frame.LZ4FrameDecompressor()
    out = stream.decompress(payload, max_length=max_bytes + 1)
    if len(out) > max_bytes:
        raise _TooLarge
    if not stream.eof:
        raise ValueError("truncated lz4 frame")
    if stream.unused_data:
        raise ValueError(f"{len(stream.unused_data)} bytes after the lz4 frame")
    return out


def _zstd(payload: bytes | bytearray | memoryview, max_bytes: int) -> bytes:
    # zstandard allocates a frame's declared content size and ignores max_output_size then:
    # check the declaration first (-1: not declared, and max_output_size bounds the output)
    declared = zstandard.frame_content_size(payload)
    if declared > max_bytes:
        raise _TooLarge
    return zstandard.ZstdDecompressor().decompress(payload, max_output_size=max_bytes)


def _snappy(payload: bytes | bytearray | memoryview, max_bytes: int) -> bytes:
    out = bytearray()
    for block in _snappy_blocks(memoryview(payload)):
        out += _snappy_raw(block, max_bytes - len(out))
    return bytes(out)


def _snappy_raw(block: memoryview, max_bytes: int) -> bytes:
    # a raw snappy block starts with its uncompressed length: refuse before allocating it
    if cramjam.snappy.decompress_raw_len(block) > max_bytes:
        raise _TooLarge
    return bytes(cramjam.snappy.decompress_raw(block))


def _xerial_compress(data: memoryview) -> bytes:
    parts = [_XERIAL_HEADER]
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[start:start + _XERIAL_BLOCK]))
        parts += (_BLOCK_LENGTH.pack(len(block)), block)
    return b"".join(parts)


_DECODERS = {GZIP: _gzip, SNAPPY: _snappy, LZ4: _lz4, ZSTD: _zstd}
