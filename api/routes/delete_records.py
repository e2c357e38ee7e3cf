"""`POST /v1/delete-records`: Kafka's DeleteRecords (kafka-delete-records, Admin.deleteRecords).

Each partition's leader moves its log start offset to the requested offset (-1: the high
watermark) and answers its low watermark once every live replica's log start reached it
(`ReplicaManager.delete_records`). Any broker takes the request: the partitions led elsewhere go
to their leaders in one forwarded request each (`forward.py`). Every partition is answered on its
own (`error_code`/`message` in a 200 answer), as Kafka does; the whole request is refused only
when it is malformed, names a partition twice, or names a topic the principal may not Delete.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from kraft.api.errors import invalid_request
from kraft.api.messages.records import DeletedRecordsPartition, DeleteRecordsRequest, DeleteRecordsResponse
from kraft.api.routes.forward import by_leader, delete_records_remote
from kraft.api.routes.services import context_of, services_of
from kraft.api.wire import read_message, render
from kraft.metadata.acl import TOPIC
from kraft.server.access import DELETE_RECORDS, NAMED, rule_of
from kraft.server.records import DeleteRecordsEntry, DeleteRecordsResult

routes = web.RouteTableDef()


@routes.post("/v1/delete-records")
async def delete_records(request: web.Request) -> web.Response:
    body = await read_message(request, DeleteRecordsRequest)
    entries = [DeleteRecordsEntry(p.topic, p.partition, p.offset) for p in body.partitions]
    seen: set[tuple[str, int]] = set()
    for e in entries:
        if (e.topic, e.partition) in seen:
            raise invalid_request(f"partition {e.topic}-{e.partition} is named twice")
        seen.add((e.topic, e.partition))
    services, ctx = services_of(request), context_of(request)
    # every topic, before any partition is forwarded: one refused topic refuses the request
    services.authorization.require(ctx, rule_of(DELETE_RECORDS, TOPIC, NAMED), {e.topic for e in entries})
    local, remote = by_leader(request, entries)
    calls = [services.records.delete_records(ctx, local, body.timeout_ms)] if local else []
    calls += [delete_records_remote(request, leader, group, body.timeout_ms) for leader, group in remote.items()]
    answered: dict[tuple[str, int], DeleteRecordsResult] = {
        (r.topic, r.partition): r for results in await asyncio.gather(*calls) for r in results}
    return render(request, DeleteRecordsResponse(partitions=[
        DeletedRecordsPartition(topic=r.topic, partition=r.partition, low_watermark=r.low_watermark,
                                error_code=r.error_code, message=r.message)
        for r in (answered[(e.topic, e.partition)] for e in entries)
    ]))
