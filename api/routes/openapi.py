"""`GET /v1/openapi.json`: the OpenAPI document of every route (`api/openapi.py`)."""

from __future__ import annotations

import functools

import msgspec
from aiohttp import web

from kraft.api.openapi import openapi_document
from kraft.api.wire import JSON

routes = web.RouteTableDef()


@functools.cache
def _document() -> bytes:
    return msgspec.json.encode(openapi_document())


@routes.get("/v1/openapi.json")
async def openapi(request: web.Request) -> web.Response:
    return web.Response(body=_document(), content_type=JSON, charset="utf-8")
