"""Follower fetchers: one long-poll loop per leader broker, carrying every partition this broker
follows from that leader (Kafka's ReplicaFetcherThread, one per source broker), over one
persistent replication channel per leader (`channel.py`; `POST /v1/fetch` with `replica_id` to a
leader that has no channel route).

The loop asks its owner (the replica manager) for each partition's fetch position, sends one
replica fetch, and hands each partition's answer back to the owner, which appends or truncates
(`follower.py` decides which). A partition whose answer says "not now" (stale epoch, leader not
ready) sits out `backoff_ms`; a failed request backs the whole loop off. Adding or removing a
partition interrupts the long poll at once, so a leader change takes effect without waiting for
`max_wait_ms`. Bounded: one request in flight per leader, sizes from settings. Back-offs are
timed by the event loop's clock (a simulation's loop has a simulated one).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import aiohttp
import msgpack

from kraft.broker.replication.channel import FetchChannel, ReplicationChannel
from kraft.broker.replication.follower import PartitionFetchResponse
from kraft.broker.replication.leader import EpochEndOffset
from kraft.security.peers import PLAIN_PEERS

log = logging.getLogger("kraft.broker.fetcher")

TopicPartition = tuple[str, int]
MSGPACK = "application/msgpack"
FETCH_PATH = "/v1/fetch"


@dataclass(frozen=True)
class FetcherSettings:
    max_wait_ms: int = 500  # replica.fetch.wait.max.ms
    min_bytes: int = 1  # replica.fetch.min.bytes
    max_bytes: int = 10_485_760  # replica.fetch.response.max.bytes
    partition_max_bytes: int = 1_048_576  # replica.fetch.max.bytes
    backoff_ms: int = 200  # replica.fetch.backoff.ms (Kafka 1000; shorter here for failover)
    request_timeout_ms: int = 10_000  # beyond max_wait_ms


class FollowerPartitions(Protocol):
    """The replica manager's side of the fetchers."""

    def fetch_position(self, tp: TopicPartition, leader_epoch: int) -> dict[str, Any] | None:
        """The partition's fetch entry (fetch_offset, last_fetched_epoch, high_watermark), or None
        when it cannot fetch now (log not open, no longer following at this epoch)."""
        ...

    async def on_fetch_response(
        self, tp: TopicPartition, leader_epoch: int, response: PartitionFetchResponse
    ) -> bool:
        """Applies one partition's answer; False when the partition should back off."""
        ...


def parse_partition_response(item: dict[str, Any]) -> PartitionFetchResponse:
    diverging = item.get("diverging_epoch")
    return PartitionFetchResponse(
        high_watermark=int(item.get("high_watermark", -1)),
        log_start_offset=int(item.get("log_start_offset", -1)),
        log_end_offset=int(item.get("log_end_offset", -1)),
        records=bytes(item.get("records") or b""),
        diverging_epoch=None if diverging is None else EpochEndOffset(
            int(diverging["epoch"]), int(diverging["end_offset"])),
        error_code=item.get("error_code"),
    )


@dataclass
class LeaderFetcher:
    """The partitions followed from one leader broker, and the loop fetching them."""

    leader_id: int
    channel: FetchChannel
    partitions: dict[TopicPartition, int] = field(default_factory=dict)  # -> leader epoch
    delayed_until: dict[TopicPartition, float] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    http_only: bool = False  # the leader has no replication channel route (an older node)

    def interrupt(self) -> None:
        """The partitions changed: the long poll in flight ends now."""
        self.changed.set()
        self.channel.interrupt()


