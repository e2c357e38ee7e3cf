"""Authorization in the routes: may this request's principal, from its host, do an operation on a
resource (Kafka's Authorizer.authorize), and the error when not.

Which operation on which resource a route needs is the route's entry in `api/access.py`: the
authorization middleware (`api/access_middleware.py`) applies the rules whose resource is known
before the handler runs (`authorize_route`); a handler applies the rest with `require_named` (the
names it read from the request, or a rule's `when` case) and `visible` (filtering what it lists),
which take the operation and resource type from the same entry.

The node sets `AUTHORIZER` when `authorizer.class.name` names Kafka's StandardAuthorizer; without
it every request is allowed (as in Kafka with no authorizer). The cluster's own nodes calling as
themselves are always allowed. A denial is Kafka's `*_AUTHORIZATION_FAILED` for the resource type
(403), logged like Kafka's authorizer audit line.

The client host is the peer address, or for a request another node forwarded (its principal in
`X-Kraft-Principal`), the client's address in `X-Kraft-Client-Host`, believed only under a valid
node signature like the principal.
"""

from __future__ import annotations

import logging
from typing import Callable, Iterable, Protocol, TypeVar

from aiohttp import web

from kraft.api.access import (
    CLUSTER as CLUSTER_SOURCE, LISTED, NAMED, NODES, PATH, RESOURCE_WORDS, Access, Rule, access_of,
)
from kraft.api.errors import KraftError
from kraft.api.security import CLIENT_HOST_HEADER, FORWARDED_BY, NODE_ID, principal_of, require_node
from kraft.metadata.acl import CLUSTER, CLUSTER_NAME, GROUP, TOPIC, TRANSACTIONAL_ID, operation_name

log = logging.getLogger("kraft.authorizer")

ERROR_CODES = {
    TOPIC: "TOPIC_AUTHORIZATION_FAILED",
    GROUP: "GROUP_AUTHORIZATION_FAILED",
    CLUSTER: "CLUSTER_AUTHORIZATION_FAILED",
    TRANSACTIONAL_ID: "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
}


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
             principal, operation_name(operation), client_host(request), RESOURCE_WORDS[resource_type].title(),
             ",".join(names), request.method, request.path)
    if AUTHORIZER in request.app:
        request.app[AUTHORIZER].denied(resource_type)
    if resource_type == CLUSTER:
        return KraftError(ERROR_CODES[CLUSTER], f"Cluster authorization failed: {principal} may not "
                                                f"{operation_name(operation)} the cluster")
    return KraftError(ERROR_CODES[resource_type], f"Not authorized to access {RESOURCE_WORDS[resource_type]}: "
                                                  f"[{', '.join(names)}] ({principal} may not "
                                                  f"{operation_name(operation)})")


def entry_of(request: web.Request) -> Access | None:
    """The access table's entry of the route `request` matched; None when it matched none (404,
    405: answered as such). A served route without an entry is refused (fail closed)."""
    if request.match_info.http_exception is not None:
        return None
    resource = request.match_info.route.resource
    entry = None if resource is None else access_of(request.method, resource.canonical)
    if entry is None:
        log.error("no authorization rule for %s %s: refused (add it to api/access.py)", request.method,
                  request.path)
        raise KraftError("CLUSTER_AUTHORIZATION_FAILED", "this route has no authorization rule")
    return entry


def _rule(request: web.Request, source: str, when: str) -> Rule:
    entry = entry_of(request)
    for rule in entry.rules if entry is not None else ():
        if rule.when == when and (when or rule.source == source):
            return rule
    raise LookupError(f"api/access.py has no {source} rule {when!r} for {request.method} {request.path}")


def permits(request: web.Request, rule: Rule, name: str) -> bool:
    if rule.or_cluster and allowed(request, rule.operation, CLUSTER):
        return True
    return allowed(request, rule.operation, rule.resource_type, name)


def _require(request: web.Request, rule: Rule, names: Iterable[str]) -> None:
    """One 403 naming every name of `names` the rule refuses."""
    refused = sorted({n for n in names if not permits(request, rule, n)})
    if refused:
        raise authorization_failed(request, rule.operation, rule.resource_type, refused)


def authorize_route(request: web.Request, entry: Access) -> None:
    """The route's rules whose resource is known before its handler runs: the cluster, a path
    parameter, or the cluster's own nodes."""
    for rule in entry.rules:
        if not rule.up_front:
            continue
        if rule.source == NODES:
            require_node(request)
        elif rule.source == CLUSTER_SOURCE:
            _require(request, rule, (CLUSTER_NAME,))
        else:
            _require(request, rule, (request.match_info[rule.source[len(PATH):]],))


def require_named(request: web.Request, names: Iterable[str], when: str = "") -> None:
    """The route's NAMED rule (or its rule for the case `when`) on every name of `names`."""
    _require(request, _rule(request, NAMED, when), names)


def require_nodes(request: web.Request, when: str, as_node_id: int) -> None:
    """The route's NODES rule for the case `when`: one of the cluster's nodes calling as `as_node_id`."""
    _rule(request, NODES, when)
    require_node(request, as_node_id=as_node_id)


def visible(request: web.Request, items: Iterable[T], name_of: Callable[[T], str]) -> list[T]:
    """The items the route's LISTED rule allows (listings: never an error)."""
    rule = _rule(request, LISTED, "")
    if not enabled(request) or (rule.or_cluster and allowed(request, rule.operation, CLUSTER)):
        return list(items)
    return [item for item in items if allowed(request, rule.operation, rule.resource_type, name_of(item))]


def listing_refusal(request: web.Request, name: str) -> KraftError:
    """The error reported for a name the LISTED rule hides, when the request named it."""
    rule = _rule(request, LISTED, "")
    return authorization_failed(request, rule.operation, rule.resource_type, (name,))
