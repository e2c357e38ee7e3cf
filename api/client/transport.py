"""HTTP transport of the Python client: msgpack bodies over keep-alive connections, errors as KraftError.

One `http.client` connection per (thread, broker): the producer's sender workers and the
consumer's fetchers run requests concurrently. `http.client` rather than `requests`: on a 1 MiB
fetch answer requests spends ~2 ms of CPU (urllib3 reads in small chunks), http.client ~0.3 ms,
and a small request costs ~0.8 ms against ~0.2 ms (docs/benchmarks.md). A request goes to an
explicit broker address (partition leaders), or to any server we know (bootstrap list, then the
brokers of the last metadata), falling back to the next one when a server cannot be reached or, for
a GET, does not answer in time: a paused node accepts connections but never answers, and Kafka's
client likewise treats a timed-out node as disconnected and asks another one. A client speaking
the wrong security protocol to a listener is told so at once (`protocol_mismatch`), not retried.
"""

from __future__ import annotations

import http.client
import json
import select
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence
from urllib.parse import urlencode

import msgpack

from kraft.api.client.packed_body import PackedBody, send_parts
from kraft.api.client.protocol_mismatch import plain_client_mismatch, tls_client_mismatch
from kraft.api.client.security import PLAINTEXT, ClientSecurity
from kraft.api.errors import KraftError

Address = tuple[str, int]
MSGPACK = "application/msgpack"
_HEADERS = {"Accept": MSGPACK, "Content-Type": MSGPACK}
CLIENT_ID_HEADER = "X-Kraft-Client-Id"  # Kafka's request header client_id: quotas per client id

_packb = msgpack.Packer(use_bin_type=True).pack
_UNREACHABLE = frozenset({"NETWORK_EXCEPTION", "REQUEST_TIMED_OUT"})


def parse_address(text: str) -> Address:
    """'host:port' or '[v6]:port' -> (host, port); raises ValueError on anything else."""
    text = text.strip()
    if text.startswith("["):
        host, sep, port = text[1:].partition("]:")
    else:
        host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bad server address {text!r}: expected host:port")
    return host, int(port)


def parse_bootstrap(servers: str | Sequence[str]) -> list[Address]:
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    addresses = [parse_address(s) for s in items if s.strip()]
    if not addresses:
        raise ValueError("bootstrap_servers names no server")
    return addresses


def base_url(address: Address) -> str:
    host, port = address
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class _HeadersLike(Protocol):
    def get(self, key: str, default: str = ...) -> str | None: ...


class ResponseLike(Protocol):
    """What the decoders need of an answer (ours, or a `requests.Response`)."""

    status_code: int
    content: bytes
    headers: _HeadersLike


@dataclass
class Answer:
    status_code: int
    content: bytes
    headers: Mapping[str, str] = field(default_factory=dict)


def decode_body(response: ResponseLike) -> Any:
    if not response.content:
        return None
    ctype = response.headers.get("Content-Type") or ""
    if ctype.startswith(MSGPACK):
        return msgpack.unpackb(response.content, raw=False)
    if "json" in ctype:
        return json.loads(response.content)
    return None


def error_from_response(response: ResponseLike) -> KraftError:
    try:
        body = decode_body(response)
    except ValueError:
        body = None
    if isinstance(body, dict) and "error_code" in body:
        error = KraftError.from_dict(body)
        prefix = f"{error.error_code}: "
        if error.message.startswith(prefix):  # a server that put str(KraftError) in the message
            return KraftError(error.error_code, error.message[len(prefix):], **error.extra)
        return error
    code = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 415: "UNSUPPORTED_MEDIA_TYPE"}.get(
        response.status_code, "UNKNOWN_SERVER_ERROR"
    )
    text = response.content[:200].decode("utf-8", "replace")
    return KraftError(code, f"HTTP {response.status_code}: {text}")


def _request_parts(conn: http.client.HTTPConnection, method: str, path: str, headers: Mapping[str, str],
                   body: PackedBody) -> None:
    """`conn.request` for a body in parts: the head through http.client, the parts written as
    they are (a `body` of bytes would be one buffer: the parts joined, a copy of the records)."""
    conn.putrequest(method, path)
    for name, value in headers.items():
        conn.putheader(name, value)
    conn.putheader("Content-Length", str(body.size))
    conn.endheaders()
    assert conn.sock is not None  # endheaders connected it
    send_parts(conn.sock, body.parts)


def _peer_closed(conn: http.client.HTTPConnection) -> bool:
    """True when an idle keep-alive socket is readable: the server closed it (or sent junk), so
    it must not carry the next request (urllib3's `is_connection_dropped`)."""
    sock = conn.sock
    if sock is None:
        return False
    try:
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True


class NoBrokersAvailable(KraftError):
    """No server of bootstrap_servers accepted a connection, and none ever answered this client:
    nothing to wait for (kafka-python's NoBrokersAvailable), so it is not retried. Once a broker
    has answered, refused connections are retriable NETWORK_EXCEPTIONs again (a restart)."""

    def __init__(self, addresses: list[Address]) -> None:
        servers = ", ".join(base_url(a).removeprefix("http://") for a in addresses)
        super().__init__("NETWORK_EXCEPTION", f"connection refused by {servers}: no broker is running there "
                                              "(check bootstrap_servers)")

    @property
    def retriable(self) -> bool:
        return False


