"""The routes decode bodies and query strings through the messages (refusals name the field), the
answers the node's services build have the shape of their messages, and `GET /docs` serves the
browsable document from the package's own files."""

from __future__ import annotations

import re
from typing import Any

import msgspec
import msgspec.inspect as mi
import pytest
from aiohttp.test_utils import TestClient

from kraft.api.messages import controller, groups, node, security, topics
from kraft.api.openapi import DOCS_ASSETS
from kraft.security.node_auth import NodeCredential
from kraft.security.peers import PeerSecurity
from routes_testing import MSGPACK, create_topic, expect_error


@pytest.mark.parametrize("method, path, body, field", [
    ("POST", "/v1/topics", {"name": "a", "partitions": "3"}, "Expected `int | null`, got `str` - at `$.partitions`"),
    ("POST", "/v1/topics", {"partitions": 3}, "missing required field `name`"),
    ("POST", "/v1/produce", {"partitions": [{"topic": "t", "partition": 0, "records": 5}]},
     "at `$.partitions[0].records`"),
    ("POST", "/v1/fetch", {"partitions": [{"topic": "t", "partition": 0, "fetch_offset": -1}]},
     "Expected `int` >= 0 - at `$.partitions[0].fetch_offset`"),
    ("POST", "/v1/topics/t/records", {"records": [{"value": "a"}, {"value": 5}]}, "at `$.records[1].value`"),
    ("POST", "/v1/topics/t/records", {"records": [{"valeu": "typo"}]}, "unknown field `valeu` - at `$.records[0]`"),
    ("POST", "/v1/groups/g/offsets", {"offsets": [{"topic": "t", "partition": 0, "offset": "1"}]},
     "at `$.offsets[0].offset`"),
    ("POST", "/v1/client-quotas", {"entries": [{"entity": {}, "ops": [{"key": "producer_byte_rate", "value": -1}]}]},
     "producer_byte_rate must be a positive number, got -1"),
])
@pytest.mark.parametrize("form", ["json", "msgpack"])
async def test_a_refused_body_names_the_field(client: TestClient, method: str, path: str, body: Any, field: str,
                                              form: str) -> None:
    await create_topic(client, "t")
    data = msgspec.json.encode(body) if form == "json" else msgspec.msgpack.encode(body)
    resp = await client.request(method, path, data=data,
                                headers={"Content-Type": "application/json" if form == "json" else MSGPACK})
    error = await expect_error(resp, 400, "INVALID_REQUEST")
    assert field in error["message"], error


async def test_a_refused_query_names_the_parameter(client: TestClient) -> None:
    await create_topic(client, "t")
    error = await expect_error(await client.get("/v1/topics/t/partitions/0/records?max_records=many"),
                               400, "INVALID_REQUEST")
    assert error["message"] == "query string: Expected `int`, got `str` - at `$.max_records`"
    error = await expect_error(await client.get("/v1/topics/t/partitions/0/offsets?timestamp=-1"),
                               400, "INVALID_REQUEST")
    assert error["message"] == "query string: Expected `int` >= 0 - at `$.timestamp`"


# -- answers the services build ---------------------------------------------------------------------


def _unknown_fields(value: Any, info: mi.Type, path: str = "$") -> list[str]:
    """Fields of `value` its message does not define (msgspec.convert ignores them)."""
    if isinstance(info, mi.Metadata):
        return _unknown_fields(value, info.type, path)
    if isinstance(info, mi.UnionType):
        return [f for t in info.types for f in _unknown_fields(value, t, path)]
    if isinstance(info, mi.StructType) and isinstance(value, dict):
        fields = {f.encode_name: f for f in info.fields}
        return [f"{path}.{k}" for k in value if k not in fields] + [
            f for k, v in value.items() if k in fields for f in _unknown_fields(v, fields[k].type, f"{path}.{k}")]
    if isinstance(info, mi.ListType) and isinstance(value, list):
        return [f for i, v in enumerate(value) for f in _unknown_fields(v, info.item_type, f"{path}[{i}]")]
    return []


SECRET = "message-routes-secret"


