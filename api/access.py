"""What every HTTP route serves: one table, (method, route) -> `RouteAccess`, naming the Kafka API
the route plays (whose authorization rules are the services' table, kraft/server/access.py), or
none with a note saying why (probes, the API's own description, the cluster's inter-node routes),
so that no route can be served without a rule (a unit test walks the router).

The API names the request in its RequestContext (request metrics, audit lines). Before a route's
handler reads anything, the authorization middleware (`api/access_middleware.py`) applies every
rule of its API whose resource is known from the route alone: the cluster, the cluster's own
nodes, and a resource a path parameter names (`{topic}`, `{group}`); the services apply all their
rules again, and those that need the body. A route of an API only the active controller answers
is forwarded there whole from any other node (KIP-590), and the controller authorizes the client.
The inter-node routes (`node_only`) answer the cluster's own nodes only, refused to anyone else
before authentication (api/security.py).

`python -m kraft.api.access` prints the table of docs/security.md (a test keeps it in step).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import cache, cached_property

from kraft.metadata.acl import CLUSTER as CLUSTER_TYPE, GROUP, TOPIC, TRANSACTIONAL_ID
from kraft.server.access import (
    ADD_OFFSETS_TO_TXN, ADD_PARTITIONS_TO_TXN, ADMIN_ABORT, DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, END_TXN, GROUP_COORDINATOR,
    LIST_TRANSACTIONS, TXN_COORDINATOR, TXN_OFFSET_COMMIT, WRITE_TXN_MARKERS,
    ALTER_CLIENT_QUOTAS, ALTER_PARTITION_REASSIGNMENTS, ALTER_USER_SCRAM_CREDENTIALS, API_ACCESS, AUTO_CREATE, CLUSTER,
    CONSUMER_GROUP_DESCRIBE, CONSUMER_GROUP_HEARTBEAT, CREATE_ACLS, CREATE_PARTITIONS, CREATE_TOPICS, DELETE_ACLS,
    DELETE_GROUPS, DELETE_RECORDS, DELETE_TOPICS, DESCRIBE_ACLS, DESCRIBE_CLIENT_QUOTAS, DESCRIBE_CONFIGS,
    DESCRIBE_LOG_DIRS, DESCRIBE_QUORUM, DESCRIBE_USER_SCRAM_CREDENTIALS, ELECT_LEADERS, FETCH, FIND_COORDINATOR,
    INCREMENTAL_ALTER_CONFIGS, INIT_PRODUCER_ID, LIST_GROUPS, LIST_OFFSETS, LIST_PARTITION_REASSIGNMENTS, METADATA,
    NODES, OFFSET_COMMIT, OFFSET_DELETE, OFFSET_FETCH, PRODUCE, REPLICA_FETCH, TRANSACTIONAL_PRODUCE, Access, Rule,
    describe,
)

# Every route under these is the cluster's own unless the table gives it a client API (the
# controller's RPCs, ZooKeeper-mode pushes, the partition side of the transaction coordinator's)
NODE_PREFIXES = ("/v1/controller/", "/v1/zk/", "/v1/partitions/")
# the path parameters that name a resource, by the resource type they name
PATH_RESOURCES = {"topic": TOPIC, "group": GROUP, "transactional_id": TRANSACTIONAL_ID}
NODE_RULE = Rule("CLUSTER_ACTION", CLUSTER_TYPE, NODES)


@dataclass(frozen=True)
class RouteAccess:
    api: str = ""  # the Kafka API the route plays
    note: str = ""  # why a route plays none, or what the API's rules leave out here
    node_only: bool = False  # the cluster's inter-node API (Kafka's ClusterAction on the cluster)
    without: tuple[str, ...] = ()  # the API's `when` cases this route never meets
    only: str = ""  # the one `when` case of the API this route serves (its other rules never apply)

    @cached_property  # the table is fixed: derived once, not on every request
    def access(self) -> Access:
        if self.node_only:
            return Access((NODE_RULE,))
        if not self.api:
            return Access()
        access = API_ACCESS[self.api]
        return replace(access, rules=tuple(r for r in access.rules
                                           if r.when not in self.without and (not self.only or r.when == self.only)))

    @property
    def rules(self) -> tuple[Rule, ...]:
        return self.access.rules

    @property
    def controller(self) -> bool:
        return self.access.controller


NODE_ONLY = RouteAccess(node_only=True)
PUBLIC_DOCS = RouteAccess(note="the API's own description: any authenticated client")

ACCESS: dict[tuple[str, str], RouteAccess] = {
    ("GET", "/v1/health"): RouteAccess(note="liveness and readiness probes: no credentials needed"),
    ("GET", "/"): PUBLIC_DOCS,
    ("GET", "/v1/openapi.json"): PUBLIC_DOCS,
    ("GET", "/docs"): PUBLIC_DOCS,
    ("GET", "/docs/"): PUBLIC_DOCS,
    ("GET", "/docs/{asset}"): PUBLIC_DOCS,
    ("GET", "/metrics"): RouteAccess(
        DESCRIBE_LOG_DIRS, note="its series name every topic, as Kafka's DescribeLogDirs (which needs the same) does"),
    # -- topics and records
    ("GET", "/v1/metadata"): RouteAccess(METADATA),
    ("POST", "/v1/topics"): RouteAccess(CREATE_TOPICS),
    ("GET", "/v1/topics"): RouteAccess(METADATA, without=(AUTO_CREATE,)),
    ("GET", "/v1/topics/{topic}"): RouteAccess(METADATA, without=(AUTO_CREATE,)),
    ("DELETE", "/v1/topics/{topic}"): RouteAccess(DELETE_TOPICS),
    ("POST", "/v1/topics/{topic}/partitions"): RouteAccess(CREATE_PARTITIONS),
    ("GET", "/v1/topics/{topic}/configs"): RouteAccess(DESCRIBE_CONFIGS),
    ("PATCH", "/v1/topics/{topic}/configs"): RouteAccess(INCREMENTAL_ALTER_CONFIGS),
    # the route builds its batches itself: never transactional
    ("POST", "/v1/topics/{topic}/records"): RouteAccess(PRODUCE, without=(TRANSACTIONAL_PRODUCE,)),
    ("GET", "/v1/topics/{topic}/partitions/{partition}/records"): RouteAccess(FETCH, without=(REPLICA_FETCH,)),
    ("GET", "/v1/topics/{topic}/partitions/{partition}/offsets"): RouteAccess(LIST_OFFSETS),
    ("POST", "/v1/produce"): RouteAccess(PRODUCE),
    ("POST", "/v1/delete-records"): RouteAccess(DELETE_RECORDS),
    ("POST", "/v1/fetch"): RouteAccess(FETCH),
    ("GET", "/v1/replication"): RouteAccess(
        FETCH, only=REPLICA_FETCH, note="a follower's replication channel: the node its handshake names"),
    ("GET", "/v1/log-dirs"): RouteAccess(DESCRIBE_LOG_DIRS),
    ("GET", "/v1/trace"): RouteAccess(DESCRIBE_LOG_DIRS, note="stage timings of records by topic, as /metrics"),
    ("POST", "/v1/producers/init"): RouteAccess(INIT_PRODUCER_ID),
    # -- consumer groups
    ("GET", "/v1/groups"): RouteAccess(LIST_GROUPS),
    ("GET", "/v1/groups/{group}"): RouteAccess(CONSUMER_GROUP_DESCRIBE),
    ("DELETE", "/v1/groups/{group}"): RouteAccess(DELETE_GROUPS),
    ("GET", "/v1/groups/{group}/coordinator"): RouteAccess(FIND_COORDINATOR, only=GROUP_COORDINATOR),
    ("POST", "/v1/groups/{group}/heartbeat"): RouteAccess(CONSUMER_GROUP_HEARTBEAT),
    ("POST", "/v1/groups/{group}/offsets"): RouteAccess(OFFSET_COMMIT),
    ("GET", "/v1/groups/{group}/offsets"): RouteAccess(OFFSET_FETCH),
    ("POST", "/v1/groups/{group}/offsets/delete"): RouteAccess(OFFSET_DELETE),
    ("POST", "/v1/groups/{group}/offsets/reset"): RouteAccess(OFFSET_COMMIT),  # Kafka's tools reset by commits
    ("POST", "/v1/groups/{group}/txn-offsets"): RouteAccess(TXN_OFFSET_COMMIT),
    # -- transactions
    ("GET", "/v1/transactions/{transactional_id}/coordinator"): RouteAccess(FIND_COORDINATOR, only=TXN_COORDINATOR),
    ("POST", "/v1/transactions/{transactional_id}/init"): RouteAccess(INIT_PRODUCER_ID),
    ("POST", "/v1/transactions/{transactional_id}/partitions"): RouteAccess(ADD_PARTITIONS_TO_TXN),
    ("POST", "/v1/transactions/{transactional_id}/offsets"): RouteAccess(ADD_OFFSETS_TO_TXN),
    ("POST", "/v1/transactions/{transactional_id}/end"): RouteAccess(END_TXN),
    ("GET", "/v1/transactions/{transactional_id}"): RouteAccess(DESCRIBE_TRANSACTIONS),
    ("GET", "/v1/transactions"): RouteAccess(LIST_TRANSACTIONS),
    ("GET", "/v1/topics/{topic}/partitions/{partition}/producers"): RouteAccess(DESCRIBE_PRODUCERS),
    ("POST", "/v1/producers/describe"): RouteAccess(DESCRIBE_PRODUCERS),
    ("POST", "/v1/topics/{topic}/partitions/{partition}/abort-transaction"): RouteAccess(
        WRITE_TXN_MARKERS, only=ADMIN_ABORT),
    ("POST", "/v1/partitions/txn-markers"): RouteAccess(WRITE_TXN_MARKERS, node_only=True),
    ("POST", "/v1/partitions/txn-verify"): RouteAccess(WRITE_TXN_MARKERS, node_only=True),
    # -- security: SCRAM credentials, ACLs, client quotas
    ("GET", "/v1/users/scram-credentials"): RouteAccess(DESCRIBE_USER_SCRAM_CREDENTIALS),
    ("POST", "/v1/users/scram-credentials"): RouteAccess(ALTER_USER_SCRAM_CREDENTIALS),
    ("GET", "/v1/acls"): RouteAccess(DESCRIBE_ACLS),
    ("POST", "/v1/acls"): RouteAccess(CREATE_ACLS),
    ("POST", "/v1/acls/delete"): RouteAccess(DELETE_ACLS),
    ("GET", "/v1/client-quotas"): RouteAccess(DESCRIBE_CLIENT_QUOTAS),
    ("POST", "/v1/client-quotas"): RouteAccess(ALTER_CLIENT_QUOTAS),
    # -- Kafka's admin APIs only the active controller answers
    ("GET", "/v1/controller/quorum"): RouteAccess(DESCRIBE_QUORUM),
    ("POST", "/v1/controller/elect-leaders"): RouteAccess(ELECT_LEADERS),
    ("GET", "/v1/controller/reassignments"): RouteAccess(LIST_PARTITION_REASSIGNMENTS),
    ("POST", "/v1/controller/reassignments"): RouteAccess(ALTER_PARTITION_REASSIGNMENTS),
    # -- the cluster's own: controller RPCs, forwarded changes, ZooKeeper-mode pushes
    **{(method, route): NODE_ONLY for method, route in (
        ("GET", "/v1/controller/quorum/local"), ("GET", "/v1/controller/metadata"),
        ("GET", "/v1/controller/snapshot"), ("POST", "/v1/controller/brokers/register"),
        ("POST", "/v1/controller/brokers/heartbeat"), ("POST", "/v1/controller/brokers/unregister"),
        ("POST", "/v1/controller/producer-ids"), ("POST", "/v1/controller/alter-partition"),
        ("POST", "/v1/controller/topics"), ("POST", "/v1/controller/topics/delete"),
        ("POST", "/v1/controller/topics/partitions"), ("POST", "/v1/controller/configs"),
        ("POST", "/v1/controller/users/scram-credentials"), ("POST", "/v1/controller/acls"),
        ("POST", "/v1/controller/acls/delete"), ("POST", "/v1/controller/client-quotas"),
        ("POST", "/v1/zk/update-metadata"), ("POST", "/v1/zk/controlled-shutdown"),
    )},
}


def access_of(method: str, route: str) -> RouteAccess | None:
    """The entry of a route (its path template, e.g. `/v1/topics/{topic}`); HEAD is GET's."""
    return ACCESS.get(("GET" if method == "HEAD" else method, route))


