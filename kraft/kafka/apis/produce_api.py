"""Produce (key 0), v3 and later (v2 record batches, magic 2): each partition's batches go to the
Produce service as they are, to be stored as sent (the log's validator applies Kafka's
LogValidator rules for magic 2: log/validator.py). As Kafka answers: a topic the principal may not Write gets TOPIC_AUTHORIZATION_FAILED
on its partitions, a partition whose batches do not check out gets its error, and the others are
appended; acks=0 is answered with nothing (the client expects no answer). A transactional produce
(a transactional id: its batches carry the transactional bit, producer id and epoch, checked by
the partition's producer state, KIP-890's verification included) needs Write on the
transactional id, else every partition answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED; so does a
produce of transactional batches without a transactional id (the Produce service's rule,
`transactional_refusal`, which the HTTP routes apply too)."""

from __future__ import annotations

import asyncio
from typing import Any

from kraft.errors import KraftError
from kraft.kafka.apis.common import Api, as_ms, code, entity, error_of, ms, nested, response_of
from kraft.metadata.acl import TOPIC
from kraft.server.access import NAMED, PRODUCE, rule_of
from kraft.server.record_apis import transactional_refusal
from kraft.server.records import ProduceEntry, ProducePartitionResult
from kraft.server.request_context import RequestContext
from kraft.server.services import BrokerServices

PRODUCE_KEY = 0
_WRITE = rule_of(PRODUCE, TOPIC, NAMED)
NO_RESPONSE = None  # acks=0: the channel sends nothing back


def produce(services: BrokerServices) -> Any:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        acks, timeout_ms = int(request.acks), as_ms(request.timeout)
        names = [t.name for t in request.topic_data]
        tid = request.transactional_id
        # Kafka refuses a transactional produce as a whole without Write on its transactional id
        refused_tid = transactional_refusal(services.authorization, ctx, tid,
                                            (p.records for t in request.topic_data for p in t.partition_data))
        refused = set(services.authorization.refused(ctx, _WRITE, names))
        if refused and refused_tid is None:  # logged and counted once, as the authorizer's denials are
            services.authorization.failure(ctx, _WRITE.operation, TOPIC, sorted(refused))
        answers: dict[tuple[str, int], ProducePartitionResult] = {}
        allowed = []
        for topic in request.topic_data:
            for p in topic.partition_data:
                refusal = refused_tid
                if refusal is None and topic.name in refused:
                    refusal = KraftError("TOPIC_AUTHORIZATION_FAILED", "Topic authorization failed.")
                if refusal is not None:
                    answers[(topic.name, p.index)] = _failed(topic.name, p.index, refusal.error_code, refusal.message)
                else:
                    allowed.append((topic.name, p))
        by_topic: dict[str, list[ProduceEntry]] = {}
        for name, p in allowed:
            if not p.records:
                answers[(name, p.index)] = _failed(name, p.index, "INVALID_RECORD", "no record batch")
            else:
                by_topic.setdefault(name, []).append(ProduceEntry(name, p.index, p.records))
        # one call per topic: a topic's failure as a whole (unknown, not creatable) is its partitions'
        calls = list(by_topic.items())
        outcomes = await asyncio.gather(*(services.records.produce(ctx, entries, acks, timeout_ms, tid)
                                          for _, entries in calls), return_exceptions=True)
        throttle_ms = 0
        for (name, entries), outcome in zip(calls, outcomes):
            if isinstance(outcome, asyncio.CancelledError):
                raise outcome
            if isinstance(outcome, BaseException):
                error = error_of(outcome)
                for e in entries:
                    answers[(name, e.partition)] = _failed(name, e.partition, error.error_code, error.message)
                continue
            throttle_ms = max(throttle_ms, outcome.throttle_time_ms)
            for r in outcome.partitions:
                answers[(r.topic, r.partition)] = r
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
                log_append_time=None, log_start_offset=r.log_start_offset,
                record_errors=tuple(entity(batch_error_cls, batch_index=e.batch_index,
                                           batch_index_error_message=e.message) for e in r.record_errors)
                if batch_error_cls is not None else (),
                error_message=r.message if r.error_code else None))
        topics.append(entity(topic_cls, name=topic.name, partition_responses=tuple(partitions)))
    return entity(response, responses=tuple(topics), throttle_time=ms(throttle_ms))


APIS = (Api(PRODUCE_KEY, 3, 9, produce, "Produce"),)
