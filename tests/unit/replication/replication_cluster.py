"""An in-process cluster for the replica manager tests: three ReplicaManagers, each behind its own
HTTP listener app over its services (real HTTP and WebSockets between followers and leaders:
the replication channels), and a fake
controller that validates AlterPartition and fencing with the real handlers and publishes every
new metadata image to the brokers. No processes, no Raft: the unit under test is the replica
manager and its fetchers."""

from __future__ import annotations

import socket
import uuid
from pathlib import Path
from typing import Any

from aiohttp import web

from kraft.api.server import build_app
from kraft.broker.metadata_view import BrokerMetadataView
from kraft.broker.replica_manager import ReplicaManager, ReplicationSettings
from kraft.broker.replication.alter_partition import ControllerAlterPartition
from kraft.broker.replication.fetcher import FetcherSettings
from kraft.controller import handlers
from kraft.log.batch import build_batch, decode_records, iter_batches
from kraft.log.config import LogConfig
from kraft.metadata.delta import apply_records
from kraft.metadata.image import MetadataImage
from kraft.metadata.partition_change import BrokerState
from kraft.metadata.records import (
    ClaimController, Endpoint, MetadataRecord, Partition, RegisterBroker, Topic, UnfenceBroker,
)
from kraft.server.authorization import Authorization
from kraft.server.controller_apis import ControllerApis
from kraft.server.replica_admin import ReplicaAdminApis
from kraft.server.group_apis import GroupApis
from kraft.server.metadata import NodeInfo
from kraft.server.quotas import Quotas
from kraft.server.record_apis import RecordApis
from kraft.server.records import ProduceEntry
from kraft.server.security_apis import SecurityApis
from kraft.server.services import BrokerServices
from kraft.server.topic_apis import TopicApis
from kraft.server.transaction_apis import TransactionApis

EPOCH = 1
TOPIC = "orders"
TOPIC_ID = "t-orders"


def batch_of(*values: bytes) -> bytes:
    return build_batch([(None, v, [], 1_700_000_000_000) for v in values])


def values_of(records: bytes) -> list[bytes]:
    return [r.value for pos, _ in iter_batches(records) for r in decode_records(records, pos)]


class FakeController:
    """The active controller's decisions (real handlers) on an image it publishes to brokers."""

    def __init__(self, cluster: "Cluster") -> None:
        self.cluster = cluster
        self.image = MetadataImage.EMPTY
        self.refused: list[str] = []

    def commit(self, records: list[MetadataRecord]) -> None:
        rid = uuid.uuid4().hex
        stamped = [r.stamped(EPOCH, rid) for r in records]
        delta, self.image = apply_records(
            self.image, ((self.image.offset + 1 + i, r) for i, r in enumerate(stamped)))
        for node in self.cluster.live():
            node.on_metadata_update(delta, self.image)

    async def alter_partition(self, broker_id: int, broker_epoch: int, topic: str, partition: int,
                              leader_epoch: int, partition_epoch: int, new_isr: list[BrokerState], *,
                              request_id: str | None = None) -> dict[str, Any]:
        try:
            result = handlers.alter_partition(self.image, broker_id, broker_epoch, topic, partition,
                                              leader_epoch, partition_epoch, new_isr)
        except Exception as e:
            self.refused.append(getattr(e, "error_code", type(e).__name__))
            raise
        self.commit(list(result.records))
        return result.response

    def fence(self, broker_id: int) -> None:
        self.commit(list(handlers.fence_broker(self.image, handlers.ControllerSettings(), broker_id).records))

    def unfence(self, broker_id: int) -> None:
        broker = self.image.cluster.broker(broker_id)
        self.commit([UnfenceBroker(broker_id=broker_id, broker_epoch=broker.broker_epoch)])

    def partition(self) -> Any:
        return self.image.partition(TOPIC, 0)


