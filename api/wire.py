"""The HTTP wire: content negotiation (JSON or msgpack), body parsing under a size and a nesting
limit, error rendering, and typed field access that turns bad input into INVALID_REQUEST naming
the field.

In JSON, binary fields are base64 strings; in msgpack they are bin (docs/internals.md §5).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any, Mapping

import msgpack
from aiohttp import web

from kraft.api.errors import KraftError, invalid_request
from kraft.metadata.errors import MetadataError
from kraft.metadata.topic_name import check_client_topic, validate_topic_name

JSON = "application/json"
MSGPACK = "application/msgpack"
_MSGPACK_TYPES = (MSGPACK, "application/x-msgpack")

_packb = msgpack.Packer(use_bin_type=True).pack
INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1
# No route takes a body deeper than a handful of levels; deeper ones would reach the interpreter's
# recursion limit in the decoder or in later reprs and encoders (a 500 instead of a 400).
MAX_BODY_DEPTH = 64


def wants_msgpack(request: web.Request) -> bool:
    accept = request.headers.get("Accept", "")
    return any(t in accept for t in _MSGPACK_TYPES)


def _json_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def render(request: web.Request, body: Any, status: int = 200) -> web.Response:
    """Encodes `body` as the client's Accept asks: msgpack, else JSON (bytes as base64)."""
    if wants_msgpack(request):
        return web.Response(body=_packb(body), status=status, content_type=MSGPACK)
    return render_json(body, status)


def render_json(body: Any, status: int = 200) -> web.Response:
    text = json.dumps(body, default=_json_default, separators=(",", ":"))
    return web.Response(text=text, status=status, content_type=JSON)


def render_error(request: web.Request | None, error: KraftError) -> web.Response:
    if request is not None:
        return render(request, error.to_dict(), error.http_status)
    return render_json(error.to_dict(), error.http_status)


async def read_body(request: web.Request) -> tuple[Any, bool]:
    """Returns the decoded body and whether it came as JSON (binary fields then are base64).

    The size limit is the application's `client_max_size` (aiohttp answers 413 beyond it). An
    empty body is `{}`. A body nested deeper than `MAX_BODY_DEPTH`, or JSON with a string that is
    not Unicode (a lone UTF-16 surrogate such as `"\\ud800"`, which no route could encode to
    UTF-8 for storage), is INVALID_REQUEST before any route sees it."""
    raw = await request.read()
    content_type = request.content_type
    if not raw:
        return {}, content_type not in _MSGPACK_TYPES
    if content_type in _MSGPACK_TYPES:
        try:
            body = msgpack.unpackb(raw, raw=False)
        except msgpack.StackError:
            raise invalid_request(f"msgpack nested too deeply (limit {MAX_BODY_DEPTH})") from None
        except (ValueError, msgpack.UnpackException, TypeError) as e:
            raise invalid_request(f"body is not valid msgpack: {e}") from None
        check_body(body, "msgpack")  # its strings are valid UTF-8 already: msgpack decodes strictly
        return body, False
    if content_type == JSON or "Content-Type" not in request.headers:
        try:
            body = json.loads(raw)
        except RecursionError:
            raise invalid_request(f"JSON nested too deeply (limit {MAX_BODY_DEPTH})") from None
        except (ValueError, UnicodeDecodeError) as e:
            raise invalid_request(f"body is not valid JSON: {e}") from None
        check_body(body, "JSON")
        return body, True
    raise KraftError(
        "UNSUPPORTED_MEDIA_TYPE", f"Content-Type {content_type!r}: use {JSON} or {MSGPACK}"
    )


def check_body(body: Any, form: str) -> None:
    """INVALID_REQUEST when `body` nests deeper than MAX_BODY_DEPTH or holds a key or string value
    that does not encode to UTF-8. One pass, level by level, without recursion."""
    level, depth = [body], 0
    while level:
        nested = []
        for container in level:
            if isinstance(container, dict):
                for key, value in container.items():
                    _check_text(key, "key")
                    _check_text(value, "value")
                    if isinstance(value, (dict, list)):
                        nested.append(value)
            elif isinstance(container, list):
                for value in container:
                    _check_text(value, "value")
                    if isinstance(value, (dict, list)):
                        nested.append(value)
        if nested:
            depth += 1
            if depth >= MAX_BODY_DEPTH:
                raise invalid_request(f"{form} nested too deeply (limit {MAX_BODY_DEPTH})")
        level = nested


def _check_text(value: Any, what: str) -> None:
    if isinstance(value, str) and not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise invalid_request(f"invalid UTF-16 surrogate in {what} {ascii(value)[:80]}: "
                                  "strings must be Unicode text (a pair of surrogates, or base64)") from None


