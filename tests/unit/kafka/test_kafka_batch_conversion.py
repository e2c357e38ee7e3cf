"""The Kafka listener's Produce handler hands a producer's v2 batches to the log as sent (no
conversion); Fetch serves stored v2 batches as they are and converts a large answer's kraft
batches (every record decoded and re-encoded) in a thread, leaving the event loop free. Over the
real handlers and authorization, with a records service below them that keeps what it was given."""

from __future__ import annotations

import asyncio
import datetime
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from kraft.kafka.apis.batches import INLINE_BYTES, to_client
from kraft.kafka.apis.fetch_api import fetch
from kraft.kafka.apis.produce_api import produce
from kraft.kafka.entities import build
from kraft.log import kafka_batch
from kraft.server.authorization import Authorization
from kraft.server.quotas import Quotas
from kraft.server.record_apis import FetchRequest, FetchResult, ProduceResult
from kraft.server.records import FetchPartitionResult, ProduceEntry, ProducePartitionResult
from kraft.server.request_context import RequestContext
from kraft.server.services import BrokerServices

CTX = RequestContext("User:alice", "10.0.0.8", "PLAINTEXT", client_id="app")
PARTITIONS = 4
# each partition's batch is bigger than INLINE_BYTES: the conversion takes many loop turns
BATCH = kafka_batch.build_batch([(None, os.urandom(1000), (), 1_700_000_000_000)
                                 for _ in range(INLINE_BYTES // 1000 + 1)])
KRAFT_BATCH = kafka_batch.to_kraft(BATCH)  # the same records written over HTTP


class LoopTurns:
    """Counts the times another task ran on the loop."""

    def __init__(self) -> None:
        self.turns = 0

    async def count(self) -> None:
        while True:
            self.turns += 1
            await asyncio.sleep(0)


class Records:
    def __init__(self, loop_turns: LoopTurns, stored: bytes = KRAFT_BATCH) -> None:
        self.loop_turns = loop_turns
        self.stored = stored
        self.appended: list[ProduceEntry] = []
        self.turns_when_called = -1

    async def produce(self, ctx: RequestContext, entries: list[ProduceEntry], acks: int,
                      timeout_ms: int, transactional_id: str | None = None) -> ProduceResult:
        self.turns_when_called = self.loop_turns.turns  # the conversion was before
        self.appended += entries
        return ProduceResult([ProducePartitionResult(e.topic, e.partition, 0, 0) for e in entries], 0)

    async def fetch(self, ctx: RequestContext, request: FetchRequest) -> FetchResult:
        stored = self.stored
        self.turns_when_called = self.loop_turns.turns  # the conversion comes after
        return FetchResult([FetchPartitionResult(e.topic, e.partition, 1, 0, 1, stored)
                            for e in request.entries], 0)


class Throttle:
    def record(self, kind: str, principal: str, client_id: str, value: float, now_ms: int) -> int:
        return 0


def _services(records: Records) -> BrokerServices:
    return BrokerServices(
        node=None, metadata=None, authorization=Authorization(None), quotas=Quotas(Throttle()),  # type: ignore[arg-type]
        records=records, topics=None, groups=None, security=None, controller=None,  # type: ignore[arg-type]
        replicas=None, transactions=None)  # type: ignore[arg-type]


async def _counting_loop_turns(records: Records, call: Any) -> Any:
    counter = asyncio.create_task(records.loop_turns.count())
    try:
        return await call
    finally:
        counter.cancel()


async def test_a_produce_hands_the_producers_batches_to_the_log_as_sent() -> None:
    records = Records(LoopTurns())
    answer = await _counting_loop_turns(records, produce(_services(records))(CTX.for_api("Produce", 9), _produce_request()))
    assert [p.error_code for t in answer.responses for p in t.partition_responses] == [ErrorCode.none] * PARTITIONS
    assert [e.records for e in records.appended] == [BATCH] * PARTITIONS


def _fetch_request() -> Any:
    return build(load_request_schema(1, 12), {
        "replica_id": -1, "max_wait": datetime.timedelta(0), "min_bytes": 1, "max_bytes": 2**31 - 1,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": (),
        "topics": [{"topic": "t", "partitions": [{
            "partition": p, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
            "log_start_offset": -1, "partition_max_bytes": 1 << 24} for p in range(PARTITIONS)]}]})


async def test_a_fetch_serves_stored_v2_batches_as_they_are() -> None:
    records = Records(LoopTurns(), stored=BATCH + KRAFT_BATCH[:100])  # a cut trailing batch is left out
    answer = await fetch(_services(records))(CTX.for_api("Fetch", 12), _fetch_request())
    assert [p.records for t in answer.responses for p in t.partitions] == [BATCH] * PARTITIONS
    assert to_client(BATCH) is BATCH  # not even copied


def test_a_mixed_answer_converts_only_the_kraft_batches() -> None:
    assert to_client(BATCH + KRAFT_BATCH + BATCH) == BATCH * 3


async def test_a_large_fetch_answer_is_converted_off_the_event_loop() -> None:
    records = Records(LoopTurns())
    answer = await _counting_loop_turns(records, fetch(_services(records))(CTX.for_api("Fetch", 12), _fetch_request()))
    assert [p.records for t in answer.responses for p in t.partitions] == [BATCH] * PARTITIONS
    assert records.loop_turns.turns > records.turns_when_called + 1  # others ran while it was converted


async def test_a_large_answer_of_v2_batches_is_served_without_a_thread_hop() -> None:
    """Nothing to convert, whatever the answer's size (PARTITIONS batches over INLINE_BYTES each):
    the handler answers in the same loop turn as the read."""
    records = Records(LoopTurns(), stored=BATCH)
    answer = await _counting_loop_turns(records, fetch(_services(records))(CTX.for_api("Fetch", 12), _fetch_request()))
    assert [p.records for t in answer.responses for p in t.partitions] == [BATCH] * PARTITIONS
    assert records.loop_turns.turns == records.turns_when_called  # no other task ran after the read


# In a fresh interpreter (aiokafka not imported yet): the first Produce request, while it is
# handled, starts the import of aiokafka's record codec; the import runs in another thread than
# the event loop's, once, and the codec ends up loaded.
_FIRST_PRODUCE = """
import asyncio, sys, threading, time
sys.path.insert(0, sys.argv[1])
import test_kafka_batch_conversion as t
from kraft.log import kafka_fast_parse

assert "aiokafka" not in sys.modules
importers = []

class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "aiokafka":
            importers.append(threading.current_thread() is threading.main_thread())
        return None

sys.meta_path.insert(0, Watch())

async def main():
    records = t.Records(t.LoopTurns())
    for _ in range(2):
        await t.produce(t._services(records))(t.CTX.for_api("Produce", 9), t._produce_request())
    deadline = time.monotonic() + 60
    while not kafka_fast_parse.loaded():
        assert time.monotonic() < deadline, "aiokafka's codec was never loaded"
        await asyncio.sleep(0.01)

asyncio.run(main())
print(importers)
"""


def _produce_request() -> Any:
    return build(load_request_schema(0, 9), {
        "transactional_id": None, "acks": -1, "timeout": 1000,
        "topic_data": [{"name": "t", "partition_data": [{"index": p, "records": BATCH} for p in range(PARTITIONS)]}]})


def test_the_first_produce_loads_the_record_codec_off_the_event_loop() -> None:
    proc = subprocess.run([sys.executable, "-c", _FIRST_PRODUCE, str(Path(__file__).parent)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["[False]"]  # imported once, not on the loop's thread
