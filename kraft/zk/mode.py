"""ZooKeeper mode as `kraft/node.py` wires it: the same broker (loader, publishers, HTTP API),
with metadata from ZooKeeper instead of the Raft quorum.

`ZkServices` owns the session, the broker registration, the UpdateMetadata receiver and route,
the admin front (`ZkAdmin`, in place of the `ControllerChannel`) and this node's candidate
`ZkController`. `ZkControllerEndpoint` answers `/v1/controller/...` and `/v1/health` for it:
the controller is whoever holds `/controller`; the Raft-only routes answer NOT_CONTROLLER.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, Callable

from aiohttp import web

from kraft.controller.client import ControllerClient, ControllerDirectory
from kraft.controller.endpoint import ControllerEndpoint
from kraft.controller.handlers import ConfigValidator, ControllerSettings
from kraft.controller.metadata_loader import MetadataLoader
from kraft.zk.broker import ImageWaiter, ZkAdmin, ZkBrokerRegistration, ZkMetadataReceiver, update_metadata_route
from kraft.zk.controller import ZkController
from kraft.zk.session import ZkSession, ZkSettings

log = logging.getLogger("kraft.zk")


def read_cluster_id(meta_properties: Path) -> str | None:
    """The cluster id a data dir already belongs to, if any."""
    try:
        lines = meta_properties.read_text().splitlines()
    except FileNotFoundError:
        return None
    return next((line.split("=", 1)[1] for line in lines if line.startswith("cluster.id=")), None)


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

    def install(self, app: web.Application) -> None:
        app.router.add_routes([update_metadata_route(self.receiver)])

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
        await self.controller.stop()
        await self.registration.stop()
        await self.session.stop()


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