def is_node_route(method: str, path_: str) -> bool:
    """Served to the cluster's own nodes only: refused to anyone else before authentication."""
    entry = access_of(method, path_)
    return entry.node_only if entry is not None else path_.startswith(NODE_PREFIXES)


def path_parameters(route: str) -> dict[str, str]:
    """Resource type -> the path parameter of `route` that names one."""
    return {PATH_RESOURCES[p]: p for p in re.findall(r"\{(\w+)\}", route) if p in PATH_RESOURCES}


@cache  # bounded by the routes; derived once instead of on every request
def up_front(route: str, entry: RouteAccess) -> tuple[tuple[Rule, str | None], ...]:
    """The rules the middleware applies before the handler runs, each with the path parameter
    naming its resource (None: the cluster, or the cluster's own nodes)."""
    named = path_parameters(route)
    found: list[tuple[Rule, str | None]] = []
    for rule in entry.rules:
        if rule.when:
            continue
        if rule.source in (CLUSTER, NODES):
            found.append((rule, None))
        elif rule.resource_type in named and not rule.names:
            found.append((rule, named[rule.resource_type]))
    return tuple(found)


# -- the table of docs/security.md ---------------------------------------------------------------


def markdown_table() -> str:
    rows = ["| Route | Kafka API | Needs |", "|---|---|---|"]
    for (method, route), entry in ACCESS.items():
        named = {resource_type: f"the {parameter.replace('_', ' ')}"
                 for resource_type, parameter in path_parameters(route).items()}
        parts = describe(entry.access, named) or ["none"]
        if entry.note:
            parts.append(entry.note)
        rows.append(f"| `{method} {route}` | {entry.api or '-'} | {'; '.join(parts)} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(markdown_table(), end="")
