"""The C-speed parse of produced v2 batches (log/kafka_fast_parse.py) against the Python parser
(log/kafka_batch.py): whatever the batch (generated, written by a real client, or damaged; of any
codec, CreateTime or LogAppendTime), Kafka's LogValidator answers the same with the fast path as
without it, and the fast path is the one taken for the batches real clients send."""

from __future__ import annotations

import subprocess
import sys
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.log import kafka_batch as kb
from kraft.log import kafka_fast_parse as fast
from kraft.log import compression
from kraft.log.batch import TIMESTAMP_TYPE_FLAG, BatchHeader, compute_crc, reframe
from kraft.log.config import LogConfig
from kraft.log.errors import CorruptRecordError, InvalidRecordError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "kafka_batches"
NOW = 1_800_000_000_000
CONFIGS = (LogConfig(), LogConfig(cleanup_policy="compact"))

pytestmark = pytest.mark.skipif(not fast.load(), reason="aiokafka's C extensions are not installed")

optional_bytes = st.one_of(st.none(), st.binary(max_size=40))
headers = st.lists(st.tuples(st.text(max_size=6), optional_bytes), max_size=2).map(tuple)
# timestamp deltas around every varint width, NO_TIMESTAMP's -1 and int64's ends included
deltas = st.one_of(st.integers(-70, 70), st.integers(-(2**63), 2**63 - 1), st.sampled_from([0, 2**62, -(2**62)]))
rows = st.lists(st.tuples(deltas, optional_bytes, optional_bytes, headers), min_size=1, max_size=12)


@contextmanager
def _python_only() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fast, "AVAILABLE", False)
        yield


def _verdict(batch: bytes, config: LogConfig) -> object:
    """What validate_for_append answers: the bytes to store, or the error's type and message."""
    try:
        return bytes(kb.validate_for_append(batch, config, NOW))
    except Exception as e:  # noqa: BLE001 - the verdict under comparison
        return type(e), str(e)


def _same_verdicts(batch: bytes) -> None:
    for config in CONFIGS:
        with _python_only():
            expected = _verdict(batch, config)
        assert _verdict(batch, config) == expected


CODECS = sorted(compression.CODES.values())  # none, gzip, snappy, lz4, zstd
codecs = st.sampled_from(CODECS)
attributes = st.sampled_from([0, TIMESTAMP_TYPE_FLAG])  # CreateTime, LogAppendTime


def _batch(payload: bytes, count: int, base_timestamp: int = NOW, code: int = 0, attributes: int = 0) -> bytes:
    """A producer's v2 batch of `count` records around `payload` (compressed with `code`), with a
    good CRC."""
    header = BatchHeader(0, 0, -1, 2, 0, attributes, count - 1, base_timestamp, base_timestamp, -1, -1, -1, count)
    return reframe(header, payload, code)


def _payload(rows: list[tuple[int, bytes | None, bytes | None, tuple]]) -> bytes:
    return bytes(kb.encode_records([(i, td, k, v, h) for i, (td, k, v, h) in enumerate(rows)]))


@settings(max_examples=300, deadline=None)
@given(rows=rows, base=st.one_of(st.just(NOW), st.integers(-(2**63), 2**63 - 1)), code=codecs, attributes=attributes)
def test_well_formed_batches_parse_alike(rows, base, code, attributes) -> None:
    """A canonical records section, of every codec and timestamp type: the fast path gives the
    Python parser's columns (or leaves the batch to it), and the verdicts agree."""
    batch = _batch(_payload(rows), len(rows), base, code, attributes)
    header = kb.validate_framing(batch)
    got = fast.timestamp_deltas_and_keys(batch, header)
    python = [(td, k) for _, td, k, _, _ in kb._rows(batch, 0, header, 1 << 30)]
    if got is not None:
        assert list(zip(*got)) == python
    elif max(abs(td) for td, *_ in rows) <= 70 and base == NOW:
        pytest.fail("the fast path refused a canonical batch with small timestamps")
    _same_verdicts(batch)


@settings(max_examples=500, deadline=None)
@given(rows=rows, data=st.data(), code=codecs, attributes=attributes)
def test_damaged_records_sections_get_the_same_verdict(rows, data, code, attributes) -> None:
    """Bytes of the records section replaced, cut or added before it is compressed (the CRC made
    to match, so the records are what is judged), and the record count off by one or two."""
    payload = bytearray(_payload(rows))
    for _ in range(data.draw(st.integers(1, 4))):
        kind = data.draw(st.sampled_from(["replace", "cut", "insert"]))
        at = data.draw(st.integers(0, max(0, len(payload) - 1)))
        if kind == "replace" and payload:
            payload[at] = data.draw(st.integers(0, 255))
        elif kind == "cut":
            del payload[at:at + data.draw(st.integers(1, 3))]
        else:
            payload[at:at] = data.draw(st.binary(min_size=1, max_size=3))
    count = max(1, len(rows) + data.draw(st.sampled_from([0, 0, 0, -1, 1, 2])))
    _same_verdicts(_batch(bytes(payload), count, code=code, attributes=attributes))


@settings(max_examples=300, deadline=None)
@given(rows=rows, data=st.data(), code=st.sampled_from(CODECS[1:]))
def test_damaged_compressed_payloads_get_the_same_verdict(rows, data, code) -> None:
    """Bytes of the compressed payload itself replaced or cut under a good CRC: a payload that
    no longer decompresses, or decompresses to other records."""
    batch = _batch(_payload(rows), len(rows), code=code)
    header = kb.validate_framing(batch)
    body = bytearray(batch[61:])
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(body) - 1))
        if data.draw(st.booleans()):
            body[at] = data.draw(st.integers(0, 255))
        else:
            del body[at:]
            if not body:
                break
    _same_verdicts(bytes(_rebuilt(header, bytes(body))))


