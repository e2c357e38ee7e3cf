"""The OpenAPI 3.0 document of every public route (served at `/v1/openapi.json`).

Schemas state types, ranges and required fields precisely enough for a schemathesis fuzz run, and
every route lists the error answers it can give (the body of `api/errors.py`).
"""

from __future__ import annotations

from typing import Any

from kraft.api.wire import INT32_MAX, INT64_MAX
from kraft.log.config import TOPIC_CONFIG_KEYS

INT32 = {"type": "integer", "format": "int32"}
INT64 = {"type": "integer", "format": "int64"}
TOPIC_NAME = {"type": "string", "pattern": r"^[a-zA-Z0-9._-]{1,249}$", "minLength": 1,
              "maxLength": 249}
_MAX_TIMEOUT_MS = 300_000


def _int(minimum: int = 0, maximum: int = INT32_MAX, **extra: Any) -> dict[str, Any]:
    base = INT32 if maximum <= INT32_MAX else INT64
    return {**base, "minimum": minimum, "maximum": maximum, **extra}


def _obj(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "nullable": True}


_NODE = _obj({"node_id": INT32, "host": {"type": "string"}, "port": INT32}, ("node_id", "host", "port"))
ACKS = {"oneOf": [{"type": "integer", "enum": [0, 1, -1]}, {"type": "string", "enum": ["all"]}]}
BINARY = {"type": "string", "format": "byte", "description": "base64 in JSON, bin in msgpack"}
CONFIGS = {"type": "object", "additionalProperties": {"type": "string"}}
_ENUM_CONFIGS = {
    "cleanup.policy": ["delete", "compact", "compact,delete"],
    "message.timestamp.type": ["CreateTime", "LogAppendTime"],
    "unclean.leader.election.enable": ["true", "false"],
}


def _config_values(nullable: bool) -> dict[str, Any]:
    """Topic config overrides: the known keys only (log.config.TOPIC_CONFIG_KEYS), string values."""
    properties = {}
    for key in sorted(TOPIC_CONFIG_KEYS):
        if key in _ENUM_CONFIGS:
            schema: dict[str, Any] = {"type": "string", "enum": _ENUM_CONFIGS[key]}
        else:
            # 100..999999999: inside every numeric key's range (min 14, max int32 for some)
            schema = {"type": "string", "pattern": "^[1-9][0-9]{2,8}$"}
        properties[key] = _nullable(schema) if nullable else schema
    return {"type": "object", "properties": properties, "additionalProperties": False}


SCHEMAS: dict[str, Any] = {
    "Error": _obj({
        "error_code": {"type": "string"},
        "message": {"type": "string"},
        "retriable": {"type": "boolean"},
        "leader": _obj({"node_id": INT32, "host": {"type": "string"}, "port": INT32}),
        "partitions": {"type": "array", "items": {"type": "object"},
                       "description": "JSON produce: every partition's error"},
    }, ("error_code", "message", "retriable")),
    "Partition": _obj({
        "partition": _int(), "leader": _int(-1), "leader_epoch": _int(-1),
        "replicas": {"type": "array", "items": INT32}, "isr": {"type": "array", "items": INT32},
    }, ("partition", "leader", "leader_epoch", "replicas", "isr")),
    "TopicMetadata": _obj({
        "name": {"type": "string"}, "topic_id": {"type": "string"}, "internal": {"type": "boolean"},
        "partitions": {"type": "array", "items": _ref("Partition")},
    }, ("name", "topic_id", "internal", "partitions")),
    "Header": _obj({"key": {"type": "string"}, "value": _nullable({"type": "string"}),
                    "value_b64": {"type": "string", "format": "byte"}}, ("key", "value")),
}

_ERROR_STATUSES = {
    "400": "Invalid request (INVALID_REQUEST, INVALID_TOPIC_EXCEPTION, INVALID_CONFIG, ...)",
    "401": "Authentication failed (SASL_AUTHENTICATION_FAILED): wrong or missing credentials",
    "403": "Refused (CLUSTER_AUTHORIZATION_FAILED: a route of the cluster's own nodes; POLICY_VIOLATION, "
           "TOPIC_DELETION_DISABLED)",
    "404": "Unknown topic or partition, or unknown route",
    "405": "Method not allowed",
    "406": "Not acceptable",
    "409": "Conflict (TOPIC_ALREADY_EXISTS, ...)",
    "413": "Request or batch too large",
    "415": "Unsupported media type",
    "416": "Offset out of range",
    "421": "Not leader or not controller (answer names the leader)",
    "500": "Unknown server error",
    "503": "Temporarily unavailable (NOT_ENOUGH_REPLICAS, LEADER_NOT_AVAILABLE, ...)",
    "504": "Request timed out",
}


def _content(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}, "application/msgpack": {"schema": schema}}


def _operation(
    summary: str, answer: dict[str, Any], status: str = "200",
    body: dict[str, Any] | None = None, parameters: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    responses: dict[str, Any] = {status: {"description": "OK", "content": _content(answer)}}
    for code, description in _ERROR_STATUSES.items():
        responses[code] = {"description": description, "content": _content(_ref("Error"))}
    op: dict[str, Any] = {"summary": summary, "responses": responses}
    if body is not None:
        op["requestBody"] = {"required": True, "content": _content(body)}
    if parameters:
        op["parameters"] = parameters
    return op


def _query(name: str, schema: dict[str, Any], description: str = "") -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema,
            "description": description}


TOPIC_PARAM = {"name": "topic", "in": "path", "required": True, "schema": TOPIC_NAME}
PARTITION_PARAM = {"name": "partition", "in": "path", "required": True, "schema": _int()}

