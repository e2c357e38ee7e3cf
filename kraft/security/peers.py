"""How this node calls the other nodes: the scheme (https when the cluster's listeners speak TLS,
checked against the truststore) and the node credential on every request, addressed to the node
called and covering the headers that node believes on the credential's word.

One `PeerSecurity` is shared by the node's inter-node HTTP clients (controller client, replica
fetchers, forwarding, `PeerClient`'s callers: leader offsets and the transaction coordinator's
partition requests, ZooKeeper-mode pushes). `PLAIN_PEERS` (http, unsigned) is
what a component built without a node uses (unit tests); a node always installs its own.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import msgpack
from yarl import URL

from kraft.errors import KraftError
from kraft.security.node_auth import SIGNED_HEADERS, NodeCredential


@dataclass(frozen=True)
class PeerSecurity:
    credential: NodeCredential | None = None
    ssl_context: ssl.SSLContext | None = None  # a client context trusting the cluster's CA

    @property
    def scheme(self) -> str:
        return "https" if self.ssl_context is not None else "http"

    def url(self, host: str, port: int, path_qs: str) -> str:
        return f"{self.scheme}://{host}:{port}{path_qs}"

    def headers(self, method: str, path_qs: str, body: bytes | None = None, *, target: int,
                trusted: Mapping[str, str] | None = None) -> dict[str, str]:
        """The headers of one request to node `target` (`path_qs`: the raw path and query as
        sent): `trusted` (names of `SIGNED_HEADERS` only, e.g. the principal of a forwarded
        request) and the node credential covering them."""
        trusted = dict(trusted or {})
        assert trusted.keys() <= set(SIGNED_HEADERS), f"not signed: {sorted(trusted.keys() - set(SIGNED_HEADERS))}"
        if self.credential is None:
            return trusted
        covered = {name: trusted.get(name) for name in SIGNED_HEADERS}
        return {**trusted, **self.credential.sign(method, path_qs, body, int(time.time() * 1000), target, covered)}

    def connector(self, **kwargs: object) -> aiohttp.TCPConnector:
        """A connector for a session that talks to other nodes."""
        if self.ssl_context is not None:
            kwargs["ssl"] = self.ssl_context
        return aiohttp.TCPConnector(**kwargs)  # type: ignore[arg-type]


PLAIN_PEERS = PeerSecurity()
MSGPACK = "application/msgpack"


class PeerClient:
    """msgpack requests to other nodes' routes over one keep-alive session, signed with `security`
    (which the node installs: TLS and its credential); the answer, or KraftError with the node's
    error name (REQUEST_TIMED_OUT, NETWORK_EXCEPTION when it did not answer)."""

    def __init__(self, security: PeerSecurity = PLAIN_PEERS) -> None:
        self.security = security
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def call(self, method: str, host: str, port: int, path_qs: str, *, target: int, body: Any = None,
                   timeout_s: float, what: str) -> dict[str, Any]:
        """`path_qs` as sent (quoted); `what` names the request in errors."""
        url = self.security.url(host, port, path_qs)
        payload = None if body is None else msgpack.packb(body, use_bin_type=True)
        headers = {"Accept": MSGPACK, **({"Content-Type": MSGPACK} if payload is not None else {}),
                   **self.security.headers(method, path_qs, payload, target=target)}
        try:
            async with self._http().request(method, URL(url, encoded=True), data=payload, headers=headers,
                                            timeout=aiohttp.ClientTimeout(total=timeout_s)) as response:
                raw = await response.read()
                answer = msgpack.unpackb(raw, raw=False) if raw else None
                status = response.status
        except asyncio.TimeoutError:
            raise KraftError("REQUEST_TIMED_OUT", f"{what} from {url}: timed out") from None
        except (aiohttp.ClientError, OSError, ValueError) as e:
            raise KraftError("NETWORK_EXCEPTION", f"{what} from {url}: {e}") from None
        if status != 200 or not isinstance(answer, dict):
            if isinstance(answer, dict) and "error_code" in answer:
                raise KraftError(str(answer["error_code"]), str(answer.get("message", "")))
            raise KraftError("UNKNOWN_SERVER_ERROR", f"{what} from {url}: HTTP {status}")
        return answer

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(connector=self.security.connector(limit=64, keepalive_timeout=30))
        return self._session
