"""Any broker accepts any convenience request (design §7): a partition led by another broker is
served by forwarding the work to that leader, one hop; so is a request only the active controller
answers (`remote_controller`, KIP-590), forwarded whole with the client's principal.

People with curl do not know which broker leads a partition; the Python client does and never
needs this. The JSON produce route sends its already-built batches for remote partitions to each
leader's `POST /v1/produce` (which never forwards), `POST /v1/delete-records` sends each leader
its partitions, and the single-partition read routes proxy the whole request. A forwarded request
carries `X-Kraft-Forwarded`, and a node never forwards such a request again, so a stale view of
leadership cannot make requests bounce between brokers.

Every forwarded request is signed with the node credential addressed to the node it goes to,
covering the headers that node believes (`kraft.security.node_auth.SIGNED_HEADERS`): the client's
principal, address and client id (the request context's), and the forwarding mark.
`proxy(request, peer)` is the one entry point for sending a client's request on to another node.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, NamedTuple, Protocol, TypeVar

import aiohttp
import msgpack
from aiohttp import web
from yarl import URL

from kraft.api.errors import KraftError
from kraft.api.routes.services import context_of, services_of
from kraft.api.security import (
    CLIENT_HOST_HEADER, CLIENT_ID_HEADER, FORWARDED_HEADER, FORWARDED_PRINCIPAL_HEADER, SECURITY,
)
from kraft.server.records import DeleteRecordsEntry, DeleteRecordsResult, ProduceEntry, ProducePartitionResult

FORWARD_TIMEOUT_S = 330.0  # above the longest long poll a read route accepts (300 s)
SESSION = web.AppKey("forward_session", aiohttp.ClientSession)
MSGPACK = "application/msgpack"
T = TypeVar("T")
FORWARD_ANSWER_MARGIN_S = 5.0  # beyond a forwarded batch request's own timeout_ms


async def session_ctx(app: web.Application) -> AsyncIterator[None]:
    ssl_context = app[SECURITY].peer_ssl if SECURITY in app else None
    connector = aiohttp.TCPConnector(ssl=ssl_context) if ssl_context is not None else None
    app[SESSION] = aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=FORWARD_TIMEOUT_S))
    yield
    await app[SESSION].close()


class Peer(NamedTuple):
    """Another node a request is sent on to."""
    node_id: int
    host: str
    port: int


def _forwarding(request: web.Request, method: str, peer: Peer, path_qs: str,
                body: bytes | None) -> tuple[str, dict[str, str]]:
    """The URL and the headers of a forwarded request: the node credential addressed to `peer`
    (it serves nodes' forwarded requests on any listener) naming the client's principal and
    address, so it authorizes the client, not this node, and covering every header it believes."""
    trusted = {FORWARDED_HEADER: str(services_of(request).node.node_id)}
    if CLIENT_ID_HEADER in request.headers:  # quotas charge the client's id on the leader too
        trusted[CLIENT_ID_HEADER] = request.headers[CLIENT_ID_HEADER]
    if SECURITY not in request.app:
        return f"http://{peer.host}:{peer.port}{path_qs}", trusted
    security, ctx = request.app[SECURITY], context_of(request)
    trusted[FORWARDED_PRINCIPAL_HEADER] = ctx.principal
    trusted[CLIENT_HOST_HEADER] = ctx.client_address  # host-scoped ACLs see the client, not this node
    return (security.peer_url(peer.host, peer.port, path_qs),
            security.peer_headers(method, path_qs, body, peer.node_id, trusted))


def leader_of(request: web.Request, topic: str, partition: int) -> dict[str, object] | None:
    """`{node_id, host, port}` of the partition's leader as this node's metadata has it."""
    view = services_of(request).metadata
    description = view.topic(topic)
    if description is None or partition >= len(description.partitions):
        return None
    leader = description.partitions[partition].leader
    for broker in view.cluster().brokers:
        if broker.node_id == leader:
            return {"node_id": broker.node_id, "host": broker.host, "port": broker.port}
    return None


def remote_leader(request: web.Request, topic: str, partition: int) -> Peer | None:
    """The partition's leader when it is another broker this request may be forwarded to; None
    when this node leads it, nobody does, or the request was forwarded already."""
    if FORWARDED_HEADER in request.headers or SESSION not in request.app:
        return None
    leader = leader_of(request, topic, partition)
    if leader is None or leader["node_id"] == services_of(request).node.node_id:
        return None
    return Peer(int(leader["node_id"]), str(leader["host"]), int(leader["port"]))  # type: ignore[call-overload]


def remote_controller(request: web.Request) -> Peer | None:
    """The active controller when it is another node a controller-bound request
    may be forwarded to (KIP-590); None when this node is it, nobody knows it, or the request was
    forwarded already (its node answers NOT_CONTROLLER naming the controller)."""
    api = services_of(request).controller_api
    if FORWARDED_HEADER in request.headers or SESSION not in request.app or api is None or api.is_active():
        return None
    leader = api.leader_json()
    if leader is None or leader["node_id"] == services_of(request).node.node_id:
        return None
    return Peer(int(leader["node_id"]), str(leader["host"]), int(leader["port"]))


class PartitionEntry(Protocol):
    topic: str
    partition: int


E = TypeVar("E", bound=PartitionEntry)


def by_leader(request: web.Request, entries: Sequence[E]) -> tuple[list[E], dict[Peer, list[E]]]:
    """The entries this node serves itself (`remote_leader` is None) and the others by their
    leader, for one forwarded request per leader."""
    local: list[E] = []
    remote: dict[Peer, list[E]] = {}
    for entry in entries:
        peer = remote_leader(request, entry.topic, entry.partition)
        if peer is None:
            local.append(entry)
        else:
            remote.setdefault(peer, []).append(entry)
    return local, remote


def not_leader(request: web.Request, topic: str, partition: int, message: str) -> KraftError:
    """NOT_LEADER_OR_FOLLOWER naming the leader, so a client can go there itself."""
    leader = leader_of(request, topic, partition)
    return KraftError("NOT_LEADER_OR_FOLLOWER", message, **({"leader": leader} if leader else {}))


def _unreachable(peer: Peer, exc: BaseException) -> KraftError:
    return KraftError("NETWORK_EXCEPTION", f"the node at {peer.host}:{peer.port} this request is forwarded to "
                      f"did not answer ({type(exc).__name__}); retry, or send it there directly")


async def proxy(request: web.Request, peer: Peer) -> web.Response:
    """The same request, answered by `peer`."""
    body = await request.read() if request.can_read_body else None
    url, headers = _forwarding(request, request.method, peer, request.raw_path, body)
    for name in ("Accept", "Content-Type"):
        if name in request.headers:
            headers[name] = request.headers[name]
    try:
        async with request.app[SESSION].request(request.method, URL(url, encoded=True), data=body,
                                                headers=headers) as answer:
            payload = await answer.read()
            return web.Response(body=payload, status=answer.status,
                                headers={"Content-Type": answer.headers.get("Content-Type", "application/json")})
    except (aiohttp.ClientError, TimeoutError) as e:
        raise _unreachable(peer, e) from None


async def produce_remote(request: web.Request, peer: Peer, entries: Sequence[ProduceEntry],
                         acks: int, timeout_ms: int) -> list[ProducePartitionResult]:
    """Appends `entries` on their leader through its batch route; one result per entry, never an
    exception: a leader that cannot be reached, or refuses the whole request, fails its entries
    only (the caller may have stored other partitions already)."""
    body = {"acks": acks, "timeout_ms": timeout_ms,
            "partitions": [{"topic": e.topic, "partition": e.partition, "records": e.records} for e in entries]}
    try:
        return await forward_partitions(
            request, peer, "/v1/produce", body, timeout_ms, "the records may or may not be stored",
            lambda p: ProducePartitionResult(p["topic"], p["partition"], p.get("base_offset", -1),
                                    p.get("log_start_offset", -1), p.get("error_code"), p.get("message"),
                                    log_append_time=p.get("log_append_time", -1)))
    except KraftError as error:
        return [ProducePartitionResult(e.topic, e.partition, -1, -1, error.error_code, error.message)
                for e in entries]


async def delete_records_remote(request: web.Request, peer: Peer,
                                entries: Sequence[DeleteRecordsEntry], timeout_ms: int) -> list[DeleteRecordsResult]:
    """DeleteRecords of `entries` on their leader; one result per entry, never an exception."""
    body = {"timeout_ms": timeout_ms,
            "partitions": [{"topic": e.topic, "partition": e.partition, "offset": e.offset} for e in entries]}
    try:
        return await forward_partitions(
            request, peer, "/v1/delete-records", body, timeout_ms,
            "the log start offset may or may not have moved",
            lambda p: DeleteRecordsResult(p["topic"], p["partition"], p.get("low_watermark", -1),
                                          p.get("error_code"), p.get("message")))
    except KraftError as error:
        return [DeleteRecordsResult(e.topic, e.partition, -1, error.error_code, error.message) for e in entries]


async def forward_partitions(request: web.Request, peer: Peer, path: str, body: dict[str, Any],
                             timeout_ms: int, outcome_unknown: str,
                             parse: Callable[[dict[str, Any]], T]) -> list[T]:
    """POSTs `body` to the batch route `path` of the partitions' leader `peer`, which
    answers within `timeout_ms` (a leader that does not, paused or overloaded, costs a margin
    more), and parses each partition of its answer. Raises a KraftError when the whole request
    failed: NETWORK_EXCEPTION when nothing was sent, REQUEST_TIMED_OUT or NETWORK_EXCEPTION when
    it was sent but not answered (`outcome_unknown` says what that leaves open), the leader's
    own error when it refused the request."""
    data = msgpack.packb(body)
    url, headers = _forwarding(request, "POST", peer, path, data)
    headers.update({"Content-Type": MSGPACK, "Accept": MSGPACK})
    limit = aiohttp.ClientTimeout(total=timeout_ms / 1000 + FORWARD_ANSWER_MARGIN_S)
    leader = f"the partition leader at {peer.host}:{peer.port}"
    try:
        async with request.app[SESSION].post(url, data=data, headers=headers, timeout=limit) as answer:
            reply = msgpack.unpackb(await answer.read())
        if answer.status >= 400:
            raise KraftError.from_dict(reply if isinstance(reply, dict) else {"message": str(reply)})
        return [parse(p) for p in reply["partitions"]]
    except aiohttp.ClientConnectorError as e:  # nothing was sent: nothing was done
        raise _unreachable(peer, e) from None
    except TimeoutError:
        raise KraftError("REQUEST_TIMED_OUT", f"{leader} did not answer within {limit.total:.0f} s; "
                         f"{outcome_unknown}") from None
    except aiohttp.ClientError as e:
        raise KraftError("NETWORK_EXCEPTION", f"the connection to {leader} failed ({type(e).__name__}); "
                         f"{outcome_unknown}") from None
    except (ValueError, KeyError, TypeError) as e:
        raise KraftError("UNKNOWN_SERVER_ERROR", f"{leader} answered something unreadable "
                         f"({type(e).__name__}: {e})") from None