def check_topic_name(name: Any, action: str | None = None) -> str:
    """Kafka's legal topic names (`metadata.topic_name`); with `action` ("create", "produce to",
    "delete", ...), also a name a client may do that to (not an internal topic)."""
    try:
        return validate_topic_name(name) if action is None else check_client_topic(name, action)
    except MetadataError as e:
        raise KraftError(e.error_code, e.message) from None


_MISSING = object()


class Fields:
    """Typed access to one JSON/msgpack object (or query string); every violation raises
    INVALID_REQUEST naming the field path."""

    def __init__(self, obj: Any, where: str = "body", binary_b64: bool = False) -> None:
        if not isinstance(obj, Mapping):
            raise invalid_request(f"{where} must be an object, got {type(obj).__name__}")
        self.obj = obj
        self.where = where
        self.binary_b64 = binary_b64

    def _path(self, name: str) -> str:
        return f"{self.where}.{name}"

    def has(self, name: str) -> bool:
        return self.obj.get(name) is not None

    def raw(self, name: str, default: Any = _MISSING, nullable: bool = False) -> Any:
        """The value; `default` when absent (required without one); null only when nullable."""
        if name not in self.obj:
            if default is _MISSING:
                raise invalid_request(f"{self._path(name)} is required")
            return default
        value = self.obj[name]
        if value is None and not nullable:
            raise invalid_request(f"{self._path(name)} must not be null")
        return value

    def get_int(
        self, name: str, default: Any = _MISSING, minimum: int = 0, maximum: int = INT64_MAX,
        range_error: str = "INVALID_REQUEST",
    ) -> Any:
        """An integer field; a value of the wrong type is INVALID_REQUEST, one out of range is
        `range_error` (Kafka answers INVALID_PARTITIONS for a partition count of 0, say)."""
        value = self.raw(name, default)
        if value is default and default is not _MISSING:
            return value
        if isinstance(value, str) and self.where == "query":
            try:
                value = int(value, 10)
            except ValueError:
                raise invalid_request(f"{self._path(name)} must be an integer, got {value!r}") from None
        if isinstance(value, bool) or not isinstance(value, int):
            raise invalid_request(f"{self._path(name)} must be an integer, got {value!r}")
        if not minimum <= value <= maximum:
            raise KraftError(range_error, f"{self._path(name)} must be in [{minimum}, {maximum}], got {value}")
        return value

    def get_str(self, name: str, default: Any = _MISSING, nullable: bool = False) -> Any:
        value = self.raw(name, default, nullable)
        if value is None or (value is default and default is not _MISSING):
            return value
        if not isinstance(value, str):
            raise invalid_request(f"{self._path(name)} must be a string, got {type(value).__name__}")
        return value

    def get_bytes(self, name: str, default: Any = _MISSING) -> Any:
        value = self.raw(name, default)
        if value is default and default is not _MISSING:
            return value
        return self.to_bytes(value, self._path(name))

    def to_bytes(self, value: Any, path: str) -> bytes:
        if self.binary_b64:
            if not isinstance(value, str):
                raise invalid_request(f"{path} must be a base64 string")
            try:
                return base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                raise invalid_request(f"{path} is not valid base64") from None
        if not isinstance(value, bytes):
            raise invalid_request(f"{path} must be binary (msgpack bin)")
        return value

    def get_list(self, name: str, max_items: int = 100_000) -> list[Any]:
        value = self.raw(name)
        if not isinstance(value, list):
            raise invalid_request(f"{self._path(name)} must be an array")
        if len(value) > max_items:
            raise invalid_request(f"{self._path(name)} has {len(value)} items, at most {max_items}")
        return value

    def get_object(self, name: str, default: Any = _MISSING) -> Any:
        value = self.raw(name, default)
        if value is default and default is not _MISSING:
            return value
        if not isinstance(value, Mapping):
            raise invalid_request(f"{self._path(name)} must be an object")
        return value

    def child(self, value: Any, name: str) -> Fields:
        return Fields(value, self._path(name), self.binary_b64)


def parse_acks(value: Any) -> int:
    """Kafka's acks: 0, 1, or all (-1)."""
    if isinstance(value, str):
        value = {"all": -1, "-1": -1, "0": 0, "1": 1}.get(value.strip().lower(), value)
    if isinstance(value, bool) or value not in (0, 1, -1):
        raise KraftError("INVALID_REQUIRED_ACKS", f"acks must be 0, 1, all or -1, got {value!r}")
    return int(value)
