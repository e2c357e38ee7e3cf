"""Produce (key 0), v3 and later (v2 record batches, magic 2): each partition's batches go to the
Produce service as they are, to be stored as sent (the log's validator applies Kafka's
LogValidator rules for magic 2: log/validator.py). As Kafka answers: a partition whose batches do
not check out gets its error, and the Produce service answers the others (authorized there,
once: a topic the principal may not Write gets TOPIC_AUTHORIZATION_FAILED on its partitions and
the other topics are appended); acks=0 is answered with nothing (the client expects no answer).
A transactional produce (a transactional id: its batches carry the transactional bit, producer id
and epoch, checked by the partition's producer state, KIP-890's verification included) needs
Write on the transactional id, else every partition answers
TRANSACTIONAL_ID_AUTHORIZATION_FAILED; so does a produce of transactional batches without a
transactional id (the service's `transactional_refusal`).

The first Produce request starts the import of aiokafka's record codec in a thread, for the
records' parse at C speed (log/kafka_fast_parse.py); the batches that come before it is loaded are
parsed in Python, so no request waits for that import (the loop still yields the GIL to it in
stretches: docs/benchmarks.md)."""

from __future__ import annotations

import asyncio
from typing import Any

from kraft.kafka.apis.common import Api, as_ms, code, entity, error_of, ms, nested, response_of
from kraft.kafka.entities import timestamp
from kraft.log import kafka_fast_parse
from kraft.server.records import ProduceEntry, ProducePartitionResult
from kraft.server.request_context import RequestContext
from kraft.server.services import BrokerServices

PRODUCE_KEY = 0
NO_RESPONSE = None  # acks=0: the channel sends nothing back


def produce(services: BrokerServices) -> Any:
    codec_loading: list[asyncio.Future[bool]] = []  # the one import, kept referenced until done

    async def handle(ctx: RequestContext, request: Any) -> Any:
        if not codec_loading:
            codec_loading.append(asyncio.get_running_loop().run_in_executor(None, kafka_fast_parse.load))
        acks, timeout_ms = int(request.acks), as_ms(request.timeout)
        partitions = [(t.name, p) for t in request.topic_data for p in t.partition_data]
        answers: dict[tuple[str, int], ProducePartitionResult] = {}
        entries = []
        for name, p in partitions:
            if not p.records:
                answers[(name, p.index)] = _failed(name, p.index, "INVALID_RECORD", "no record batch")
            else:
                entries.append(ProduceEntry(name, p.index, p.records))
        throttle_ms = 0
        # the service authorizes (the transactional id: the whole request; each topic: its own
        # partitions) and answers each entry
        try:
            result = await services.records.produce(ctx, entries, acks, timeout_ms, request.transactional_id)
        except Exception as e:  # noqa: BLE001 - the request's refusal, every partition's answer
            refusal = error_of(e)
            answers = {(name, p.index): _failed(name, p.index, refusal.error_code, refusal.message)
                       for name, p in partitions}
        else:
            throttle_ms = result.throttle_time_ms
            answers.update(((r.topic, r.partition), r) for r in result.partitions)
        if acks == 0:
            return NO_RESPONSE
        return _response(request, answers, throttle_ms)
    return handle


def _failed(topic: str, partition: int, error: str, message: str | None) -> ProducePartitionResult:
    return ProducePartitionResult(topic, partition, -1, -1, error, message)


def _response(request: Any, answers: dict[tuple[str, int], ProducePartitionResult], throttle_ms: int) -> Any:
    response = response_of(request)
    topic_cls, partition_cls = nested(response, "TopicProduceResponse"), nested(response, "PartitionProduceResponse")
    batch_error_cls = nested(response, "BatchIndexAndErrorMessage") if request.__version__ >= 8 else None
    topics = []
    for topic in request.topic_data:
        partitions = []
        for p in topic.partition_data:
            r = answers[(topic.name, p.index)]
            partitions.append(entity(
                partition_cls, index=p.index, error_code=code(r.error_code), base_offset=r.base_offset,
                log_append_time=None if r.log_append_time < 0 else timestamp(r.log_append_time),
                log_start_offset=r.log_start_offset,
                record_errors=tuple(entity(batch_error_cls, batch_index=e.batch_index,
                                           batch_index_error_message=e.message) for e in r.record_errors)
                if batch_error_cls is not None else (),
                error_message=r.message if r.error_code else None))
        topics.append(entity(topic_cls, name=topic.name, partition_responses=tuple(partitions)))
    return entity(response, responses=tuple(topics), throttle_time=ms(throttle_ms))


APIS = (Api(PRODUCE_KEY, 3, 9, produce, "Produce"),)