_TOPIC_DESCRIPTION = _obj({
    "name": {"type": "string"}, "topic_id": {"type": "string"}, "internal": {"type": "boolean"},
    "configs": CONFIGS, "partitions": {"type": "array", "items": _ref("Partition")},
}, ("name", "topic_id", "internal", "configs", "partitions"))

_RECORD_IN = _obj({
    "key": _nullable({"type": "string"}), "value": _nullable({"type": "string"}),
    "key_b64": {"type": "string", "format": "byte"}, "value_b64": {"type": "string", "format": "byte"},
    "partition": _int(), "timestamp": _int(0, INT64_MAX),
    "headers": {"oneOf": [
        {"type": "object", "additionalProperties": _nullable({"type": "string"})},
        {"type": "array", "items": _obj(
            {"key": {"type": "string"}, "value": _nullable({"type": "string"})}, ("key",))},
    ]},
})

_RECORD_OUT = _obj({
    "partition": INT32, "offset": INT64, "timestamp": INT64,
    "key": _nullable({"type": "string"}), "value": _nullable({"type": "string"}),
    "key_b64": {"type": "string"}, "value_b64": {"type": "string"},
    "headers": {"type": "array", "items": _ref("Header")},
}, ("partition", "offset", "timestamp", "key", "value", "headers"))

_PRODUCED_PARTITION = _obj({
    "partition": INT32, "base_offset": _nullable(INT64), "record_count": INT32,
    "error_code": {"type": "string"}, "message": {"type": "string"}, "retriable": {"type": "boolean"},
}, ("partition", "base_offset", "record_count"))
_PRODUCE_ANSWER = (
    "Records go to their partitions (each partition's leader, forwarded when another broker leads "
    "it), and every partition is answered on its own, as Kafka's ProduceResponse: `partitions` holds "
    "one entry per partition written to, with `base_offset` when its records were stored or "
    "`error_code`, `message` and `retriable` when they were not; `offsets` says the same per record, "
    "in request order. 200 when at least one partition stored its records: check every entry, and "
    "retry only the failed partitions (a retry of the stored ones would duplicate them). When no "
    "partition stored anything, the answer is the first partition's error with its status (e.g. 503 "
    "KAFKA_STORAGE_ERROR), carrying the same `partitions` list. Invalid input is refused before "
    "anything is written (400).")

_OFFSET_QUERY = {"oneOf": [{"type": "string", "enum": ["earliest", "latest"]},
                           {"type": "string", "pattern": "^[0-9]{1,18}$"}]}

def _health() -> dict[str, Any]:
    body = _obj({
        "status": {"type": "string", "enum": ["ok", "not_ready"],
                   "description": "not_ready only with ?ready=true on a node that is not ready"},
        "node_id": INT32,
        "roles": {"type": "array", "items": {"type": "string"}},
        "features": {"type": "array", "items": {"type": "string", "enum": ["idempotence"]},
                     "description": "optional features this node supports"},
        "cluster_id": {"type": "string"},
        "active_controller": {"type": "boolean", "description": "this node is the active controller"},
        "controller_id": {**INT32, "description": "the active controller as this node knows it (-1: unknown)"},
        "metadata_offset": {**INT64, "description": "last metadata offset applied here"},
        "broker_state": _nullable({"type": "string", "enum": ["STARTING", "FENCED", "RUNNING"]}),
        "metadata_log_error": _nullable({"type": "string", "description": "why this node's metadata log "
                                         "cannot be written now (e.g. a full disk); null while it can"}),
        "ready": {"type": "boolean", "description": "caught up with the metadata log, knows the active "
                  "controller, and (a broker) registered and unfenced"},
        "reason": {"type": "string", "description": "why the node is not ready (only when it is not)"},
    }, ("status", "node_id", "roles", "ready"))
    op = _operation("Liveness of this node, its roles, controller and broker state, readiness", body,
                    parameters=[_query("ready", {"type": "string", "enum": ["true", "false"]},
                                       "true: answer 503 until the node is ready (a readiness probe)")])
    op["description"] = ("With `?ready=true`, a node that is not ready answers 503 with this body: `status` "
                         "`not_ready`, `ready` false and the `reason` (for a readiness probe, or a script "
                         "that waits before creating topics).")
    op["responses"]["503"]["content"] = _content(body)
    return op


