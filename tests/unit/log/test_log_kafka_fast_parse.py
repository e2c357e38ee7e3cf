"""The C-speed parse of produced v2 batches (log/kafka_fast_parse.py) against the Python parser
(log/kafka_batch.py): whatever the batch (generated, written by a real client, or damaged), Kafka's
LogValidator answers the same with the fast path as without it, and the fast path is the one
taken for the batches real clients send."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.log import kafka_batch as kb
from kraft.log import kafka_fast_parse as fast
from kraft.log.batch import BatchHeader, reframe
from kraft.log.config import LogConfig
from kraft.log.errors import CorruptRecordError, InvalidRecordError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "kafka_batches"
NOW = 1_800_000_000_000
CONFIGS = (LogConfig(), LogConfig(cleanup_policy="compact"))

pytestmark = pytest.mark.skipif(fast.codec() is None, reason="aiokafka's C extensions are not installed")

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


def _batch(payload: bytes, count: int, base_timestamp: int = NOW) -> bytes:
    """A producer's uncompressed v2 batch of `count` records around `payload`, with a good CRC."""
    header = BatchHeader(0, 0, -1, 2, 0, 0, count - 1, base_timestamp, base_timestamp, -1, -1, -1, count)
    return reframe(header, payload, 0)


def _payload(rows: list[tuple[int, bytes | None, bytes | None, tuple]]) -> bytes:
    return bytes(kb.encode_records([(i, td, k, v, h) for i, (td, k, v, h) in enumerate(rows)]))


@settings(max_examples=300, deadline=None)
@given(rows=rows, base=st.one_of(st.just(NOW), st.integers(-(2**63), 2**63 - 1)))
def test_well_formed_batches_parse_alike(rows, base) -> None:
    """A canonical records section: the fast path gives the Python parser's columns (or leaves
    the batch to it), and the verdicts agree."""
    batch = _batch(_payload(rows), len(rows), base)
    header = kb.validate_framing(batch)
    got = fast.timestamp_deltas_and_keys(batch, header)
    python = [(td, k) for _, td, k, _, _ in kb._rows(batch, 0, header, 1 << 30)]
    if got is not None:
        assert list(zip(*got)) == python
    elif max(abs(td) for td, *_ in rows) <= 70 and base == NOW:
        pytest.fail("the fast path refused a canonical batch with small timestamps")
    _same_verdicts(batch)


@settings(max_examples=500, deadline=None)
@given(rows=rows, data=st.data())
def test_damaged_records_sections_get_the_same_verdict(rows, data) -> None:
    """Bytes of the records section replaced, cut or added (the CRC made to match, so the
    records are what is judged), and the record count off by one or two."""
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
    _same_verdicts(_batch(bytes(payload), count))


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


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*-none.bin")), ids=lambda p: p.stem)
def test_real_clients_batches_take_the_fast_path(path: Path) -> None:
    data = path.read_bytes()
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
