"""HTTP transport of the Python client: msgpack bodies over keep-alive sessions, errors as KraftError.

One `requests.Session` per thread (the producer's sender workers and the consumer's fetchers run
requests concurrently). A request goes to an explicit broker address (partition leaders), or to
the bootstrap list, falling back to the next server when one cannot be reached.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Iterable, Sequence

import msgpack
import requests

from api.errors import KraftError

Address = tuple[str, int]
MSGPACK = "application/msgpack"

_packb = msgpack.Packer(use_bin_type=True).pack


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


def decode_body(response: requests.Response) -> Any:
    if not response.content:
        return None
    ctype = response.headers.get("Content-Type", "")
    if ctype.startswith(MSGPACK):
        return msgpack.unpackb(response.content, raw=False)
    if "json" in ctype:
        return json.loads(response.content)
    return None


def error_from_response(response: requests.Response) -> KraftError:
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
    return KraftError(code, f"HTTP {response.status_code}: {response.text[:200]}")


class Transport:
    """Sends msgpack requests; raises KraftError for error answers and for network failures
    (NETWORK_EXCEPTION / REQUEST_TIMED_OUT, both retriable)."""

    def __init__(self, bootstrap_servers: str | Sequence[str], request_timeout_ms: int = 30000) -> None:
        try:
            self._bootstrap = parse_bootstrap(bootstrap_servers)
        except ValueError as e:
            raise KraftError("INVALID_CONFIG", str(e)) from None
        self._known: list[Address] = []  # brokers learnt from metadata, tried after bootstrap
        self._preferred = 0
        self.request_timeout_s = request_timeout_ms / 1000
        self._local = threading.local()
        self._sessions: list[requests.Session] = []
        self._lock = threading.Lock()

    @property
    def bootstrap(self) -> list[Address]:
        return list(self._bootstrap)

    def set_known_brokers(self, addresses: Iterable[Address]) -> None:
        self._known = [a for a in addresses if a not in self._bootstrap]

    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = requests.Session()
            session.headers.update({"Accept": MSGPACK, "Content-Type": MSGPACK})
            self._local.session = session
            with self._lock:
                self._sessions.append(session)
        return session

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: dict[str, Any] | None = None,
        address: Address | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        """Sends to `address`, or to the bootstrap servers (then known brokers) in turn."""
        if address is not None:
            return self._send(address, method, path, body, params, timeout_s)
        candidates = self._bootstrap + self._known
        last_error: KraftError | None = None
        for i in range(len(candidates)):
            idx = (self._preferred + i) % len(candidates)
            try:
                result = self._send(candidates[idx], method, path, body, params, timeout_s)
            except KraftError as e:
                if e.error_code != "NETWORK_EXCEPTION":
                    raise
                last_error = e
                continue
            self._preferred = idx
            return result
        assert last_error is not None
        raise last_error

    def _send(
        self,
        address: Address,
        method: str,
        path: str,
        body: Any,
        params: dict[str, Any] | None,
        timeout_s: float | None,
    ) -> Any:
        url = base_url(address) + path
        data = None if body is None else _packb(body)
        try:
            response = self._session().request(
                method, url, data=data, params=params, timeout=timeout_s or self.request_timeout_s
            )
        except requests.Timeout as e:
            raise KraftError("REQUEST_TIMED_OUT", f"{method} {url}: {e}") from e
        except requests.RequestException as e:
            raise KraftError("NETWORK_EXCEPTION", f"{method} {url}: {e}") from e
        if response.status_code >= 400:
            raise error_from_response(response)
        try:
            return decode_body(response)
        except ValueError as e:
            raise KraftError("UNKNOWN_SERVER_ERROR", f"{method} {url}: undecodable answer: {e}") from e

    def close(self) -> None:
        with self._lock:
            sessions, self._sessions = self._sessions, []
        for s in sessions:
            s.close()