_PATHS: dict[str, Any] = {
    "/v1/health": {"get": _health()},
    "/v1/metadata": {"get": _operation("Brokers, controller and topics", _obj({
        "cluster_id": {"type": "string"}, "controller_id": INT32,
        "brokers": {"type": "array", "items": _obj({
            "node_id": INT32, "host": {"type": "string"}, "port": INT32,
            "rack": _nullable({"type": "string"}),
        }, ("node_id", "host", "port", "rack"))},
        "topics": {"type": "array", "items": _ref("TopicMetadata")},
        "topic_errors": {"type": "array", "description": "why a named topic is not in topics",
                         "items": _obj({"name": {"type": "string"}, "error_code": {"type": "string"},
                                        "message": {"type": "string"}, "retriable": {"type": "boolean"}},
                                       ("name", "error_code", "message"))},
    }, ("cluster_id", "controller_id", "brokers", "topics", "topic_errors")), parameters=[
        _query("topics", {"type": "string", "pattern": "^[a-zA-Z0-9._,-]*$"},
               "comma-separated topic names"),
        _query("allow_auto_topic_creation", {"type": "string", "enum": ["true", "false"]},
               "create a named topic that does not exist (when auto.create.topics.enable), as produce does"),
    ])},
    "/v1/topics": {
        "post": _operation("Create a topic", _obj({
            "name": {"type": "string"}, "topic_id": {"type": "string"}, "partitions": INT32,
            "replication_factor": INT32, "configs": CONFIGS,
        }, ("name", "topic_id", "partitions", "replication_factor", "configs")), "201", _obj({
            "name": TOPIC_NAME, "partitions": _int(1, 10_000),
            "replication_factor": _int(1, 32767), "configs": _config_values(nullable=False),
        }, ("name",))),
        "get": _operation("List topics", _obj({"topics": {"type": "array", "items": _obj({
            "name": {"type": "string"}, "topic_id": {"type": "string"},
            "internal": {"type": "boolean"}, "partitions": INT32,
        }, ("name", "topic_id", "internal", "partitions"))}}, ("topics",))),
    },
    "/v1/topics/{topic}": {
        "parameters": [TOPIC_PARAM],
        "get": _operation("Describe a topic", _TOPIC_DESCRIPTION),
        "delete": _operation("Delete a topic", _obj({"name": {"type": "string"}}, ("name",))),
    },
    "/v1/topics/{topic}/partitions": {
        "parameters": [TOPIC_PARAM],
        "post": _operation("Raise the partition count", _obj(
            {"name": {"type": "string"}, "partitions": INT32}, ("name", "partitions")),
            body=_obj({"count": _int(1, 10_000)}, ("count",))),
    },
    "/v1/topics/{topic}/configs": {
        "parameters": [TOPIC_PARAM],
        "get": _operation("Topic config overrides and broker defaults", _obj(
            {"configs": CONFIGS, "defaults": CONFIGS}, ("configs", "defaults"))),
        "patch": _operation("Set (or with null, delete) topic config overrides", _obj(
            {"configs": CONFIGS}, ("configs",)),
            body=_obj({"configs": _config_values(nullable=True)}, ("configs",))),
    },
    "/v1/topics/{topic}/records": {
        "parameters": [TOPIC_PARAM],
        "post": {**_operation("Produce JSON records", _obj({"offsets": {"type": "array", "items": _obj({
            "partition": INT32, "offset": _nullable(INT64),
            "error_code": {"type": "string"}, "message": {"type": "string"}, "retriable": {"type": "boolean"},
        }, ("partition", "offset"))}, "partitions": {"type": "array", "items": _PRODUCED_PARTITION}},
            ("offsets", "partitions")), body=_obj({
            "records": {"type": "array", "minItems": 1, "maxItems": 100_000, "items": _RECORD_IN},
            "acks": ACKS,
        }, ("records",)), parameters=[_query("acks", {"type": "string", "enum": [
            "0", "1", "-1", "all"]})]), "description": _PRODUCE_ANSWER},
    },
    "/v1/topics/{topic}/partitions/{partition}/records": {
        "parameters": [TOPIC_PARAM, PARTITION_PARAM],
        "get": _operation("Read records from an offset", _obj({
            "records": {"type": "array", "items": _RECORD_OUT},
            "high_watermark": INT64, "log_start_offset": INT64, "next_offset": INT64,
        }, ("records", "high_watermark", "log_start_offset", "next_offset")), parameters=[
            _query("offset", _OFFSET_QUERY, "an offset, earliest (default) or latest"),
            _query("timestamp", _int(0, INT64_MAX), "start at the first record this late"),
            _query("max_records", _int(1, 10_000)),
            _query("max_bytes", _int(1)),
            _query("timeout_ms", _int(0, _MAX_TIMEOUT_MS), "long-poll time when nothing is new"),
        ]),
    },
    "/v1/topics/{topic}/partitions/{partition}/offsets": {
        "parameters": [TOPIC_PARAM, PARTITION_PARAM],
        "get": _operation("A partition's offsets, or the offset for a timestamp", _obj({
            "partition": INT32, "log_start_offset": INT64, "high_watermark": INT64,
            "log_end_offset": INT64, "offset": _nullable(INT64), "timestamp": _nullable(INT64),
        }, ("partition", "log_start_offset", "high_watermark", "log_end_offset")), parameters=[
            _query("timestamp", _int(0, INT64_MAX)),
        ]),
    },
    "/v1/produce": {"post": _operation("Produce record batches to many partitions", _obj({
        "partitions": {"type": "array", "items": _obj({
            "topic": {"type": "string"}, "partition": INT32, "base_offset": INT64,
            "log_start_offset": INT64, "error_code": {"type": "string"},
            "message": {"type": "string"},
        }, ("topic", "partition", "base_offset", "log_start_offset"))},
        "throttle_time_ms": {**INT32, "description": "how long the answer was held back for a client quota"},
    }, ("partitions",)), body=_obj({
        "acks": ACKS, "timeout_ms": _int(0, _MAX_TIMEOUT_MS),
        "partitions": {"type": "array", "maxItems": 10_000, "items": _obj({
            "topic": TOPIC_NAME, "partition": _int(),
            "records": {**BINARY, "minLength": 84},  # base64 of one 61-byte batch header
        }, ("topic", "partition", "records"))},
    }, ("partitions",)))},
    "/v1/fetch": {"post": _operation("Fetch record batches from many partitions (long poll)", _obj({
        "throttle_time_ms": {**INT32, "description": "how long the answer was held back for a client quota"},
        "partitions": {"type": "array", "items": _obj({
            "topic": {"type": "string"}, "partition": INT32, "high_watermark": INT64,
            "log_start_offset": INT64, "records": BINARY, "error_code": {"type": "string"},
            "message": {"type": "string"},
            "log_end_offset": {**INT64, "description": "replica fetches only: the leader's log end offset"},
            "diverging_epoch": {**_obj({"epoch": INT32, "end_offset": INT64}, ("epoch", "end_offset")),
                                "description": "replica fetches only, instead of records: the follower's "
                                "log diverged; the leader's end offset of the largest epoch <= "
                                "last_fetched_epoch (KIP-320/595); truncate there"},
            "leader": {**_NODE, "description": "with NOT_LEADER_OR_FOLLOWER: the partition's leader as "
                                               "this broker knows it"},
        }, ("topic", "partition", "high_watermark", "log_start_offset", "records"))},
    }, ("partitions",)), body=_obj({
        "max_wait_ms": _int(0, _MAX_TIMEOUT_MS), "min_bytes": _int(0), "max_bytes": _int(1),
        "replica_id": _int(-1, description="the fetching broker's id (a follower); -1 or absent: a consumer, "
                           "which reads below the high watermark only"),
        "replica_epoch": _int(-1, INT64_MAX, description="the follower's broker epoch (KIP-903): an older "
                              "incarnation gets STALE_BROKER_EPOCH; -1: unchecked"),
        "partitions": {"type": "array", "maxItems": 10_000, "items": _obj({
            "topic": TOPIC_NAME, "partition": _int(), "fetch_offset": _int(0, INT64_MAX),
            "partition_max_bytes": _int(1),
            "current_leader_epoch": _int(-1, description="the leader epoch the fetcher believes current "
                                         "(KIP-320): older than the broker's -> FENCED_LEADER_EPOCH, newer "
                                         "-> UNKNOWN_LEADER_EPOCH; -1: unchecked"),
            "last_fetched_epoch": _int(-1, description="the epoch of the follower's last batch: the "
                                       "leader answers diverging_epoch when its log differs; -1: none"),
            "high_watermark": _int(-1, INT64_MAX, description="the follower's own high watermark: the "
                                   "leader answers at once when its own is newer; -1: unknown"),
        }, ("topic", "partition", "fetch_offset"))},
    }, ("partitions",)))},
    "/v1/producers/init": {"post": _operation(
        "A producer id and epoch for an idempotent producer (Kafka's InitProducerId)", _obj({
            "producer_id": INT64, "producer_epoch": _int(0, 32767),
        }, ("producer_id", "producer_epoch")), body=_obj({
            "transactional_id": {**_nullable({"type": "string", "maxLength": 1024}), "description":
                                 "derive the id from this name (stateless, the same on every broker)"},
        }))},
    "/v1/openapi.json": {"get": {"summary": "This document", "responses": {"200": {
        "description": "OpenAPI 3 document",
        "content": {"application/json": {"schema": {"type": "object"}}},
    }}}},
}


