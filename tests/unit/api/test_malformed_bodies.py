"""Bodies no route can take (issue 11, item 8): nesting beyond the decoder's limit and strings that
are not Unicode (a lone UTF-16 surrogate); and (issue 21, item 9) a body that is not the gzip or
deflate its Content-Encoding says. Each is a 400 INVALID_REQUEST on every route, before anything is
written, and the node goes on serving."""

from __future__ import annotations

import gzip

import msgpack
import pytest
from aiohttp.test_utils import TestClient

from kraft.api.access import NODE_PREFIXES
from kraft.api.openapi import openapi_document
from kraft.api.errors import KraftError
from kraft.api.wire import MAX_BODY_DEPTH, check_body
from kraft.security.node_auth import NodeCredential
from kraft.security.peers import PeerSecurity
from routes_testing import MSGPACK, create_topic, expect_error, read_all

DEPTH = 100_000
SECRET = "malformed-bodies-secret"
PATH_PARAMS = {"{topic}": "t", "{group}": "g", "{partition}": "0", "{transactional_id}": "tx"}


def body_routes() -> list[tuple[str, str]]:
    """(method, path) of every operation that takes a body, as the OpenAPI document lists them."""
    routes = []
    for path, ops in openapi_document()["paths"].items():
        for method, op in ops.items():
            if "requestBody" in op:
                for param, value in PATH_PARAMS.items():
                    path = path.replace(param, value)
                routes.append((method.upper(), path))
    return routes


async def post_raw(client: TestClient, method: str, path: str, data: bytes, content_type: str) -> dict:
    resp = await client.request(method, path, data=data, headers={"Content-Type": content_type})
    return await expect_error(resp, 400, "INVALID_REQUEST")


async def refused_or_invalid(client: TestClient, method: str, path: str, data: bytes, content_type: str) -> dict:
    """INVALID_REQUEST; or, on a route served to the cluster's own nodes only, the refusal of
    this client, which comes before the body is read."""
    resp = await client.request(method, path, data=data, headers={"Content-Type": content_type})
    body = await resp.json()
    if path.startswith(NODE_PREFIXES) and body.get("error_code") == "CLUSTER_AUTHORIZATION_FAILED":
        return body
    return await expect_error(resp, 400, "INVALID_REQUEST")


async def state(client: TestClient) -> tuple[list[str], int, dict]:
    """What a rejected request must not change: the topics, topic t's log end, group g's offsets
    (read first: reading them creates __consumer_offsets)."""
    group = await (await client.get("/v1/groups/g/offsets")).json()
    topics = sorted(t["name"] for t in (await (await client.get("/v1/topics")).json())["topics"])
    offsets = await (await client.get("/v1/topics/t/partitions/0/offsets")).json()
    return topics, offsets["log_end_offset"], group


async def assert_healthy(client: TestClient) -> None:
    resp = await client.get("/v1/health")
    assert resp.status == 200 and (await resp.json())["status"] == "ok"


def nested_json(depth: int, inner: str = "1") -> bytes:
    return ("[" * depth + inner + "]" * depth).encode()


async def test_deeply_nested_bodies_on_every_route(client: TestClient) -> None:
    await create_topic(client, "t")
    before = await state(client)
    routes = body_routes()
    assert len(routes) >= 20, routes
    deep_object = ('{"a":' * DEPTH + "1" + "}" * DEPTH).encode()
    deep_msgpack = b"\x91" * DEPTH + b"\xc0"
    for method, path in routes:
        for data, content_type in [(nested_json(DEPTH), "application/json"),
                                   (deep_object, "application/json"),
                                   (deep_msgpack, MSGPACK),
                                   (b"\x91" * (MAX_BODY_DEPTH + 1) + b"\xc0", MSGPACK),
                                   (nested_json(MAX_BODY_DEPTH + 1), "application/json")]:
            error = await refused_or_invalid(client, method, path, data, content_type)
            if error["error_code"] == "CLUSTER_AUTHORIZATION_FAILED":
                continue
            assert "nested too deeply" in error["message"], (method, path, error)
            assert f"limit {MAX_BODY_DEPTH}" in error["message"], (method, path, error)
    assert await state(client) == before
    await assert_healthy(client)


async def test_nesting_up_to_the_limit_is_decoded(client: TestClient) -> None:
    """The limit counts the body object itself: MAX_BODY_DEPTH levels reach the route, which
    then judges the field (here an ignored one)."""
    pad = "[" * (MAX_BODY_DEPTH - 1) + "]" * (MAX_BODY_DEPTH - 1)
    resp = await client.post("/v1/topics", data=f'{{"name":"ok","pad":{pad}}}'.encode(),
                             headers={"Content-Type": "application/json"})
    assert resp.status == 201, await resp.text()


# Escaped in the JSON text, as `curl -d '{"value":"\ud800"}'` sends them.
LONE = ["\\ud800", "\\udfff", "x\\ud83d", "\\ude00y"]


