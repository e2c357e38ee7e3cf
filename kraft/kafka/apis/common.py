"""What the Kafka API handlers share: the registry entry (`Api`), building kio's entities of any
version from keyword values (`entity`: the fields that version lacks are dropped), its nested
types (`nested`), and Kafka's error codes from kraft's error names."""

from __future__ import annotations

import dataclasses
import inspect
import datetime
import sys
import uuid
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, TypeVar

from kio.schema.errors import ErrorCode

from kraft.errors import KraftError, from_exception
from kraft.kafka.dispatch import Handler
from kraft.server.services import BrokerServices

T = TypeVar("T")


@dataclass(frozen=True)
class Api:
    key: int
    min_version: int
    max_version: int
    handler: Callable[[BrokerServices], Handler]  # the handler over the node's services
    name: str = ""  # Kafka's name, for the docs' table


def entity(cls: type, **values: Any) -> Any:
    """`cls(**values)` without the values `cls` (one version of an entity) has no field for."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})


def nested(cls: type, name: str) -> type:
    """The nested entity `name` of the same version as `cls` (kio generates one module per version)."""
    found: type = getattr(sys.modules[cls.__module__], name)
    return found


def response_of(request: Any) -> type:
    """The response type of `request`'s API and version."""
    from kio.index import load_response_schema
    return load_response_schema(request.__api_key__, request.__version__)


def topic_uuid(topic_id: str) -> uuid.UUID:
    """A topic id (a UUID's text) as kio's UUID; the zero UUID (Kafka's "none") if it is not one."""
    try:
        return uuid.UUID(topic_id)
    except ValueError:
        return uuid.UUID(int=0)


def code(error: str | KraftError | None) -> ErrorCode:
    """Kafka's error code of a kraft error or its name (None: no error)."""
    if error is None:
        return ErrorCode.none
    if isinstance(error, KraftError):
        error = error.error_code
    try:
        return ErrorCode[error.lower()]
    except KeyError:
        return ErrorCode.unknown_server_error


def error_of(exc: BaseException) -> KraftError:
    return from_exception(exc)


async def attempt(call: Callable[[], Awaitable[T] | T]) -> tuple[T | None, KraftError | None]:
    """One resource's call (a topic's, a partition's): its result, or its error as that resource's
    answer rather than the request's."""
    try:
        result = call()
        if inspect.isawaitable(result):
            result = await result
        return result, None
    except Exception as e:  # noqa: BLE001 - the resource's answer
        return None, error_of(e)


def ms(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


def as_ms(value: Any) -> int:
    """A kio duration (a timedelta) or a plain number of ms, as ms."""
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)