GROUP_PARAM = {"name": "group", "in": "path", "required": True,
               "schema": {"type": "string", "pattern": r"^[a-zA-Z0-9._-]{1,249}$", "minLength": 1,
                          "maxLength": 249}}
_TOPIC_PARTITIONS_OUT = {"type": "array", "items": _obj({
    "topic": {"type": "string"}, "partitions": {"type": "array", "items": INT32},
}, ("topic", "partitions"))}
_TOPIC_PARTITIONS_IN = {"type": "array", "maxItems": 10_000, "items": _obj({
    "topic": TOPIC_NAME, "partitions": {"type": "array", "maxItems": 10_000, "items": _int()},
}, ("topic", "partitions"))}

_GROUP_PATHS: dict[str, Any] = {
    "/v1/groups": {"get": _operation("Consumer groups coordinated by this broker", _obj({
        "groups": {"type": "array", "items": _obj({
            "group_id": {"type": "string"}, "state": {"type": "string"},
            "protocol_type": {"type": "string"}, "members": INT32, "coordinator": INT32,
        }, ("group_id", "state", "protocol_type", "members", "coordinator"))},
    }, ("groups",)))},
    "/v1/groups/{group}": {
        "parameters": [GROUP_PARAM],
        "get": _operation("Describe a group: state, members, assignments, offsets and lag", _obj({
            "group_id": {"type": "string"}, "state": {"type": "string", "enum": [
                "Empty", "Assigning", "Reconciling", "Stable"]},
            "protocol_type": {"type": "string"}, "assignor": {"type": "string"},
            "group_epoch": INT32, "assignment_epoch": INT32, "coordinator": _nullable(_NODE),
            "members": {"type": "array", "items": _obj({
                "member_id": {"type": "string"}, "member_epoch": INT32,
                "client_id": {"type": "string"}, "host": {"type": "string"},
                "subscribed_topics": {"type": "array", "items": {"type": "string"}},
                "subscribed_topic_regex": _nullable({"type": "string"}),
                "assignment": _TOPIC_PARTITIONS_OUT, "pending_revocation": _TOPIC_PARTITIONS_OUT,
                "target_assignment": _TOPIC_PARTITIONS_OUT,
            }, ("member_id", "member_epoch", "client_id", "host", "subscribed_topics",
                "subscribed_topic_regex", "assignment", "pending_revocation", "target_assignment"))},
            "offsets": {"type": "array", "items": _obj({
                "topic": {"type": "string"}, "partition": INT32,
                "current_offset": _nullable(INT64), "log_end_offset": _nullable(INT64),
                "lag": _nullable(INT64), "member_id": _nullable({"type": "string"}),
            }, ("topic", "partition", "current_offset", "log_end_offset", "lag", "member_id"))},
        }, ("group_id", "state", "protocol_type", "assignor", "group_epoch", "assignment_epoch",
            "coordinator", "members", "offsets"))),
        "delete": _operation("Delete a group without members, and its committed offsets", _obj(
            {"group_id": {"type": "string"}}, ("group_id",))),
    },
    "/v1/groups/{group}/coordinator": {
        "parameters": [GROUP_PARAM],
        "get": _operation("Find the group's coordinator (creates __consumer_offsets on first use)", _obj({
            "group_id": {"type": "string"}, "partition": INT32, "coordinator": _NODE,
        }, ("group_id", "partition", "coordinator"))),
    },
    "/v1/groups/{group}/heartbeat": {
        "parameters": [GROUP_PARAM],
        "post": _operation("Join (epoch 0), heartbeat, or leave (epoch -1): KIP-848", _obj({
            "member_id": {"type": "string"}, "member_epoch": INT32, "heartbeat_interval_ms": INT32,
            "assignment": _TOPIC_PARTITIONS_OUT,
        }, ("member_id", "member_epoch", "heartbeat_interval_ms", "assignment")), body=_obj({
            "member_id": {"type": "string", "maxLength": 255},
            "member_epoch": _int(-1),
            "client_id": {"type": "string"},
            "subscribed_topics": {"type": "array", "maxItems": 10_000, "items": TOPIC_NAME},
            "subscribed_topic_regex": {"type": "string", "maxLength": 1000},
            "server_assignor": {"type": "string", "enum": ["range", "uniform"]},
            "owned_partitions": _TOPIC_PARTITIONS_IN,
            "rebalance_timeout_ms": _int(1),
        }, ("member_epoch",))),
    },
    "/v1/groups/{group}/offsets": {
        "parameters": [GROUP_PARAM],
        "post": _operation("Commit offsets (members send their id and epoch; -1 for none)", _obj({
            "offsets": {"type": "array", "items": _obj({
                "topic": {"type": "string"}, "partition": INT32, "offset": INT64,
            }, ("topic", "partition", "offset"))},
        }, ("offsets",)), body=_obj({
            "member_id": {"type": "string"}, "member_epoch": _int(-1),
            "offsets": {"type": "array", "maxItems": 10_000, "items": _obj({
                "topic": TOPIC_NAME, "partition": _int(), "offset": _int(0, INT64_MAX),
                "metadata": {"type": "string", "maxLength": 4096},
            }, ("topic", "partition", "offset"))},
        }, ("offsets",))),
        "get": _operation("Committed offsets of a group", _obj({
            "group_id": {"type": "string"},
            "offsets": {"type": "array", "items": _obj({
                "topic": {"type": "string"}, "partition": INT32, "offset": INT64,
                "metadata": {"type": "string"}, "commit_timestamp": INT64,
            }, ("topic", "partition", "offset", "metadata", "commit_timestamp"))},
        }, ("group_id", "offsets")), parameters=[
            _query("topics", {"type": "string"}, "comma-separated topic names"),
        ]),
    },
    "/v1/groups/{group}/offsets/delete": {
        "parameters": [GROUP_PARAM],
        "post": _operation("Delete a group's committed offsets (Kafka's OffsetDelete); per partition an "
                           "error_code when refused", _obj({
            "group_id": {"type": "string"},
            "partitions": {"type": "array", "items": _obj({
                "topic": {"type": "string"}, "partition": INT32, "error_code": {"type": "string"},
                "message": {"type": "string"},
            }, ("topic", "partition"))},
        }, ("group_id", "partitions")), body=_obj({
            "topics": {"type": "array", "minItems": 1, "maxItems": 1000, "items": _obj({
                "topic": TOPIC_NAME, "partitions": {"type": "array", "maxItems": 10_000, "items": _int(0, INT32_MAX)},
            }, ("topic",))},
        }, ("topics",))),
    },
    "/v1/groups/{group}/offsets/reset": {
        "parameters": [GROUP_PARAM],
        "post": _operation("Reset a group's offsets (group without members only); dry_run by default", _obj({
            "group_id": {"type": "string"}, "dry_run": {"type": "boolean"},
            "offsets": {"type": "array", "items": _obj({
                "topic": {"type": "string"}, "partition": INT32, "new_offset": INT64,
                "previous_offset": _nullable(INT64),
            }, ("topic", "partition", "new_offset", "previous_offset"))},
        }, ("group_id", "dry_run", "offsets")), body=_obj({
            "topics": {"type": "array", "minItems": 1, "maxItems": 1000, "items": TOPIC_NAME},
            "partitions": {"type": "array", "maxItems": 10_000, "items": _int()},
            "strategy": {"type": "string", "enum": ["earliest", "latest", "offset", "datetime", "shift"]},
            "value": {**INT64, "description": "offset (offset), timestamp ms (datetime) or shift"},
            "dry_run": {"type": "boolean", "default": True},
        }, ("topics", "strategy"))),
    },
}
_PATHS.update(_GROUP_PATHS)