class ReplicaFetcherManager:
    def __init__(
        self,
        node_id: int,
        owner: FollowerPartitions,
        endpoint_of: Callable[[int], tuple[str, int] | None],
        broker_epoch: Callable[[], int],
        settings: FetcherSettings = FetcherSettings(),
        open_channel: Callable[[int], FetchChannel] | None = None,
    ) -> None:
        """`open_channel(leader_id)`: the channel fetches from that leader go through (default: a
        `ReplicationChannel`, falling back to `POST /v1/fetch`)."""
        self.node_id = node_id
        self.owner = owner
        self.endpoint_of = endpoint_of
        self.broker_epoch = broker_epoch
        self.settings = settings
        self._fetchers: dict[int, LeaderFetcher] = {}
        self._leader_of: dict[TopicPartition, int] = {}
        self._session: aiohttp.ClientSession | None = None
        self._open_channel = open_channel or (lambda leader_id: ReplicationChannel(
            self.node_id, leader_id, self._session_or_new, lambda: self.security))
        self._closed = False
        self.security = PLAIN_PEERS  # the node installs TLS and its credential: leaders serve nodes only

    # -- assignment -------------------------------------------------------------------------------

    def assign(self, tp: TopicPartition, leader_id: int, leader_epoch: int) -> None:
        """Follow `tp` from `leader_id` at `leader_epoch` (idempotent)."""
        if self._closed:
            return
        current = self._leader_of.get(tp)
        if current == leader_id and self._fetchers[leader_id].partitions.get(tp) == leader_epoch:
            return
        if current is not None and current != leader_id:
            self.remove(tp)
        fetcher = self._fetchers.get(leader_id)
        if fetcher is None:
            fetcher = self._fetchers[leader_id] = LeaderFetcher(leader_id, self._open_channel(leader_id))
            fetcher.task = asyncio.get_running_loop().create_task(self._run(fetcher))
        fetcher.partitions[tp] = leader_epoch
        fetcher.delayed_until.pop(tp, None)
        fetcher.interrupt()
        self._leader_of[tp] = leader_id

    def remove(self, tp: TopicPartition) -> None:
        leader_id = self._leader_of.pop(tp, None)
        if leader_id is None:
            return
        fetcher = self._fetchers[leader_id]
        fetcher.partitions.pop(tp, None)
        fetcher.delayed_until.pop(tp, None)
        fetcher.interrupt()
        if not fetcher.partitions:
            del self._fetchers[leader_id]
            if fetcher.task is not None:
                fetcher.task.cancel()

    def following(self) -> dict[TopicPartition, int]:
        """Partition -> the leader it is fetched from."""
        return dict(self._leader_of)

    async def close(self) -> None:
        self._closed = True
        tasks = [f.task for f in self._fetchers.values() if f.task is not None]
        self._fetchers.clear()
        self._leader_of.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._session is not None:
            await self._session.close()

    # -- the loop ---------------------------------------------------------------------------------

    def _session_or_new(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=self.security.connector(limit=0, keepalive_timeout=60),
            )
        return self._session

    async def _run(self, fetcher: LeaderFetcher) -> None:
        try:
            while True:
                fetcher.changed.clear()
                try:
                    fetched = await self._fetch_once(fetcher)
                except asyncio.CancelledError:
                    raise
                except Exception as e:  # the leader is down or unreachable: retry after a pause
                    log.warning("fetch from broker %d failed: %s", fetcher.leader_id, e or type(e).__name__)
                    fetched = False
                if not fetched:
                    await self._wait_changed(fetcher, self.settings.backoff_ms / 1000)
        finally:
            await fetcher.channel.close()

    async def _wait_changed(self, fetcher: LeaderFetcher, timeout_s: float) -> None:
        try:  # not asyncio.wait_for, which on 3.11 can drop the cancellation that stops the fetcher
            async with asyncio.timeout(timeout_s):
                await fetcher.changed.wait()
        except TimeoutError:
            pass

    async def _fetch_once(self, fetcher: LeaderFetcher) -> bool:
        """One request and its processing; False when there was nothing to fetch or it failed."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        requested: dict[TopicPartition, int] = {}
        entries = []
        for tp, epoch in fetcher.partitions.items():
            if fetcher.delayed_until.get(tp, 0) > now:
                continue
            position = self.owner.fetch_position(tp, epoch)
            if position is None:
                continue
            requested[tp] = epoch
            entries.append({"topic": tp[0], "partition": tp[1], "current_leader_epoch": epoch,
                            "partition_max_bytes": self.settings.partition_max_bytes, **position})
        endpoint = self.endpoint_of(fetcher.leader_id)
        if not entries or endpoint is None:
            return False
        body = {"replica_id": self.node_id, "replica_epoch": self.broker_epoch(),
                "max_wait_ms": self.settings.max_wait_ms, "min_bytes": self.settings.min_bytes,
                "max_bytes": self.settings.max_bytes, "partitions": entries}
        answer = await self._exchange(fetcher, endpoint, body)
        if answer is None:
            return True  # interrupted by an assignment change: go again at once
        for item in answer.get("partitions", ()):
            tp = (item.get("topic"), item.get("partition"))
            epoch = requested.get(tp)  # type: ignore[arg-type]
            if epoch is None or fetcher.partitions.get(tp) != epoch:  # type: ignore[arg-type]
                continue  # reassigned while the request was in flight
            ok = await self.owner.on_fetch_response(tp, epoch, parse_partition_response(item))  # type: ignore[arg-type]
            if not ok:
                fetcher.delayed_until[tp] = loop.time() + self.settings.backoff_ms / 1000  # type: ignore[index]
        return True

    async def _exchange(self, fetcher: LeaderFetcher, endpoint: tuple[str, int],
                        body: dict[str, Any]) -> dict[str, Any] | None:
        """The decoded answer, or None when an assignment change interrupted the long poll."""
        timeout_s = (self.settings.max_wait_ms + self.settings.request_timeout_ms) / 1000
        if not fetcher.http_only:
            try:
                return await fetcher.channel.fetch(endpoint, body, timeout_s)
            except aiohttp.WSServerHandshakeError as e:
                if e.status not in (404, 405):
                    raise
                log.info("broker %d has no replication channel (HTTP %d): fetching over HTTP",
                         fetcher.leader_id, e.status)
                fetcher.http_only = True
        return await self._post(fetcher, endpoint, body)

    async def _post(self, fetcher: LeaderFetcher, endpoint: tuple[str, int],
                    body: dict[str, Any]) -> dict[str, Any] | None:
        """The decoded answer, or None when an assignment change interrupted the long poll."""
        host, port = endpoint
        timeout = aiohttp.ClientTimeout(
            total=(self.settings.max_wait_ms + self.settings.request_timeout_ms) / 1000)
        data = msgpack.packb(body, use_bin_type=True)
        headers = {"Content-Type": MSGPACK, "Accept": MSGPACK,
                   **self.security.headers("POST", FETCH_PATH, data, target=fetcher.leader_id)}
        request = asyncio.ensure_future(self._session_or_new().post(
            self.security.url(host, port, FETCH_PATH), data=data, headers=headers, timeout=timeout,
        ))
        changed = asyncio.ensure_future(fetcher.changed.wait())
        try:
            await asyncio.wait({request, changed}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            request.cancel()
            await asyncio.gather(request, return_exceptions=True)
            raise
        finally:
            changed.cancel()
        if not request.done():
            request.cancel()
            await asyncio.gather(request, return_exceptions=True)
            return None
        async with request.result() as response:
            payload = await response.read()
            if response.status != 200:
                raise RuntimeError(f"HTTP {response.status}: {payload[:200]!r}")
        return msgpack.unpackb(payload, raw=False)
