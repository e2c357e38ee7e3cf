"""Control records: Kafka's transaction markers (`EndTransactionMarker`, `ControlRecordType`), pure.

A control batch has the control bit (`CONTROL_FLAG`) and the transactional bit in its attributes,
the producer id and epoch of the transaction it ends, base sequence -1, and one record whose key
is the control record type (version int16 0, type int16: 0 ABORT, 1 COMMIT) and whose value is
the end-transaction marker (version int16 0, coordinator epoch int32), all big-endian, as Kafka
writes them. The key and value bytes are the same in kraft's batches and in Kafka's v2 ones: only
the record framing differs (`log/batch.py`, `log/kafka_batch.py`). The partition leader writes
markers on behalf of the transaction coordinator; producers never can (`log/validator.py`), and
readers never hand a control record to an application. See docs/transactions.md.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kraft.log import kafka_batch
from kraft.log.batch import CONTROL_FLAG, MAGIC, TRANSACTIONAL_FLAG, BatchHeader, Record, encode_batch
from kraft.log.records import decode_records
from kraft.log.errors import CorruptRecordError

ABORT = 0  # Kafka's ControlRecordType ids
COMMIT = 1
CONTROL_ATTRIBUTES = TRANSACTIONAL_FLAG | CONTROL_FLAG
_KEY = struct.Struct(">hh")  # version, type
_VALUE = struct.Struct(">hi")  # version, coordinator epoch
_VERSION = 0


@dataclass(frozen=True)
class EndTransactionMarker:
    control_type: int  # ABORT or COMMIT
    coordinator_epoch: int

    @property
    def is_commit(self) -> bool:
        return self.control_type == COMMIT


def marker_key(control_type: int) -> bytes:
    return _KEY.pack(_VERSION, control_type)


def marker_value(coordinator_epoch: int) -> bytes:
    return _VALUE.pack(_VERSION, coordinator_epoch)


def parse_marker(key: bytes | None, value: bytes | None) -> EndTransactionMarker | None:
    """The marker a control record holds; None for a control type other than ABORT and COMMIT
    (Kafka's other control records end no transaction). Raises CorruptRecordError for a key or
    value too short or of a negative version (a version above 0 is read as 0, as Kafka does)."""
    if key is None or len(key) < _KEY.size:
        raise CorruptRecordError(f"control record key of {0 if key is None else len(key)} bytes: "
                                 f"needs at least {_KEY.size}")
    version, control_type = _KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"control record key version {version}")
    if control_type not in (ABORT, COMMIT):
        return None
    if value is None or len(value) < _VALUE.size:
        raise CorruptRecordError(f"end transaction marker of {0 if value is None else len(value)} "
                                 f"bytes: needs at least {_VALUE.size}")
    version, coordinator_epoch = _VALUE.unpack_from(value)
    if version < 0:
        raise CorruptRecordError(f"end transaction marker version {version}")
    return EndTransactionMarker(control_type, coordinator_epoch)


def build_marker_batch(
    *, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool, timestamp: int,
    base_offset: int = 0, magic: int = MAGIC,
) -> bytes:
    """A control batch ending `producer_id`'s transaction (COMMIT or ABORT), in kraft's format or
    with `magic=2` in Kafka's (MemoryRecords.withEndTransactionMarker)."""
    key, value = marker_key(COMMIT if commit else ABORT), marker_value(coordinator_epoch)
    if magic == kafka_batch.MAGIC_V2:
        return kafka_batch.encode_batch(
            [Record(base_offset, timestamp, key, value)], base_offset=base_offset,
            attributes=CONTROL_ATTRIBUTES, producer_id=producer_id, producer_epoch=producer_epoch)
    return encode_batch([[0, 0, key, value, ()]], base_offset=base_offset, last_offset_delta=0,
                        base_timestamp=timestamp, max_timestamp=timestamp,
                        attributes=CONTROL_ATTRIBUTES, producer_id=producer_id,
                        producer_epoch=producer_epoch)


def read_marker(buf: bytes | bytearray | memoryview, pos: int = 0) -> EndTransactionMarker | None:
    """The marker of the control batch at `pos` (either format, CRC checked); None when it holds
    no record or another control type. Raises CorruptRecordError."""
    header = BatchHeader.parse(buf, pos)
    records = decode_records(buf, pos)
    if not header.is_control:
        raise CorruptRecordError(f"batch at offset {header.base_offset} is not a control batch")
    if not records:
        return None
    return parse_marker(records[0].key, records[0].value)