# -- the controller API (api/routes/controller.py): answered by the active controller only -------

_REQUEST_ID = {"type": "string", "minLength": 1, "maxLength": 256,
               "description": "retries with the same id are applied once"}
_SCRAM_MECHANISM = {"type": "string", "enum": ["SCRAM-SHA-256", "SCRAM-SHA-512"]}
_SCRAM_RESULTS = {"type": "array", "items": _obj({"name": {"type": "string"}, "mechanism": _SCRAM_MECHANISM})}
_SCRAM_ALTER = _obj({
    "upsertions": {"type": "array", "maxItems": 1000, "items": _obj({
        "name": {"type": "string", "minLength": 1}, "mechanism": _SCRAM_MECHANISM, "iterations": _int(4096, 16384),
        "salt": {"type": "string", "description": "base64"},
        "salted_password": {"type": "string", "description": "base64 PBKDF2(password, salt, iterations): "
                                                             "the password itself is never sent"}},
        ("name", "mechanism", "salt", "salted_password"))},
    "deletions": {"type": "array", "maxItems": 1000, "items": _obj({
        "name": {"type": "string", "minLength": 1}, "mechanism": _SCRAM_MECHANISM}, ("name", "mechanism"))},
    "request_id": _REQUEST_ID})
_COMMITTED = {"metadata_offset": {**INT64, "description": "offset the change was committed at"}}
_BROKER_ID = _int()
_BROKER_EPOCH = _int(-1, INT64_MAX)
_REPLICA_ROW = _obj({
    "node_id": INT32, "log_end_offset": INT64, "lag": INT64, "last_fetch_timestamp": INT64,
    "last_caught_up_timestamp": INT64, "status": {"type": "string", "enum": ["Leader", "Follower", "Observer"]},
}, ("node_id", "log_end_offset", "lag", "last_fetch_timestamp", "last_caught_up_timestamp", "status"))
_PARTITION_STATE = _obj({
    "topic": {"type": "string"}, "topic_id": {"type": "string"}, "partition": INT32, "leader": INT32,
    "leader_epoch": INT32, "isr": {"type": "array", "items": INT32}, "partition_epoch": INT32, **_COMMITTED,
}, ("topic", "partition", "leader", "leader_epoch", "isr", "partition_epoch"))
_ANY_OBJECT = {"type": "object", "additionalProperties": True}
_BROKER_IDS = {"type": "array", "items": INT32}
_REASSIGNMENTS = _obj({"partitions": {"type": "array", "items": _obj({
    "topic": {"type": "string"}, "partition": INT32,
    "replicas": {**_BROKER_IDS, "description": "the target, then the replicas still leaving"},
    "adding_replicas": _BROKER_IDS, "removing_replicas": _BROKER_IDS,
}, ("topic", "partition", "replicas", "adding_replicas", "removing_replicas"))}}, ("partitions",))

