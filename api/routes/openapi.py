"""`GET /v1/openapi.json`: the OpenAPI document of every route (`api/openapi.py`)."""

from __future__ import annotations

from aiohttp import web

from kraft.api.openapi import openapi_document
from kraft.api.wire import render_json

routes = web.RouteTableDef()


@routes.get("/v1/openapi.json")
async def openapi(request: web.Request) -> web.Response:
    return render_json(openapi_document())
