"""kio entities from plain data, whatever the version: a handler describes its answer once as
dicts and lists, and `build(schema, data)` makes the entity of the version the client asked for.

kio generates one class per version; fields a version lacks are dropped (a newer field the client
cannot read), fields it has and the data leaves out take their schema default, nested entities
and tuples of them are built from dicts and lists, an error code may be given as a Kafka name
(`"TOPIC_AUTHORIZATION_FAILED"`), a KraftError or a number, and durations as milliseconds.
`error_response` is Kafka's `getErrorResponse`: the top-level error, every collection empty.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import types
import typing
from typing import Any, Mapping

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta, i64Timedelta

from kraft.errors import SPECS, KraftError

_DURATIONS = (i32Timedelta, i64Timedelta)


def error_code(error: str | KraftError | ErrorCode | int | None) -> ErrorCode:
    """Kafka's numeric code of an error (None: no error); kraft's own errors, which Kafka has no
    code for, are UNKNOWN_SERVER_ERROR."""
    if error is None:
        return ErrorCode.none
    if isinstance(error, ErrorCode):
        return error
    if isinstance(error, KraftError):
        error = error.error_code
    code = SPECS[error].kafka_code if isinstance(error, str) and error in SPECS else error
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.unknown_server_error


def error_fields(error: KraftError | None) -> dict[str, Any]:
    """`error_code` and `error_message` of an entity (both no error for None)."""
    return {"error_code": error_code(error), "error_message": None if error is None else error.message}


def _entity_type(field_type: Any) -> tuple[type[Any] | None, bool]:
    """(the entity type a field holds, whether it holds a tuple of them); (None, _) for a primitive."""
    if typing.get_origin(field_type) in (typing.Union, types.UnionType):
        field_type = next(a for a in typing.get_args(field_type) if a is not type(None))
    if typing.get_origin(field_type) is tuple:
        item = typing.get_args(field_type)[0]
        return (item, True) if dataclasses.is_dataclass(item) else (None, True)
    return (field_type, False) if dataclasses.is_dataclass(field_type) else (None, False)


@functools.cache
def _fields(schema: type[Any]) -> tuple[tuple[str, Any, bool], ...]:
    """(name, type, has a default) of each field of `schema`."""
    return tuple((f.name, f.type, f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING)
                 for f in dataclasses.fields(schema))


def _value(field_type: Any, value: Any) -> Any:
    if value is None:
        return None
    if field_type is ErrorCode:
        return error_code(value)
    if field_type in _DURATIONS and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    entity, many = _entity_type(field_type)
    if entity is None:
        return tuple(value) if many else value
    if many:
        return tuple(item if isinstance(item, entity) else build(entity, item) for item in value)
    return value if isinstance(value, entity) else build(entity, value)


def build(schema: type[Any], data: Mapping[str, Any]) -> Any:
    """An entity of `schema` from `data` (keys the schema lacks are dropped); TypeError when a
    field without a default is missing."""
    values = {}
    for name, field_type, has_default in _fields(schema):
        if name in data:
            values[name] = _value(field_type, data[name])
        elif name == "throttle_time":
            values[name] = datetime.timedelta(0)
        elif not has_default:
            raise TypeError(f"{schema.__module__}.{schema.__name__}: no value for {name}")
    return schema(**values)


def _empty(field_type: Any) -> Any:
    """A required field's value in an error response: no entries, no error, no name, -1 (Kafka's
    "none" for ids, epochs and offsets)."""
    if _entity_type(field_type)[1]:
        return ()
    if field_type is ErrorCode:
        return ErrorCode.none
    if field_type is str:
        return ""
    if typing.get_origin(field_type) in (typing.Union, types.UnionType):
        return None
    return -1


def error_response(api_key: int, version: int, error: KraftError, throttle_ms: int = 0) -> Any:
    """The response of `version` carrying `error` at the top level, every collection empty
    (Kafka's AbstractRequest.getErrorResponse); None when the response has no top-level error."""
    schema = load_response_schema(api_key, version)
    names = {name for name, _, _ in _fields(schema)}
    if "error_code" not in names:
        return None
    data: dict[str, Any] = {name: _empty(field_type) for name, field_type, has_default in _fields(schema)
                            if not has_default}
    data.update(error_code=error_code(error), throttle_time=throttle_ms)
    if "error_message" in names:
        data["error_message"] = error.message
    return build(schema, data)


def timestamp(value: int) -> datetime.datetime:
    """A time in ms since the epoch as kio's (UTC) timestamp."""
    return datetime.datetime.fromtimestamp(value / 1000, tz=datetime.timezone.utc)
