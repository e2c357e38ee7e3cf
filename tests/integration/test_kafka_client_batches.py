"""Batches written by the real Kafka clients (kafka-python, confluent-kafka, aiokafka), every codec,
captured live by the in-process fake broker (tests/kafka_capture.py, which runs on kraft's
sans-I/O protocol core): each one passes kraft's v2 validation as sent and decodes to what was
sent, and converts to kraft's format and back without loss."""

from __future__ import annotations

import time

import pytest

from kafka_capture import CODECS, DRIVERS, CaptureBroker
from kraft.log import kafka_batch
from kraft.log.batch import decode_records
from kraft.log.config import LogConfig


@pytest.mark.parametrize("compression", CODECS)
@pytest.mark.parametrize("client", sorted(DRIVERS))
def test_real_client_batches_validate_and_decode(client: str, compression: str) -> None:
    now = int(time.time() * 1000)
    messages = [(b"key-%d" % i if i % 5 else None, b"value-%d " % i * (1 + i % 40),
                 [("i", b"%d" % i)] if i % 2 else [], now - 5000 + i) for i in range(300)]
    with CaptureBroker() as broker:
        DRIVERS[client](broker.bootstrap, "captured", compression, messages)
    records = []
    for topic, partition, data in broker.batches:
        assert (topic, partition) == ("captured", 0)
        pos = 0
        while pos < len(data):
            header = kafka_batch.validate_framing(data, pos)
            assert header.compression == compression
            batch = data[pos:pos + header.size_in_bytes]
            assert kafka_batch.validate_for_append(batch, LogConfig(), now) is batch
            assert decode_records(kafka_batch.to_kraft(batch)) == kafka_batch.decode_records(batch)
            records += kafka_batch.decode_records(batch)
            pos += header.size_in_bytes
    assert [(r.key, r.value, [tuple(h) for h in r.headers], r.timestamp) for r in records] == [
        (k, v, [tuple(h) for h in hs], ts) for k, v, hs, ts in messages]