class Cluster:
    def __init__(self, tmp: Path, min_isr: int = 2, lag_ms: int = 400) -> None:
        self.tmp = tmp
        self.config = LogConfig(min_insync_replicas=min_isr)
        self.settings = ReplicationSettings(
            replica_lag_time_max_ms=lag_ms, alter_partition_retry_ms=1000,
            fetcher=FetcherSettings(max_wait_ms=200, backoff_ms=30, request_timeout_ms=2000),
        )
        self.controller = FakeController(self)
        self.ports = {b: 0 for b in (1, 2, 3)}
        self.sockets = {b: _bound_socket(0) for b in (1, 2, 3)}
        self.nodes: dict[int, ReplicaManager] = {}
        self.runners: dict[int, web.AppRunner] = {}

    def live(self) -> list[ReplicaManager]:
        return list(self.nodes.values())

    async def start(self, replicas: tuple[int, ...] = (1, 2, 3), running: tuple[int, ...] = (1, 2, 3)) -> None:
        """Registers the brokers and the topic; starts the brokers in `running` (a test plays
        the others' part by calling the leader's `replica_fetch` itself)."""
        records: list[MetadataRecord] = [ClaimController(node_id=1, controller_epoch=EPOCH)]
        for b, sock in self.sockets.items():
            port = self.ports[b] = sock.getsockname()[1]
            records.append(RegisterBroker(broker_id=b, incarnation_id=f"inc-{b}",
                                          endpoints=(Endpoint("HTTP", "127.0.0.1", port),),
                                          broker_epoch=100 + b))
            records.append(UnfenceBroker(broker_id=b, broker_epoch=100 + b))
        records.append(Topic(name=TOPIC, topic_id=TOPIC_ID))
        records.append(Partition(topic_id=TOPIC_ID, partition=0, replicas=replicas, isr=replicas,
                                 leader=replicas[0]))
        self.controller.commit(records)
        for b in running:
            await self.start_node(b)

    async def start_node(self, b: int) -> ReplicaManager:
        node = ReplicaManager(
            b, self.tmp / f"data-{b}", self.config, 3_600_000, 50 * 1024 * 1024,
            replication=self.settings,
            alter_partition=ControllerAlterPartition(self.controller, b, lambda b=b: 100 + b),
            broker_epoch=lambda b=b: 100 + b,
        )
        (self.tmp / f"data-{b}").mkdir(parents=True, exist_ok=True)
        runner = web.AppRunner(build_app(replica_services(b, node)), access_log=None)
        await runner.setup()
        if self.sockets[b].fileno() < 0:  # restarted: same port as registered
            self.sockets[b] = _bound_socket(self.ports[b])
        await web.SockSite(runner, self.sockets[b]).start()
        node.start()
        node.on_metadata_update(None, self.controller.image)
        self.nodes[b], self.runners[b] = node, runner
        replica = node.replica(TOPIC, 0)
        if replica is not None:
            await replica.wait_ready()
        return node

    async def stop_node(self, b: int) -> None:
        """A clean stop (logs closed); the port is re-bound on the next start."""
        node, runner = self.nodes.pop(b), self.runners.pop(b)
        await runner.cleanup()
        await node.close()
        self.sockets[b].close()

    async def close(self) -> None:
        for b in list(self.nodes):
            await self.stop_node(b)

    async def produce(self, b: int, *values: bytes, acks: int = -1, timeout_ms: int = 5000):
        [result] = await self.nodes[b].produce(
            [ProduceEntry(TOPIC, 0, batch_of(*values))], acks, timeout_ms)
        return result

    def log(self, b: int) -> Any:
        return self.nodes[b].replica(TOPIC, 0).log

    def raw(self, b: int, end: int) -> bytes:
        """The replica's batches below `end`, as stored."""
        plog = self.log(b)
        out, offset = b"", plog.log_start_offset
        while offset < end:
            info = plog.read(offset, 1 << 20, max_offset=end)
            if not info.records:
                break
            out += info.records
            offset = info.next_offset
        return out


def replica_services(node_id: int, replicas: ReplicaManager) -> BrokerServices:
    """The services of a broker that is only its replica manager: what its followers fetch from
    (the listener authenticates no nodes here, and nothing is authorized or throttled)."""
    info = NodeInfo(node_id, ("broker",), 100 << 20, auto_create_topics=False, fetch_max_bytes=50 << 20)
    view = BrokerMetadataView(lambda: "", {})
    authorization, quotas = Authorization(check_nodes=False), Quotas()
    topics = TopicApis(info, view, None, authorization)  # type: ignore[arg-type]  # no topic changes here
    return BrokerServices(
        node=info, metadata=view, authorization=authorization, quotas=quotas,
        records=RecordApis(replicas, topics, authorization, quotas), topics=topics,
        groups=GroupApis(None, authorization), security=SecurityApis(None, None, authorization),
        controller=ControllerApis(None, authorization), replicas=ReplicaAdminApis(replicas, [], authorization),
        transactions=TransactionApis(None, None, None, authorization))


def _bound_socket(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    return sock
