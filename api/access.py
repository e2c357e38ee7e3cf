"""What every route needs: one table, (method, route) -> `Access`, with Kafka's per-API
authorization rules (the Kafka docs' "Operations and Resources on Protocols", KafkaApis and
ControllerApis), so that no route can be served without a rule (a unit test walks the router).

An `Access` is the `Rule`s of a route, or none with a note saying why (probes, the API's own
description).
A rule is an operation on a resource type, and where the resource's name comes from:
- `CLUSTER`: the cluster (`kafka-cluster`);
- `path(name)`: the route's path parameter;
- `NAMED`: names the handler gives, every one of which must be allowed (the topics of a produce,
  the topics a group description shows); one refused name refuses the request;
- `LISTED`: the answer lists only what is allowed, never an error (metadata, topic listings);
- `NODES`: the cluster's own nodes only, by their node credential (Kafka's ClusterAction on the
  cluster, which in Kafka only brokers and controllers hold).
`or_cluster`: the operation on the cluster allows every resource of the type (Kafka's CreateTopics,
DeleteTopics, ListGroups). `when`: the rule applies only in that case (the handler checks it).
The authorization middleware (`api/access_middleware.py`) applies every rule whose name is known
before the handler runs (CLUSTER, a path parameter, NODES); handlers take the others from here
(`api/authz.py`: `require_named`, `visible`). `controller`: Kafka's forwardable controller APIs that
only the active controller answers; any other node forwards them there with the client's principal
(KIP-590), and the controller authorizes the client.

`python -m kraft.api.access` prints the table of docs/security.md (a test keeps it in step).
"""

from __future__ import annotations

from dataclasses import dataclass

from kraft.metadata.acl import CLUSTER as CLUSTER_TYPE, GROUP, TOPIC, TRANSACTIONAL_ID, operation_name

CLUSTER = "cluster"
NAMED = "named"
LISTED = "listed"
NODES = "nodes"
PATH = "path:"

AUTO_CREATE = "auto-creating a topic (`auto.create.topics.enable`)"
REPLICA_FETCH = "a replica's fetch (`replica_id` set)"

# Every route under these is the cluster's own unless the table gives it a client rule (the
# controller's RPCs, ZooKeeper-mode pushes, the partition side of the transaction coordinator's)
NODE_PREFIXES = ("/v1/controller/", "/v1/zk/", "/v1/partitions/")


def path(parameter: str) -> str:
    return PATH + parameter


@dataclass(frozen=True)
class Rule:
    operation: str  # Kafka's name: DESCRIBE, ALTER_CONFIGS, ...
    resource_type: str  # TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID
    source: str  # CLUSTER, path(...), NAMED, LISTED or NODES
    or_cluster: bool = False
    when: str = ""
    names: str = ""  # NAMED: whose names, when not the request's; LISTED: what is listed

    @property
    def up_front(self) -> bool:
        """Applied by the middleware before the handler runs."""
        return not self.when and (self.source in (CLUSTER, NODES) or self.source.startswith(PATH))


@dataclass(frozen=True)
class Access:
    rules: tuple[Rule, ...] = ()
    controller: bool = False
    note: str = ""  # why a route needs no rule, or what the rules leave out

    @property
    def node_only(self) -> bool:
        return any(r.source == NODES and not r.when for r in self.rules)


def _cluster(operation: str, controller: bool = False) -> Access:
    return Access((Rule(operation, CLUSTER_TYPE, CLUSTER),), controller=controller)


NODE_ONLY = Access((Rule("CLUSTER_ACTION", CLUSTER_TYPE, NODES),))
PUBLIC_DOCS = Access(note="the API's own description: any authenticated client")
TOPIC_PATH = path("topic")
GROUP_PATH = path("group")
TXN_PATH = path("transactional_id")
_AUTO_CREATE_NAMED = Rule("CREATE", TOPIC, NAMED, or_cluster=True, when=AUTO_CREATE)