_CONTROLLER_PATHS: dict[str, Any] = {
    "/v1/controller/quorum": {"get": _operation(
        "Metadata quorum status and replication (kafka-metadata-quorum describe)", _obj({
            "cluster_id": {"type": "string"}, "leader_id": INT32, "leader_epoch": INT64,
            "controller_epoch": INT64, "high_watermark": INT64, "max_follower_lag": INT64,
            "max_follower_lag_time_ms": INT64, "current_voters": {"type": "array", "items": INT32},
            "current_observers": {"type": "array", "items": INT32},
            "replication": {"type": "array", "items": _REPLICA_ROW},
        }, ("cluster_id", "leader_id", "leader_epoch", "high_watermark", "max_follower_lag",
            "max_follower_lag_time_ms", "current_voters", "current_observers", "replication")))},
    "/v1/controller/quorum/local": {"get": _operation("This node's own view of the quorum (any node answers)", _obj({
        "node_id": INT32, "metadata_offset": INT64, "active": {"type": "boolean"}, "controller_id": INT32,
        "controller_epoch": INT64, "raft": _nullable(_ANY_OBJECT),
    }, ("node_id", "metadata_offset", "active", "controller_id")))},
    "/v1/controller/metadata": {"get": _operation(
        "Committed metadata records from an offset (long poll), or snapshot_needed", _obj({
            "cluster_id": {"type": "string"}, "leader": _nullable(_NODE),
            "controllers": {"type": "array", "items": _NODE}, "snapshot_needed": {"type": "boolean"},
            "first_available": INT64, "high_watermark": INT64,
            "records": {"type": "array", "items": {"type": "array", "description": "[offset, record]"}},
        }, ("snapshot_needed", "records", "high_watermark")), parameters=[
            _query("broker_id", _int(), "the fetching broker (an observer)"),
            _query("from_offset", _int(0, INT64_MAX)),
            _query("max_records", _int(1, 10_000)),
            _query("max_wait_ms", _int(0, 1_000)),
        ])},
    "/v1/controller/snapshot": {"get": {
        "summary": "The metadata image at the last applied offset (always msgpack)",
        "responses": {"200": {"description": "OK", "content": {"application/msgpack": {"schema": _ANY_OBJECT}}},
                      **{code: {"description": d, "content": _content(_ref("Error"))}
                         for code, d in _ERROR_STATUSES.items()}},
    }},
    "/v1/controller/brokers/register": {"post": _operation("Register a broker (fenced until caught up)", _obj({
        "broker_id": INT32, "broker_epoch": INT64, **_COMMITTED}, ("broker_id", "broker_epoch")), body=_obj({
            "broker_id": _BROKER_ID, "incarnation_id": {"type": "string", "minLength": 1, "maxLength": 64},
            "endpoints": {"type": "array", "minItems": 1, "maxItems": 16, "items": _obj({
                "name": {"type": "string", "maxLength": 64}, "host": {"type": "string", "minLength": 1,
                                                                      "maxLength": 255},
                "port": _int(1, 65535)}, ("host", "port"))},
            "rack": _nullable({"type": "string", "maxLength": 255}),
            "cluster_id": _nullable({"type": "string"}), "request_id": _REQUEST_ID,
        }, ("broker_id", "incarnation_id", "endpoints")))},
    "/v1/controller/brokers/heartbeat": {"post": _operation("Broker heartbeat: renews the session", _obj({
        "broker_id": INT32, "broker_epoch": INT64, "is_caught_up": {"type": "boolean"},
        "is_fenced": {"type": "boolean"}, "should_shutdown": {"type": "boolean"}, **_COMMITTED,
    }, ("broker_id", "broker_epoch", "is_caught_up", "is_fenced", "should_shutdown")), body=_obj({
        "broker_id": _BROKER_ID, "broker_epoch": _BROKER_EPOCH, "current_metadata_offset": _int(-1, INT64_MAX),
        "want_fence": {"type": "boolean"}, "want_shutdown": {"type": "boolean"},
    }, ("broker_id", "broker_epoch", "current_metadata_offset")))},
    "/v1/controller/brokers/unregister": {"post": _operation("Unregister a broker", _obj({
        "broker_id": INT32, **_COMMITTED}, ("broker_id",)), body=_obj({
            "broker_id": _BROKER_ID, "request_id": _REQUEST_ID}, ("broker_id",)))},
    "/v1/controller/producer-ids": {"post": _operation("Allocate a block of producer ids", _obj({
        "producer_id_start": INT64, "producer_id_len": INT32, **_COMMITTED},
        ("producer_id_start", "producer_id_len")), body=_obj({
            "broker_id": _BROKER_ID, "broker_epoch": _BROKER_EPOCH, "request_id": _REQUEST_ID},
            ("broker_id", "broker_epoch")))},
    "/v1/controller/alter-partition": {"post": _operation(
        "AlterPartition: an ISR change from the partition leader", _PARTITION_STATE, body=_obj({
            "broker_id": _BROKER_ID, "broker_epoch": _BROKER_EPOCH, "topic": TOPIC_NAME, "partition": _int(),
            "leader_epoch": _int(), "partition_epoch": _int(),
            "new_isr": {"type": "array", "maxItems": 1000, "items": _int()}, "request_id": _REQUEST_ID,
        }, ("broker_id", "broker_epoch", "topic", "partition", "leader_epoch", "partition_epoch", "new_isr")))},
    "/v1/controller/topics": {"post": _operation("Create a topic (what other nodes forward)", _obj({
        "name": {"type": "string"}, "topic_id": {"type": "string"}, "partitions": INT32,
        "replication_factor": INT32, "configs": CONFIGS, **_COMMITTED},
        ("name", "topic_id", "partitions", "replication_factor", "configs")), body=_obj({
            "name": TOPIC_NAME, "partitions": _nullable(_int(1, 10_000)),
            "replication_factor": _nullable(_int(1, 32767)), "configs": _config_values(False),
            "validate_only": {"type": "boolean"}, "request_id": _REQUEST_ID,
        }, ("name",)))},
    "/v1/controller/topics/delete": {"post": _operation("Delete a topic", _obj({
        "name": {"type": "string"}, "topic_id": {"type": "string"}, **_COMMITTED}, ("name", "topic_id")), body=_obj({
            "name": TOPIC_NAME, "request_id": _REQUEST_ID}, ("name",)))},
    "/v1/controller/topics/partitions": {"post": _operation("Grow a topic to `count` partitions", _obj({
        "name": {"type": "string"}, "partitions": INT32, **_COMMITTED}, ("name", "partitions")), body=_obj({
            "name": TOPIC_NAME, "count": _int(1, 10_000), "validate_only": {"type": "boolean"},
            "request_id": _REQUEST_ID}, ("name", "count")))},
    "/v1/controller/configs": {"post": _operation("Set (value) or delete (null) topic config overrides", _obj({
        "configs": CONFIGS, **_COMMITTED}, ("configs",)), body=_obj({
            "resource_type": {"type": "string", "enum": ["topic"]}, "resource_name": TOPIC_NAME,
            "configs": _config_values(True), "validate_only": {"type": "boolean"}, "request_id": _REQUEST_ID,
        }, ("resource_name", "configs")))},
    "/v1/controller/users/scram-credentials": {"post": _operation(
        "Upsert or delete SCRAM credentials, all or none (forwarded by nodes)",
        _obj({"results": _SCRAM_RESULTS, **_COMMITTED}, ("results",)), body=_SCRAM_ALTER)},
    "/v1/controller/elect-leaders": {"post": _operation(
        "Preferred leader election (kafka-leader-election --election-type preferred)", _obj({
            "partitions": {"type": "array", "items": _obj({
                "topic": {"type": "string"}, "partition": INT32, "leader": _nullable(INT32),
                "error_code": {"type": "string"}, "message": {"type": "string"}}, ("topic", "partition"))},
            **_COMMITTED}, ("partitions",)), body=_obj({
                "election_type": {"type": "string", "enum": ["preferred"]},
                "partitions": _nullable({"type": "array", "maxItems": 10_000, "items": {
                    "type": "array", "minItems": 2, "maxItems": 2,
                    "items": {"oneOf": [TOPIC_NAME, _int()]}, "description": "[topic, partition]"}}),
                "request_id": _REQUEST_ID,
            }))},
    "/v1/controller/reassignments": {
        "get": _operation("Partition reassignments in progress (kafka-reassign-partitions --verify)",
                          _REASSIGNMENTS),
        "post": _operation(
            "Start (replicas: the target) or cancel (replicas: null) partition reassignments, all or none "
            "(KIP-455): UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS "
            "reject the whole plan", {**_REASSIGNMENTS, "properties": {**_REASSIGNMENTS["properties"], **_COMMITTED}},
            body=_obj({
                "partitions": {"type": "array", "maxItems": 10_000, "items": _obj({
                    "topic": TOPIC_NAME, "partition": _int(),
                    "replicas": _nullable({"type": "array", "maxItems": 1000, "items": _int()}),
                }, ("topic", "partition", "replicas"))},
                "request_id": _REQUEST_ID,
            }, ("partitions",)))},
}
_PATHS.update(_CONTROLLER_PATHS)
_PATHS["/v1/users/scram-credentials"] = {
    "get": _operation("Users and their SCRAM mechanisms and iterations, never keys (kafka-configs --describe "
                      "--entity-type users)", _obj({"users": {"type": "array", "items": _obj({
                          "name": {"type": "string"}, "credentials": {"type": "array", "items": _obj({
                              "mechanism": _SCRAM_MECHANISM, "iterations": _int()})}})}}, ("users",)),
                      parameters=[_query("user", {"type": "string"}, "one user only")]),
    "post": _operation("Upsert or delete SCRAM credentials, all or none (kafka-configs --alter --entity-type "
                       "users --add-config/--delete-config SCRAM-SHA-256=[...])",
                       _obj({"results": _SCRAM_RESULTS}, ("results",)), body=_SCRAM_ALTER),
}
_STR = {"type": "string"}
_ACL_BINDING = _obj({
    "resource_type": {"type": "string", "enum": ["TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID"]},
    "resource_name": _STR, "pattern_type": {"type": "string", "enum": ["LITERAL", "PREFIXED"]},
    "principal": {"type": "string", "description": "User:alice, User:*"},
    "host": {"type": "string", "description": "an address, or * (the default)"},
    "operation": {"type": "string", "description": "Kafka's: READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, "
                                                   "CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, "
                                                   "IDEMPOTENT_WRITE, ALL"},
    "permission_type": {"type": "string", "enum": ["ALLOW", "DENY"]},
}, ("resource_type", "resource_name", "pattern_type", "principal", "operation", "permission_type"))
_ACL_FILTER = _obj({
    "resource_type": _STR, "resource_name": _STR,
    "pattern_type": {"type": "string", "description": "ANY, MATCH, LITERAL or PREFIXED"},
    "principal": _STR, "host": _STR, "operation": _STR, "permission_type": _STR,
})
_ACLS = {"type": "array", "items": _ACL_BINDING}
_QUOTA_ENTITY = _obj({"user": {"type": "string", "nullable": True, "description": "<default>: the default user"},
                      "client_id": {"type": "string", "nullable": True,
                                    "description": "<default>: the default client id"}})
