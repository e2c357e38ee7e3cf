"""`GET /v1/replication`: a follower's replication channel to a leader, one persistent WebSocket
per follower and leader (Kafka keeps one connection per fetcher thread and leader).

The follower opens it with its node credential (checked once, at the handshake, as every node
request is; `replica_id` in the query is the node it must be) and sends its replica fetches on it
as binary msgpack messages (`ReplicationFetch`: the body of a replica `POST /v1/fetch` with an
`id`); the leader answers each with a `ReplicationAnswer` carrying that `id`. An exchange costs a
message each way instead of an HTTP request (parsing, middlewares, a signature per fetch): a
fifth of the CPU on each side. A new fetch supersedes the one the leader still holds (the
follower's partitions changed while it long-polled): that one is dropped unanswered, as the HTTP
fetcher drops its request. Fetches naming another replica id are refused (INVALID_REQUEST) and
the channel stays open; a message that is not a `ReplicationFetch` closes it.

Each fetch is the Fetch service's (kraft/server/record_apis.py) with the handshake's request
context (one per channel: copying it per fetch to carry the message's id, which nothing reads,
cost more than the rest of the context handling of an exchange), and counts as one FetchFollower
request in the request metrics, as Kafka counts every follower fetch; the handshake itself is
not a request.
"""

from __future__ import annotations

import asyncio
import logging
import time

import msgspec
from aiohttp import WSCloseCode, WSMsgType, web

from kraft.api.errors import KraftError, from_exception
from kraft.api.messages.batch import ReplicationAnswer, ReplicationFetch, ReplicationQuery
from kraft.api.routes.batch import fetch_call, fetch_response
from kraft.api.routes.services import context_of, services_of
from kraft.api.wire import read_query
from kraft.server.request_context import RequestContext
from kraft.server.services import BrokerServices

log = logging.getLogger("kraft.api")

routes = web.RouteTableDef()
_decode = msgspec.msgpack.Decoder(ReplicationFetch).decode
_encode = msgspec.msgpack.Encoder().encode
CHANNELS = web.AppKey("replication_channels", set[web.WebSocketResponse])


def install(app: web.Application) -> None:
    """The route, and the channels closed when the server shuts down (a channel's handler would
    otherwise hold the shutdown for aiohttp's whole shutdown timeout)."""
    app[CHANNELS] = set()
    app.router.add_routes(routes)
    app.on_shutdown.append(_close_channels)


async def _close_channels(app: web.Application) -> None:
    await asyncio.gather(*(ws.close(code=WSCloseCode.GOING_AWAY, message=b"node shutting down")
                           for ws in list(app[CHANNELS])), return_exceptions=True)


async def _answer(services: BrokerServices, ctx: RequestContext, replica_id: int,
                  message: ReplicationFetch) -> ReplicationAnswer:
    """One replica fetch, answered and reported to the request metrics."""
    started = time.monotonic()
    try:
        if message.fetch.replica_id != replica_id:
            raise KraftError("INVALID_REQUEST", f"this channel is replica {replica_id}'s, the fetch names "
                                                f"{message.fetch.replica_id}")
        call = fetch_call(message.fetch)
        result = await services.records.fetch(ctx, call)
        answer = ReplicationAnswer(id=message.id, fetch=fetch_response(call, result.partitions, 0))
    except Exception as e:  # the fetch fails, the channel serves the next one
        failure = from_exception(e)
        if failure.error_code == "UNKNOWN_SERVER_ERROR":
            log.exception("replication fetch from node %d failed", replica_id)
        answer = ReplicationAnswer(id=message.id, error_code=failure.error_code, message=failure.message)
    # a fetch superseded or cut by the channel's close was never answered: not counted
    if services.metrics is not None:
        services.metrics.observe_request(ctx, answer.error_code or "NONE", time.monotonic() - started)
    return answer


@routes.get("/v1/replication")
async def replication(request: web.Request) -> web.WebSocketResponse:
    replica_id = read_query(request, ReplicationQuery).replica_id
    services, ctx = services_of(request), context_of(request)
    services.authorization.require_node(ctx, as_node_id=replica_id)  # a replica's fetch: that node only
    ws = web.WebSocketResponse(max_msg_size=services.node.max_request_bytes)
    await ws.prepare(request)
    channels = request.app[CHANNELS]
    channels.add(ws)

    async def serve(raw: bytes) -> None:
        try:
            message = _decode(raw)
        except (msgspec.ValidationError, msgspec.DecodeError) as e:
            await ws.close(code=1003, message=f"not a replication fetch: {e}"[:120].encode())
            return
        answer = await _answer(services, ctx, replica_id, message)
        if not ws.closed:
            await ws.send_bytes(_encode(answer))

    current: asyncio.Task[None] | None = None
    try:
        async for msg in ws:
            if msg.type != WSMsgType.BINARY:
                await ws.close(code=1003, message=b"binary msgpack messages only")
                break
            if current is not None:
                current.cancel()  # superseded: the follower no longer waits for its answer
            current = asyncio.create_task(serve(msg.data))
    finally:
        channels.discard(ws)
        if current is not None:
            current.cancel()
            await asyncio.gather(current, return_exceptions=True)
    return ws