ACCESS: dict[tuple[str, str], Access] = {
    ("GET", "/v1/health"): Access(note="liveness and readiness probes: no credentials needed"),
    ("GET", "/"): PUBLIC_DOCS,
    ("GET", "/v1/openapi.json"): PUBLIC_DOCS,
    ("GET", "/docs"): PUBLIC_DOCS,
    ("GET", "/docs/"): PUBLIC_DOCS,
    ("GET", "/docs/{asset}"): PUBLIC_DOCS,
    ("GET", "/metrics"): Access(
        (Rule("DESCRIBE", CLUSTER_TYPE, CLUSTER),),
        note="its series name every topic, as Kafka's DescribeLogDirs (which needs the same) does"),
    # -- topics and records
    ("GET", "/v1/metadata"): Access((Rule("DESCRIBE", TOPIC, LISTED), _AUTO_CREATE_NAMED)),
    ("POST", "/v1/topics"): Access((Rule("CREATE", TOPIC, NAMED, or_cluster=True),)),
    ("GET", "/v1/topics"): Access((Rule("DESCRIBE", TOPIC, LISTED),)),
    ("GET", "/v1/topics/{topic}"): Access((Rule("DESCRIBE", TOPIC, TOPIC_PATH),)),
    ("DELETE", "/v1/topics/{topic}"): Access((Rule("DELETE", TOPIC, TOPIC_PATH, or_cluster=True),)),
    ("POST", "/v1/topics/{topic}/partitions"): Access((Rule("ALTER", TOPIC, TOPIC_PATH),)),
    ("GET", "/v1/topics/{topic}/configs"): Access((Rule("DESCRIBE_CONFIGS", TOPIC, TOPIC_PATH),)),
    ("PATCH", "/v1/topics/{topic}/configs"): Access((Rule("ALTER_CONFIGS", TOPIC, TOPIC_PATH),)),
    ("POST", "/v1/topics/{topic}/records"): Access((
        Rule("WRITE", TOPIC, TOPIC_PATH), Rule("CREATE", TOPIC, TOPIC_PATH, or_cluster=True, when=AUTO_CREATE))),
    ("GET", "/v1/topics/{topic}/partitions/{partition}/records"): Access((Rule("READ", TOPIC, TOPIC_PATH),)),
    ("GET", "/v1/topics/{topic}/partitions/{partition}/offsets"): Access((Rule("DESCRIBE", TOPIC, TOPIC_PATH),)),
    ("POST", "/v1/produce"): Access((Rule("WRITE", TOPIC, NAMED), _AUTO_CREATE_NAMED)),
    ("POST", "/v1/delete-records"): Access((Rule("DELETE", TOPIC, NAMED),)),
    ("POST", "/v1/fetch"): Access((Rule("READ", TOPIC, NAMED),
                                   Rule("CLUSTER_ACTION", CLUSTER_TYPE, NODES, when=REPLICA_FETCH))),
    ("GET", "/v1/replication"): Access((Rule("CLUSTER_ACTION", CLUSTER_TYPE, NODES, when=REPLICA_FETCH),),
                                       note="a follower's replication channel"),
    ("GET", "/v1/trace"): Access(
        (Rule("DESCRIBE", CLUSTER_TYPE, CLUSTER),),
        note="stage timings of records by topic, as /metrics"),
    # -- transactions (Kafka's rules: TransactionalId Write to take part, Describe to look)
    ("GET", "/v1/transactions/{transactional_id}/coordinator"): Access((Rule("DESCRIBE", TRANSACTIONAL_ID, TXN_PATH),)),
    ("POST", "/v1/transactions/{transactional_id}/init"): Access((Rule("WRITE", TRANSACTIONAL_ID, TXN_PATH),)),
    ("POST", "/v1/transactions/{transactional_id}/partitions"): Access((
        Rule("WRITE", TRANSACTIONAL_ID, TXN_PATH), Rule("WRITE", TOPIC, NAMED))),
    ("POST", "/v1/transactions/{transactional_id}/offsets"): Access((
        Rule("WRITE", TRANSACTIONAL_ID, TXN_PATH), Rule("READ", GROUP, NAMED))),
    ("POST", "/v1/transactions/{transactional_id}/end"): Access((Rule("WRITE", TRANSACTIONAL_ID, TXN_PATH),)),
    ("GET", "/v1/transactions/{transactional_id}"): Access((Rule("DESCRIBE", TRANSACTIONAL_ID, TXN_PATH),)),
    ("GET", "/v1/transactions"): Access((Rule("DESCRIBE", TRANSACTIONAL_ID, LISTED),)),
    ("POST", "/v1/groups/{group}/txn-offsets"): Access((
        Rule("READ", GROUP, GROUP_PATH), Rule("WRITE", TRANSACTIONAL_ID, NAMED))),
    ("GET", "/v1/topics/{topic}/partitions/{partition}/producers"): Access((Rule("READ", TOPIC, TOPIC_PATH),)),
    ("POST", "/v1/producers/init"): Access(
        (Rule("WRITE", TRANSACTIONAL_ID, NAMED),),
        note="without a transactional id nothing more: an idempotent producer's produce needs Write on each topic"),
    # -- consumer groups
    ("GET", "/v1/groups"): Access((Rule("DESCRIBE", GROUP, LISTED, or_cluster=True),)),
    ("GET", "/v1/groups/{group}"): Access((
        Rule("DESCRIBE", GROUP, GROUP_PATH),
        Rule("DESCRIBE", TOPIC, NAMED, names="its members subscribe to or are assigned"),
        Rule("DESCRIBE", TOPIC, LISTED, names="offsets of the topics"))),
    ("DELETE", "/v1/groups/{group}"): Access((Rule("DELETE", GROUP, GROUP_PATH),)),
    ("GET", "/v1/groups/{group}/coordinator"): Access((Rule("DESCRIBE", GROUP, GROUP_PATH),)),
    ("POST", "/v1/groups/{group}/heartbeat"): Access(
        (Rule("READ", GROUP, GROUP_PATH), Rule("DESCRIBE", TOPIC, NAMED, names="it subscribes to by name")),
        note="a subscription regex resolves to the topics the member may Describe (the coordinator filters)"),
    ("POST", "/v1/groups/{group}/offsets"): Access((Rule("READ", GROUP, GROUP_PATH), Rule("READ", TOPIC, NAMED))),
    ("GET", "/v1/groups/{group}/offsets"): Access((Rule("DESCRIBE", GROUP, GROUP_PATH),
                                                   Rule("DESCRIBE", TOPIC, LISTED, names="offsets of the topics"))),
    ("POST", "/v1/groups/{group}/offsets/delete"): Access((Rule("DELETE", GROUP, GROUP_PATH),
                                                           Rule("READ", TOPIC, NAMED))),
    ("POST", "/v1/groups/{group}/offsets/reset"): Access((Rule("READ", GROUP, GROUP_PATH),
                                                          Rule("READ", TOPIC, NAMED))),
    # -- security: SCRAM credentials, ACLs, client quotas
    ("GET", "/v1/users/scram-credentials"): _cluster("DESCRIBE"),
    ("POST", "/v1/users/scram-credentials"): _cluster("ALTER"),
    ("GET", "/v1/acls"): _cluster("DESCRIBE"),
    ("POST", "/v1/acls"): _cluster("ALTER"),
    ("POST", "/v1/acls/delete"): _cluster("ALTER"),
    ("GET", "/v1/client-quotas"): _cluster("DESCRIBE_CONFIGS"),
    ("POST", "/v1/client-quotas"): _cluster("ALTER_CONFIGS"),
    # -- Kafka's admin APIs only the active controller answers
    ("GET", "/v1/controller/quorum"): _cluster("DESCRIBE", controller=True),
    ("POST", "/v1/controller/elect-leaders"): _cluster("ALTER", controller=True),
    ("GET", "/v1/controller/reassignments"): _cluster("DESCRIBE", controller=True),
    ("POST", "/v1/controller/reassignments"): _cluster("ALTER", controller=True),
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
        # the transaction coordinator's WriteTxnMarkers and KIP-890 verification, to partition leaders
        ("POST", "/v1/partitions/txn-markers"), ("POST", "/v1/partitions/txn-verify"),
    )},
}


