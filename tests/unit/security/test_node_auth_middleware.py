"""The security middleware with the node credential v2, served as the node serves (error middleware,
SERVER_OPTIONS) on a real socket: a bad signature is refused from the headers alone, before a byte
of the body arrives, and the connection is closed rather than drained; a good one is served only
with the body it signed; forwarded principals are believed only as signed."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from kraft.api.security import (
    CLIENT_HOST_HEADER, FORWARDED_BY, FORWARDED_HEADER, FORWARDED_PRINCIPAL_HEADER, PRINCIPAL, SECURITY,
    security_middleware,
)
from kraft.api.server import SERVER_OPTIONS, error_middleware
from kraft.security.node_auth import HEADER, NodeCredential
from kraft.security.peers import PeerSecurity
from kraft.security.service import NodeSecurity

SECRET = "middleware-secret"
PATH = "/v1/controller/brokers/register"
BOMB_BYTES = 10 * 1024 * 1024  # what the client claims to send; it never sends it


@pytest.fixture
async def port() -> AsyncIterator[int]:
    """Node 1's middlewares over a route that echoes who called and what it read."""
    app = web.Application(middlewares=[error_middleware, security_middleware])
    app[SECURITY] = NodeSecurity(NodeCredential(1, SECRET), PeerSecurity())

    async def whoami(request: web.Request) -> web.Response:
        body = await request.read()
        return web.json_response({"principal": request[PRINCIPAL], "forwarded_by": request.get(FORWARDED_BY),
                                  "body": body.decode()})
    app.router.add_post(PATH, whoami)
    app.router.add_post("/v1/produce", whoami)
    runner = web.AppRunner(app, **SERVER_OPTIONS)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    await runner.cleanup()


async def exchange(port: int, head: dict[str, str], body: bytes = b"", path: str = PATH,
                   length: int | None = None) -> tuple[int, dict, bool | None]:
    """Sends the request line, headers and `body` (a `length` beyond it: the rest never comes);
    (status, answer, with `length`: whether the node then closed the connection)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    lines = [f"POST {path} HTTP/1.1", "Host: node-1", f"Content-Length: {len(body) if length is None else length}",
             *(f"{k}: {v}" for k, v in head.items())]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
    await writer.drain()
    try:
        status_line = await asyncio.wait_for(reader.readline(), 10)
        headers: dict[str, str] = {}
        while (line := await asyncio.wait_for(reader.readline(), 10)) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            headers[name.strip().lower()] = value.strip()
        answer = json.loads(await reader.readexactly(int(headers["content-length"])))
        closed = await asyncio.wait_for(reader.read(1), 10) == b"" if length is not None else None
    finally:
        writer.close()
    return int(status_line.split()[1]), answer, closed


def signed(body: bytes, target: int = 1, trusted: dict[str, str] | None = None, path: str = PATH) -> dict[str, str]:
    return PeerSecurity(NodeCredential(2, SECRET)).headers("POST", path, body, target=target, trusted=trusted)


@pytest.mark.parametrize("credential", [
    "v1 1 1 a b",  # the issue's
    "v2 2 1 1700000000000 00 " + "0" * 64 + " " + "0" * 64,  # well-formed, long expired, forged
])
async def test_a_bogus_signature_is_refused_before_the_body_is_sent(port, credential):
    status, answer, closed = await exchange(port, {HEADER: credential, "Content-Encoding": "gzip"},
                                            gzip.compress(b"\0" * 1000)[:100], length=BOMB_BYTES)
    assert (status, answer["error_code"]) == (403, "CLUSTER_AUTHORIZATION_FAILED")
    assert closed  # the rest of the body is neither awaited nor drained


async def test_a_signature_for_another_node_is_refused_before_the_body(port):
    status, answer, closed = await exchange(port, signed(b"x" * 10, target=3), b"x", length=10)
    assert (status, answer["error_code"], closed) == (403, "CLUSTER_AUTHORIZATION_FAILED", True)


async def test_a_good_signature_is_served_with_the_body_it_signed(port):
    body = b'{"broker_id": 2}'
    assert await exchange(port, signed(body), body) == (
        200, {"principal": "Node:2", "forwarded_by": None, "body": body.decode()}, None)


async def test_a_body_altered_in_flight_is_refused(port):
    status, answer, _ = await exchange(port, signed(b'{"broker_id": 2}'), b'{"broker_id": 9}')
    assert (status, answer["error_code"]) == (403, "CLUSTER_AUTHORIZATION_FAILED")


async def test_a_forwarded_principal_is_believed_only_as_signed(port):
    trusted = {FORWARDED_PRINCIPAL_HEADER: "User:alice", CLIENT_HOST_HEADER: "10.0.0.8", FORWARDED_HEADER: "2"}
    headers = signed(b"{}", trusted=trusted, path="/v1/produce")
    assert (await exchange(port, headers, b"{}", path="/v1/produce"))[:2] == (
        200, {"principal": "User:alice", "forwarded_by": 2, "body": "{}"})
    for changed in ({FORWARDED_PRINCIPAL_HEADER: "User:admin"}, {FORWARDED_HEADER: "9"}):
        again = signed(b"{}", trusted=trusted, path="/v1/produce")
        status, answer, _ = await exchange(port, {**again, **changed}, b"{}", path="/v1/produce")
        assert (status, answer["error_code"]) == (403, "CLUSTER_AUTHORIZATION_FAILED")
    dropped = {k: v for k, v in signed(b"{}", trusted=trusted, path="/v1/produce").items() if k != FORWARDED_HEADER}
    status, answer, _ = await exchange(port, dropped, b"{}", path="/v1/produce")
    assert (status, answer["error_code"]) == (403, "CLUSTER_AUTHORIZATION_FAILED")


async def test_a_signed_body_that_is_not_its_encoding_is_the_clients_400(port):
    status, answer, _ = await exchange(port, {**signed(b"{}"), "Content-Encoding": "gzip"}, b"not gzip at all")
    assert (status, answer["error_code"]) == (400, "INVALID_REQUEST")
    assert "cannot be read" in answer["message"] and "gzip" in answer["message"]