_QUOTA_KEY = {"type": "string", "enum": ["producer_byte_rate", "consumer_byte_rate", "request_percentage"]}
_QUOTA_ENTRIES = {"type": "array", "maxItems": 1000, "items": _obj({
    "entity": _QUOTA_ENTITY, "ops": {"type": "array", "items": _obj({
        "key": _QUOTA_KEY, "value": {"type": "number", "minimum": 0, "exclusiveMinimum": True}, "remove": {"type": "boolean"}},
        ("key",))}}, ("entity", "ops"))}
_QUOTA_ALTER = _obj({"entries": _QUOTA_ENTRIES, "validate_only": {"type": "boolean"}}, ("entries",))
_PATHS["/v1/acls"] = {
    "get": _operation("ACL bindings matching Kafka's filter (kafka-acls --list); Describe on the cluster",
                      _obj({"acls": _ACLS}, ("acls",)),
                      parameters=[_query(name, _STR) for name in _ACL_FILTER["properties"]]),
    "post": _operation("Create ACL bindings (kafka-acls --add); Alter on the cluster",
                       _obj({"created": _ACLS}, ("created",)), status="201",
                       body=_obj({"acls": {**_ACLS, "maxItems": 1000}}, ("acls",))),
}
_PATHS["/v1/acls/delete"] = {"post": _operation(
    "Delete the ACLs each filter matches (kafka-acls --remove); Alter on the cluster",
    _obj({"filter_results": {"type": "array", "items": _obj({"matching_acls": _ACLS})}}, ("filter_results",)),
    body=_obj({"filters": {"type": "array", "maxItems": 1000, "items": _ACL_FILTER}}, ("filters",)))}
