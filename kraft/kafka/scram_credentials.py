"""DescribeUserScramCredentials and AlterUserScramCredentials over the user service
(kraft/server/security_apis.py): the credentials SASL/SCRAM checks on both APIs, which
`kraft users` and `/v1/users/scram-credentials` manage too.

Mechanisms are Kafka's ScramMechanism bytes (1 SCRAM-SHA-256, 2 SCRAM-SHA-512). Describing names
mechanisms and iteration counts, never keys; a user asked for who has none is RESOURCE_NOT_FOUND
and one asked for twice DUPLICATE_RESOURCE, as Kafka answers. The client salts and hashes (the
password never leaves it); the alterations are applied together through the controller, all or
none (Kafka answers each user on its own; every user here gets the one outcome), and a user named
in two alterations of one mechanism is DUPLICATE_RESOURCE before anything is sent.
"""

from __future__ import annotations

import base64
from collections import Counter
from typing import Any, Mapping

from kraft.errors import KraftError
from kraft.kafka.entities import error_fields
from kraft.kafka.handling import KafkaApi
from kraft.server.request_context import RequestContext
from kraft.server.services import BrokerServices

DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS = 50, 51

MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
_CODES = {name: code for code, name in MECHANISMS.items()}


async def describe(services: BrokerServices, ctx: RequestContext, request: Any) -> Mapping[str, Any]:
    known = {u.name: u for u in services.security.describe_scram_credentials(ctx, None)}
    names = None if not request.users else [u.name for u in request.users]
    if names is None:
        names = sorted(known)
    counts = Counter(names)
    results = []
    for name in dict.fromkeys(names):
        user = known.get(name)
        error = (KraftError("DUPLICATE_RESOURCE", f"Cannot describe SCRAM credentials for the same user twice "
                                                  f"in a single request: {name}") if counts[name] > 1 else
                 KraftError("RESOURCE_NOT_FOUND", f"Attempt to describe a user credential that does not exist: "
                                                  f"{name}") if user is None else None)
        results.append({"user": name, **error_fields(error), "credential_infos": [] if error else [
            {"mechanism": _CODES[c.mechanism], "iterations": c.iterations} for c in user.credentials
            if c.mechanism in _CODES]})
    return {**error_fields(None), "results": results}


def _mechanism(code: int) -> str:
    if code not in MECHANISMS:
        raise KraftError("UNSUPPORTED_SASL_MECHANISM", f"unknown SCRAM mechanism {code}")
    return MECHANISMS[code]


async def alter(services: BrokerServices, ctx: RequestContext, request: Any) -> Mapping[str, Any]:
    users = list(dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions]))
    outcome: KraftError | None = None
    try:
        pairs = Counter([(d.name, d.mechanism) for d in (*request.deletions, *request.upsertions)])
        twice = sorted({name for (name, _), n in pairs.items() if n > 1})
        if twice:
            raise KraftError("DUPLICATE_RESOURCE", f"a user's mechanism is altered twice: {', '.join(twice)}")
        deletions = [{"name": d.name, "mechanism": _mechanism(d.mechanism)} for d in request.deletions]
        upsertions = [{"name": u.name, "mechanism": _mechanism(u.mechanism), "iterations": int(u.iterations),
                       "salt": base64.b64encode(u.salt).decode(),
                       "salted_password": base64.b64encode(u.salted_password).decode()}
                      for u in request.upsertions]
        if users:
            await services.security.alter_scram_credentials(ctx, upsertions, deletions)
    except KraftError as e:
        outcome = e
    return {"results": [{"user": name, **error_fields(outcome)} for name in users]}


APIS = (
    KafkaApi(DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0, describe),
    KafkaApi(ALTER_USER_SCRAM_CREDENTIALS, 0, 0, alter),
)
