"""The HTTP wire: content negotiation (JSON or msgpack), decoding bodies and query strings into
the messages of `api/messages/` (refusals are INVALID_REQUEST naming the field), the limits every
body is held to, and rendering answers and errors.

In JSON, binary fields are base64 strings; in msgpack they are bin (docs/internals.md §5). Both
codecs are msgspec's, in one pass from bytes to Struct and back.
"""

from __future__ import annotations

import functools
import json
from typing import Any, TypeVar

import msgpack
import msgspec
from aiohttp import web

from kraft.api.errors import KraftError, http_status, invalid_request

JSON = "application/json"
MSGPACK = "application/msgpack"
_MSGPACK_TYPES = (MSGPACK, "application/x-msgpack")

# No route takes a body deeper than a handful of levels; deeper ones would reach the interpreter's
# recursion limit in the decoder or in later reprs and encoders (a 500 instead of a 400).
MAX_BODY_DEPTH = 64

_json_encode = msgspec.json.Encoder().encode
_msgpack_encode = msgspec.msgpack.Encoder().encode


def wants_msgpack(request: web.Request) -> bool:
    accept = request.headers.get("Accept", "")
    return any(t in accept for t in _MSGPACK_TYPES)


def render(request: web.Request, body: Any, status: int = 200) -> web.Response:
    """Encodes `body` (a message Struct, or plain data) as the client's Accept asks: msgpack,
    else JSON (bytes as base64)."""
    if wants_msgpack(request):
        return web.Response(body=_msgpack_encode(body), status=status, content_type=MSGPACK)
    return render_json(body, status)


def render_json(body: Any, status: int = 200) -> web.Response:
    try:
        text = _json_encode(body)
    except UnicodeEncodeError:  # a lone surrogate echoed from a path: escaped, as JSON allows
        text = json.dumps(msgspec.to_builtins(body), separators=(",", ":")).encode("ascii")
    return web.Response(body=text, status=status, content_type=JSON, charset="utf-8")


def render_error(request: web.Request | None, error: KraftError) -> web.Response:
    if request is not None:
        return render(request, error.to_dict(), http_status(error))
    return render_json(error.to_dict(), http_status(error))


M = TypeVar("M")


@functools.cache
def _decoders(message: type[M]) -> tuple[msgspec.json.Decoder[M], msgspec.msgpack.Decoder[M]]:
    return msgspec.json.Decoder(message), msgspec.msgpack.Decoder(message)


async def read_message(request: web.Request, message: type[M]) -> M:
    """The body decoded into `message` (a Struct of `api/messages/`): JSON or msgpack by
    Content-Type, binary fields base64 in JSON and bin in msgpack. An empty body is `{}`.

    A body the Struct refuses is INVALID_REQUEST with msgspec's reason, which names the field path
    ("Expected `int`, got `str` - at `$.partitions`"); a Kafka rule of the message (its
    `__post_init__`) raises its own error code. The size limit is the application's
    `client_max_size` (aiohttp answers 413 beyond it). A body nested deeper than `MAX_BODY_DEPTH`,
    or JSON with a string that is not Unicode (a lone UTF-16 surrogate such as `"\\ud800"`), is
    refused with that reason: the decoder never builds such a body, and no Struct nests that deep."""
    raw = await read_body(request)
    content_type = request.content_type
    if content_type in _MSGPACK_TYPES:
        form, decoder = "msgpack", _decoders(message)[1]
    elif content_type == JSON or "Content-Type" not in request.headers:
        form, decoder = "JSON", _decoders(message)[0]
    else:
        raise KraftError("UNSUPPORTED_MEDIA_TYPE", f"Content-Type {content_type!r}: use {JSON} or {MSGPACK}")
    if not raw:
        raw = _EMPTY[form]
    try:
        return decoder.decode(raw)
    except RecursionError:
        raise invalid_request(f"{form} nested too deeply (limit {MAX_BODY_DEPTH})") from None
    except (msgspec.ValidationError, msgspec.DecodeError, UnicodeDecodeError) as e:
        raise _refusal(raw, form, e) from None


_EMPTY = {"JSON": b"{}", "msgpack": b"\x80"}
_BODY = web.RequestKey("body", object)  # a body read by `read_body` (bytes or bytearray)


async def read_body(request: web.Request) -> bytes | bytearray:
    """The body with at most one copy made here: the parser's one chunk itself when it came in
    one, else the parser's chunks joined into one bytearray. Taken one chunk at a time
    (`readchunk`): aiohttp's `readany` joins the chunks it holds into new bytes first, and
    `read()` gathers into a bytearray and copies that into bytes. A msgpack `memoryview` field
    decoded from a bytearray is a writable view of it, which the log stamps in place
    (docs/benchmarks.md, the 1 KiB path). A body a middleware read already (`request.read()`:
    a node signature's digest) is taken from there; read here, it is kept for the next
    `read_body`, not for `request.read()`. Bounded by the application's `client_max_size`
    (413), as `read()`."""
    if _BODY in request:
        return request[_BODY]  # type: ignore[no-any-return]
    if request.content.at_eof():  # read by request.read() before, or empty (not `is_eof`: that is
        return await request.read()  # true too when the whole body is buffered, unread)
    limit = request.client_max_size
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk, end_of_http_chunk = await request.content.readchunk()
        if not chunk:
            if end_of_http_chunk:  # a chunked body's chunk boundary: more may follow
                continue
            break
        chunks.append(chunk)
        size += len(chunk)
        if limit and size > limit:
            raise web.HTTPRequestEntityTooLarge(max_size=limit, actual_size=size)
    # bytearray.join: one pass, into memory it does not zero first (bytearray(size) would)
    body: bytes | bytearray = chunks[0] if len(chunks) == 1 else bytearray().join(chunks)
    request[_BODY] = body
    return body


def _refusal(raw: bytes, form: str, error: Exception) -> KraftError:
    """Why a body was refused: not JSON or msgpack at all, too deep or not Unicode (the limits
    every body is held to, checked on this error path only), else the decoder's reason."""
    try:
        if form == "msgpack":
            try:
                body = msgpack.unpackb(raw, raw=False)
            except msgpack.StackError:
                raise invalid_request(f"msgpack nested too deeply (limit {MAX_BODY_DEPTH})") from None
            except (ValueError, msgpack.UnpackException, TypeError) as e:
                raise invalid_request(f"body is not valid msgpack: {e}") from None
        else:
            try:
                body = json.loads(raw)
            except RecursionError:
                raise invalid_request(f"JSON nested too deeply (limit {MAX_BODY_DEPTH})") from None
            except (ValueError, UnicodeDecodeError) as e:
                raise invalid_request(f"body is not valid JSON: {e}") from None
        check_body(body, form)
    except KraftError as e:
        return e
    return invalid_request(str(error))


def read_query(request: web.Request, message: type[M]) -> M:
    """The query string decoded into `message` (text converted to the fields' types);
    INVALID_REQUEST naming the parameter."""
    try:
        return msgspec.convert(dict(request.query), message, strict=False)
    except msgspec.ValidationError as e:
        raise invalid_request(f"query string: {e}") from None


def check_body(body: Any, form: str) -> None:
    """INVALID_REQUEST when `body` nests deeper than MAX_BODY_DEPTH or holds a key or string value
    that does not encode to UTF-8: the reason `read_message` gives for a body its Struct refused.
    One pass, level by level, without recursion."""
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
