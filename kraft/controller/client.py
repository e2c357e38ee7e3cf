"""How a node reaches the active controller's HTTP API (`/v1/controller/...`) on another node.

`ControllerDirectory` is the address book: node_id -> client listener of the controllers this
node has heard of (the quorum's announced endpoints, NOT_CONTROLLER answers, fetch answers) plus
the configured bootstrap servers. `ControllerClient.call` sends one request (msgpack both ways)
to the node believed to be the active controller and follows NOT_CONTROLLER answers, retrying
other nodes until its deadline: callers see either the controller's answer or a `KraftError`.

The node credential on each request names the node it is addressed to (a signature is valid at
that node only); a bootstrap address whose node is not known yet is asked who it is first
(`GET /v1/health`, which every node answers without credentials).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import aiohttp
import msgpack
from yarl import URL

from kraft.errors import KraftError
from kraft.controller.heap import gc_paused
from kraft.security.peers import PLAIN_PEERS, PeerSecurity

log = logging.getLogger("kraft.controller.client")

Address = tuple[str, int]
MSGPACK = "application/msgpack"
RETRY_BACKOFF_S = 0.02
MAX_RETRY_BACKOFF_S = 0.1


@dataclass
class ControllerDirectory:
    """Where controllers listen and who we believe is active. Loop-only state."""

    bootstrap: list[Address] = field(default_factory=list)
    endpoints: dict[int, Address] = field(default_factory=dict)
    leader_id: int | None = None
    refresh: Callable[[], None] | None = None  # pulls in what this node's own quorum knows
    asked: dict[Address, int] = field(default_factory=dict)  # node ids that addresses gave for themselves

    def node_at(self, address: Address) -> int | None:
        """The id of the node at `address`, when known."""
        for node_id, known in self.endpoints.items():
            if known == address:
                return node_id
        return self.asked.get(address)

    def learn(self, node_id: int, host: str, port: int) -> None:
        self.endpoints[node_id] = (host, port)

    def learn_leader(self, leader: Any) -> None:
        """From a `{"node_id","host","port"}` object (a NOT_CONTROLLER answer's `leader`)."""
        if isinstance(leader, dict) and isinstance(leader.get("node_id"), int):
            self.leader_id = leader["node_id"]
            if isinstance(leader.get("host"), str) and isinstance(leader.get("port"), int):
                self.learn(leader["node_id"], leader["host"], leader["port"])

    def leader_json(self, leader_id: int | None) -> dict[str, Any] | None:
        address = None if leader_id is None else self.endpoints.get(leader_id)
        if address is None:
            return None
        return {"node_id": leader_id, "host": address[0], "port": address[1]}

    def candidates(self) -> list[Address]:
        """The believed leader first, then every other known controller, then the bootstrap."""
        if self.refresh is not None:
            self.refresh()
        ordered: list[Address] = []
        if self.leader_id is not None and self.leader_id in self.endpoints:
            ordered.append(self.endpoints[self.leader_id])
        ordered += [a for _, a in sorted(self.endpoints.items())]
        ordered += self.bootstrap
        return list(dict.fromkeys(ordered))


class ControllerClient:
    def __init__(self, directory: ControllerDirectory, *, request_timeout_s: float = 5.0,
                 security: PeerSecurity = PLAIN_PEERS) -> None:
        self.directory = directory
        self.request_timeout_s = request_timeout_s
        self.security = security  # TLS and the node credential: /v1/controller is the cluster's own
        self._session: aiohttp.ClientSession | None = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=self.security.connector(limit=64, force_close=False),
                headers={"Accept": MSGPACK},
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request_at(self, address: Address, method: str, path: str, body: Any = None,
                         params: dict[str, Any] | None = None, timeout_s: float | None = None,
                         *, raw_answer: bool = False) -> Any:
        """One request to one node; its error answer is raised as a KraftError. `raw_answer`:
        a successful answer's body is returned undecoded (bytes), for a caller that decodes a
        large one off the loop."""
        data = None if body is None else msgpack.packb(body, use_bin_type=True)
        target = URL(path).with_query(params) if params else URL(path)
        timeout = aiohttp.ClientTimeout(total=timeout_s or self.request_timeout_s)
        node_id = await self._node_at(address, timeout)
        headers = self.security.headers(method, target.raw_path_qs, data, target=node_id)
        if data is not None:
            headers["Content-Type"] = MSGPACK
        url = self.security.url(address[0], address[1], target.raw_path_qs)
        try:
            async with self._http().request(method, URL(url, encoded=True), data=data, headers=headers,
                                            timeout=timeout) as response:
                raw = await response.read()
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
            self.directory.asked.pop(address, None)  # another node may be there next time: ask again
            raise
        if response.status == 403:  # addressed to a node that is no longer there, perhaps
            self.directory.asked.pop(address, None)
        if raw_answer and response.status < 400:
            return raw
        try:
            answer = _unpack(raw) if raw else {}
        except (ValueError, msgpack.UnpackException) as e:
            raise KraftError("UNKNOWN_SERVER_ERROR", f"{url} answered {response.status} "
                                                     f"with an undecodable body: {e}") from None
        if response.status >= 400:
            raise KraftError.from_dict(answer if isinstance(answer, dict) else {})
        return answer

    async def _node_at(self, address: Address, timeout: aiohttp.ClientTimeout) -> int:
        """The id of the node at `address` (the directory's, else the node's own word)."""
        node_id = self.directory.node_at(address)
        if node_id is not None:
            return node_id
        url = self.security.url(address[0], address[1], "/v1/health")
        async with self._http().get(url, timeout=timeout) as response:
            raw = await response.read()
        try:
            node_id = _unpack(raw)["node_id"] if response.status == 200 else None
        except (ValueError, TypeError, KeyError, msgpack.UnpackException):
            node_id = None
        if not isinstance(node_id, int):
            raise KraftError("NETWORK_EXCEPTION", f"{url} answered {response.status} without its node id")
        self.directory.asked[address] = node_id
        return node_id

    async def call(self, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None,
                   *, timeout_s: float | None = None, request_timeout_s: float | None = None,
                   raw_answer: bool = False) -> Any:
        """Send to the active controller, following NOT_CONTROLLER and trying the other known
        controllers on connection failures, until `timeout_s` passes. Non-retriable errors of
        the controller are raised at once."""
        deadline = time.monotonic() + (timeout_s or self.request_timeout_s)
        backoff = RETRY_BACKOFF_S
        last: KraftError = KraftError("NOT_CONTROLLER", "no controller address is known")
        tried: set[Address] = set()
        while True:
            targets = [a for a in self.directory.candidates() if a not in tried] or self.directory.candidates()
            address = targets[0] if targets else None
            if address is not None:
                remaining = max(0.05, deadline - time.monotonic())
                per_request = min(remaining, request_timeout_s or self.request_timeout_s)
                try:
                    return await self.request_at(address, method, path, body, params, per_request,
                                                 raw_answer=raw_answer)
                except KraftError as e:
                    last = e
                    if e.error_code == "NOT_CONTROLLER":
                        self.directory.learn_leader(e.extra.get("leader"))
                        leader = self.directory.leader_json(self.directory.leader_id)
                        if leader is not None and (leader["host"], leader["port"]) != address:
                            tried.add(address)
                            continue  # follow the redirect at once
                    elif not e.retriable:
                        raise
                    tried.add(address)
                except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as e:
                    last = KraftError("NETWORK_EXCEPTION", f"controller at {address[0]}:{address[1]}: "
                                                           f"{type(e).__name__}: {e}")
                    tried.add(address)
                    if self.directory.leader_id is not None and \
                            self.directory.endpoints.get(self.directory.leader_id) == address:
                        self.directory.leader_id = None  # it is gone; ask the others
            if time.monotonic() + backoff > deadline:
                raise last
            if len(tried) >= len(self.directory.candidates()):
                tried.clear()  # went round everyone: back off before the next round
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, MAX_RETRY_BACKOFF_S)


LARGE_ANSWER_BYTES = 64 * 1024


def _unpack(raw: bytes) -> Any:
    """msgpack.unpackb; without garbage collections for a large body (a metadata fetch of
    thousands of records: its own allocations would trigger collections of the whole heap)."""
    if len(raw) < LARGE_ANSWER_BYTES:
        return msgpack.unpackb(raw, raw=False)
    with gc_paused():
        return msgpack.unpackb(raw, raw=False)