def _rebuilt(header: BatchHeader, body: bytes) -> bytes:
    """`header`'s batch around the (compressed) `body` as it is, length and CRC made to match."""
    out = bytearray(reframe(header, b"", 0)[:61] + body)
    out[8:12] = (len(out) - 12).to_bytes(4, "big")
    out[21:23] = header.attributes.to_bytes(2, "big")
    out[17:21] = compute_crc(out, 0, len(out)).to_bytes(4, "big")
    return bytes(out)


def _record(body: bytes) -> bytes:
    out = bytearray()
    kb._write_varint(out, len(body))
    return bytes(out + body)


# records aiokafka's parser takes but Kafka's (and the Python parser) refuse, or read otherwise
LENIENT = {
    # record attributes are an int8 (Kafka ignores them); aiokafka reads a varint, so 0x80 makes
    # it read every later field from the wrong byte
    "attributes-varint": _record(b"\x80\x00\x00\x01\x02v\x00"),
    # a key length of -5: aiokafka reads null, the Python parser refuses it
    "negative-length": _record(b"\x00\x00\x00\x09\x02v\x00"),
    # an offset delta in six bytes (Kafka's varints are five at most)
    "long-varint": _record(b"\x00\x00\x80\x80\x80\x80\x80\x00\x01\x02v\x00"),
}


@pytest.mark.parametrize("name", sorted(LENIENT))
def test_what_aiokafka_alone_would_take_is_left_to_the_python_parser(name: str) -> None:
    batch = _batch(LENIENT[name], 1)
    from aiokafka.record._crecords.default_records import DefaultRecordBatch

    if name != "attributes-varint":
        assert len(list(DefaultRecordBatch(batch))) == 1  # aiokafka alone takes it
    assert fast.timestamp_deltas_and_keys(batch, kb.validate_framing(batch)) is None
    _same_verdicts(batch)


@pytest.mark.parametrize(
    "name,batch",
    [
        ("offset-delta", _batch(bytes(kb.encode_records([(0, 0, None, b"a", ()), (2, 0, None, b"b", ())])), 2)),
        ("truncated-varint", _batch(_payload([(0, None, b"v", ())])[:-3] + b"\x80\x80", 1)),
        ("count-short", _batch(_payload([(0, None, b"v", ())] * 3), 2)),
        ("count-long", _batch(_payload([(0, None, b"v", ())] * 3), 4)),
        ("crc", _batch(_payload([(0, None, b"v", ())]), 1)[:-1] + b"w"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_malformed_batches_are_refused_alike(name: str, batch: bytes) -> None:
    with pytest.raises(Exception) as refused:
        kb.validate_for_append(batch, LogConfig(), NOW)
    assert isinstance(refused.value, (CorruptRecordError, InvalidRecordError))
    _same_verdicts(batch)


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.bin")), ids=lambda p: p.stem)
@pytest.mark.parametrize("log_append_time", [False, True], ids=["CreateTime", "LogAppendTime"])
def test_real_clients_batches_take_the_fast_path(path: Path, log_append_time: bool) -> None:
    """Every codec each client writes; and the same batch as LogAppendTime (as a mirror might
    send it)."""
    data = path.read_bytes()
    if log_append_time:
        header = kb.validate_framing(data)
        data = _rebuilt(replace(header, attributes=header.attributes | TIMESTAMP_TYPE_FLAG), data[61:])
    header = kb.validate_framing(data)
    got = fast.timestamp_deltas_and_keys(data, header)
    assert got is not None
    assert list(zip(*got)) == [(td, k) for _, td, k, _, _ in kb._rows(data, 0, header, 1 << 30)]
    _same_verdicts(data)


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*-none.bin")), ids=lambda p: p.stem)
def test_real_clients_batches_flipped_get_the_same_verdict(path: Path) -> None:
    """Each third byte of a client's records section changed in turn under a good CRC."""
    data = path.read_bytes()
    header = kb.validate_framing(data)
    payload = bytearray(data[61:])
    for at in range(0, len(payload), 3):
        damaged = bytearray(payload)
        damaged[at] ^= 0x81
        _same_verdicts(reframe(header, bytes(damaged), 0))


# In a fresh interpreter: validating produced batches never imports aiokafka (its client, tens of
# milliseconds of CPU, would run on the event loop inside the first append); `load` does, and the
# batches after it take the fast path.
_NO_IMPORT_ON_VALIDATE = """
import sys
from kraft.log import kafka_batch as kb, kafka_fast_parse as fast
from kraft.log.config import LogConfig
batch = kb.build_batch([(None, b"v", (), 1_800_000_000_000)] * 3)
kb.validate_for_append(batch, LogConfig(), 1_800_000_000_000)
assert "aiokafka" not in sys.modules, "validating imported aiokafka"
assert fast.timestamp_deltas_and_keys(batch, kb.validate_framing(batch)) is None
assert fast.load() and "aiokafka" in sys.modules
assert fast.timestamp_deltas_and_keys(batch, kb.validate_framing(batch)) is not None
"""


def test_validation_never_imports_aiokafka_and_load_does() -> None:
    proc = subprocess.run([sys.executable, "-c", _NO_IMPORT_ON_VALIDATE], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
