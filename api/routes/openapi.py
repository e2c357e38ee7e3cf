"""The API's own description: `GET /` (what answers here and where to look next), `GET
/v1/openapi.json` (the OpenAPI document, `api/openapi.py`) and `GET /docs`, the same document
browsable with Swagger UI, whose files ship in the package (`api/static/`): the page loads nothing
from another host. `GET /docs/` redirects to `/docs`: the page's links are relative to it (so it
works behind a proxy's path prefix), and from `/docs/` they would point one level too deep."""

from __future__ import annotations

import functools
from pathlib import Path

import msgspec
from aiohttp import web

from kraft.api.messages.node import RootResponse
from kraft.api.openapi import DOCS_ASSETS, openapi_document
from kraft.api.routes.services import services_of
from kraft.api.version import kraft_version
from kraft.api.wire import JSON, render

routes = web.RouteTableDef()

STATIC = Path(__file__).resolve().parents[1] / "static"
PAGE = "docs.html"
_CACHE = "public, max-age=3600"  # the files change with the package only


@functools.cache
def _document() -> bytes:
    return msgspec.json.encode(openapi_document())


@routes.get("/")
async def root(request: web.Request) -> web.Response:
    return render(request, RootResponse(name="kraft", version=kraft_version(), node_id=services_of(request).node.node_id,
                                        docs="/docs", openapi="/v1/openapi.json", health="/v1/health",
                                        metadata="/v1/metadata", metrics="/metrics"))


@routes.get("/v1/openapi.json")
async def openapi(request: web.Request) -> web.Response:
    return web.Response(body=_document(), content_type=JSON, charset="utf-8")


@routes.get("/docs")
async def docs(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC / PAGE, headers={"Content-Type": "text/html; charset=utf-8"})


@routes.get("/docs/")
async def docs_slash(request: web.Request) -> web.Response:
    raise web.HTTPMovedPermanently("../docs")  # relative: right behind a proxy's path prefix too


@routes.get("/docs/{asset}")
async def docs_asset(request: web.Request) -> web.FileResponse:
    name = request.match_info["asset"]
    if name not in DOCS_ASSETS:
        raise web.HTTPNotFound()
    return web.FileResponse(STATIC / name, headers={"Content-Type": DOCS_ASSETS[name], "Cache-Control": _CACHE})
