"""The API's own description: `GET /v1/openapi.json` (the OpenAPI document, `api/openapi.py`) and
`GET /docs`, the same document browsable with Swagger UI, whose files ship in the package
(`api/static/`): the page loads nothing from another host."""

from __future__ import annotations

import functools
from pathlib import Path

import msgspec
from aiohttp import web

from kraft.api.openapi import DOCS_ASSETS, openapi_document
from kraft.api.wire import JSON

routes = web.RouteTableDef()

STATIC = Path(__file__).resolve().parents[1] / "static"
PAGE = "docs.html"
_CACHE = "public, max-age=3600"  # the files change with the package only


@functools.cache
def _document() -> bytes:
    return msgspec.json.encode(openapi_document())


@routes.get("/v1/openapi.json")
async def openapi(request: web.Request) -> web.Response:
    return web.Response(body=_document(), content_type=JSON, charset="utf-8")


@routes.get("/docs")
async def docs(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC / PAGE, headers={"Content-Type": "text/html; charset=utf-8"})


@routes.get("/docs/{asset}")
async def docs_asset(request: web.Request) -> web.FileResponse:
    name = request.match_info["asset"]
    if name not in DOCS_ASSETS:
        raise web.HTTPNotFound()
    return web.FileResponse(STATIC / name, headers={"Content-Type": DOCS_ASSETS[name], "Cache-Control": _CACHE})
