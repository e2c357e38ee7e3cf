"""ZooKeeper mode as `kraft/node.py` wires it: the same broker (loader, publishers, HTTP API),
with metadata from ZooKeeper instead of the Raft quorum.

`ZkServices` owns the session, the broker registration, the UpdateMetadata receiver and route,
the admin front (`ZkAdmin`, in place of the `ControllerChannel`), this node's candidate
`ZkController` and the controlled shutdown (`controlled.shutdown.enable`, Kafka's default true:
on stop, the broker asks the controller, `POST /v1/zk/controlled-shutdown`, to move its
leaderships before it closes its session). `ZkControllerEndpoint` answers `/v1/controller/...` and `/v1/health` for it:
the controller is whoever holds `/controller`; the Raft-only routes answer NOT_CONTROLLER, and the
operations this mode does not have (preferred leader election, partition reassignment) answer
UNSUPPORTED_VERSION at once.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any, Callable, Iterable

import aiohttp
from aiohttp import web

from kraft.errors import KraftError

from kraft.controller.client import ControllerClient, ControllerDirectory
from kraft.controller.endpoint import ControllerEndpoint
from kraft.controller.handlers import ConfigValidator, ControllerSettings
from kraft.controller.metadata_loader import MetadataLoader
from kraft.zk.broker import ImageWaiter, ZkAdmin, ZkBrokerRegistration, ZkMetadataReceiver, update_metadata_route
from kraft.zk.controller import ZkController
from kraft.zk.session import ZkSession, ZkSettings

log = logging.getLogger("kraft.zk")

CONTROLLED_SHUTDOWN_PATH = "/v1/zk/controlled-shutdown"
# Kafka's controlled.shutdown.max.retries is 3; its 5 s backoff is shortened here: a partition
# whose only in-sync replica is this broker stays led by it however often the broker asks
CONTROLLED_SHUTDOWN_ATTEMPTS = 3
CONTROLLED_SHUTDOWN_BACKOFF_S = 1.0
CONTROLLED_SHUTDOWN_REQUEST_TIMEOUT_S = 35.0  # the whole shutdown is bounded by the session timeout


class ZkServices:
    def __init__(self, config: Any, loader: MetadataLoader, settings: ControllerSettings,
                 config_validator: ConfigValidator | None, cluster_id: Callable[[], str]) -> None:
        self.node_id = config.node_id
        self.session = ZkSession(ZkSettings.from_config(config))
        self.loader = loader
        self.registration = ZkBrokerRegistration(self.session, self.node_id, config["broker.rack"],
                                                 protocol=config.security_protocol, listener=config.listener_name)
        self.receiver = ZkMetadataReceiver(self.node_id, loader, cluster_id)
        self.waiter = ImageWaiter(loader)
        self.admin = ZkAdmin(self.session, loader, self.waiter, settings, config_validator)
        self.controller = ZkController(self.node_id, self.session, self.receiver, cluster_id,
                                       unclean_leader_election_enable=settings.unclean_leader_election_enable)
        self.session.on_state(self.registration.on_session_state)
        self.session.on_state(self.controller.on_session_state)
        self.controlled_shutdown_enable: bool = config["controlled.shutdown.enable"]

    def routes(self) -> list[web.RouteDef]:
        """The inter-node routes ZooKeeper mode adds to the node's HTTP listener."""
        return [update_metadata_route(self.receiver), controlled_shutdown_route(self.controller)]

    async def connect(self, candidate_cluster_id: str) -> str:
        """Connects (ZkUnavailableError past zookeeper.connection.timeout.ms); the cluster id."""
        await self.session.start()
        return await asyncio.to_thread(self.session.cluster_id, candidate_cluster_id)

    async def start(self, endpoint: tuple[str, int]) -> None:
        """Registers the broker, then runs for controller."""
        self.loader.install_publisher(self.waiter)
        self.registration.endpoint = endpoint
        await self.registration.register()
        await self.controller.start()

    async def stop(self) -> None:
        """Stops the controller, then closes the session: that deletes our znodes, so what we
        still lead moves now (the node ran `controlled_shutdown` before, while still serving)."""
        await self.controller.stop()
        await self.registration.stop()
        await self.session.stop()

    async def controlled_shutdown(self) -> bool:
        """Asks the controller to move this broker's leaderships (Kafka's controlled shutdown),
        up to CONTROLLED_SHUTDOWN_ATTEMPTS times within the session timeout (past it a crashed
        broker's leaderships would have moved too); True once it leads no partition of more
        than one replica. Whatever the outcome the node then stops, and closing its session
        moves what is left."""
        epoch = self.registration.broker_epoch
        if epoch < 0 or not self.session.client.connected:
            log.warning("broker %d: no controlled shutdown (not registered in ZooKeeper)", self.node_id)
            return False
        if not [b for b in self.loader.image.live_brokers() if b.broker_id != self.node_id]:
            log.info("broker %d: no controlled shutdown (no other live broker to take over)", self.node_id)
            return False
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.session.settings.session_timeout_ms / 1000
        for attempt in range(1, CONTROLLED_SHUTDOWN_ATTEMPTS + 1):
            try:
                remaining = await asyncio.wait_for(self._ask_controller(epoch), max(0.1, deadline - loop.time()))
                if not remaining:
                    log.info("broker %d: controlled shutdown done, its leaderships moved", self.node_id)
                    return True
                log.warning("broker %d: controlled shutdown attempt %d: still the leader of %s (their only "
                            "in-sync replica)", self.node_id, attempt,
                            ", ".join(f"{t}-{p}" for t, p in remaining[:10]) + (" ..." if len(remaining) > 10 else ""))
            except Exception as e:
                log.warning("broker %d: controlled shutdown attempt %d failed: %s: %s", self.node_id, attempt,
                            type(e).__name__, e)
            if attempt == CONTROLLED_SHUTDOWN_ATTEMPTS or loop.time() + CONTROLLED_SHUTDOWN_BACKOFF_S >= deadline:
                break
            await asyncio.sleep(CONTROLLED_SHUTDOWN_BACKOFF_S)
        log.warning("broker %d: proceeding to shut down without a complete controlled shutdown", self.node_id)
        return False

    async def _ask_controller(self, broker_epoch: int) -> list[tuple[str, int]]:
        controller_id = self.controller.controller_id
        if controller_id is None:
            controller_id = self.loader.image.controller_id
        if controller_id == self.node_id and self.controller.is_active:
            return await self.controller.controlled_shutdown(self.node_id, broker_epoch)
        broker = self.loader.image.cluster.brokers.get(controller_id) if controller_id is not None else None
        endpoint = broker.endpoint() if broker is not None else None
        if endpoint is None:
            raise KraftError("NOT_CONTROLLER", f"no known controller (last seen: {controller_id})")
        security = self.controller.pusher.security  # the node's TLS and credential, as its pushes
        body = json.dumps({"broker_id": self.node_id, "broker_epoch": broker_epoch}).encode()
        async with aiohttp.ClientSession(connector=security.connector(),
                                         timeout=aiohttp.ClientTimeout(total=CONTROLLED_SHUTDOWN_REQUEST_TIMEOUT_S)) as http:
            async with http.post(security.url(endpoint.host, endpoint.port, CONTROLLED_SHUTDOWN_PATH), data=body,
                                 headers={"Content-Type": "application/json",
                                          **security.headers("POST", CONTROLLED_SHUTDOWN_PATH, body,
                                                             target=controller_id)}) as response:
                answer = await response.json(content_type=None)
        if response.status != 200:
            raise KraftError.from_dict(answer if isinstance(answer, dict) else {})
        return [(p["topic"], p["partition"]) for p in answer["remaining_partitions"]]


