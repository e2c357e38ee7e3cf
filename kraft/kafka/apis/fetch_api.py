"""Fetch (key 1), consumers only (followers fetch over the HTTP API's replication channel), v4
(isolation level, last stable offset) to v12 (last fetched epoch, diverging epoch). The long poll
(max.wait.ms, min.bytes) is the Fetch service's; a topic the principal may not Read answers
TOPIC_AUTHORIZATION_FAILED on its partitions and the others are read. Without transactions the
last stable offset is the high watermark and read_committed sees no aborted transactions (the
typed result carries both). Fetch sessions (KIP-227) are not kept: every answer says session 0,
which tells the client to send full fetch requests, as a broker out of session slots does."""

from __future__ import annotations

from typing import Any

from kraft.kafka.apis.batches import to_client
from kraft.kafka.apis.common import Api, as_ms, code, entity, ms, nested, response_of
from kraft.metadata.acl import TOPIC
from kraft.server.access import FETCH, NAMED, rule_of
from kraft.server.record_apis import FetchRequest
from kraft.server.records import NO_EPOCH, FetchEntry, FetchPartitionResult
from kraft.server.request_context import RequestContext
from kraft.server.services import BrokerServices

FETCH_KEY = 1
_READ = rule_of(FETCH, TOPIC, NAMED)
READ_COMMITTED = 1
NO_SESSION = 0


def fetch(services: BrokerServices) -> Any:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        response = response_of(request)
        if getattr(request, "session_id", NO_SESSION) != NO_SESSION:  # never handed out: the client starts over
            return entity(response, throttle_time=ms(0), error_code=code("FETCH_SESSION_ID_NOT_FOUND"),
                          session_id=NO_SESSION, responses=())
        names = [t.topic for t in request.topics]
        refused = set(services.authorization.refused(ctx, _READ, names))
        if refused:
            services.authorization.failure(ctx, _READ.operation, TOPIC, sorted(refused))
        entries = [FetchEntry(t.topic, p.partition, p.fetch_offset, p.partition_max_bytes,
                              getattr(p, "current_leader_epoch", NO_EPOCH), getattr(p, "last_fetched_epoch", NO_EPOCH))
                   for t in request.topics if t.topic not in refused for p in t.partitions]
        result = await services.records.fetch(ctx, FetchRequest(
            entries, as_ms(request.max_wait), int(request.min_bytes), int(getattr(request, "max_bytes", 2**31 - 1))))
        read = {(r.topic, r.partition): r for r in result.partitions}
        committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
        topic_cls, partition_cls = nested(response, "FetchableTopicResponse"), nested(response, "PartitionData")
        topics = []
        for t in request.topics:
            partitions = []
            for p in t.partitions:
                r = read.get((t.topic, p.partition))
                partitions.append(_partition(response, partition_cls, p.partition, r, committed))
            topics.append(entity(topic_cls, topic=t.topic, partitions=tuple(partitions)))
        return entity(response, throttle_time=ms(result.throttle_time_ms), error_code=code(None),
                      session_id=NO_SESSION, responses=tuple(topics))
    return handle


def _partition(response: type, cls: type, index: int, r: FetchPartitionResult | None, committed: bool) -> Any:
    if r is None:  # refused
        return entity(cls, partition_index=index, error_code=code("TOPIC_AUTHORIZATION_FAILED"), high_watermark=-1,
                      last_stable_offset=-1, log_start_offset=-1, aborted_transactions=None, records=None)
    aborted = None
    if committed:
        aborted_cls = nested(response, "AbortedTransaction")
        aborted = tuple(entity(aborted_cls, producer_id=a.producer_id, first_offset=a.first_offset)
                        for a in r.aborted_transactions)
    values: dict[str, Any] = dict(
        partition_index=index, error_code=code(r.error_code), high_watermark=r.high_watermark,
        last_stable_offset=r.last_stable_offset, log_start_offset=r.log_start_offset, aborted_transactions=aborted,
        preferred_read_replica=r.preferred_read_replica, records=to_client(r.records))
    if r.diverging_epoch is not None:
        values["diverging_epoch"] = entity(nested(response, "EpochEndOffset"), epoch=r.diverging_epoch.epoch,
                                           end_offset=r.diverging_epoch.end_offset)
    return entity(cls, **values)


APIS = (Api(FETCH_KEY, 4, 12, fetch, "Fetch"),)
