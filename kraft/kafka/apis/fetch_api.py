"""Fetch (key 1), consumers only (followers fetch over the HTTP API's replication channel), v4
(isolation level, last stable offset) to v12 (last fetched epoch, diverging epoch). The long poll
(max.wait.ms, min.bytes) is the Fetch service's; a topic the principal may not Read answers
TOPIC_AUTHORIZATION_FAILED on its partitions and the others are read. A read_committed fetch
(isolation level 1) reads up to the last stable offset and is answered the aborted transactions
its records overlap, which the client drops (with the control batches); read_uncommitted reads
to the high watermark. From v7 a fetch may open, use or close an incremental fetch session
(KIP-227, fetch_sessions.py): an incremental answer carries only the partitions that changed."""

from __future__ import annotations

from typing import Any

from kraft.errors import KraftError
from kraft.kafka.apis.batches import to_client_all
from kraft.kafka.apis.common import Api, as_ms, code, entity, ms, nested, response_of
from kraft.kafka.apis.fetch_sessions import (
    FINAL_EPOCH, INITIAL_EPOCH, NO_SESSION, FetchSessionCache, SessionPartition, TopicPartition,
)
from kraft.metadata.acl import TOPIC
from kraft.server.access import FETCH, NAMED, rule_of
from kraft.server.record_apis import FetchRequest
from kraft.server.records import NO_EPOCH, FetchEntry, FetchPartitionResult
from kraft.server.request_context import RequestContext
from kraft.server.services import BrokerServices

FETCH_KEY = 1
_READ = rule_of(FETCH, TOPIC, NAMED)
READ_COMMITTED = 1


def fetch(services: BrokerServices) -> Any:
    sessions = FetchSessionCache()

    async def handle(ctx: RequestContext, request: Any) -> Any:
        response = response_of(request)
        requested = {(t.topic, p.partition): SessionPartition(
            int(p.fetch_offset), int(p.partition_max_bytes), int(getattr(p, "current_leader_epoch", NO_EPOCH)),
            int(getattr(p, "last_fetched_epoch", NO_EPOCH))) for t in request.topics for p in t.partitions}
        session_id, epoch = int(getattr(request, "session_id", NO_SESSION)), int(getattr(request, "session_epoch", -1))
        session, incremental = None, False
        if ctx.api_version >= 7:
            if session_id == NO_SESSION and epoch == INITIAL_EPOCH:
                session = sessions.open(ctx.principal, requested)
            elif session_id != NO_SESSION and epoch == FINAL_EPOCH:
                sessions.close(session_id)
            elif session_id != NO_SESSION:
                try:
                    session = sessions.resume(session_id, epoch, ctx.principal)
                except KraftError as e:
                    return entity(response, throttle_time=ms(0), error_code=code(e.error_code),
                                  session_id=NO_SESSION, responses=())
                forgotten = [(f.topic, int(p)) for f in request.forgotten_topics_data for p in f.partitions]
                sessions.update(session, requested, forgotten)
                incremental = True
        partitions = dict(session.partitions) if session is not None else requested
        refused = set(services.authorization.refused(ctx, _READ, {tp[0] for tp in partitions}))
        if refused:
            services.authorization.failure(ctx, _READ.operation, TOPIC, sorted(refused))
        committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
        entries = [FetchEntry(tp[0], tp[1], part.fetch_offset, part.partition_max_bytes, part.current_leader_epoch,
                              part.last_fetched_epoch, read_committed=committed)
                   for tp, part in partitions.items() if tp[0] not in refused]
        result = await services.records.fetch(ctx, FetchRequest(
            entries, as_ms(request.max_wait), int(request.min_bytes), int(getattr(request, "max_bytes", 2**31 - 1))))
        read = {(r.topic, r.partition): r for r in result.partitions}
        partition_cls = nested(response, "PartitionData")
        answered: list[tuple[TopicPartition, FetchPartitionResult | None]] = []
        for tp in partitions:
            r = read.get(tp)
            if session is not None:
                answer = (-1, -1, -1) if r is None else (r.high_watermark, r.last_stable_offset, r.log_start_offset)
                changed = session.changed(tp, answer, bool(r is not None and r.records),
                                          r is None or r.error_code is not None)
                if incremental and not changed:
                    continue
            answered.append((tp, r))
        records = await to_client_all([b"" if r is None else r.records for _, r in answered])
        by_topic: dict[str, list[Any]] = {}
        for ((topic, index), r), batches in zip(answered, records):
            by_topic.setdefault(topic, []).append(_partition(response, partition_cls, index, r, batches, committed))
        topic_cls = nested(response, "FetchableTopicResponse")
        topics = tuple(entity(topic_cls, topic=name, partitions=tuple(ps)) for name, ps in by_topic.items())
        return entity(response, throttle_time=ms(result.throttle_time_ms), error_code=code(None),
                      session_id=NO_SESSION if session is None else session.session_id, responses=topics)
    return handle


def _partition(response: type, cls: type, index: int, r: FetchPartitionResult | None, records: bytes | memoryview,
               committed: bool) -> Any:
    if r is None:  # refused; empty records as Kafka's MemoryRecords.EMPTY (librdkafka cannot parse null)
        return entity(cls, partition_index=index, error_code=code("TOPIC_AUTHORIZATION_FAILED"), high_watermark=-1,
                      last_stable_offset=-1, log_start_offset=-1, aborted_transactions=None, records=b"")
    aborted = None
    if committed:
        aborted_cls = nested(response, "AbortedTransaction")
        aborted = tuple(entity(aborted_cls, producer_id=a.producer_id, first_offset=a.first_offset)
                        for a in r.aborted_transactions)
    values: dict[str, Any] = dict(
        partition_index=index, error_code=code(r.error_code), high_watermark=r.high_watermark,
        last_stable_offset=r.last_stable_offset, log_start_offset=r.log_start_offset, aborted_transactions=aborted,
        preferred_read_replica=r.preferred_read_replica, records=records)
    if r.diverging_epoch is not None:
        values["diverging_epoch"] = entity(nested(response, "EpochEndOffset"), epoch=r.diverging_epoch.epoch,
                                           end_offset=r.diverging_epoch.end_offset)
    return entity(cls, **values)


APIS = (Api(FETCH_KEY, 4, 12, fetch, "Fetch"),)
