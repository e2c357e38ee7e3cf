"""The OpenAPI document covers every route the node serves, and is a valid OpenAPI 3 document."""

from __future__ import annotations

from aiohttp.test_utils import TestClient
from openapi_spec_validator import validate

from kraft.api.openapi import openapi_document


def test_document_is_valid_openapi() -> None:
    validate(openapi_document())


async def test_every_route_is_documented(client: TestClient) -> None:
    served = await (await client.get("/v1/openapi.json")).json()
    assert served == openapi_document()
    routes = {
        (route.resource.canonical, route.method.lower())
        for route in client.server.app.router.routes()
        if route.method != "HEAD"
    }
    documented = {
        (path, method) for path, item in served["paths"].items() for method in item
        if method != "parameters"
    }
    assert routes == documented
