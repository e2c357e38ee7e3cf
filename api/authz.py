"""Authorization in the routes: may this request's principal, from its host, do an operation on a
resource (Kafka's Authorizer.authorize), and the error when not.

The node sets `AUTHORIZER` when `authorizer.class.name` names Kafka's StandardAuthorizer; without
it every request is allowed (as in Kafka with no authorizer). The cluster's own nodes calling as
themselves are always allowed (their routes are guarded by api/security.py). A denial is Kafka's
`*_AUTHORIZATION_FAILED` for the resource type (403), logged like Kafka's authorizer audit line.

The client host is the peer address, or for a request another node forwarded (its principal in
`X-Kraft-Principal`), the client's address in `X-Kraft-Client-Host`, believed only under a valid
node signature like the principal.
"""

from __future__ import annotations

import logging
from typing import Callable, Iterable, Protocol, TypeVar

from aiohttp import web

from kraft.api.errors import KraftError
from kraft.api.security import CLIENT_HOST_HEADER, FORWARDED_BY, NODE_ID, principal_of
from kraft.metadata.acl import CLUSTER, CLUSTER_NAME, GROUP, TOPIC, TRANSACTIONAL_ID, operation_name

log = logging.getLogger("kraft.authorizer")

ERROR_CODES = {
    TOPIC: "TOPIC_AUTHORIZATION_FAILED",
    GROUP: "GROUP_AUTHORIZATION_FAILED",
    CLUSTER: "CLUSTER_AUTHORIZATION_FAILED",
    TRANSACTIONAL_ID: "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
}
_WHAT = {TOPIC: "topic", GROUP: "group", CLUSTER: "cluster", TRANSACTIONAL_ID: "transactional id"}


class Authorizer(Protocol):
    """Implemented by the node over its metadata image (kraft/security/authorizer.py)."""

    def authorize(self, principal: str, host: str, operation: str, resource_type: str, resource_name: str) -> bool: ...

    def denied(self, resource_type: str) -> None:
        """Count a denial."""


AUTHORIZER = web.AppKey("authorizer", Authorizer)
T = TypeVar("T")


def client_host(request: web.Request) -> str:
    """The address of the client the request is from (through a forwarding node, the client's)."""
    if FORWARDED_BY in request:
        forwarded = request.headers.get(CLIENT_HOST_HEADER)
        if forwarded:
            return forwarded
    return request.remote or ""


def enabled(request: web.Request) -> bool:
    return AUTHORIZER in request.app


def allowed(request: web.Request, operation: str, resource_type: str, resource_name: str = CLUSTER_NAME) -> bool:
    authorizer = request.app.get(AUTHORIZER)
    if authorizer is None or NODE_ID in request:
        return True
    return authorizer.authorize(principal_of(request), client_host(request), operation, resource_type, resource_name)


def authorization_failed(request: web.Request, operation: str, resource_type: str,
                         names: Iterable[str] = (CLUSTER_NAME,)) -> KraftError:
    """Logs the denial (Kafka's audit line) and counts it; the caller raises or reports it."""
    names = sorted(names)
    principal = principal_of(request)
    log.info("Principal = %s is Denied operation = %s from host = %s on resource = %s:LITERAL:%s for %s %s",
             principal, operation_name(operation), client_host(request), _WHAT[resource_type].title(),
             ",".join(names), request.method, request.path)
    if AUTHORIZER in request.app:
        request.app[AUTHORIZER].denied(resource_type)
    if resource_type == CLUSTER:
        return KraftError(ERROR_CODES[CLUSTER], f"Cluster authorization failed: {principal} may not "
                                                f"{operation_name(operation)} the cluster")
    return KraftError(ERROR_CODES[resource_type], f"Not authorized to access {_WHAT[resource_type]}: "
                                                  f"[{', '.join(names)}] ({principal} may not "
                                                  f"{operation_name(operation)})")


def require(request: web.Request, operation: str, resource_type: str, resource_name: str = CLUSTER_NAME) -> None:
    """403 with Kafka's *_AUTHORIZATION_FAILED unless the principal may do `operation`."""
    if not allowed(request, operation, resource_type, resource_name):
        raise authorization_failed(request, operation, resource_type, (resource_name,))


def require_topics(request: web.Request, operation: str, names: Iterable[str]) -> None:
    """One 403 naming every topic of `names` the principal may not `operation`."""
    refused = sorted({n for n in names if not allowed(request, operation, TOPIC, n)})
    if refused:
        raise authorization_failed(request, operation, TOPIC, refused)


def may_create_topic(request: web.Request, name: str) -> bool:
    """Kafka's CreateTopics rule: Create on the cluster, or on the topic."""
    return allowed(request, "CREATE", CLUSTER) or allowed(request, "CREATE", TOPIC, name)


def visible(request: web.Request, operation: str, resource_type: str, items: Iterable[T],
            name_of: Callable[[T], str]) -> list[T]:
    """The items (topics, groups) the principal may `operation`, for listings (never an error)."""
    if not enabled(request):
        return list(items)
    return [item for item in items if allowed(request, operation, resource_type, name_of(item))]
