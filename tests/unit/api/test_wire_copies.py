"""The produce request's body on its way in (docs/benchmarks.md, the 1 KiB path): read into one
buffer at most (the parser's own chunk when the body came in one), and the records decoded as a
view of that buffer, writable when it is the gathered bytearray, so the log stamps it in place."""

from __future__ import annotations

import tracemalloc
from typing import Any
from unittest import mock

import msgpack
from aiohttp import StreamReader, web
from aiohttp.test_utils import TestClient, TestServer, make_mocked_request

from kraft.api.messages.batch import ProduceRequest
from kraft.api.wire import read_body, read_message
from kraft.log.batch import build_batch

MIB = 1 << 20


async def _post(body: bytes, content_type: str = "application/msgpack") -> dict[str, Any]:
    seen: dict[str, Any] = {}

    async def handler(request: web.Request) -> web.Response:
        raw = await read_body(request)
        seen["raw"] = raw
        seen["again"] = await read_body(request)  # a second read (a middleware's, say) gets the same
        return web.Response()

    async def decode(request: web.Request) -> web.Response:
        message = await read_message(request, ProduceRequest)
        seen["records"] = message.partitions[0].records if message.partitions else None
        return web.Response()

    app = web.Application(client_max_size=64 * MIB)
    app.router.add_post("/raw", handler)
    app.router.add_post("/decode", decode)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        for path in ("/raw", "/decode"):
            r = await client.post(path, data=body, headers={"Content-Type": content_type})
            assert r.status == 200
    return seen


async def test_a_large_body_is_gathered_once_and_its_records_are_a_writable_view_of_it() -> None:
    batch = build_batch([(None, b"v" * 1024, (), 1_700_000_000_000)] * 4000)  # ~4 MiB: many chunks
    body = msgpack.packb({"acks": 1, "partitions": [{"topic": "t", "partition": 0, "records": batch}]})
    seen = await _post(body)
    raw = seen["raw"]
    assert isinstance(raw, bytearray) and raw == body  # one copy: the chunks into one buffer
    records = seen["records"]
    assert isinstance(records, memoryview) and not records.readonly and records == batch
    assert isinstance(records.obj, bytearray)  # a view of the gathered body, not a copy of it


async def test_a_body_is_read_whole_even_when_read_before() -> None:
    seen = await _post(b'{"partitions": [], "acks": 1}', "application/json")
    assert bytes(seen["raw"]) == bytes(seen["again"]) == b'{"partitions": [], "acks": 1}'


async def test_chunks_held_together_are_joined_once_into_a_writable_buffer() -> None:
    """aiohttp's `readany` joined the chunks it held into new bytes (a copy the log copied again
    to stamp offsets); the body's chunks are now joined once, into a bytearray."""
    chunks = [bytes([i]) * MIB for i in range(4)]
    stream = StreamReader(mock.Mock(_reading_paused=False), 2**16, loop=mock.Mock())
    for chunk in chunks:  # all four arrived before the handler reads: `readany` would join them
        stream.feed_data(chunk)
    stream.feed_eof()
    request = make_mocked_request("POST", "/v1/produce", headers={"Content-Length": str(4 * MIB)},
                                  payload=stream, client_max_size=64 * MIB)
    tracemalloc.start()
    try:
        body = await read_body(request)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(body, bytearray) and body == b"".join(chunks)
    assert peak < 5 * MIB  # the body once, no joined copy beside it
