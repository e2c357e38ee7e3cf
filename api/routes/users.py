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

from kraft.api.errors import KraftError, invalid_request
from kraft.api.wire import INT32_MAX, Fields, read_body, render


class UserService(Protocol):
    def describe(self, user: str | None) -> list[dict[str, Any]]: ...

    async def alter(self, upsertions: list[dict[str, Any]], deletions: list[dict[str, Any]]) -> dict[str, Any]: ...


USERS = web.AppKey("users", UserService)
MAX_ENTRIES = 1000
MAX_NAME_CHARS = 1024

routes = web.RouteTableDef()


def _service(request: web.Request) -> UserService:
    if USERS not in request.app:
        raise KraftError("UNSUPPORTED_VERSION", "this node does not manage SCRAM credentials")
    return request.app[USERS]


@routes.get("/v1/users/scram-credentials")
async def describe_scram_credentials(request: web.Request) -> web.Response:
    user = Fields(request.query, "query").get_str("user", None)
    return render(request, {"users": _service(request).describe(user)})


def _scram_entry(f: Fields, upsertion: bool) -> dict[str, Any]:
    """One upsertion or deletion with every field of the type it must have (strings, an integer
    iteration count), unknown fields dropped; what the values mean (a known mechanism, base64 of
    the right length, iterations in range) the controller checks."""
    name = f.get_str("name")
    if not 0 < len(name) <= MAX_NAME_CHARS:
        raise invalid_request(f"{f.where}.name must have 1 to {MAX_NAME_CHARS} characters")
    entry: dict[str, Any] = {"name": name, "mechanism": f.get_str("mechanism")}
    if upsertion:
        iterations = f.get_int("iterations", None, maximum=INT32_MAX)  # Kafka's field is an int32
        if iterations is not None:
            entry["iterations"] = iterations
        entry["salt"] = f.get_str("salt")
        entry["salted_password"] = f.get_str("salted_password")
    return entry


def scram_alterations(f: Fields) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """`upsertions` and `deletions` of an AlterUserScramCredentials body, type-checked (INVALID_REQUEST
    naming the field): shared by this route and the controller's."""
    upsertions, deletions = (
        [_scram_entry(f.child(raw, f"{name}[{i}]"), name == "upsertions")
         for i, raw in enumerate(f.get_list(name, MAX_ENTRIES))] if f.has(name) else []
        for name in ("upsertions", "deletions"))
    return upsertions, deletions


@routes.post("/v1/users/scram-credentials")
async def alter_scram_credentials(request: web.Request) -> web.Response:
    body, _ = await read_body(request)
    upsertions, deletions = scram_alterations(Fields(body))
    return render(request, await _service(request).alter(upsertions, deletions))
