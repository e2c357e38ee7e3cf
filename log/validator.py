"""LogValidator: checks every batch of an incoming blob before anything is appended, then stamps it.

A blob may mix kraft's batches and Kafka's RecordBatch v2 (magic 2): both are stored as sent, and
this is where the rules dispatch on the magic. A producer's v2 batch gets Kafka's LogValidator
for magic 2 (`kafka_batch.validate_for_append`: every record parsed, offset deltas, keys on
compacted topics, CreateTime within message.timestamp.before/after.max.ms, the header's max
timestamp corrected) after the header rules both formats share; a kraft batch gets those below.

One place for Kafka's LogValidator rules: framing and CRC (`validate_stored`), batch size against
max.message.bytes, record count and offset deltas, supported compression, no control batches
from producers (transaction markers are the leader's, `log/control.py`; a replicated one must hold
a readable marker), keys on compacted topics. A request is all-or-nothing: the first bad
batch rejects the whole blob. A topic whose compression.type names a codec gets the producer's
batches in that codec (recompressed here, as Kafka's LogValidator does; `producer` keeps them byte
for byte). The leader then stamps offsets and its epoch (and LogAppendTime when configured); a
follower keeps what the leader stamped, so only offset order is checked.

A producer's compressed batch must fit in max.message.bytes decompressed too (a 3 KB zstd batch of
100 MB of zeros made every JSON read of it allocate a gigabyte): its payload is decompressed a
chunk at a time and counted, never held, and counting stops at the bound. An uncompressed batch
is not decoded: its header's size is its size. Nothing else here decodes records except the key
check on compacted topics.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Sequence

from kraft.log import kafka_batch
from kraft.log.batch import (
    COMPRESSION_CODES,
    MAGIC_V2,
    NO_TIMESTAMP,
    BatchHeader,
    decode_records,
    decompressed_size,
    iter_batches,
    recompress,
    set_log_append_time,
    stamp,
    validate_stored,
)
from kraft.log.config import LogConfig
from kraft.log.control import read_marker
from kraft.log.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
)

SUPPORTED_COMPRESSION_CODES = frozenset(COMPRESSION_CODES.values())


@dataclass(frozen=True)
class ValidatedBatches:
    """An incoming blob whose batches all passed validation, with their positions and headers."""

    buffer: bytes | bytearray | memoryview  # writable when it came from a producer (stamped in place)
    batches: tuple[tuple[int, BatchHeader], ...]
    record_count: int
    max_timestamp: int

    @property
    def size_in_bytes(self) -> int:
        return len(self.buffer)

    @property
    def first_offset(self) -> int:
        return self.batches[0][1].base_offset

    @property
    def last_offset(self) -> int:
        return self.batches[-1][1].last_offset

    def subset(self, keep: Sequence[bool]) -> ValidatedBatches:
        """The batches whose `keep` flag is set, copied into a buffer of their own."""
        buffer = bytearray()
        batches = []
        record_count = 0
        max_timestamp = -1
        for (pos, header), kept in zip(self.batches, keep, strict=True):
            if kept:
                batches.append((len(buffer), header))
                buffer += self.buffer[pos:pos + header.size_in_bytes]
                record_count += header.record_count
                max_timestamp = max(max_timestamp, header.max_timestamp)
        return ValidatedBatches(buffer, tuple(batches), record_count, max_timestamp)


def _writable(data: bytes | bytearray | memoryview) -> bool:
    return isinstance(data, bytearray) or (isinstance(data, memoryview) and not data.readonly)


class LogValidator:
    def __init__(self, config: LogConfig) -> None:
        self.config = config

    def validate_for_leader(
        self, data: bytes | bytearray | memoryview, now_ms: int | None = None
    ) -> ValidatedBatches:
        """Producer batches: every rule, including last_offset_delta == record_count - 1; then
        each batch not already in the topic's compression.type is recompressed to it. `now_ms`
        (default: the clock) bounds v2 batches' CreateTime timestamps."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        validated = self._validate(data, from_producer=True, now_ms=now)
        target = self.config.target_compression
        if target is None or all(h.compression == target for _, h in validated.batches):
            return validated  # the fast path: stored byte for byte as the producer sent it
        return self._recompress(validated, COMPRESSION_CODES[target])

    def validate_for_follower(
        self, data: bytes | bytearray | memoryview, log_end_offset: int
    ) -> ValidatedBatches:
        """Replicated batches: framing, CRC and size, plus offsets increasing from
        `log_end_offset` (compacted batches may have gaps, so deltas may exceed the count)."""
        validated = self._validate(data, from_producer=False)
        expected = log_end_offset
        for _, header in validated.batches:
            if header.base_offset < expected:
                raise InvalidRecordError(
                    f"replicated batch at offset {header.base_offset} is below the expected "
                    f"offset {expected}"
                )
            expected = header.next_offset
        return validated

    def assign_offsets(
        self, validated: ValidatedBatches, first_offset: int, leader_epoch: int, now_ms: int
    ) -> ValidatedBatches:
        """Stamps consecutive offsets from `first_offset` and the leader epoch in place (and the
        append time for LogAppendTime topics); returns the stamped batches' headers."""
        buf = validated.buffer
        next_offset = first_offset
        stamped = []
        max_timestamp = -1
        for pos, header in validated.batches:
            stamp(buf, pos, next_offset, leader_epoch)
            if self.config.log_append_time:
                set_log_append_time(buf, pos, header.size_in_bytes, now_ms)
            new_header = BatchHeader.parse(buf, pos)
            stamped.append((pos, new_header))
            max_timestamp = max(max_timestamp, new_header.max_timestamp)
            next_offset = new_header.next_offset
        return ValidatedBatches(buf, tuple(stamped), validated.record_count, max_timestamp)

    def _recompress(self, validated: ValidatedBatches, code: int) -> ValidatedBatches:
        buffer = bytearray()
        batches = []
        for pos, header in validated.batches:
            if header.compression_code != code:
                batch = recompress(validated.buffer, pos, header, code)
                header = BatchHeader.parse(batch)
                self._check_size(header)  # Kafka checks the size it stores
            else:
                batch = validated.buffer[pos:pos + header.size_in_bytes]
            batches.append((len(buffer), header))
            buffer += batch
        return ValidatedBatches(buffer, tuple(batches), validated.record_count, validated.max_timestamp)

    def _check_size(self, header: BatchHeader) -> None:
        if header.size_in_bytes > self.config.max_message_bytes:
            raise RecordTooLargeError(
                f"batch of {header.size_in_bytes} bytes exceeds max.message.bytes "
                f"{self.config.max_message_bytes}"
            )

    def _validate(
        self, data: bytes | bytearray | memoryview, from_producer: bool, now_ms: int = 0
    ) -> ValidatedBatches:
        """A producer's batches are stamped in place later: a writable buffer (a bytearray, or
        a writable memoryview of one: the request body) is taken over as it is, anything else
        copied once. A follower's batches are stored as they are."""
        if len(data) == 0:
            raise InvalidRecordError("no record batches in the request")
        buf = data if not from_producer or _writable(data) else bytearray(data)
        batches = []
        changed: dict[int, bytes | bytearray | memoryview] = {}  # position -> the v2 batch to store instead
        end = 0
        for pos, _ in iter_batches(buf):
            header = validate_stored(buf, pos)
            self._check_batch(buf, pos, header, from_producer)
            end = pos + header.size_in_bytes
            if from_producer and header.magic == MAGIC_V2:
                view = memoryview(buf)[pos:end]
                checked = kafka_batch.validate_for_append(view, self.config, now_ms, framed=header)
                if checked is not view:
                    changed[pos] = checked
            batches.append((pos, header))
        if end != len(buf):
            raise CorruptRecordError(
                f"{len(buf) - end} trailing bytes after the last complete batch"
            )
        if changed:
            buf, batches = _replaced(buf, batches, changed)
        return ValidatedBatches(buf, tuple(batches), sum(h.record_count for _, h in batches),
                                max((h.max_timestamp for _, h in batches), default=-1))

    def _check_batch(self, buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader, from_producer: bool) -> None:
        self._check_size(header)
        if header.record_count <= 0:
            raise InvalidRecordError(f"batch at position {pos} has {header.record_count} records")
        if from_producer:
            if header.last_offset_delta != header.record_count - 1:
                raise InvalidRecordError(
                    f"batch at position {pos}: last_offset_delta {header.last_offset_delta} "
                    f"!= record_count - 1 ({header.record_count - 1})"
                )
            if header.is_control:
                raise InvalidRecordError("clients are not allowed to write control records")
            if header.is_transactional and header.producer_id < 0:
                raise InvalidRecordError(f"batch at position {pos} is transactional without a producer id")
        elif header.last_offset_delta < header.record_count - 1:
            raise InvalidRecordError(
                f"batch at position {pos}: last_offset_delta {header.last_offset_delta} "
                f"< record_count - 1 ({header.record_count - 1})"
            )
        if header.compression_code not in SUPPORTED_COMPRESSION_CODES:
            raise InvalidRecordError(f"unsupported compression code {header.compression_code}")
        if header.is_control:
            read_marker(buf, pos)  # the producer state reads it after the append: it must be readable
        if from_producer and header.compression_code != 0:
            limit = self.config.max_message_bytes
            if decompressed_size(buf, pos, header, limit) > limit:
                raise RecordTooLargeError(
                    f"compressed batch of {header.size_in_bytes} bytes exceeds max.message.bytes "
                    f"{limit} decompressed"
                )
        if from_producer and min(header.base_timestamp, header.max_timestamp) < NO_TIMESTAMP:
            raise InvalidTimestampError(
                f"batch at position {pos} has a negative timestamp other than {NO_TIMESTAMP}"
            )
        if from_producer and self.config.compact and header.magic != MAGIC_V2:  # v2: validate_for_append
            # Kafka rejects keyless records on compacted topics; only these topics pay a decode.
            if any(r.key is None for r in decode_records(buf, pos)):
                raise InvalidRecordError("compacted topic cannot accept a record without a key")


def _replaced(
    buf: bytes | bytearray | memoryview,
    batches: list[tuple[int, BatchHeader]],
    changed: dict[int, bytes | bytearray | memoryview],
) -> tuple[bytearray, list[tuple[int, BatchHeader]]]:
    """The blob with the batches at the `changed` positions swapped for their replacements."""
    out = bytearray()
    placed = []
    for pos, header in batches:
        batch = changed.get(pos)
        if batch is None:
            batch = buf[pos:pos + header.size_in_bytes]
        else:
            header = BatchHeader.parse(batch)
        placed.append((len(out), header))
        out += batch
    return out, placed