def access_of(method: str, route: str) -> Access | None:
    """The entry of a route (its path template, e.g. `/v1/topics/{topic}`); HEAD is GET's."""
    return ACCESS.get(("GET" if method == "HEAD" else method, route))


def is_node_route(method: str, path_: str) -> bool:
    """Served to the cluster's own nodes only: refused to anyone else before authentication."""
    entry = access_of(method, path_)
    return entry.node_only if entry is not None else path_.startswith(NODE_PREFIXES)


# -- the table of docs/security.md ---------------------------------------------------------------

RESOURCE_WORDS = {TOPIC: "topic", GROUP: "group", CLUSTER_TYPE: "cluster", TRANSACTIONAL_ID: "transactional id"}


def describe_rule(rule: Rule) -> str:
    op, what = operation_name(rule.operation), RESOURCE_WORDS[rule.resource_type]
    if rule.source == NODES:
        text = "the cluster's own nodes only (node credential)"
    elif rule.source == CLUSTER:
        text = f"{op} on the cluster"
    elif rule.source == LISTED:
        text = f"lists only the {rule.names or what + 's'} the principal may {op}"
        if rule.or_cluster:
            text = f"{op} on the cluster lists all, else {text}"
    else:
        where = f"the {what}" if rule.source.startswith(PATH) else f"each {what} {rule.names or 'named in the request'}"
        text = f"{op} on the cluster or on {where}" if rule.or_cluster else f"{op} on {where}"
    return f"{rule.when}: {text}" if rule.when else text


def describe(entry: Access) -> str:
    parts = [describe_rule(r) for r in entry.rules] or ["none"]
    if entry.controller:
        parts.append("answered by the active controller (other nodes forward it, authorized there as the client)")
    if entry.note:
        parts.append(entry.note)
    return "; ".join(parts)


def markdown_table() -> str:
    rows = ["| Route | Needs |", "|---|---|"]
    for (method, route), entry in ACCESS.items():
        rows.append(f"| `{method} {route}` | {describe(entry)} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(markdown_table(), end="")
