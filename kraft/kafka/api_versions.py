"""The broker's ApiVersions table: which (api key, versions) it serves, and its ApiVersions answer.

Handlers register their ranges (`register(api_key, min, max)`); kio must have a type for every
version registered (checked in kio's index: the types themselves are imported on first use). ApiVersions itself (key 18, v0-v4) is always there. A request for a key or
version outside the table is UnsupportedVersionError; for ApiVersions Kafka answers that with a
v0 response carrying UNSUPPORTED_VERSION (35) and the table, so the client can pick a version it
shares (`unsupported_answer`), and for any other API it closes the connection.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map, schema_name_map
from kio.static.constants import EntityType
from kio.static.primitive import i16

from kraft.kafka.codec import encode_response

API_VERSIONS = 18
_API_VERSIONS_RANGE = (0, 4)


class ApiVersionsTable:
    def __init__(self) -> None:
        self._ranges: dict[int, tuple[int, int]] = {}
        self.register(API_VERSIONS, *_API_VERSIONS_RANGE)

    def register(self, api_key: int, min_version: int, max_version: int) -> None:
        """Serves `api_key` from `min_version` to `max_version`; ValueError if the range is empty,
        the key is registered already, or kio lacks a version's request or response type."""
        if not 0 <= min_version <= max_version:
            raise ValueError(f"API key {api_key}: bad version range {min_version}-{max_version}")
        if api_key in self._ranges:
            raise ValueError(f"API key {api_key} is registered already")
        # kio's index, not its types: importing every version's request and response types (several
        # hundred dataclass modules) held a starting node's loop for 0.7 s idle, seconds loaded (issue 26)
        versions = schema_name_map.get(api_key_map.get(api_key, ""), {})
        for version in range(min_version, max_version + 1):
            if not {EntityType.request, EntityType.response} <= set(versions.get(version, {})):
                raise ValueError(f"kio has no types for API key {api_key} version {version}")
        self._ranges[api_key] = (min_version, max_version)

    def supports(self, api_key: int, api_version: int) -> bool:
        versions = self._ranges.get(api_key)
        return versions is not None and versions[0] <= api_version <= versions[1]

    @property
    def ranges(self) -> dict[int, tuple[int, int]]:
        return dict(self._ranges)

    def response(self, version: int, error_code: ErrorCode = ErrorCode.none) -> Any:
        """The ApiVersions response of `version` listing the table (kio's type of that version)."""
        schema = load_response_schema(API_VERSIONS, version)
        entry = _nested_type(schema, "api_keys")
        fields: dict[str, Any] = {
            "error_code": error_code,
            "api_keys": tuple(
                entry(api_key=i16(key), min_version=i16(low), max_version=i16(high))
                for key, (low, high) in sorted(self._ranges.items())
            ),
        }
        if "throttle_time" in {f.name for f in dataclasses.fields(schema)}:
            fields["throttle_time"] = datetime.timedelta(0)
        return schema(**fields)

    def unsupported_answer(self, correlation_id: int) -> bytes:
        """Kafka's framed answer to an ApiVersions request of a version it does not know."""
        return encode_response(correlation_id, self.response(0, ErrorCode.unsupported_version))


def _nested_type(schema: type[Any], field_name: str) -> type[Any]:
    """The element type of a kio tuple field (`tuple[ApiVersion, ...]`)."""
    [field] = [f for f in dataclasses.fields(schema) if f.name == field_name]
    return field.type.__args__[0]
