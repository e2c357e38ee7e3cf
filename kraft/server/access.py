"""What each Kafka API needs: one table, Kafka's API name -> `Access`, with Kafka's authorization
rules (the Kafka docs' "Operations and Resources on Protocols", KafkaApis and ControllerApis).
The services apply their API's rules through the RequestContext (`authorization.py`); every
listener maps its requests to these APIs: the HTTP routes (api/access.py, which prints the table
of docs/security.md from both) and the Kafka listener's API keys.

An `Access` is the `Rule`s of an API, or none with a note saying why.
A rule is an operation on a resource type, and where the resources' names come from:
- `CLUSTER`: the cluster (`kafka-cluster`);
- `NAMED`: the resources the request names, every one of which must be allowed (the topics of a
  produce, the group of an offset commit); one refused name refuses the request;
- `LISTED`: the answer lists only what is allowed, never an error (metadata, topic listings);
- `NODES`: the cluster's own nodes only, by their node credential (Kafka's ClusterAction on the
  cluster, which in Kafka only brokers and controllers hold).
`or_cluster`: the operation on the cluster allows every resource of the type (Kafka's CreateTopics,
DeleteTopics, ListGroups). `when`: the rule applies only in that case (the service checks it).
`names`: whose names a NAMED rule takes when not the request's, or what a LISTED rule lists.
`controller`: Kafka's forwardable controller APIs that only the active controller answers; any
other node forwards them there with the client's principal (KIP-590), and the controller
authorizes the client.
"""

from __future__ import annotations

from dataclasses import dataclass

from kraft.metadata.acl import CLUSTER as CLUSTER_TYPE, GROUP, TOPIC, TRANSACTIONAL_ID, operation_name

CLUSTER = "cluster"
NAMED = "named"
LISTED = "listed"
NODES = "nodes"

AUTO_CREATE = "auto-creating a topic (`auto.create.topics.enable`)"
REPLICA_FETCH = "a replica's fetch (`replica_id` set)"
TRANSACTIONAL_PRODUCE = "a transactional produce (a transactional id, which transactional batches must name)"
TXN_COORDINATOR = "a transactional id's coordinator (key type transaction)"
GROUP_COORDINATOR = "a group's coordinator (key type group)"
ADMIN_ABORT = "an administrator's abort of a hanging transaction (kafka-transactions abort)"
BROKER_ADD_PARTITIONS = "a broker's batched request (AddPartitionsToTxn v4+, KIP-890), instead of the other rules"

# Kafka's API names (ApiKeys' names), as the services, request metrics and audit lines say them
PRODUCE = "Produce"
FETCH = "Fetch"
LIST_OFFSETS = "ListOffsets"
METADATA = "Metadata"
OFFSET_FOR_LEADER_EPOCH = "OffsetForLeaderEpoch"
DELETE_RECORDS = "DeleteRecords"
INIT_PRODUCER_ID = "InitProducerId"
CREATE_TOPICS = "CreateTopics"
DELETE_TOPICS = "DeleteTopics"
CREATE_PARTITIONS = "CreatePartitions"
DESCRIBE_CONFIGS = "DescribeConfigs"
INCREMENTAL_ALTER_CONFIGS = "IncrementalAlterConfigs"
DESCRIBE_LOG_DIRS = "DescribeLogDirs"
DESCRIBE_PRODUCERS = "DescribeProducers"
FIND_COORDINATOR = "FindCoordinator"
CONSUMER_GROUP_HEARTBEAT = "ConsumerGroupHeartbeat"
CONSUMER_GROUP_DESCRIBE = "ConsumerGroupDescribe"
OFFSET_COMMIT = "OffsetCommit"
OFFSET_FETCH = "OffsetFetch"
OFFSET_DELETE = "OffsetDelete"
LIST_GROUPS = "ListGroups"
DELETE_GROUPS = "DeleteGroups"
JOIN_GROUP = "JoinGroup"
SYNC_GROUP = "SyncGroup"
HEARTBEAT = "Heartbeat"
LEAVE_GROUP = "LeaveGroup"
DESCRIBE_GROUPS = "DescribeGroups"
DESCRIBE_ACLS = "DescribeAcls"
CREATE_ACLS = "CreateAcls"
DELETE_ACLS = "DeleteAcls"
DESCRIBE_CLIENT_QUOTAS = "DescribeClientQuotas"
ALTER_CLIENT_QUOTAS = "AlterClientQuotas"
DESCRIBE_USER_SCRAM_CREDENTIALS = "DescribeUserScramCredentials"
ALTER_USER_SCRAM_CREDENTIALS = "AlterUserScramCredentials"
DESCRIBE_QUORUM = "DescribeQuorum"
ELECT_LEADERS = "ElectLeaders"
LIST_PARTITION_REASSIGNMENTS = "ListPartitionReassignments"
ALTER_PARTITION_REASSIGNMENTS = "AlterPartitionReassignments"
ADD_PARTITIONS_TO_TXN = "AddPartitionsToTxn"
ADD_OFFSETS_TO_TXN = "AddOffsetsToTxn"
END_TXN = "EndTxn"
TXN_OFFSET_COMMIT = "TxnOffsetCommit"
DESCRIBE_TRANSACTIONS = "DescribeTransactions"
LIST_TRANSACTIONS = "ListTransactions"
WRITE_TXN_MARKERS = "WriteTxnMarkers"