_PATHS["/v1/client-quotas"] = {
    "get": _operation("Client quotas of every entity (kafka-configs --describe --entity-type users|clients)",
                      _obj({"entries": {"type": "array", "items": _obj({
                          "user": {"type": "string", "nullable": True},
                          "client_id": {"type": "string", "nullable": True},
                          "quotas": {"type": "object", "additionalProperties": {"type": "number"}}})}},
                           ("entries",))),
    "post": _operation("Set or remove client quotas (kafka-configs --alter --entity-type users|clients)",
                       _obj({"entries": _int()}, ("entries",)), body=_QUOTA_ALTER),
}
_PATHS["/v1/controller/acls"] = {"post": _operation(
    "Create ACL bindings (forwarded by nodes)", _obj({"created": _ACLS, **_COMMITTED}, ("created",)),
    body=_obj({"acls": {**_ACLS, "maxItems": 1000}, "request_id": _REQUEST_ID}, ("acls",)))}
_PATHS["/v1/controller/acls/delete"] = {"post": _operation(
    "Delete ACLs by filter (forwarded by nodes)",
    _obj({"filter_results": {"type": "array", "items": _obj({"matching_acls": _ACLS})}, **_COMMITTED},
         ("filter_results",)),
    body=_obj({"filters": {"type": "array", "maxItems": 1000, "items": _ACL_FILTER}, "request_id": _REQUEST_ID},
              ("filters",)))}
_PATHS["/v1/controller/client-quotas"] = {"post": _operation(
    "Set or remove client quotas (forwarded by nodes)", _obj({"entries": _int(), **_COMMITTED}, ("entries",)),
    body=_obj({**_QUOTA_ALTER["properties"], "request_id": _REQUEST_ID}, ("entries",)))}
_PATHS["/metrics"] = {"get": {
    "summary": "Prometheus metrics of this node, named like Kafka's (docs/operations.md)",
    "description": "Text format 0.0.4; OpenMetrics 1.0 when Accept names application/openmetrics-text.",
    "responses": {"200": {"description": "OK", "content": {
        "text/plain": {"schema": {"type": "string"}},
        "application/openmetrics-text": {"schema": {"type": "string"}},
    }}},
}}


def openapi_document() -> dict[str, Any]:
    return {
        "openapi": "3.0.3",
        "info": {"title": "kraft", "version": "1", "description": (
            "kraft's client API. Bodies are JSON or msgpack (by Content-Type; answers follow "
            "Accept). Errors: {error_code, message, retriable}.")},
        "paths": _PATHS,
        "components": {"schemas": SCHEMAS},
    }
