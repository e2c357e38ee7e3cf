"""Test support: a tiny in-process fake Kafka broker that captures real clients' record batches.

It answers ApiVersions, Metadata (itself the leader of partition 0 of every topic asked for) and
Produce (success, capturing each partition's raw records bytes) through kraft's sans-I/O protocol
core (kraft/kafka) and kio's types, on 127.0.0.1 and a free port, in a thread of its own. The
drivers below run kafka-python, confluent-kafka and aiokafka producers against it, so the v2 codec
is tested on the bytes the real clients write.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import threading
import uuid
from collections.abc import Sequence
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.static.primitive import i16, i32, i64

from kraft.kafka.api_versions import ApiVersionsTable
from kraft.kafka.codec import Request
from kraft.kafka.connection import AnswerReady, KafkaConnection
from kraft.kafka.errors import KafkaProtocolError

PRODUCE, FETCH, METADATA, FIND_COORDINATOR, API_VERSIONS = 0, 1, 3, 10, 18
NODE_ID = 0
CLUSTER_ID = "kraft-capture"
# (key, value, headers, timestamp_ms) sent by every driver
Message = tuple[bytes | None, bytes, Sequence[tuple[str, bytes]], int]


def _build(schema: type[Any], **values: Any) -> Any:
    """A kio entity of `schema` from `values`, ignoring fields this version lacks and giving the
    required ones not in `values` their zero (the fake broker answers every version alike)."""
    kwargs = {}
    for field in dataclasses.fields(schema):
        if field.name in values:
            value = values[field.name]
            element = getattr(field.type, "__args__", (None,))[0]
            if isinstance(value, list) and dataclasses.is_dataclass(element):
                value = tuple(_build(element, **v) for v in value)
            elif isinstance(value, list):
                value = tuple(value)
            kwargs[field.name] = value
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            kwargs[field.name] = _zero(field.type)
    return schema(**kwargs)


def _zero(kind: Any) -> Any:
    if getattr(kind, "__origin__", None) is tuple:
        return ()
    if kind is ErrorCode:
        return ErrorCode.none
    if isinstance(kind, type) and issubclass(kind, datetime.timedelta):
        return datetime.timedelta(0)
    if "None" in str(kind):
        return None
    if kind is bool:
        return False
    if kind is str:
        return ""
    if kind is uuid.UUID:
        return uuid.UUID(int=0)
    return 0


class CaptureBroker:
    """`with CaptureBroker() as broker:` then point producers at `broker.bootstrap`;
    `broker.batches` holds `(topic, partition, records bytes)` in arrival order."""

    def __init__(self) -> None:
        self.api_versions = ApiVersionsTable()
        self.api_versions.register(METADATA, 0, 12)
        self.api_versions.register(PRODUCE, 3, 12)  # v13 names topics by id
        # advertised only: librdkafka writes v2 batches to a broker that also has Fetch v4+,
        # and lz4 to one with FindCoordinator (its feature map dates them by those APIs)
        self.api_versions.register(FETCH, 4, 12)
        self.api_versions.register(FIND_COORDINATOR, 0, 6)
        self.batches: list[tuple[str, int, bytes]] = []
        self.port = 0
        self._offsets: dict[tuple[str, int], int] = {}
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="capture-broker", daemon=True)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> CaptureBroker:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the capture broker did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._serve())
        self._loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await self._stop.wait()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = KafkaConnection(self.api_versions)
        try:
            while data := await reader.read(65536):
                for event in connection.receive_data(data):
                    if isinstance(event, AnswerReady):
                        writer.write(event.data)
                        continue
                    response = self._answer(event.request)
                    if response is not None:
                        writer.writelines(connection.send(event.request, response))
                await writer.drain()
        except (KafkaProtocolError, ConnectionError):
            pass
        finally:
            writer.close()

    def _answer(self, request: Request) -> Any:
        schema = load_response_schema(request.api_key, request.api_version)
        if request.api_key == API_VERSIONS:
            return self.api_versions.response(request.api_version)
        if request.api_key == METADATA:
            names = [t.name for t in request.body.topics or ()]
            partition = {"error_code": ErrorCode.none, "partition_index": i32(0), "leader_id": i32(NODE_ID),
                         "leader_epoch": i32(0), "replica_nodes": [i32(NODE_ID)], "isr_nodes": [i32(NODE_ID)]}
            return _build(
                schema, brokers=[{"node_id": i32(NODE_ID), "host": "127.0.0.1", "port": i32(self.port)}],
                cluster_id=CLUSTER_ID, controller_id=i32(NODE_ID),
                topics=[{"error_code": ErrorCode.none, "name": name, "topic_id": uuid.UUID(int=1),
                         "partitions": [partition]} for name in names],
            )
        assert request.api_key == PRODUCE
        responses = []
        for topic in request.body.topic_data:
            partitions = []
            for data in topic.partition_data:
                self.batches.append((topic.name, int(data.index), bytes(data.records or b"")))
                key = (topic.name, int(data.index))
                base = self._offsets.get(key, 0)
                self._offsets[key] = base + 1000
                partitions.append({"index": data.index, "error_code": ErrorCode.none,
                                   "base_offset": i64(base), "log_start_offset": i64(0)})
            responses.append({"name": topic.name, "partition_responses": partitions})
        if request.body.acks == 0:
            return None
        return _build(schema, responses=responses, throttle_time=datetime.timedelta(0))


# -- drivers: each sends `messages` to `topic` with codec `compression` ("none" or Kafka's name) --


def produce_kafka_python(bootstrap: str, topic: str, compression: str, messages: Sequence[Message]) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap, compression_type=None if compression == "none" else compression,
        enable_idempotence=False, linger_ms=50, acks=1,
    )
    try:
        for key, value, headers, ts in messages:
            producer.send(topic, key=key, value=value, headers=list(headers), partition=0, timestamp_ms=ts)
        producer.flush(30)
    finally:
        producer.close(10)


def produce_confluent(bootstrap: str, topic: str, compression: str, messages: Sequence[Message]) -> None:
    from confluent_kafka import Producer

    producer = Producer({
        "bootstrap.servers": bootstrap, "compression.type": compression, "enable.idempotence": False,
        "linger.ms": 50, "acks": 1,
    })
    for key, value, headers, ts in messages:
        producer.produce(topic, key=key, value=value, headers=list(headers), partition=0, timestamp=ts)
    if producer.flush(30) != 0:
        raise RuntimeError("confluent-kafka did not deliver every message")


def produce_aiokafka(bootstrap: str, topic: str, compression: str, messages: Sequence[Message]) -> None:
    from aiokafka import AIOKafkaProducer

    async def run() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, compression_type=None if compression == "none" else compression,
            linger_ms=50, acks=1,
        )
        await producer.start()
        try:
            futures = [await producer.send(topic, key=key, value=value, headers=list(headers), partition=0,
                                           timestamp_ms=ts) for key, value, headers, ts in messages]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()

    asyncio.run(run())


DRIVERS = {"kafka-python": produce_kafka_python, "confluent-kafka": produce_confluent, "aiokafka": produce_aiokafka}


# The messages of the committed fixtures (tests/fixtures/kafka_batches/CLIENT-CODEC.bin): what
# tests/unit/log/test_log_kafka_batch.py expects to decode from them.
FIXTURE_MESSAGES: list[Message] = [
    (None if i % 4 == 3 else b"key-%d" % i, b"value-%d " % i * 12,
     [("trace", b"t-%d" % i), ("n", b"")] if i % 3 == 0 else [], 1_700_000_000_000 + 7 * i)
    for i in range(12)
]
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def write_fixtures(directory: str) -> None:
    """Captures one batch per client and codec into `directory` (run: python tests/kafka_capture.py)."""
    import pathlib

    out = pathlib.Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    for client, drive in DRIVERS.items():
        for compression in CODECS:
            with CaptureBroker() as broker:
                drive(broker.bootstrap, "fixture", compression, FIXTURE_MESSAGES)
            [(_, _, records)] = broker.batches
            (out / f"{client}-{compression}.bin").write_bytes(records)


if __name__ == "__main__":
    import pathlib

    write_fixtures(str(pathlib.Path(__file__).parent / "fixtures" / "kafka_batches"))
