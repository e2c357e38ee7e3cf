"""SCRAM credentials of users, as kafka-configs --entity-type users manages them (Kafka's
DescribeUserScramCredentials and AlterUserScramCredentials).

`GET /v1/users/scram-credentials[?user=NAME]` lists users with their mechanisms and iteration
counts (never keys). `POST /v1/users/scram-credentials` with `upsertions` ({name, mechanism,
iterations, salt, salted_password}: base64; the client salts and iterates, so the password never
leaves it) and `deletions` ({name, mechanism}) changes them all or none, through the controller.
Describing needs Describe on the cluster, changing Alter (kraft/server/access.py), as in Kafka.
"""

from __future__ import annotations

from typing import Any

import msgspec
from aiohttp import web

from kraft.api.messages.security import (
    AlterScramCredentialsRequest, AlterScramCredentialsResponse, DescribeScramCredentialsResponse,
    DescribeScramQuery,
)
from kraft.api.routes.services import context_of, services_of
from kraft.api.wire import read_message, read_query, render

routes = web.RouteTableDef()


@routes.get("/v1/users/scram-credentials")
async def describe_scram_credentials(request: web.Request) -> web.Response:
    user = read_query(request, DescribeScramQuery).user
    users = services_of(request).security.describe_scram_credentials(context_of(request), user)
    return render(request, msgspec.convert({"users": users}, DescribeScramCredentialsResponse, from_attributes=True))


def scram_alterations(body: AlterScramCredentialsRequest) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """`upsertions` and `deletions` as the controller takes them (iterations left out when absent):
    shared by this route and the controller's."""
    return msgspec.to_builtins(body.upsertions), msgspec.to_builtins(body.deletions)


@routes.post("/v1/users/scram-credentials")
async def alter_scram_credentials(request: web.Request) -> web.Response:
    upsertions, deletions = scram_alterations(await read_message(request, AlterScramCredentialsRequest))
    results = await services_of(request).security.alter_scram_credentials(context_of(request), upsertions, deletions)
    return render(request, msgspec.convert({"results": results}, AlterScramCredentialsResponse, from_attributes=True))