async def answer_of(client: TestClient, message: type, method: str, path: str, body: Any = None,
                    status: int = 200) -> Any:
    """The answer, which must convert to `message` and have no field it does not define; a
    /v1/controller/ request is signed as this node (those routes serve the cluster's nodes)."""
    data = None if body is None else msgspec.json.encode(body)
    headers = {"Content-Type": "application/json"}
    if path.startswith("/v1/controller/"):
        headers.update(PeerSecurity(NodeCredential(1, SECRET)).headers(method, path, data, target=1))
    resp = await client.request(method, path, data=data, headers=headers)
    answer = await resp.json()
    assert resp.status == status, answer
    msgspec.convert(answer, message)
    assert _unknown_fields(answer, mi.type_info(message)) == [], (path, answer)
    return answer


async def test_service_answers_have_their_messages_shape(make_client) -> None:
    client = await make_client(controller_quorum_secret=SECRET)
    await create_topic(client, "t", 2)
    await answer_of(client, node.HealthResponse, "GET", "/v1/health")
    joined = await answer_of(client, groups.HeartbeatResponse, "POST", "/v1/groups/g/heartbeat",
                             {"member_epoch": 0, "subscribed_topics": ["t"]})
    await answer_of(client, groups.FindCoordinatorResponse, "GET", "/v1/groups/g/coordinator")
    await answer_of(client, groups.CommitOffsetsResponse, "POST", "/v1/groups/g/offsets", {
        "member_id": joined["member_id"], "member_epoch": joined["member_epoch"],
        "offsets": [{"topic": "t", "partition": 0, "offset": 0}]})
    await answer_of(client, groups.FetchOffsetsResponse, "GET", "/v1/groups/g/offsets")
    await answer_of(client, groups.DescribeGroupResponse, "GET", "/v1/groups/g")
    await answer_of(client, groups.ListGroupsResponse, "GET", "/v1/groups")
    await answer_of(client, controller.DescribeQuorumResponse, "GET", "/v1/controller/quorum")
    await answer_of(client, controller.LocalQuorumStatus, "GET", "/v1/controller/quorum/local")
    await answer_of(client, controller.MetadataLogResponse, "GET", "/v1/controller/metadata?from_offset=0")
    await answer_of(client, topics.ControllerCreateTopicResponse, "POST", "/v1/controller/topics",
                    {"name": "c", "partitions": 1})
    await answer_of(client, controller.ElectLeadersResponse, "POST", "/v1/controller/elect-leaders",
                    {"partitions": [["c", 0]]})
    await answer_of(client, controller.ListReassignmentsResponse, "GET", "/v1/controller/reassignments")
    await answer_of(client, security.DescribeScramCredentialsResponse, "GET", "/v1/users/scram-credentials")
    await answer_of(client, security.DescribeClientQuotasResponse, "GET", "/v1/client-quotas")


# -- GET /docs ------------------------------------------------------------------------------------------


async def test_docs_page_loads_only_files_of_this_node(client: TestClient) -> None:
    resp = await client.get("/docs")
    assert resp.status == 200 and resp.content_type == "text/html"
    page = await resp.text()
    links = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert links and all("//" not in link and not link.startswith("/") for link in links), links  # relative
    script = ""
    for link in links:
        asset = await client.get(f"/{link}")
        assert asset.status == 200, link
        assert asset.content_type == DOCS_ASSETS[link.removeprefix("docs/")], link
        if link == "docs/docs.js":
            script = await asset.text()
    assert 'url: "v1/openapi.json"' in script and "://" not in script
    assert (await client.get("/docs/swagger-ui-bundle.js")).content_type == "application/javascript"
    await expect_error(await client.get("/docs/..%2Fopenapi.py"), 404, "NOT_FOUND")
    await expect_error(await client.get("/docs/nothing.js"), 404, "NOT_FOUND")


async def test_root_and_docs_slash_point_to_the_docs(client: TestClient) -> None:
    """`GET /` and `GET /docs/` answered 404: a newcomer's first two guesses."""
    root = await answer_of(client, node.RootResponse, "GET", "/")
    assert root["name"] == "kraft" and root["node_id"] == 1 and root["version"]
    for path in ("docs", "openapi", "health", "metadata", "metrics"):
        assert (await client.get(root[path])).status == 200, path
    moved = await client.get("/docs/", allow_redirects=False)
    assert moved.status == 301 and moved.headers["Location"] == "../docs"
    followed = await client.get("/docs/")
    assert followed.status == 200 and followed.url.path == "/docs" and await followed.text() == await (
        await client.get("/docs")).text()
