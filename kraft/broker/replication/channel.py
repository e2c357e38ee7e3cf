"""The follower's end of a replication channel (`GET /v1/replication`, a WebSocket): one per
leader, opened once with this node's credential and kept, carrying one numbered fetch at a time
and its answer (api/routes/replication_channel.py has the leader's end).

`fetch` sends and waits for the answer with the same number; `interrupt` makes a waiting fetch
return None at once (the fetcher's partitions changed: it sends a new fetch, which supersedes the
parked one at the leader). A lost connection, an answer not in time or a refused fetch raise,
and the next fetch opens a new channel.

`FetchChannel` is what the fetcher needs of a channel. A seeded simulation runs this one with
its own messages in place of the WebSocket (`_open`; tests/unit/controlplane/simulation.py).
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Protocol

import aiohttp
import msgpack

from kraft.security.peers import PeerSecurity

CHANNEL_PATH = "/v1/replication"


class ChannelError(RuntimeError):
    pass


class FetchChannel(Protocol):
    """One follower's channel to one leader, one fetch at a time."""

    async def fetch(self, endpoint: tuple[str, int], body: dict[str, Any], timeout_s: float) -> dict[str, Any] | None:
        """The leader's answer to `body` (a replica fetch), or None when `interrupt`ed; raises
        when there is none in `timeout_s`."""
        ...

    def interrupt(self) -> None: ...

    async def close(self) -> None: ...


class ReplicationChannel:
    def __init__(self, node_id: int, leader_id: int, session: Callable[[], aiohttp.ClientSession],
                 security: Callable[[], PeerSecurity]) -> None:
        self.node_id = node_id
        self.leader_id = leader_id  # the node the handshake's signature is addressed to
        self._session = session
        self._security = security
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._endpoint: tuple[str, int] | None = None
        self._reader: asyncio.Task[None] | None = None
        self._id = 0
        self._waiting: asyncio.Future[dict[str, Any] | None] | None = None

    async def fetch(self, endpoint: tuple[str, int], body: dict[str, Any], timeout_s: float) -> dict[str, Any] | None:
        """The leader's fetch answer, or None when `interrupt`ed."""
        ws = await self._open(endpoint, timeout_s)
        self._id += 1
        waiting = self._waiting = asyncio.get_running_loop().create_future()
        await ws.send_bytes(msgpack.packb({"id": self._id, "fetch": body}, use_bin_type=True))
        try:
            # asyncio.timeout, not wait_for: Python 3.11's wait_for returns an answer that arrives
            # as the task is cancelled and drops the cancellation (the fetcher then never stops)
            async with asyncio.timeout(timeout_s):
                answer = await waiting
        except TimeoutError:
            await self.close()
            raise ChannelError(f"no answer within {timeout_s:g} s") from None
        finally:
            self._waiting = None
        if answer is not None and answer.get("error_code"):
            raise ChannelError(f"{answer['error_code']}: {answer.get('message')}")
        return None if answer is None else answer["fetch"]

    def interrupt(self) -> None:
        if self._waiting is not None and not self._waiting.done():
            self._waiting.set_result(None)

    async def close(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None:
            await ws.close()
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
            self._reader = None

    async def _open(self, endpoint: tuple[str, int], timeout_s: float) -> aiohttp.ClientWebSocketResponse:
        if self._ws is not None and not self._ws.closed and self._endpoint == endpoint:
            return self._ws
        await self.close()
        security = self._security()
        path_qs = f"{CHANNEL_PATH}?replica_id={self.node_id}"
        self._ws = await self._session().ws_connect(
            security.url(*endpoint, path_qs), headers=security.headers("GET", path_qs, b"", target=self.leader_id),
            max_msg_size=0, autoping=True, timeout=aiohttp.ClientWSTimeout(ws_close=timeout_s),
        )
        self._endpoint = endpoint
        self._reader = asyncio.get_running_loop().create_task(self._read(self._ws))
        return self._ws

    async def _read(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        error: BaseException = ChannelError("the leader closed the replication channel")
        try:
            async for msg in ws:
                if msg.type == aiohttp.WSMsgType.BINARY:
                    self._received(msgpack.unpackb(msg.data, raw=False))
        except Exception as e:
            error = e
        finally:
            waiting = self._waiting
            if waiting is not None and not waiting.done():
                waiting.set_exception(error)

    def _received(self, answer: dict[str, Any]) -> None:
        """An answer from the leader: taken when it is the fetch waited for's (an older id was
        superseded: its fetch is gone)."""
        waiting = self._waiting
        if waiting is not None and not waiting.done() and answer.get("id") == self._id:
            waiting.set_result(answer)
