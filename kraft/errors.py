"""The error model of every service of the node: Kafka's error names, each with Kafka's numeric
code and a retriable flag (what a listener needs to answer in either protocol).

Every error a client can see is a `KraftError` with `error_code` (Kafka's name, e.g.
`UNKNOWN_TOPIC_OR_PARTITION`), a human `message`, and `retriable`, plus any extra fields (e.g.
`leader` for NOT_LEADER_OR_FOLLOWER). The services raise it or carry its name in per-partition
results; each listener renders it: the HTTP API as `{"error_code", "message", "retriable", ...}`
with an HTTP status of its own (`api/errors.py`), the Kafka protocol by the numeric code.

`log/` and `metadata/` are pure and import nothing of this; they raise their own exceptions
carrying an `error_code` attribute with a Kafka name, which `from_exception` maps here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ErrorSpec:
    code: str
    kafka_code: int  # Kafka's numeric error code (negative: kraft's own, no Kafka counterpart)
    retriable: bool


_SPECS = [
    ErrorSpec("UNKNOWN_SERVER_ERROR", -1, False),
    ErrorSpec("OFFSET_OUT_OF_RANGE", 1, False),
    ErrorSpec("CORRUPT_MESSAGE", 2, False),
    ErrorSpec("UNKNOWN_TOPIC_OR_PARTITION", 3, True),
    ErrorSpec("INVALID_FETCH_SIZE", 4, False),
    ErrorSpec("LEADER_NOT_AVAILABLE", 5, True),
    ErrorSpec("NOT_LEADER_OR_FOLLOWER", 6, True),
    ErrorSpec("REQUEST_TIMED_OUT", 7, True),
    ErrorSpec("MESSAGE_TOO_LARGE", 10, False),
    ErrorSpec("STALE_CONTROLLER_EPOCH", 11, False),
    ErrorSpec("NETWORK_EXCEPTION", 13, True),
    ErrorSpec("COORDINATOR_LOAD_IN_PROGRESS", 14, True),
    ErrorSpec("COORDINATOR_NOT_AVAILABLE", 15, True),
    ErrorSpec("NOT_COORDINATOR", 16, True),
    ErrorSpec("INVALID_TOPIC_EXCEPTION", 17, False),
    ErrorSpec("RECORD_LIST_TOO_LARGE", 18, False),
    ErrorSpec("NOT_ENOUGH_REPLICAS", 19, True),
    ErrorSpec("NOT_ENOUGH_REPLICAS_AFTER_APPEND", 20, True),
    ErrorSpec("INVALID_REQUIRED_ACKS", 21, False),
    ErrorSpec("ILLEGAL_GENERATION", 22, False),
    ErrorSpec("INCONSISTENT_GROUP_PROTOCOL", 23, False),
    ErrorSpec("INVALID_GROUP_ID", 24, False),
    ErrorSpec("INVALID_SESSION_TIMEOUT", 26, False),
    ErrorSpec("REBALANCE_IN_PROGRESS", 27, False),
    ErrorSpec("MEMBER_ID_REQUIRED", 79, False),
    ErrorSpec("GROUP_MAX_SIZE_REACHED", 81, False),
    ErrorSpec("FENCED_INSTANCE_ID", 82, False),
    ErrorSpec("TOPIC_AUTHORIZATION_FAILED", 29, False),
    ErrorSpec("GROUP_AUTHORIZATION_FAILED", 30, False),
    ErrorSpec("CLUSTER_AUTHORIZATION_FAILED", 31, False),
    ErrorSpec("TRANSACTIONAL_ID_AUTHORIZATION_FAILED", 53, False),
    ErrorSpec("SECURITY_DISABLED", 54, False),
    ErrorSpec("INVALID_TIMESTAMP", 32, False),
    ErrorSpec("UNSUPPORTED_SASL_MECHANISM", 33, False),
    ErrorSpec("UNSUPPORTED_VERSION", 35, False),
    ErrorSpec("TOPIC_ALREADY_EXISTS", 36, False),
    ErrorSpec("INVALID_PARTITIONS", 37, False),
    ErrorSpec("INVALID_REPLICATION_FACTOR", 38, False),
    ErrorSpec("INVALID_REPLICA_ASSIGNMENT", 39, False),
    ErrorSpec("INVALID_CONFIG", 40, False),
    ErrorSpec("NOT_CONTROLLER", 41, True),
    ErrorSpec("INVALID_REQUEST", 42, False),
    ErrorSpec("UNSUPPORTED_FOR_MESSAGE_FORMAT", 43, False),
    ErrorSpec("POLICY_VIOLATION", 44, False),
    ErrorSpec("OUT_OF_ORDER_SEQUENCE_NUMBER", 45, False),
    ErrorSpec("DUPLICATE_SEQUENCE_NUMBER", 46, False),
    ErrorSpec("INVALID_PRODUCER_EPOCH", 47, False),
    ErrorSpec("UNKNOWN_PRODUCER_ID", 59, False),
    ErrorSpec("INVALID_PRODUCER_ID_MAPPING", 49, False),
    ErrorSpec("INVALID_TXN_STATE", 48, False),
    ErrorSpec("TRANSACTION_COORDINATOR_FENCED", 52, False),
    ErrorSpec("PRODUCER_FENCED", 90, False),
    ErrorSpec("CONCURRENT_TRANSACTIONS", 51, True),
    ErrorSpec("INVALID_TRANSACTION_TIMEOUT", 50, False),
    ErrorSpec("TRANSACTIONAL_ID_NOT_FOUND", 105, False),
    ErrorSpec("OPERATION_NOT_ATTEMPTED", 55, False),
    ErrorSpec("BROKER_NOT_AVAILABLE", 8, True),
    ErrorSpec("KAFKA_STORAGE_ERROR", 56, True),
    ErrorSpec("SASL_AUTHENTICATION_FAILED", 58, False),
    ErrorSpec("GROUP_ID_NOT_FOUND", 69, False),
    ErrorSpec("TOPIC_DELETION_DISABLED", 73, False),
    ErrorSpec("FENCED_LEADER_EPOCH", 74, True),
    ErrorSpec("UNKNOWN_LEADER_EPOCH", 75, True),
    ErrorSpec("OFFSET_NOT_AVAILABLE", 78, True),
    ErrorSpec("PREFERRED_LEADER_NOT_AVAILABLE", 80, True),
    ErrorSpec("ELECTION_NOT_NEEDED", 84, False),
    ErrorSpec("NO_REASSIGNMENT_IN_PROGRESS", 85, False),
    ErrorSpec("GROUP_SUBSCRIBED_TO_TOPIC", 86, False),
    ErrorSpec("UNSTABLE_OFFSET_COMMIT", 88, True),
    ErrorSpec("UNKNOWN_MEMBER_ID", 25, False),
    ErrorSpec("FENCED_MEMBER_EPOCH", 110, False),
    ErrorSpec("NON_EMPTY_GROUP", 68, False),
    ErrorSpec("INCONSISTENT_CLUSTER_ID", 104, False),
    ErrorSpec("INVALID_RECORD", 87, False),
    ErrorSpec("THROTTLING_QUOTA_EXCEEDED", 89, True),
    ErrorSpec("STALE_BROKER_EPOCH", 77, False),
    ErrorSpec("INELIGIBLE_REPLICA", 107, False),
    ErrorSpec("INVALID_UPDATE_VERSION", 95, True),
    ErrorSpec("RESOURCE_NOT_FOUND", 91, False),
    ErrorSpec("DUPLICATE_RESOURCE", 92, False),
    ErrorSpec("INVALID_REGULAR_EXPRESSION", 128, False),
    ErrorSpec("INVALID_TXN_STATE", 48, False),
    ErrorSpec("FETCH_SESSION_ID_NOT_FOUND", 70, True),
    ErrorSpec("INVALID_FETCH_SESSION_EPOCH", 71, True),
    ErrorSpec("UNKNOWN_TOPIC_ID", 100, True),
    # the HTTP listener's own (no Kafka counterpart): a route or representation it does not serve
    ErrorSpec("METHOD_NOT_ALLOWED", -2, False),
    ErrorSpec("NOT_FOUND", -3, False),
    ErrorSpec("UNSUPPORTED_MEDIA_TYPE", -4, False),
    ErrorSpec("NOT_ACCEPTABLE", -5, False),
]

SPECS: dict[str, ErrorSpec] = {s.code: s for s in _SPECS}


class KraftError(Exception):
    """An error with a Kafka name. Raise it anywhere in the node; the listener renders it."""

    def __init__(self, error_code: str, message: str, **extra: Any) -> None:
        if error_code not in SPECS:
            error_code = "UNKNOWN_SERVER_ERROR"
        super().__init__(f"{error_code}: {message}")
        self.error_code = error_code
        self.message = message
        self.extra = extra

    @property
    def spec(self) -> ErrorSpec:
        return SPECS[self.error_code]

    @property
    def retriable(self) -> bool:
        return self.spec.retriable

    @property
    def kafka_code(self) -> int:
        return self.spec.kafka_code

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "error_code": self.error_code,
            "message": self.message,
            "retriable": self.retriable,
        }
        body.update(self.extra)
        return body

    @classmethod
    def from_dict(cls, body: dict[str, Any]) -> "KraftError":
        extra = {k: v for k, v in body.items() if k not in ("error_code", "message", "retriable")}
        return cls(str(body.get("error_code", "UNKNOWN_SERVER_ERROR")), str(body.get("message", "")), **extra)


def from_exception(exc: BaseException) -> KraftError:
    """Map any exception to a KraftError. Exceptions of `log/` and `metadata/` carry `error_code`."""
    if isinstance(exc, KraftError):
        return exc
    code = getattr(exc, "error_code", None)
    if isinstance(code, str) and code in SPECS:
        return KraftError(code, str(exc))
    return KraftError("UNKNOWN_SERVER_ERROR", f"{type(exc).__name__}: {exc}")


def invalid_request(message: str) -> KraftError:
    return KraftError("INVALID_REQUEST", message)