def controlled_shutdown_route(controller: ZkController) -> web.RouteDef:
    """`POST /v1/zk/controlled-shutdown` {"broker_id", "broker_epoch"} (inter-node only, as all of
    /v1/zk): answered by the active controller with the partitions the broker still leads."""
    async def handle(request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except ValueError as e:
            raise KraftError("INVALID_REQUEST", f"body is not JSON: {e}") from None
        if not isinstance(body, dict) or not all(isinstance(body.get(k), int) and not isinstance(body.get(k), bool)
                                                 for k in ("broker_id", "broker_epoch")):
            raise KraftError("INVALID_REQUEST", "expected {\"broker_id\": int, \"broker_epoch\": int}")
        remaining = await controller.controlled_shutdown(body["broker_id"], body["broker_epoch"])
        return web.json_response({"remaining_partitions": [{"topic": t, "partition": p} for t, p in remaining]})

    return web.post(CONTROLLED_SHUTDOWN_PATH, handle)


class ZkControllerEndpoint(ControllerEndpoint):
    def __init__(self, node_id: int, services: ZkServices, loader: MetadataLoader, directory: ControllerDirectory,
                 client: ControllerClient, cluster_id: Callable[[], str]) -> None:
        super().__init__(node_id, None, None, loader, directory, client, cluster_id)
        self.services = services

    def leader_id(self) -> int | None:
        known = self.services.controller.controller_id
        return known if known is not None else self.loader.image.controller_id

    def is_active(self) -> bool:
        return self.services.controller.is_active

    async def describe_quorum(self) -> dict[str, Any]:
        """There is no quorum: the cluster runs in ZooKeeper mode (said by `metadata_mode`)."""
        image = self.loader.image
        leader = self.leader_id()
        return {
            "metadata_mode": "zookeeper", "zookeeper_connect": self.services.session.settings.connect,
            "cluster_id": self.cluster_id(), "leader_id": -1 if leader is None else leader,
            "leader_epoch": image.controller_epoch, "controller_epoch": image.controller_epoch,
            "high_watermark": image.offset, "max_follower_lag": 0, "max_follower_lag_time_ms": 0,
            "current_voters": [], "current_observers": [b.broker_id for b in image.live_brokers()],
            "replication": [],
        }

    # Not built in this mode: said at once, rather than NOT_CONTROLLER, which a client retries
    # (the ZooKeeper controller is no Raft controller, so no node would ever answer).
    async def elect_leaders(self, partitions: Iterable[tuple[str, int]] | None,
                            request_id: str | None) -> dict[str, Any]:
        raise unsupported_in_zookeeper_mode("preferred leader election (kafka-leader-election)")

    async def alter_partition_reassignments(self, reassignments: list[dict[str, Any]],
                                            request_id: str | None) -> dict[str, Any]:
        raise unsupported_in_zookeeper_mode("partition reassignment (kafka-reassign-partitions)")

    async def list_partition_reassignments(self) -> dict[str, Any]:
        raise unsupported_in_zookeeper_mode("partition reassignment (kafka-reassign-partitions)")


def unsupported_in_zookeeper_mode(operation: str) -> KraftError:
    return KraftError("UNSUPPORTED_VERSION", f"{operation} is not supported in ZooKeeper mode: this cluster "
                                             "keeps its metadata in ZooKeeper (zookeeper.connect); it is a KRaft-mode "
                                             "operation here")
