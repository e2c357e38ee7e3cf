"""Authorization in the services (Kafka's AuthHelper): may the request context's principal, from
its address, do an operation on a resource (Kafka's Authorizer.authorize), and the error when not.

The rules are the API's entries of `access.py`; a service applies them with `require` (every
name must be allowed: one 403 naming each refused one), `visible` (a listing keeps what is
allowed) and `require_node` (the cluster's own nodes only). `refused` tells the names a rule
refuses without raising, for a listener that answers each resource on its own (Kafka's
per-partition TOPIC_AUTHORIZATION_FAILED).

The node passes the `Authorizer` when `authorizer.class.name` names Kafka's StandardAuthorizer;
without it every request is allowed (as in Kafka with no authorizer). The cluster's own nodes
calling as themselves are always allowed. A denial is Kafka's `*_AUTHORIZATION_FAILED` for the
resource type, logged like Kafka's authorizer audit line (logger `kraft.authorizer`) and counted.
A request that must come from one of the cluster's nodes and does not is
CLUSTER_AUTHORIZATION_FAILED, logged (logger `kraft.security`) and counted; a listener that does
not authenticate nodes (`check_nodes` false: an in-process test harness) lets it through.
"""

from __future__ import annotations

import logging
from typing import Callable, Iterable, Protocol, TypeVar

from kraft.errors import KraftError
from kraft.metadata.acl import CLUSTER, CLUSTER_NAME, GROUP, TOPIC, TRANSACTIONAL_ID, operation_name
from kraft.server.access import RESOURCE_WORDS, Rule
from kraft.server.request_context import RequestContext

log = logging.getLogger("kraft.authorizer")
security_log = logging.getLogger("kraft.security")

ERROR_CODES = {
    TOPIC: "TOPIC_AUTHORIZATION_FAILED",
    GROUP: "GROUP_AUTHORIZATION_FAILED",
    CLUSTER: "CLUSTER_AUTHORIZATION_FAILED",
    TRANSACTIONAL_ID: "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
}
NODES_ONLY_MESSAGE = "Cluster authorization failed: this request is served to the cluster's own nodes only"

T = TypeVar("T")


class Authorizer(Protocol):
    """Implemented by the node over its metadata image (kraft/security/authorizer.py)."""

    def authorize(self, principal: str, host: str, operation: str, resource_type: str, resource_name: str) -> bool: ...

    def denied(self, resource_type: str) -> None:
        """Count a denial."""


class Authorization:
    def __init__(self, authorizer: Authorizer | None = None, *, check_nodes: bool = True,
                 node_refused: Callable[[], None] = lambda: None) -> None:
        """`node_refused()` counts a request refused for not coming from one of the cluster's nodes."""
        self.authorizer = authorizer
        self.check_nodes = check_nodes
        self.node_refused = node_refused

    @property
    def enabled(self) -> bool:
        return self.authorizer is not None

    def allowed(self, ctx: RequestContext, operation: str, resource_type: str,
                resource_name: str = CLUSTER_NAME) -> bool:
        if self.authorizer is None or ctx.is_node:
            return True
        return self.authorizer.authorize(ctx.principal, ctx.client_address, operation, resource_type, resource_name)

    def permits(self, ctx: RequestContext, rule: Rule, name: str) -> bool:
        if rule.or_cluster and self.allowed(ctx, rule.operation, CLUSTER):
            return True
        return self.allowed(ctx, rule.operation, rule.resource_type, name)

    def refused(self, ctx: RequestContext, rule: Rule, names: Iterable[str]) -> list[str]:
        """The names of `names` the rule refuses, sorted (none is logged or counted)."""
        return sorted({n for n in names if not self.permits(ctx, rule, n)})

    def require(self, ctx: RequestContext, rule: Rule, names: Iterable[str] = (CLUSTER_NAME,)) -> None:
        """One error naming every name of `names` the rule refuses (the cluster: no names)."""
        refused = self.refused(ctx, rule, names)
        if refused:
            raise self.failure(ctx, rule.operation, rule.resource_type, refused)

    def visible(self, ctx: RequestContext, rule: Rule, items: Iterable[T], name_of: Callable[[T], str]) -> list[T]:
        """The items a LISTED rule allows (listings: never an error)."""
        if self.authorizer is None or (rule.or_cluster and self.allowed(ctx, rule.operation, CLUSTER)):
            return list(items)
        return [item for item in items if self.allowed(ctx, rule.operation, rule.resource_type, name_of(item))]

    def failure(self, ctx: RequestContext, operation: str, resource_type: str,
                names: Iterable[str] = (CLUSTER_NAME,)) -> KraftError:
        """Logs the denial (Kafka's audit line) and counts it; the caller raises or reports it."""
        names = sorted(names)
        log.info("Principal = %s is Denied operation = %s from host = %s on resource = %s:LITERAL:%s "
                 "for request = %s", ctx.principal, operation_name(operation), ctx.client_address,
                 RESOURCE_WORDS[resource_type].title(), ",".join(names), ctx.api or "-")
        if self.authorizer is not None:
            self.authorizer.denied(resource_type)
        if resource_type == CLUSTER:
            return KraftError(ERROR_CODES[CLUSTER], f"Cluster authorization failed: {ctx.principal} may not "
                                                    f"{operation_name(operation)} the cluster")
        return KraftError(ERROR_CODES[resource_type], f"Not authorized to access {RESOURCE_WORDS[resource_type]}: "
                                                      f"[{', '.join(names)}] ({ctx.principal} may not "
                                                      f"{operation_name(operation)})")

    def require_node(self, ctx: RequestContext, as_node_id: int | None = None) -> None:
        """CLUSTER_AUTHORIZATION_FAILED unless one of the cluster's nodes calls as itself (and,
        with `as_node_id`, is that node)."""
        if not self.check_nodes:
            return
        if ctx.node_id is None:
            raise self.node_failure(ctx, "no node credential")
        if as_node_id is not None and ctx.node_id != as_node_id:
            raise self.node_failure(ctx, f"node {ctx.node_id} acting as node {as_node_id}")

    def node_failure(self, ctx: RequestContext, reason: str) -> KraftError:
        """Logs and counts the refusal of a request only the cluster's nodes may send."""
        security_log.warning("refused %s from %s (principal %s): %s", ctx.api or "a request", ctx.client_address,
                             ctx.principal, reason, extra={"client": ctx.client_address})
        self.node_refused()
        return KraftError("CLUSTER_AUTHORIZATION_FAILED", NODES_ONLY_MESSAGE)
