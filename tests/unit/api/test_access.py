"""The access tables cover every route the node serves, with Kafka's per-API rules
(kraft/server/access.py) and each route's API (api/access.py), and the routes obey them: walking
the router finds no route without an entry, the table names no route that is not served, a route
added without one is refused, docs/security.md shows the table, and on a node with the
StandardAuthorizer and no ACLs every route whose rule is known from the route alone refuses an
ordinary principal with its resource's *_AUTHORIZATION_FAILED."""

from __future__ import annotations

import re
from pathlib import Path

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from kraft.api.access import ACCESS, NODE_PREFIXES, is_node_route, markdown_table, up_front
from kraft.api.openapi import ROUTES
from kraft.api.routes.services import SERVICES
from kraft.api.server import build_app
from kraft.config import STANDARD_AUTHORIZER
from kraft.metadata.acl import SUPPORTED_OPERATIONS
from kraft.server.access import API_ACCESS, CLUSTER, LISTED, NAMED, NODES
from kraft.server.authorization import ERROR_CODES
from kraft.zk.broker import UPDATE_METADATA_PATH, update_metadata_route
from kraft.zk.mode import CONTROLLED_SHUTDOWN_PATH, controlled_shutdown_route

SECURITY_MD = Path(__file__).resolve().parents[3] / "docs" / "security.md"
# a value for each path parameter, for requests the middleware refuses before any handler runs
PARAMETERS = {"topic": "payroll", "group": "g1", "partition": "0", "transactional_id": "tx1"}


def served(app: web.Application) -> set[tuple[str, str]]:
    return {(route.method, route.resource.canonical) for route in app.router.routes()
            if route.method != "HEAD" and route.resource is not None}


def zookeeper_mode_routes() -> set[tuple[str, str]]:
    """The routes a ZooKeeper-mode node adds (kraft/zk: ZkServices.install)."""
    app = web.Application()
    app.router.add_routes([update_metadata_route(None), controlled_shutdown_route(None)])  # type: ignore[arg-type]
    return served(app)


async def test_every_served_route_has_a_rule_and_every_rule_a_route(client: TestClient) -> None:
    routes = served(client.server.app) | zookeeper_mode_routes()
    assert routes - set(ACCESS) == set(), "routes without an entry in api/access.py"
    assert set(ACCESS) - routes == set(), "entries of api/access.py that no node serves"
    assert {("POST", UPDATE_METADATA_PATH), ("POST", CONTROLLED_SHUTDOWN_PATH)} <= set(ACCESS)


def test_every_documented_route_has_a_rule() -> None:
    assert {(r.method, r.path) for r in ROUTES} <= set(ACCESS)


def test_rules_are_kafkas() -> None:
    for api, access in API_ACCESS.items():
        for rule in access.rules:
            assert rule.operation in SUPPORTED_OPERATIONS[rule.resource_type], (api, rule)
            assert rule.source in (CLUSTER, NAMED, LISTED, NODES), (api, rule)
            assert not rule.or_cluster or rule.resource_type != "CLUSTER", (api, rule)
        keys = [(r.resource_type, r.source, r.when) for r in access.rules]
        assert len(keys) == len(set(keys)), f"{api}: a service could not tell its rules apart"
        assert access.rules or access.note, f"{api}: an API without rules says why"
    for (method, route), entry in ACCESS.items():
        assert not entry.api or entry.api in API_ACCESS, (method, route)
        assert entry.api or entry.node_only or entry.note, f"{method} {route}: a route playing no API says why"


def test_the_node_only_routes_are_the_control_plane() -> None:
    node_only = {key for key, entry in ACCESS.items() if entry.node_only}
    assert all(route.startswith(NODE_PREFIXES) for _, route in node_only)
    for method, route in ACCESS:
        assert is_node_route(method, route) == ((method, route) in node_only)
    # Kafka's client admin APIs served under /v1/controller are the controller's, and authorized
    clients = {key for key, entry in ACCESS.items() if key[1].startswith(NODE_PREFIXES) and not entry.node_only}
    assert clients == {key for key, entry in ACCESS.items() if entry.controller}
    assert is_node_route("POST", "/v1/controller/not-a-route")  # unknown control-plane paths stay closed


def test_security_md_shows_the_table() -> None:
    assert markdown_table() in SECURITY_MD.read_text(), \
        "docs/security.md's permission table differs: paste `python -m kraft.api.access` into it"


async def test_a_route_without_a_rule_is_refused(make_client) -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.json_response({"served": True})

    unlisted = web.RouteTableDef()
    unlisted.get("/v1/unlisted")(handler)
    node = await make_client()
    app = build_app(node.server.app[SERVICES], extra_routes=[unlisted])
    async with TestClient(TestServer(app)) as client:
        answer = await client.get("/v1/unlisted")
        body = await answer.json()
        assert (answer.status, body["error_code"]) == (403, "CLUSTER_AUTHORIZATION_FAILED"), body
        missing = await client.get("/v1/nowhere")
        assert (missing.status, (await missing.json())["error_code"]) == (404, "NOT_FOUND")


async def test_every_route_refuses_a_principal_without_acls(make_client) -> None:
    """StandardAuthorizer, no ACL, no super user: User:ANONYMOUS may do nothing. Every rule the
    middleware applies refuses it before the handler reads anything."""
    client = await make_client(authorizer_class_name=STANDARD_AUTHORIZER)
    walked = 0
    for (method, route), entry in ACCESS.items():
        rules = [rule for rule, _ in up_front(route, entry)]
        if not rules:
            continue
        url = re.sub(r"\{(\w+)\}", lambda m: PARAMETERS[m.group(1)], route)
        answer = await client.request(method, url, json={})
        body = await answer.json()
        expected = "CLUSTER_AUTHORIZATION_FAILED" if rules[0].source == NODES else ERROR_CODES[rules[0].resource_type]
        assert (answer.status, body["error_code"]) == (403, expected), (method, route, body)
        walked += 1
    assert walked >= 40
    for (method, route), entry in ACCESS.items():  # and nothing else is refused up front
        if not entry.rules:
            url = route.replace("{asset}", "docs.js")
            assert (await client.request(method, url)).status == 200, (method, route)
