"""Helpers for the route tests: msgpack requests and error assertions."""

from __future__ import annotations

from typing import Any

import msgpack
from aiohttp.test_utils import TestClient

MSGPACK = "application/msgpack"


async def post_msgpack(client: TestClient, path: str, body: Any) -> tuple[int, Any]:
    resp = await client.post(path, data=msgpack.packb(body, use_bin_type=True),
                             headers={"Content-Type": MSGPACK, "Accept": MSGPACK})
    assert resp.content_type == MSGPACK
    return resp.status, msgpack.unpackb(await resp.read(), raw=False)


async def expect_error(resp: Any, status: int, error_code: str) -> dict[str, Any]:
    body = await resp.json()
    assert (resp.status, body.get("error_code")) == (status, error_code), body
    assert isinstance(body["message"], str) and body["message"]
    assert isinstance(body["retriable"], bool)
    return body


async def create_topic(client: TestClient, name: str, partitions: int = 1, **extra: Any) -> dict:
    resp = await client.post("/v1/topics", json={"name": name, "partitions": partitions, **extra})
    assert resp.status == 201, await resp.text()
    return await resp.json()


async def read_all(client: TestClient, topic: str, partition: int = 0, **query: Any) -> dict:
    resp = await client.get(f"/v1/topics/{topic}/partitions/{partition}/records",
                            params={"offset": "earliest", **{k: str(v) for k, v in query.items()}})
    assert resp.status == 200, await resp.text()
    return await resp.json()
