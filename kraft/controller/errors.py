"""Errors of the controller shell, each with a Kafka `error_code` (mapped by `api.errors.from_exception`).

Validation errors of requests are `metadata.errors.MetadataError`; these are about the quorum.
"""

from __future__ import annotations


class ControllerError(Exception):
    error_code = "UNKNOWN_SERVER_ERROR"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotControllerError(ControllerError):
    """This node is not the active controller; `leader_id` is the one we know of (or None)."""

    error_code = "NOT_CONTROLLER"

    def __init__(self, message: str, leader_id: int | None = None) -> None:
        super().__init__(message)
        self.leader_id = leader_id


class MetadataStorageError(ControllerError):
    """The metadata log could not be written (e.g. a full disk): nothing was committed. Retriable:
    the next proposal tries the disk again."""

    error_code = "KAFKA_STORAGE_ERROR"


class InvalidBatchError(ControllerError, ValueError):
    """The proposed records break the metadata log's shape rule (`log_rules.validate_batch`)."""

    error_code = "INVALID_REQUEST"


class MetadataLogCorruptError(ControllerError):
    """The metadata log is damaged in the middle (rot: valid records follow the damage), and no
    peer can give the range back: the node refuses to start rather than serve on without the
    records. The message names the file, the byte position and the way to recover."""

    error_code = "KAFKA_STORAGE_ERROR"
