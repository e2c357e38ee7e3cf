"""The OpenAPI 3.1 document of every route (served at `/v1/openapi.json`, browsable at `/docs`),
generated from the messages of `api/messages/`: one row per route below names its request, query
and answer Structs and the Kafka error codes it answers with; the schemas are msgspec's JSON
Schema of those Structs (OpenAPI 3.1 is JSON Schema 2020-12), so the document cannot differ from
what the routes decode.
"""

from __future__ import annotations

import inspect
from http import HTTPStatus
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from kraft.api.errors import HTTP_STATUS
from kraft.api.messages import batch, controller, groups, node, records, security, topics, txn
from kraft.api.messages.common import ErrorResponse, GroupId, PartitionNumber, TopicName

# Every route may answer these; a route with a body also the body's size and media type errors.
COMMON_ERRORS = ("INVALID_REQUEST", "SASL_AUTHENTICATION_FAILED", "THROTTLING_QUOTA_EXCEEDED", "UNKNOWN_SERVER_ERROR")
BODY_ERRORS = ("MESSAGE_TOO_LARGE", "UNSUPPORTED_MEDIA_TYPE")
TOPIC = ("INVALID_TOPIC_EXCEPTION", "UNKNOWN_TOPIC_OR_PARTITION", "TOPIC_AUTHORIZATION_FAILED")
ADMIN = ("NOT_CONTROLLER", "REQUEST_TIMED_OUT", "POLICY_VIOLATION")  # a change the controller makes
LEADER = ("NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE", "KAFKA_STORAGE_ERROR")
TXN_COORDINATOR = ("NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS",
                   "TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
TXN_PRODUCER = ("PRODUCER_FENCED", "INVALID_PRODUCER_ID_MAPPING", "CONCURRENT_TRANSACTIONS")
GROUP = ("GROUP_AUTHORIZATION_FAILED", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR",
         "COORDINATOR_LOAD_IN_PROGRESS")
NODE = ("CLUSTER_AUTHORIZATION_FAILED", "NOT_CONTROLLER")  # the controller's routes for the cluster's nodes
# Kafka's admin APIs only the active controller answers: another node forwards them there (a
# NOT_CONTROLLER when it does not know it, NETWORK_EXCEPTION when it does not answer)
CONTROLLER_ONLY = ("CLUSTER_AUTHORIZATION_FAILED", "NOT_CONTROLLER", "NETWORK_EXCEPTION")
CLUSTER = ("CLUSTER_AUTHORIZATION_FAILED", "SECURITY_DISABLED", "UNSUPPORTED_VERSION")
# The files of the /docs page (api/static/), with their types.
DOCS_ASSETS = {"swagger-ui-bundle.js": "application/javascript", "swagger-ui.css": "text/css",
               "docs.js": "application/javascript"}
PATH_PARAMETERS: dict[str, Any] = {"topic": TopicName, "partition": PartitionNumber, "group": GroupId,
                                   "transactional_id": txn.TransactionalId,
                                   "asset": Literal[tuple(DOCS_ASSETS)]}


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    summary: str
    answer: type | None  # the 2xx body's Struct; None with `content`
    request: type | None = None  # the body's Struct
    query: type | None = None  # the query string's Struct
    errors: tuple[str, ...] = ()  # the Kafka error codes of this route, beyond COMMON_ERRORS
    status: int = 200
    description: str = ""
    content: dict[str, Any] | None = None  # media type -> schema, for an answer that is no message


def _text(media: str, description: str) -> dict[str, Any]:
    return {media: {"schema": {"type": "string", "description": description}}}


ROUTES = (
    Route("GET", "/v1/health", "Liveness of this node, its roles, controller and broker state, readiness",
          node.HealthResponse, query=node.HealthQuery,
          description=node.HealthResponse.__doc__ or ""),
    Route("GET", "/v1/metadata", "Brokers, controller and topics", topics.MetadataResponse,
          query=topics.MetadataQuery, errors=TOPIC),
    Route("POST", "/v1/topics", "Create a topic", topics.CreateTopicResponse, topics.CreateTopicRequest,
          errors=("INVALID_TOPIC_EXCEPTION", "TOPIC_AUTHORIZATION_FAILED", *ADMIN, "TOPIC_ALREADY_EXISTS",
                  "INVALID_PARTITIONS", "INVALID_REPLICATION_FACTOR", "INVALID_CONFIG"), status=201),
    Route("GET", "/v1/topics", "List topics", topics.ListTopicsResponse),
    Route("GET", "/v1/topics/{topic}", "Describe a topic", topics.DescribeTopicResponse, errors=TOPIC),
    Route("DELETE", "/v1/topics/{topic}", "Delete a topic", topics.DeleteTopicResponse,
          errors=(*TOPIC, *ADMIN, "TOPIC_DELETION_DISABLED")),
    Route("POST", "/v1/topics/{topic}/partitions", "Raise the partition count", topics.CreatePartitionsResponse,
          topics.CreatePartitionsRequest, errors=(*TOPIC, *ADMIN, "INVALID_PARTITIONS")),
    Route("GET", "/v1/topics/{topic}/configs", "Topic config overrides and broker defaults",
          topics.TopicConfigsResponse, errors=TOPIC),
    Route("PATCH", "/v1/topics/{topic}/configs", "Set (or with null, delete) topic config overrides",
          topics.AlterConfigsResponse, topics.AlterConfigsRequest, errors=(*TOPIC, *ADMIN, "INVALID_CONFIG")),
    Route("POST", "/v1/topics/{topic}/records", "Produce JSON records", records.ProduceRecordsResponse,
          records.ProduceRecordsRequest, query=records.ProduceRecordsQuery,
          errors=(*TOPIC, *LEADER, "INVALID_REQUIRED_ACKS", "NOT_ENOUGH_REPLICAS", "REQUEST_TIMED_OUT",
                  "RECORD_LIST_TOO_LARGE"), description=records.PRODUCE_ANSWER),
    Route("GET", "/v1/topics/{topic}/partitions/{partition}/records", "Read records from an offset",
          records.FetchRecordsResponse, query=records.FetchRecordsQuery,
          errors=(*TOPIC, *LEADER, "OFFSET_OUT_OF_RANGE")),
    Route("GET", "/v1/topics/{topic}/partitions/{partition}/offsets",
          "A partition's offsets, or the offset for a timestamp", records.PartitionOffsetsResponse,
          query=records.PartitionOffsetsQuery, errors=(*TOPIC, *LEADER)),
    Route("POST", "/v1/delete-records",
          "Delete the records before an offset (Kafka's DeleteRecords); per partition an error_code when refused",
          records.DeleteRecordsResponse, records.DeleteRecordsRequest,
          errors=("INVALID_TOPIC_EXCEPTION", "TOPIC_AUTHORIZATION_FAILED"),
          description="Per partition: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, OFFSET_OUT_OF_RANGE "
                      "(above the high watermark), POLICY_VIOLATION (cleanup.policy=compact), "
                      "INVALID_TOPIC_EXCEPTION (an internal topic), REQUEST_TIMED_OUT (the replicas did not follow "
                      "in time), KAFKA_STORAGE_ERROR."),
    Route("POST", "/v1/produce", "Produce record batches to many partitions", batch.ProduceResponse,
          batch.ProduceRequest, errors=(*TOPIC, "INVALID_REQUIRED_ACKS", "CORRUPT_MESSAGE", "INVALID_RECORD")),
    Route("POST", "/v1/fetch", "Fetch record batches from many partitions (long poll)", batch.FetchResponse,
          batch.FetchRequest, errors=("TOPIC_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED",
                                      "UNSUPPORTED_VERSION")),
    Route("POST", "/v1/partitions/txn-markers",
          "Write COMMIT or ABORT markers for the transaction coordinator (Kafka's WriteTxnMarkers; nodes only)",
          txn.WriteTxnMarkersResponse, txn.WriteTxnMarkersRequest, errors=("CLUSTER_AUTHORIZATION_FAILED",),
          description="Per partition: NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS, "
                      "REQUEST_TIMED_OUT (the replicas did not follow in time), INVALID_PRODUCER_EPOCH, "
                      "TRANSACTION_COORDINATOR_FENCED, KAFKA_STORAGE_ERROR."),
    Route("POST", "/v1/partitions/txn-verify",
          "Let partitions take a transaction's first batch (KIP-890's verification; nodes only)",
          txn.VerifyTransactionResponse, txn.VerifyTransactionRequest, errors=("CLUSTER_AUTHORIZATION_FAILED",),
          description="Per partition: NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, KAFKA_STORAGE_ERROR."),
    Route("GET", "/v1/transactions/{transactional_id}/coordinator",
          "The coordinator of a transactional id (Kafka's FindCoordinator, key type transaction)",
          txn.FindTransactionCoordinatorResponse,
          errors=TXN_COORDINATOR),
    Route("POST", "/v1/transactions/{transactional_id}/init",
          "Producer id and epoch of a transactional id, fencing older producers (Kafka's InitProducerId)",
          node.InitProducerIdResponse, txn.InitTransactionRequest,
          errors=(*TXN_COORDINATOR, "CONCURRENT_TRANSACTIONS", "INVALID_TRANSACTION_TIMEOUT")),
    Route("POST", "/v1/transactions/{transactional_id}/partitions",
          "Add partitions to the open transaction (Kafka's AddPartitionsToTxn)",
          txn.AddPartitionsToTxnResponse, txn.AddPartitionsToTxnRequest,
          errors=(*TXN_COORDINATOR, *TXN_PRODUCER, "TOPIC_AUTHORIZATION_FAILED"),
          description="Per partition: UNKNOWN_TOPIC_OR_PARTITION (then the others OPERATION_NOT_ATTEMPTED), or "
                      "the leader's answer to the KIP-890 verification (NOT_LEADER_OR_FOLLOWER, ...)."),
    Route("POST", "/v1/transactions/{transactional_id}/offsets",
          "Add a group's offsets partition to the open transaction (Kafka's AddOffsetsToTxn)",
          txn.TransactionAck, txn.AddOffsetsToTxnRequest,
          errors=(*TXN_COORDINATOR, *TXN_PRODUCER, "GROUP_AUTHORIZATION_FAILED")),
    Route("POST", "/v1/transactions/{transactional_id}/end",
          "Commit or abort the open transaction (Kafka's EndTxn; answered once it is prepared)",
          txn.TransactionAck, txn.EndTxnRequest,
          errors=(*TXN_COORDINATOR, *TXN_PRODUCER, "INVALID_TXN_STATE")),
    Route("GET", "/v1/transactions/{transactional_id}", "A transactional id's state (Kafka's DescribeTransactions)",
          txn.TransactionDescription, errors=(*TXN_COORDINATOR, "TRANSACTIONAL_ID_NOT_FOUND")),
    Route("GET", "/v1/transactions",
          "The transactional ids this broker coordinates (Kafka's ListTransactions; `states`, `producer_ids` "
          "filter, comma-separated)", txn.ListTransactionsResponse),
    Route("POST", "/v1/groups/{group}/txn-offsets",
          "Commit offsets in a transaction: the group sees them once it commits (Kafka's TxnOffsetCommit)",
          txn.TxnOffsetCommitResponse, txn.TxnOffsetCommitRequest,
          errors=("NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS",
                  "INVALID_PRODUCER_EPOCH", "INVALID_TXN_STATE", "GROUP_AUTHORIZATION_FAILED",
                  "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "TOPIC_AUTHORIZATION_FAILED",
                  "UNKNOWN_TOPIC_OR_PARTITION")),
    Route("GET", "/v1/topics/{topic}/partitions/{partition}/producers",
          "The active producers of a partition (Kafka's DescribeProducers)", txn.DescribeProducersResponse,
          errors=(*TOPIC, *LEADER)),
    Route("POST", "/v1/producers/describe",
          "The active producers of many partitions, each answered by this broker if it leads it, else "
          "with its own NOT_LEADER_OR_FOLLOWER (Kafka's DescribeProducers, one request per broker)",
          txn.DescribeProducersManyResponse, txn.DescribeProducersRequest, errors=("INVALID_REQUEST",)),
    Route("POST", "/v1/topics/{topic}/partitions/{partition}/abort-transaction",
          "Abort a hanging transaction in a partition: an ABORT marker for its producer (Kafka's "
          "Admin.abortTransaction; ClusterAction on the cluster)", txn.AbortTransactionResponse,
          txn.AbortTransactionRequest,
          errors=(*TOPIC, *LEADER, "CLUSTER_AUTHORIZATION_FAILED", "INVALID_PRODUCER_EPOCH",
                  "TRANSACTION_COORDINATOR_FENCED", "NOT_ENOUGH_REPLICAS", "REQUEST_TIMED_OUT")),
    Route("POST", "/v1/producers/init", "A producer id and epoch for an idempotent producer (Kafka's InitProducerId)",
          node.InitProducerIdResponse, node.InitProducerIdRequest,
          errors=("TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "BROKER_NOT_AVAILABLE")),
    Route("GET", "/", "What answers here (name, version, node id) and the paths to look at next",
          node.RootResponse),
    Route("GET", "/v1/openapi.json", "This document", None,
          content={"application/json": {"schema": {"type": "object", "description": "OpenAPI 3.1 document"}}}),
    Route("GET", "/docs", "This document, browsable (Swagger UI, served by the node itself)", None,
          content=_text("text/html", "the page")),
    Route("GET", "/docs/", "Redirects to /docs (the page's links are relative to /docs)", None, status=301,
          content={}),  # no body
    Route("GET", "/docs/{asset}", "The page's scripts and style (Swagger UI, shipped in the package)", None,
          content={media: {"schema": {"type": "string"}} for media in dict.fromkeys(DOCS_ASSETS.values())}),
    Route("GET", "/v1/groups", "Consumer groups coordinated by this broker", groups.ListGroupsResponse,
          errors=GROUP),
    Route("GET", "/v1/groups/{group}", "Describe a group: state, members, assignments, offsets and lag",
          groups.DescribeGroupResponse, errors=(*GROUP, "GROUP_ID_NOT_FOUND", "TOPIC_AUTHORIZATION_FAILED")),
    Route("DELETE", "/v1/groups/{group}", "Delete a group without members, and its committed offsets",
          groups.DeleteGroupResponse, errors=(*GROUP, "GROUP_ID_NOT_FOUND", "NON_EMPTY_GROUP")),
    Route("GET", "/v1/groups/{group}/coordinator",
          "Find the group's coordinator (creates __consumer_offsets on first use)",
          groups.FindCoordinatorResponse, errors=GROUP),
    Route("POST", "/v1/groups/{group}/heartbeat", "Join (epoch 0), heartbeat, or leave (epoch -1): KIP-848",
          groups.HeartbeatResponse, groups.HeartbeatRequest,
          errors=(*GROUP, "INVALID_TOPIC_EXCEPTION", "UNKNOWN_MEMBER_ID", "FENCED_MEMBER_EPOCH")),
    Route("POST", "/v1/groups/{group}/offsets", "Commit offsets (members send their id and epoch; -1 for none)",
          groups.CommitOffsetsResponse, groups.CommitOffsetsRequest,
          errors=(*GROUP, *TOPIC, "UNKNOWN_MEMBER_ID", "FENCED_MEMBER_EPOCH", "ILLEGAL_GENERATION")),
    Route("GET", "/v1/groups/{group}/offsets", "Committed offsets of a group", groups.FetchOffsetsResponse,
          query=groups.FetchOffsetsQuery, errors=(*GROUP, "INVALID_TOPIC_EXCEPTION")),
    Route("POST", "/v1/groups/{group}/offsets/delete",
          "Delete a group's committed offsets (Kafka's OffsetDelete); per partition an error_code when refused",
          groups.DeleteOffsetsResponse, groups.DeleteOffsetsRequest,
          errors=(*GROUP, *TOPIC, "GROUP_ID_NOT_FOUND")),
    Route("POST", "/v1/groups/{group}/offsets/reset",
          "Reset a group's offsets (group without members only); dry_run by default",
          groups.ResetOffsetsResponse, groups.ResetOffsetsRequest, errors=(*GROUP, *TOPIC, "NON_EMPTY_GROUP")),
    Route("GET", "/v1/controller/quorum", "Metadata quorum status and replication (kafka-metadata-quorum describe)",
          controller.DescribeQuorumResponse, errors=CONTROLLER_ONLY),
    Route("GET", "/v1/controller/quorum/local", "This node's own view of the quorum (any node answers)",
          controller.LocalQuorumStatus, errors=NODE),
    Route("GET", "/v1/controller/metadata", "Committed metadata records from an offset (long poll), or snapshot_needed",
          controller.MetadataLogResponse, query=controller.MetadataLogQuery, errors=NODE),
    Route("GET", "/v1/controller/snapshot", "The metadata image at the last applied offset (always msgpack)", None,
          errors=NODE, content={"application/msgpack": {"schema": {"type": "object"}}}),
    Route("POST", "/v1/controller/brokers/register", "Register a broker (fenced until caught up)",
          controller.RegisterBrokerResponse, controller.RegisterBrokerRequest,
          errors=(*NODE, "INCONSISTENT_CLUSTER_ID", "STALE_BROKER_EPOCH")),
    Route("POST", "/v1/controller/brokers/heartbeat", "Broker heartbeat: renews the session",
          controller.BrokerHeartbeatResponse, controller.BrokerHeartbeatRequest, errors=(*NODE, "STALE_BROKER_EPOCH")),
    Route("POST", "/v1/controller/brokers/unregister", "Unregister a broker", controller.UnregisterBrokerResponse,
          controller.UnregisterBrokerRequest, errors=NODE),
    Route("POST", "/v1/controller/producer-ids", "Allocate a block of producer ids",
          controller.AllocateProducerIdsResponse, controller.AllocateProducerIdsRequest,
          errors=(*NODE, "STALE_BROKER_EPOCH")),
    Route("POST", "/v1/controller/alter-partition", "AlterPartition: an ISR change from the partition leader",
          controller.PartitionStateResponse, controller.AlterPartitionRequest,
          errors=(*NODE, "STALE_BROKER_EPOCH", "FENCED_LEADER_EPOCH", "INVALID_UPDATE_VERSION",
                  "NOT_LEADER_OR_FOLLOWER", "UNKNOWN_TOPIC_OR_PARTITION", "INELIGIBLE_REPLICA")),
    Route("POST", "/v1/controller/topics", "Create a topic (what other nodes forward)",
          topics.ControllerCreateTopicResponse, topics.ControllerCreateTopicRequest,
          errors=(*NODE, "INVALID_TOPIC_EXCEPTION", "TOPIC_ALREADY_EXISTS", "INVALID_PARTITIONS",
                  "INVALID_REPLICATION_FACTOR", "INVALID_CONFIG")),
    Route("POST", "/v1/controller/topics/delete", "Delete a topic", topics.ControllerDeleteTopicResponse,
          topics.ControllerDeleteTopicRequest, errors=(*NODE, "INVALID_TOPIC_EXCEPTION", "UNKNOWN_TOPIC_OR_PARTITION")),
    Route("POST", "/v1/controller/topics/partitions", "Grow a topic to `count` partitions",
          topics.ControllerCreatePartitionsResponse, topics.ControllerCreatePartitionsRequest,
          errors=(*NODE, "INVALID_TOPIC_EXCEPTION", "UNKNOWN_TOPIC_OR_PARTITION", "INVALID_PARTITIONS")),
    Route("POST", "/v1/controller/configs", "Set (value) or delete (null) topic config overrides",
          topics.ControllerAlterConfigsResponse, topics.ControllerAlterConfigsRequest,
          errors=(*NODE, "INVALID_TOPIC_EXCEPTION", "UNKNOWN_TOPIC_OR_PARTITION", "INVALID_CONFIG")),
    Route("POST", "/v1/controller/users/scram-credentials",
          "Upsert or delete SCRAM credentials, all or none (forwarded by nodes)",
          security.ControllerAlterScramCredentialsResponse, security.ControllerAlterScramCredentialsRequest,
          errors=(*NODE, "UNSUPPORTED_SASL_MECHANISM")),
    Route("POST", "/v1/controller/elect-leaders",
          "Preferred leader election (kafka-leader-election --election-type preferred)",
          controller.ElectLeadersResponse, controller.ElectLeadersRequest,
          errors=(*CONTROLLER_ONLY, "INVALID_TOPIC_EXCEPTION")),
    Route("GET", "/v1/controller/reassignments",
          "Partition reassignments in progress (kafka-reassign-partitions --verify)",
          controller.ListReassignmentsResponse, errors=CONTROLLER_ONLY),
    Route("POST", "/v1/controller/reassignments",
          "Start (replicas: the target) or cancel (replicas: null) partition reassignments, all or none (KIP-455)",
          controller.AlterReassignmentsResponse, controller.AlterReassignmentsRequest,
          errors=(*CONTROLLER_ONLY, "INVALID_TOPIC_EXCEPTION", "UNKNOWN_TOPIC_OR_PARTITION",
                  "INVALID_REPLICA_ASSIGNMENT", "NO_REASSIGNMENT_IN_PROGRESS")),
    Route("GET", "/v1/users/scram-credentials", "Users and their SCRAM mechanisms and iterations, never keys "
          "(kafka-configs --describe --entity-type users)", security.DescribeScramCredentialsResponse,
          query=security.DescribeScramQuery, errors=("CLUSTER_AUTHORIZATION_FAILED", "UNSUPPORTED_VERSION")),
    Route("POST", "/v1/users/scram-credentials", "Upsert or delete SCRAM credentials, all or none (kafka-configs "
          "--alter --entity-type users --add-config/--delete-config SCRAM-SHA-256=[...])",
          security.AlterScramCredentialsResponse, security.AlterScramCredentialsRequest,
          errors=(*ADMIN, "CLUSTER_AUTHORIZATION_FAILED", "UNSUPPORTED_VERSION", "UNSUPPORTED_SASL_MECHANISM")),
    Route("GET", "/v1/acls", "ACL bindings matching Kafka's filter (kafka-acls --list); Describe on the cluster",
          security.DescribeAclsResponse, query=security.AclFilter, errors=CLUSTER),
    Route("POST", "/v1/acls", "Create ACL bindings (kafka-acls --add); Alter on the cluster",
          security.CreateAclsResponse, security.CreateAclsRequest, errors=(*CLUSTER, *ADMIN), status=201),
    Route("POST", "/v1/acls/delete", "Delete the ACLs each filter matches (kafka-acls --remove); Alter on the cluster",
          security.DeleteAclsResponse, security.DeleteAclsRequest, errors=(*CLUSTER, *ADMIN)),
    Route("GET", "/v1/client-quotas",
          "Client quotas of every entity (kafka-configs --describe --entity-type users|clients)",
          security.DescribeClientQuotasResponse, errors=CLUSTER),
    Route("POST", "/v1/client-quotas",
          "Set or remove client quotas (kafka-configs --alter --entity-type users|clients)",
          security.AlterClientQuotasResponse, security.AlterClientQuotasRequest, errors=(*CLUSTER, *ADMIN)),
    Route("POST", "/v1/controller/acls", "Create ACL bindings (forwarded by nodes)",
          security.ControllerCreateAclsResponse, security.ControllerCreateAclsRequest, errors=NODE),
    Route("POST", "/v1/controller/acls/delete", "Delete ACLs by filter (forwarded by nodes)",
          security.ControllerDeleteAclsResponse, security.ControllerDeleteAclsRequest, errors=NODE),
    Route("POST", "/v1/controller/client-quotas", "Set or remove client quotas (forwarded by nodes)",
          security.ControllerAlterClientQuotasResponse, security.ControllerAlterClientQuotasRequest, errors=NODE),
    Route("GET", "/v1/replication", "A follower's replication channel to this leader (WebSocket; the cluster's nodes only)",
          batch.ReplicationAnswer, query=batch.ReplicationQuery, status=101, errors=NODE,
          description="Upgrades to a WebSocket (with the follower's node credential). The follower sends binary "
                      "msgpack messages {id, fetch}, `fetch` being the body of a replica POST /v1/fetch naming "
                      "`replica_id`; the leader answers each with this message, the same `id`. A new fetch "
                      "supersedes one still parked (it is not answered)."),
    Route("GET", "/v1/log-dirs", "This broker's log directories and the partitions each holds (DescribeLogDirs)",
          node.LogDirsResponse, query=node.LogDirsQuery, errors=("CLUSTER_AUTHORIZATION_FAILED",),
          description=node.LogDirsResponse.__doc__ or ""),
    Route("GET", "/v1/trace", "Stage events along records' way through this node (kraft-bench --trace)",
          node.TraceResponse, query=node.TraceQuery, errors=("CLUSTER_AUTHORIZATION_FAILED",),
          description=node.TraceResponse.__doc__ or ""),
    Route("GET", "/metrics", "Prometheus metrics of this node, named like Kafka's (docs/operations.md)", None,
          errors=("CLUSTER_AUTHORIZATION_FAILED",),
          description="Text format 0.0.4; OpenMetrics 1.0 when Accept names application/openmetrics-text. "
                      "With an authorizer: Describe on the cluster.",
          content={**_text("text/plain", "Prometheus text format 0.0.4"),
                   **_text("application/openmetrics-text", "OpenMetrics 1.0")}),
)

_REF = "#/components/schemas/{name}"


def _content(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}, "application/msgpack": {"schema": schema}}


def _parameters(route: Route, query_schemas: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The path's parameters, then the query Struct's fields, one parameter each."""
    parameters = [{"name": name, "in": "path", "required": True, "schema": msgspec.json.schema(kind)}
                  for name, kind in PATH_PARAMETERS.items() if f"{{{name}}}" in route.path]
    if route.query is not None:
        schema = query_schemas[route.query.__name__]
        for name, field in schema["properties"].items():
            field = _without_null(field)
            description = field.pop("description", "")
            parameters.append({"name": name, "in": "query", "required": name in schema.get("required", ()),
                               "schema": field, **({"description": description} if description else {})})
    return parameters


def _without_null(schema: dict[str, Any]) -> dict[str, Any]:
    """A query parameter's schema: absent is its null, so `T | None` is T, without a null default."""
    schema = dict(schema)
    branches = [b for b in schema.pop("anyOf", ()) if b != {"type": "null"}]
    if len(branches) == 1:
        schema = {**branches[0], **schema}
    elif branches:
        schema["anyOf"] = branches
    if "default" in schema and schema["default"] is None:
        del schema["default"]
    return schema


def _responses(route: Route, answer_schema: dict[str, Any] | None) -> dict[str, Any]:
    content = route.content if route.content is not None else _content(answer_schema or {})
    responses: dict[str, Any] = {str(route.status): {"description": "OK" if route.status < 300 else HTTPStatus(route.status).phrase,
                                                     **({"content": content} if content else {})}}
    codes = dict.fromkeys((*route.errors, *COMMON_ERRORS, *(BODY_ERRORS if route.request else ())))
    by_status: dict[int, list[str]] = {}
    for code in codes:
        by_status.setdefault(HTTP_STATUS[code], []).append(code)
    for status in sorted(by_status):
        codes_of_status = sorted(by_status[status])
        responses[str(status)] = {"description": ", ".join(codes_of_status), "x-error-codes": codes_of_status,
                                  "content": _content({"$ref": _REF.format(name="ErrorResponse")})}
    if route.path == "/v1/health":  # ?ready=true on a node that is not ready: the same body
        responses["503"] = {"description": "not ready (with ?ready=true)", "content": content}
    return responses


def openapi_document() -> dict[str, Any]:
    messages = [t for r in ROUTES for t in (r.request, r.answer) if t is not None]
    queries = [r.query for r in ROUTES if r.query is not None]
    refs, schemas = msgspec.json.schema_components([ErrorResponse, *messages, *queries], ref_template=_REF)
    by_type = dict(zip([ErrorResponse, *messages, *queries], refs))
    for schema in schemas.values():  # docstrings, as Markdown reads them
        if "description" in schema:
            schema["description"] = inspect.cleandoc(schema["description"])
    query_schemas = {q.__name__: schemas[q.__name__] for q in queries}
    paths: dict[str, Any] = {}
    for route in ROUTES:
        operation: dict[str, Any] = {"summary": route.summary}
        if route.description:
            operation["description"] = inspect.cleandoc(route.description)
        parameters = _parameters(route, query_schemas)
        if parameters:
            operation["parameters"] = parameters
        if route.request is not None:
            operation["requestBody"] = {"required": True, "content": _content(by_type[route.request])}
        operation["responses"] = _responses(route, by_type.get(route.answer) if route.answer else None)
        paths.setdefault(route.path, {})[route.method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": "kraft", "version": "1", "description": (
            "kraft's client API. Bodies are JSON or msgpack (by Content-Type; answers follow Accept); binary "
            "fields are base64 in JSON and bin in msgpack. Errors: {error_code, message, retriable}, with "
            "Kafka's error names; a route that does not exist answers 404 NOT_FOUND, a method it does not "
            "take 405 METHOD_NOT_ALLOWED.")},
        "paths": paths,
        "components": {"schemas": schemas},
    }