@dataclass(frozen=True)
class Rule:
    operation: str  # Kafka's name: DESCRIBE, ALTER_CONFIGS, ...
    resource_type: str  # TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID
    source: str  # CLUSTER, NAMED, LISTED or NODES
    or_cluster: bool = False
    when: str = ""
    names: str = ""  # NAMED: whose names, when not the request's; LISTED: what is listed


@dataclass(frozen=True)
class Access:
    rules: tuple[Rule, ...] = ()
    controller: bool = False
    note: str = ""  # why an API needs no rule, or what the rules leave out


def _cluster(operation: str, controller: bool = False) -> Access:
    return Access((Rule(operation, CLUSTER_TYPE, CLUSTER),), controller=controller)


_AUTO_CREATE = Rule("CREATE", TOPIC, NAMED, or_cluster=True, when=AUTO_CREATE)

API_ACCESS: dict[str, Access] = {
    # -- records
    PRODUCE: Access((Rule("WRITE", TOPIC, NAMED), _AUTO_CREATE,
                     Rule("WRITE", TRANSACTIONAL_ID, NAMED, when=TRANSACTIONAL_PRODUCE))),
    FETCH: Access((Rule("READ", TOPIC, NAMED), Rule("CLUSTER_ACTION", CLUSTER_TYPE, NODES, when=REPLICA_FETCH))),
    LIST_OFFSETS: Access((Rule("DESCRIBE", TOPIC, NAMED),)),
    OFFSET_FOR_LEADER_EPOCH: Access((Rule("DESCRIBE", TOPIC, NAMED),)),
    DELETE_RECORDS: Access((Rule("DELETE", TOPIC, NAMED),)),
    INIT_PRODUCER_ID: Access(
        (Rule("WRITE", TRANSACTIONAL_ID, NAMED),),
        note="without a transactional id nothing more: an idempotent producer's produce needs Write on each topic"),
    # -- topics and the cluster
    METADATA: Access((Rule("DESCRIBE", TOPIC, LISTED), _AUTO_CREATE)),
    CREATE_TOPICS: Access((Rule("CREATE", TOPIC, NAMED, or_cluster=True),)),
    DELETE_TOPICS: Access((Rule("DELETE", TOPIC, NAMED, or_cluster=True),)),
    CREATE_PARTITIONS: Access((Rule("ALTER", TOPIC, NAMED),)),
    DESCRIBE_CONFIGS: Access((Rule("DESCRIBE_CONFIGS", TOPIC, NAMED),)),
    INCREMENTAL_ALTER_CONFIGS: Access((Rule("ALTER_CONFIGS", TOPIC, NAMED),)),
    DESCRIBE_LOG_DIRS: _cluster("DESCRIBE"),
    DESCRIBE_PRODUCERS: Access((Rule("READ", TOPIC, NAMED),)),
    # -- consumer groups
    FIND_COORDINATOR: Access((Rule("DESCRIBE", GROUP, NAMED, when=GROUP_COORDINATOR),
                              Rule("DESCRIBE", TRANSACTIONAL_ID, NAMED, when=TXN_COORDINATOR))),
    CONSUMER_GROUP_HEARTBEAT: Access(
        (Rule("READ", GROUP, NAMED), Rule("DESCRIBE", TOPIC, NAMED, names="it subscribes to by name")),
        note="a subscription regex resolves to the topics the member may Describe (the coordinator filters)"),
    CONSUMER_GROUP_DESCRIBE: Access((
        Rule("DESCRIBE", GROUP, NAMED),
        Rule("DESCRIBE", TOPIC, NAMED, names="its members subscribe to or are assigned"),
        Rule("DESCRIBE", TOPIC, LISTED, names="offsets of the topics"))),
    OFFSET_COMMIT: Access((Rule("READ", GROUP, NAMED), Rule("READ", TOPIC, NAMED))),
    OFFSET_FETCH: Access((Rule("DESCRIBE", GROUP, NAMED), Rule("DESCRIBE", TOPIC, LISTED, names="offsets of the topics"))),
    OFFSET_DELETE: Access((Rule("DELETE", GROUP, NAMED), Rule("READ", TOPIC, NAMED))),
    LIST_GROUPS: Access((Rule("DESCRIBE", GROUP, LISTED, or_cluster=True),)),
    DELETE_GROUPS: Access((Rule("DELETE", GROUP, NAMED),)),
    # the classic group protocol (the Kafka listener only)
    JOIN_GROUP: Access((Rule("READ", GROUP, NAMED),)),
    SYNC_GROUP: Access((Rule("READ", GROUP, NAMED),)),
    HEARTBEAT: Access((Rule("READ", GROUP, NAMED),)),
    LEAVE_GROUP: Access((Rule("READ", GROUP, NAMED),)),
    DESCRIBE_GROUPS: Access((Rule("DESCRIBE", GROUP, NAMED),)),
    # -- transactions
    ADD_PARTITIONS_TO_TXN: Access((Rule("WRITE", TRANSACTIONAL_ID, NAMED), Rule("WRITE", TOPIC, NAMED),
                                   Rule("CLUSTER_ACTION", CLUSTER_TYPE, CLUSTER, when=BROKER_ADD_PARTITIONS))),
    ADD_OFFSETS_TO_TXN: Access((Rule("WRITE", TRANSACTIONAL_ID, NAMED), Rule("READ", GROUP, NAMED))),
    END_TXN: Access((Rule("WRITE", TRANSACTIONAL_ID, NAMED),)),
    TXN_OFFSET_COMMIT: Access((Rule("WRITE", TRANSACTIONAL_ID, NAMED), Rule("READ", GROUP, NAMED),
                               Rule("READ", TOPIC, NAMED))),
    DESCRIBE_TRANSACTIONS: Access((Rule("DESCRIBE", TRANSACTIONAL_ID, NAMED),)),
    LIST_TRANSACTIONS: Access((Rule("DESCRIBE", TRANSACTIONAL_ID, LISTED),)),
    WRITE_TXN_MARKERS: Access((Rule("CLUSTER_ACTION", CLUSTER_TYPE, NODES),
                               Rule("CLUSTER_ACTION", CLUSTER_TYPE, CLUSTER, when=ADMIN_ABORT)),
                              note="the transaction coordinator's markers and KIP-890 verification (nodes); "
                                   "kafka-transactions abort (administrators)"),
    # -- security: ACLs, client quotas, SCRAM credentials
    DESCRIBE_ACLS: _cluster("DESCRIBE"),
    CREATE_ACLS: _cluster("ALTER"),
    DELETE_ACLS: _cluster("ALTER"),
    DESCRIBE_CLIENT_QUOTAS: _cluster("DESCRIBE_CONFIGS"),
    ALTER_CLIENT_QUOTAS: _cluster("ALTER_CONFIGS"),
    DESCRIBE_USER_SCRAM_CREDENTIALS: _cluster("DESCRIBE"),
    ALTER_USER_SCRAM_CREDENTIALS: _cluster("ALTER"),
    # -- Kafka's admin APIs only the active controller answers
    DESCRIBE_QUORUM: _cluster("DESCRIBE", controller=True),
    ELECT_LEADERS: _cluster("ALTER", controller=True),
    LIST_PARTITION_REASSIGNMENTS: _cluster("DESCRIBE", controller=True),
    ALTER_PARTITION_REASSIGNMENTS: _cluster("ALTER", controller=True),
}


