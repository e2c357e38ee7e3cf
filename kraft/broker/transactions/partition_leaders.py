"""What the transaction coordinator asks of the leaders of a transaction's partitions (Kafka's
`TransactionMarkerChannelManager` and KIP-890's AddPartitionsToTxn verification): the KIP-890
verification when a partition joins a transaction, and its COMMIT/ABORT marker at the end.

`LocalTxnPartitions` does both for partitions this broker leads: a data partition through the
replica manager, a `__consumer_offsets` partition through the group coordinator (which writes
and replays the marker, so the transaction's offsets become the group's). The node-only routes
`POST /v1/partitions/txn-markers` and `/txn-verify` call it for the other brokers.

`TxnPartitionLeaders` sends each partition's request to its leader, local or remote (msgpack
over the node's inter-node HTTP, `PeerClient`, signed with the node credential), each bounded by
`timeout_s`.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

from kraft.broker.groups.hashing import OFFSETS_TOPIC
from kraft.errors import KraftError
from kraft.metadata.image import MetadataImage
from kraft.security.peers import PeerClient

DEFAULT_TIMEOUT_S = 30.0
MARKERS_PATH = "/v1/partitions/txn-markers"
VERIFY_PATH = "/v1/partitions/txn-verify"

TopicPartition = tuple[str, int]


class _Replicas(Protocol):
    async def write_txn_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                               coordinator_epoch: int, commit: bool, timeout_ms: int) -> int: ...

    async def verify_transaction(self, topic: str, partition: int, producer_id: int,
                                 producer_epoch: int) -> None: ...


class _Groups(Protocol):
    async def write_txn_marker(self, partition: int, producer_id: int, producer_epoch: int,
                               coordinator_epoch: int, commit: bool) -> None: ...


class LocalTxnPartitions:
    def __init__(self, replicas: _Replicas, groups: _Groups | None) -> None:
        self.replicas = replicas
        self.groups = groups

    async def write_txn_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                               coordinator_epoch: int, commit: bool, timeout_ms: int) -> int | None:
        """The marker's offset (None for a `__consumer_offsets` partition: its shard wrote it)."""
        if topic == OFFSETS_TOPIC and self.groups is not None:
            await self.groups.write_txn_marker(partition, producer_id, producer_epoch, coordinator_epoch, commit)
            return None
        return await self.replicas.write_txn_marker(topic, partition, producer_id, producer_epoch,
                                                    coordinator_epoch, commit, timeout_ms)

    async def verify_transaction(self, topic: str, partition: int, producer_id: int, producer_epoch: int) -> None:
        await self.replicas.verify_transaction(topic, partition, producer_id, producer_epoch)


class TxnPartitionLeaders:
    def __init__(self, node_id: int, local: LocalTxnPartitions, image: Callable[[], MetadataImage],
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.node_id = node_id
        self.local = local
        self.image = image
        self.timeout_s = timeout_s
        self.peers = PeerClient()  # the node installs its security (TLS, its credential)

    async def close(self) -> None:
        await self.peers.close()

    async def write_txn_marker(self, tp: TopicPartition, producer_id: int, producer_epoch: int,
                               coordinator_epoch: int, commit: bool) -> None:
        """The marker at `tp`'s leader; raises KraftError (retriable ones: try again)."""
        leader = self._leader(tp)
        if leader == self.node_id:
            await self.local.write_txn_marker(tp[0], tp[1], producer_id, producer_epoch, coordinator_epoch,
                                              commit, int(self.timeout_s * 1000))
            return
        body = {"timeout_ms": int(self.timeout_s * 1000), "markers": [{
            "producer_id": producer_id, "producer_epoch": producer_epoch, "coordinator_epoch": coordinator_epoch,
            "transaction_result": "COMMIT" if commit else "ABORT",
            "partitions": [{"topic": tp[0], "partition": tp[1]}]}]}
        answer = await self._post(leader, MARKERS_PATH, body)
        _raise_partition_error(answer["markers"][0]["partitions"][0])

    async def verify_transaction(self, tp: TopicPartition, producer_id: int, producer_epoch: int) -> None:
        leader = self._leader(tp)
        if leader == self.node_id:
            await self.local.verify_transaction(tp[0], tp[1], producer_id, producer_epoch)
            return
        body = {"producer_id": producer_id, "producer_epoch": producer_epoch,
                "partitions": [{"topic": tp[0], "partition": tp[1]}]}
        answer = await self._post(leader, VERIFY_PATH, body)
        _raise_partition_error(answer["partitions"][0])

    def _leader(self, tp: TopicPartition) -> int:
        reg = self.image().partition(*tp)
        if reg is None:
            raise KraftError("UNKNOWN_TOPIC_OR_PARTITION", f"{tp[0]}-{tp[1]} does not exist")
        if reg.leader < 0:
            raise KraftError("LEADER_NOT_AVAILABLE", f"{tp[0]}-{tp[1]} has no leader")
        return reg.leader

    async def _post(self, node_id: int, path: str, body: dict[str, Any]) -> dict[str, Any]:
        broker = self.image().cluster.broker(node_id)
        endpoint = None if broker is None else broker.endpoint(None)
        if endpoint is None:
            raise KraftError("LEADER_NOT_AVAILABLE", f"node {node_id} has no endpoint")
        return await self.peers.call("POST", endpoint.host, endpoint.port, path, target=node_id, body=body,
                                     timeout_s=self.timeout_s, what=f"{path} of node {node_id}")


def _raise_partition_error(result: dict[str, Any]) -> None:
    if result.get("error_code"):
        raise KraftError(str(result["error_code"]), str(result.get("message") or ""))
