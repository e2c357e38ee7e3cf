"""SCRAM credentials of users, as kafka-configs --entity-type users manages them (Kafka's
DescribeUserScramCredentials and AlterUserScramCredentials).

`GET /v1/users/scram-credentials[?user=NAME]` lists users with their mechanisms and iteration
counts (never keys). `POST /v1/users/scram-credentials` with `upsertions` ({name, mechanism,
iterations, salt, salted_password}: base64; the client salts and iterates, so the password never
leaves it) and `deletions` ({name, mechanism}) changes them all or none, through the controller.
"""

from __future__ import annotations

from typing import Any, Protocol

from aiohttp import web

from api.errors import KraftError
from api.wire import Fields, read_body, render


class UserService(Protocol):
    def describe(self, user: str | None) -> list[dict[str, Any]]: ...

    async def alter(self, upsertions: list[dict[str, Any]], deletions: list[dict[str, Any]]) -> dict[str, Any]: ...


USERS = web.AppKey("users", UserService)
MAX_ENTRIES = 1000

routes = web.RouteTableDef()


def _service(request: web.Request) -> UserService:
    if USERS not in request.app:
        raise KraftError("UNSUPPORTED_VERSION", "this node does not manage SCRAM credentials")
    return request.app[USERS]


@routes.get("/v1/users/scram-credentials")
async def describe_scram_credentials(request: web.Request) -> web.Response:
    user = Fields(request.query, "query").get_str("user", None)
    return render(request, {"users": _service(request).describe(user)})


@routes.post("/v1/users/scram-credentials")
async def alter_scram_credentials(request: web.Request) -> web.Response:
    body, _ = await read_body(request)
    f = Fields(body)
    upsertions, deletions = (
        [dict(f.child(raw, f"{name}[{i}]").obj) for i, raw in enumerate(f.get_list(name, MAX_ENTRIES))]
        if f.has(name) else []
        for name in ("upsertions", "deletions"))
    return render(request, await _service(request).alter(upsertions, deletions))