def rule_of(api: str, resource_type: str, source: str, when: str = "") -> Rule:
    """The API's rule on `resource_type` from `source` (for the case `when`); LookupError when the
    table has none (a service asking for a rule its API does not have is a bug, found at import)."""
    for rule in API_ACCESS[api].rules:
        if (rule.resource_type, rule.source, rule.when) == (resource_type, source, when):
            return rule
    raise LookupError(f"kraft/server/access.py has no {source} rule on {resource_type} {when!r} for {api}")


# -- the words of docs/security.md's table -------------------------------------------------------

RESOURCE_WORDS = {TOPIC: "topic", GROUP: "group", CLUSTER_TYPE: "cluster", TRANSACTIONAL_ID: "transactional id"}


def describe_rule(rule: Rule, named: str = "") -> str:
    """The rule in words; `named`: the words for the resource a NAMED rule takes when the request
    names exactly one (an HTTP route's path parameter: "the topic")."""
    op, what = operation_name(rule.operation), RESOURCE_WORDS[rule.resource_type]
    if rule.source == NODES:
        text = "the cluster's own nodes only (node credential)"
    elif rule.source == CLUSTER:
        text = f"{op} on the cluster"
    elif rule.source == LISTED and not named:
        text = f"lists only the {rule.names or what + 's'} the principal may {op}"
        if rule.or_cluster:
            text = f"{op} on the cluster lists all, else {text}"
    else:
        where = named or f"each {what} {rule.names or 'named in the request'}"
        text = f"{op} on the cluster or on {where}" if rule.or_cluster else f"{op} on {where}"
    return f"{rule.when}: {text}" if rule.when else text


def describe(access: Access, named: dict[str, str] | None = None) -> list[str]:
    """The API's needs in words; `named`: resource type -> the words for the one resource of that
    type a request names (see `describe_rule`)."""
    named = named or {}
    parts = []
    for rule in access.rules:
        one = named.get(rule.resource_type, "") if not rule.names else ""
        parts.append(describe_rule(rule, one))
    if access.controller:
        parts.append("answered by the active controller (other nodes forward it, authorized there as the client)")
    if access.note:
        parts.append(access.note)
    return parts
