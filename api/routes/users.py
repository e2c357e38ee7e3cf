"""SCRAM credentials of users, as kafka-configs --entity-type users manages them (Kafka's
DescribeUserScramCredentials and AlterUserScramCredentials).

`GET /v1/users/scram-credentials[?user=NAME]` lists users with their mechanisms and iteration
counts (never keys). `POST /v1/users/scram-credentials` with `upsertions` ({name, mechanism,
iterations, salt, salted_password}: base64; the client salts and iterates, so the password never
leaves it) and `deletions` ({name, mechanism}) changes them all or none, through the controller.
Describing needs Describe on the cluster, changing Alter (api/access.py), as in Kafka.
"""

from __future__ import annotations

from typing import Any, Protocol

import msgspec
from aiohttp import web

from kraft.api.errors import KraftError
from kraft.api.messages.security import (
    AlterScramCredentialsRequest, DescribeScramCredentialsResponse, DescribeScramQuery,
)
from kraft.api.wire import read_message, read_query, render


class UserService(Protocol):
    def describe(self, user: str | None) -> list[dict[str, Any]]: ...

    async def alter(self, upsertions: list[dict[str, Any]], deletions: list[dict[str, Any]]) -> dict[str, Any]: ...


USERS = web.AppKey("users", UserService)

routes = web.RouteTableDef()


def _service(request: web.Request) -> UserService:
    if USERS not in request.app:
        raise KraftError("UNSUPPORTED_VERSION", "this node does not manage SCRAM credentials")
    return request.app[USERS]


@routes.get("/v1/users/scram-credentials")
async def describe_scram_credentials(request: web.Request) -> web.Response:
    user = read_query(request, DescribeScramQuery).user
    return render(request, DescribeScramCredentialsResponse(users=_service(request).describe(user)))


def scram_alterations(body: AlterScramCredentialsRequest) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """`upsertions` and `deletions` as the controller takes them (iterations left out when absent):
    shared by this route and the controller's."""
    return msgspec.to_builtins(body.upsertions), msgspec.to_builtins(body.deletions)


@routes.post("/v1/users/scram-credentials")
async def alter_scram_credentials(request: web.Request) -> web.Response:
    upsertions, deletions = scram_alterations(await read_message(request, AlterScramCredentialsRequest))
    return render(request, await _service(request).alter(upsertions, deletions))