class Transport:
    """Sends msgpack requests; raises KraftError for error answers and for network failures
    (NETWORK_EXCEPTION / REQUEST_TIMED_OUT, both retriable)."""

    def __init__(self, bootstrap_servers: str | Sequence[str], request_timeout_ms: int = 30000,
                 security: ClientSecurity = PLAINTEXT, client_id: str | None = None) -> None:
        try:
            self._bootstrap = parse_bootstrap(bootstrap_servers)
        except ValueError as e:
            raise KraftError("INVALID_CONFIG", str(e)) from None
        self._known: list[Address] = []  # brokers learnt from metadata, tried after bootstrap
        self._preferred: Address = self._bootstrap[0]  # the server that answered last
        self._unreachable: set[Address] = set()  # failed lately (any thread): tried last
        self._answered = False  # some server answered once: refusals are restarts, not a wrong address
        self.request_timeout_s = request_timeout_ms / 1000
        self._local = threading.local()
        self._connections: list[http.client.HTTPConnection] = []  # every thread's, for close()
        self._lock = threading.Lock()
        self.security = security
        self._ssl = security.ssl_context()
        self._headers = {**_HEADERS, **security.headers(), **({CLIENT_ID_HEADER: client_id} if client_id else {})}

    @property
    def bootstrap(self) -> list[Address]:
        return list(self._bootstrap)

    def set_known_brokers(self, addresses: Iterable[Address]) -> None:
        self._known = [a for a in addresses if a not in self._bootstrap]

    def _connection(self, address: Address, timeout_s: float) -> http.client.HTTPConnection:
        pool: dict[Address, http.client.HTTPConnection] | None = getattr(self._local, "pool", None)
        if pool is None:
            pool = self._local.pool = {}
        conn = pool.get(address)
        if conn is None:
            conn = pool[address] = (
                http.client.HTTPSConnection(address[0], address[1], timeout=timeout_s, context=self._ssl)
                if self._ssl is not None else http.client.HTTPConnection(address[0], address[1], timeout=timeout_s))
            with self._lock:
                self._connections.append(conn)
        elif _peer_closed(conn):
            conn.close()  # reconnects on the next request
        conn.timeout = timeout_s  # for the connect
        if conn.sock is not None:
            conn.sock.settimeout(timeout_s)
        return conn

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: dict[str, Any] | None = None,
        address: Address | None = None,
        timeout_s: float | None = None,
        on_sent: Callable[[], None] | None = None,
    ) -> Any:
        """Sends to `address`, or to the servers we know in turn: the one that answered last
        first, the ones that failed lately last. Moves on when a server cannot be reached, and on a
        timeout too for GETs (safe to repeat; a POST that timed out may have been applied).
        `on_sent` (with `address`) is called once the request is written, before its answer is
        read: the producer lets its next request to that leader go then."""
        if address is not None:
            return self._send(address, method, path, body, params, timeout_s, on_sent)
        failover = _UNREACHABLE if method == "GET" else frozenset({"NETWORK_EXCEPTION"})
        last_error: KraftError | None = None
        refused: list[Address] = []
        candidates = self.candidates()
        for candidate in candidates:
            try:
                result = self._send(candidate, method, path, body, params, timeout_s)
            except KraftError as e:
                if e.error_code not in failover or not e.retriable:  # e.g. a protocol mismatch
                    raise
                if isinstance(e.__cause__, ConnectionRefusedError):
                    refused.append(candidate)
                last_error = e
                continue
            self._preferred = candidate
            return result
        if not self._answered and len(refused) == len(candidates):
            raise NoBrokersAvailable(refused) from last_error
        assert last_error is not None
        raise last_error

    def candidates(self) -> list[Address]:
        """Every known server in the order `request` tries them."""
        servers = self._bootstrap + self._known
        start = servers.index(self._preferred) if self._preferred in servers else 0
        rotated = servers[start:] + servers[:start]
        unreachable = self._unreachable
        return sorted(rotated, key=lambda a: a in unreachable)  # stable: keeps the rotation

    def _send(
        self,
        address: Address,
        method: str,
        path: str,
        body: Any,
        params: dict[str, Any] | None,
        timeout_s: float | None,
        on_sent: Callable[[], None] | None = None,
    ) -> Any:
        if params:
            path = f"{path}?{urlencode(params)}"
        data = None if body is None or isinstance(body, PackedBody) else _packb(body)
        conn = self._connection(address, timeout_s or self.request_timeout_s)
        try:
            if isinstance(body, PackedBody):
                _request_parts(conn, method, path, self._headers, body)
            else:
                conn.request(method, path, body=data, headers=self._headers)
            if on_sent is not None:
                on_sent()
            response = conn.getresponse()
            answer = Answer(response.status, response.read(), response.headers)
        except TimeoutError as e:
            conn.close()
            self._unreachable.add(address)
            raise KraftError("REQUEST_TIMED_OUT", f"{method} {base_url(address)}{path}: {e or 'timed out'}") from e
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            mismatch = (tls_client_mismatch if self._ssl is not None else plain_client_mismatch)(e, address)
            if mismatch is not None:
                raise mismatch from e
            self._unreachable.add(address)
            raise KraftError("NETWORK_EXCEPTION", f"{method} {base_url(address)}{path}: {type(e).__name__}: {e}") from e
        self._unreachable.discard(address)
        self._answered = True
        if answer.status_code >= 400:
            raise error_from_response(answer)
        try:
            return decode_body(answer)
        except ValueError as e:
            raise KraftError("UNKNOWN_SERVER_ERROR", f"{method} {base_url(address)}{path}: undecodable answer: {e}") from e

    def close(self) -> None:
        with self._lock:
            connections, self._connections = self._connections, []
        for conn in connections:
            conn.close()
