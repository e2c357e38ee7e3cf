"""Building a Kafka answer of the request's version from kio's types: `answer(api_key, version,
**fields)` keeps the fields that version has (a field added in a later version is dropped, as
Kafka's generated code ignores it), `error_code` names kio's ErrorCode for a `KraftError`, and
`nested_type` finds the element type of a version's array field (its members, topics, ...).
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode

from kraft.errors import SPECS, KraftError

NO_THROTTLE = datetime.timedelta(0)


def error_code(error: KraftError | str | None) -> ErrorCode:
    """kio's code of a Kafka error name (a KraftError's); UNKNOWN_SERVER_ERROR for one of
    kraft's own names, which Kafka does not have."""
    if error is None:
        return ErrorCode.none
    spec = SPECS.get(error.error_code if isinstance(error, KraftError) else error)
    try:
        return ErrorCode(spec.kafka_code) if spec is not None else ErrorCode.unknown_server_error
    except ValueError:
        return ErrorCode.unknown_server_error


def field_names(schema: type[Any]) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(schema))


def build(schema: type[Any], **fields: Any) -> Any:
    """`schema(**fields)` with only the fields `schema` has."""
    names = field_names(schema)
    return schema(**{k: v for k, v in fields.items() if k in names})


def answer(api_key: int, version: int, **fields: Any) -> Any:
    """The response of `api_key` at `version` with the fields it has (throttle_time 0 unless
    given)."""
    return build(load_response_schema(api_key, version), **{"throttle_time": NO_THROTTLE, **fields})


def nested_type(schema: type[Any], field_name: str) -> type[Any]:
    """The struct type of a kio field: the element type of an array (`tuple[Member, ...]`), the
    struct of a nullable field (`Assignment | None`), both (`tuple[Topic, ...] | None`), or the
    field's type."""
    [field] = [f for f in dataclasses.fields(schema) if f.name == field_name]
    kind = field.type
    while args := [t for t in getattr(kind, "__args__", ()) if t is not type(None) and t is not Ellipsis]:
        kind = args[0]
    return kind


def response_type(api_key: int, version: int) -> type[Any]:
    return load_response_schema(api_key, version)