@pytest.mark.parametrize("lone", LONE)
async def test_lone_surrogates_are_rejected_and_nothing_is_written(client: TestClient, lone: str) -> None:
    await create_topic(client, "t")
    before = await state(client)
    bodies = [
        ("POST", "/v1/topics/t/records", f'{{"records":[{{"value":"{lone}"}}]}}'),
        ("POST", "/v1/topics/t/records", f'{{"records":[{{"key":"{lone}","value":"v"}}]}}'),
        ("POST", "/v1/topics/t/records", f'{{"records":[{{"value":"v","headers":{{"{lone}":"h"}}}}]}}'),
        ("POST", "/v1/topics/t/records", f'{{"records":[{{"value":"v","headers":{{"h":"{lone}"}}}}]}}'),
        # a topic auto-created for the records would be a write too
        ("POST", "/v1/topics/fresh/records", f'{{"records":[{{"value":"v","headers":{{"{lone}":"h"}}}}]}}'),
        ("POST", "/v1/topics", f'{{"name":"c","configs":{{"cleanup.policy":"{lone}"}}}}'),
        ("POST", "/v1/topics", f'{{"name":"c","{lone}":1}}'),
        ("PATCH", "/v1/topics/t/configs", f'{{"configs":{{"retention.ms":"{lone}"}}}}'),
        ("POST", "/v1/producers/init", f'{{"transactional_id":"{lone}"}}'),
        ("POST", "/v1/groups/g/heartbeat", f'{{"member_id":"m","member_epoch":0,"client_id":"{lone}",'
                                          f'"subscribed_topics":["t"]}}'),
        ("POST", "/v1/groups/g/offsets", f'{{"member_id":"{lone}","member_epoch":-1,'
                                         f'"offsets":[{{"topic":"t","partition":0,"offset":0}}]}}'),
        ("POST", "/v1/produce", f'{{"partitions":[],"{lone}":0}}'),
    ]
    for method, path, text in bodies:
        error = await post_raw(client, method, path, text.encode("ascii"), "application/json")
        assert "invalid UTF-16 surrogate" in error["message"], (path, text, error)
    assert await state(client) == before
    await assert_healthy(client)


async def test_a_surrogate_as_raw_bytes_is_rejected(client: TestClient) -> None:
    """The same code point sent unescaped (CESU-style bytes ED A0 80) decodes to the same lone
    surrogate: rejected the same way."""
    await create_topic(client, "t")
    error = await post_raw(client, "POST", "/v1/topics/t/records",
                           b'{"records":[{"value":"\xed\xa0\x80"}]}', "application/json")
    assert "surrogate" in error["message"] or "not valid JSON" in error["message"], error
    assert (await state(client))[1] == 0


async def test_a_surrogate_pair_is_ordinary_text(client: TestClient) -> None:
    await create_topic(client, "t")
    resp = await client.post("/v1/topics/t/records", data=b'{"records":[{"value":"\\ud83d\\ude00"}]}',
                             headers={"Content-Type": "application/json"})
    assert resp.status == 200, await resp.text()
    assert [r["value"] for r in (await read_all(client, "t"))["records"]] == ["\U0001F600"]


def test_check_body_is_the_one_rule_of_every_route() -> None:
    """What read_body applies to every body, whatever the route (cluster-internal ones too)."""
    def nested(depth: int) -> list:
        body: list = []
        for _ in range(depth - 1):
            body = [body]
        return body

    check_body(nested(MAX_BODY_DEPTH), "JSON")
    check_body({"a": [{"b": "\U0001F600"}]}, "JSON")
    for body, words in [(nested(MAX_BODY_DEPTH + 1), "JSON nested too deeply"),
                        ({"a": nested(MAX_BODY_DEPTH)}, "JSON nested too deeply"),
                        ({"\ud800": 1}, "invalid UTF-16 surrogate in key"),
                        ([{"v": ["x\udfff"]}], "invalid UTF-16 surrogate in value")]:
        with pytest.raises(KraftError, match=words) as caught:
            check_body(body, "JSON")
        assert caught.value.error_code == "INVALID_REQUEST"


def test_msgpack_cannot_carry_a_lone_surrogate() -> None:
    """msgpack str is UTF-8 and the node decodes it strictly: such a body is invalid msgpack."""
    with pytest.raises(ValueError):
        msgpack.unpackb(b"\xa3\xed\xa0\x80", raw=False)


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
async def test_a_body_that_is_not_its_content_encoding_is_invalid_on_every_route(make_client, encoding) -> None:
    """Issue 21, item 9: was a 500 with a traceback; the client's error, so 400, nothing written.
    Routes of the cluster's own nodes are called with the node credential, so the body is read."""
    client = await make_client(controller_quorum_secret=SECRET)
    await create_topic(client, "t")
    before = await state(client)
    peers = PeerSecurity(NodeCredential(1, SECRET))
    routes = body_routes()
    for method, path in routes:
        headers = {"Content-Type": "application/json", "Content-Encoding": encoding}
        if path.startswith(NODE_PREFIXES):
            headers.update(peers.headers(method, path, b"{}", target=1))
        resp = await client.request(method, path, data=f"this is not {encoding}".encode(), headers=headers)
        error = await expect_error(resp, 400, "INVALID_REQUEST")
        assert error["message"].startswith("the request body cannot be read"), (method, path, error)
    assert await state(client) == before
    await assert_healthy(client)


async def test_a_compressed_body_is_bounded_by_its_inflated_size(make_client) -> None:
    """socket.request.max.bytes bounds the body as the route would see it: a small gzip body that
    inflates past it is 413 MESSAGE_TOO_LARGE, decompressed as it streams in, never whole."""
    client = await make_client(socket_request_max_bytes=1_000_000)
    bomb = gzip.compress(b"[" + b" " * 5_000_000 + b"]")
    assert len(bomb) < 10_000
    resp = await client.post("/v1/topics", data=bomb, headers={"Content-Type": "application/json",
                                                                "Content-Encoding": "gzip"})
    await expect_error(resp, 413, "MESSAGE_TOO_LARGE")
    await assert_healthy(client)
