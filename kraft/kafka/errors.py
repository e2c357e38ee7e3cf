"""The protocol errors of a Kafka connection: all subclasses of KafkaProtocolError, so a caller
closes the connection on one `except`. Kafka's error codes for answers are kio's ErrorCode."""

from __future__ import annotations


class KafkaProtocolError(Exception):
    """The peer broke the protocol: the connection cannot go on and is closed."""


class FrameTooLargeError(KafkaProtocolError):
    """A frame whose 4-byte size exceeds socket.request.max.bytes (or is negative)."""


class InvalidRequestError(KafkaProtocolError):
    """A frame that does not parse as the request its header names."""


class UnsupportedVersionError(InvalidRequestError):
    """An API key or version this broker does not serve. Kafka answers only ApiVersions in that
    case (with v0 and UNSUPPORTED_VERSION, see `api_versions`); other requests close the
    connection, since their bodies cannot be read."""

    def __init__(self, api_key: int, api_version: int, correlation_id: int) -> None:
        super().__init__(f"unsupported API key {api_key} version {api_version}")
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
