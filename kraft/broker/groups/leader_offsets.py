"""Partition offsets (log start, high watermark, log end) and timestamp lookups asked of each
partition's *leader*, as kafka-consumer-groups does (ListOffsets to the leaders): the coordinator
needs them for lag and offset resets of partitions that other brokers lead.

Partitions this broker leads are read from its own replica manager (`LocalOffsets`, the part of
its API this needs); the others go to their leader's `GET /v1/topics/{t}/partitions/{p}/offsets`, all in parallel, each bounded by
`timeout_s`, so one dead or paused broker costs at most that long and only its partitions.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Iterable, Protocol
from urllib.parse import quote

from kraft.errors import KraftError
from kraft.security.peers import PeerClient
from kraft.metadata.image import MetadataImage
from kraft.server.records import PartitionOffsets

DEFAULT_TIMEOUT_S = 3.0

TopicPartition = tuple[str, int]


class LocalOffsets(Protocol):
    """The replica manager's answers for a partition led here (KraftError otherwise)."""

    async def offsets(self, topic: str, partition: int) -> PartitionOffsets: ...

    async def offset_for_timestamp(
        self, topic: str, partition: int, timestamp: int
    ) -> tuple[int, int] | None: ...


class LeaderOffsets:
    def __init__(self, node_id: int, replicas: LocalOffsets, image: Callable[[], MetadataImage],
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.node_id = node_id
        self.replicas = replicas
        self.image = image
        self.timeout_s = timeout_s
        self.peers = PeerClient()  # the node installs its security (TLS, its credential)

    async def close(self) -> None:
        await self.peers.close()

    async def offsets(self, tp: TopicPartition) -> PartitionOffsets:
        """The leader's offsets of `tp`; raises KraftError (NOT_LEADER_OR_FOLLOWER,
        LEADER_NOT_AVAILABLE, REQUEST_TIMED_OUT, NETWORK_EXCEPTION, ...) when it cannot tell."""
        if self._is_local(tp):
            return await self.replicas.offsets(*tp)
        answer = await self._ask_leader(tp, None)
        return PartitionOffsets(int(answer["log_start_offset"]), int(answer["high_watermark"]),
                                int(answer["log_end_offset"]), int(answer.get("last_stable_offset", -1)))

    async def offsets_or_none(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, PartitionOffsets | None]:
        """Every partition's offsets, asked in parallel; None where the leader could not answer
        (lag unknown, as Kafka's describe prints "-")."""
        wanted = list(dict.fromkeys(tps))

        async def one(tp: TopicPartition) -> PartitionOffsets | None:
            try:
                return await self.offsets(tp)
            except Exception:  # noqa: BLE001 - any failure of one partition only hides its lag
                return None
        return dict(zip(wanted, await asyncio.gather(*(one(tp) for tp in wanted))))

    async def offset_for_timestamp(self, tp: TopicPartition, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after `timestamp` below the high
        watermark, or None."""
        if self._is_local(tp):
            return await self.replicas.offset_for_timestamp(tp[0], tp[1], timestamp)
        answer = await self._ask_leader(tp, timestamp)
        if answer.get("offset") is None:
            return None
        return int(answer["offset"]), int(answer["timestamp"])

    def _is_local(self, tp: TopicPartition) -> bool:
        reg = self.image().partition(*tp)
        return reg is None or reg.leader == self.node_id  # unknown: the replica manager says why

    async def _ask_leader(self, tp: TopicPartition, timestamp: int | None) -> dict[str, Any]:
        image = self.image()
        endpoint, partition = image.leader_endpoint(*tp), image.partition(*tp)
        if endpoint is None or partition is None:
            raise KraftError("LEADER_NOT_AVAILABLE", f"{tp[0]}-{tp[1]} has no leader")
        path_qs = f"/v1/topics/{quote(tp[0], safe='')}/partitions/{tp[1]}/offsets"
        if timestamp is not None:
            path_qs += f"?timestamp={timestamp}"
        return await self.peers.call("GET", endpoint.host, endpoint.port, path_qs, target=partition.leader,
                                     timeout_s=self.timeout_s, what=f"offsets of {tp[0]}-{tp[1]}")
