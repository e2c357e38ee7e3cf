"""One kraft node: its roles wired together and its lifecycle.

Controller role: the metadata quorum (`LocalQuorum` for a one-voter cluster) with the
`ControllerService`. Broker role: the `ReplicaManager` and the HTTP routes' metadata view, both
metadata publishers of the `MetadataLoader`, and the broker's registration and heartbeats. The
HTTP application owns the lifecycle through its cleanup_ctx: services start before the listener
accepts requests and stop after it stopped accepting them (logs flushed, checkpoints written).
`<data>/meta.properties` records the cluster id and node id, like Kafka's.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import resource
import socket
import uuid
from pathlib import Path
from typing import AsyncIterator

from aiohttp import web

from api.routes.services import NodeInfo
from api.server import build_app
from kraft.broker.admin import LocalAdmin
from kraft.broker.groups.coordinator import CoordinatorSettings, GroupCoordinator
from kraft.broker.groups.membership import GroupConfig
from kraft.broker.lifecycle import BrokerLifecycle
from kraft.broker.metadata_view import BrokerMetadataView
from kraft.broker.replica_manager import ReplicaManager
from kraft.config import ConfigError, KraftConfig, validate_topic_configs
from kraft.controller.handlers import ControllerSettings
from kraft.controller.metadata_loader import MetadataLoader
from kraft.controller.quorum import LocalQuorum
from kraft.controller.service import ControllerService
from log.config import TOPIC_CONFIG_KEYS

log = logging.getLogger("kraft.node")

META_PROPERTIES = "meta.properties"


def new_cluster_id() -> str:
    """Kafka's form: a random UUID as 22 characters of URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")


def ensure_meta_properties(data_dir: Path, node_id: int, configured_cluster_id: str | None) -> str:
    """Reads `<data>/meta.properties`, or writes it on first start; returns the cluster id.

    A data dir of another cluster or node is refused (INCONSISTENT_CLUSTER_ID), as Kafka does."""
    path = data_dir / META_PROPERTIES
    if path.exists():
        props = dict(
            line.split("=", 1) for line in path.read_text().splitlines()
            if "=" in line and not line.startswith("#")
        )
        cluster_id = props.get("cluster.id", "")
        if configured_cluster_id and cluster_id != configured_cluster_id:
            raise ConfigError("cluster.id", f"{path} belongs to cluster {cluster_id!r}, "
                                            f"not {configured_cluster_id!r}")
        if props.get("node.id") != str(node_id):
            raise ConfigError("node.id", f"{path} belongs to node {props.get('node.id')}, "
                                         f"not {node_id}")
        return cluster_id
    cluster_id = configured_cluster_id or new_cluster_id()
    data_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(f"#\nversion=1\ncluster.id={cluster_id}\nnode.id={node_id}\n"
                   f"directory.id={new_cluster_id()}\n")
    tmp.replace(path)
    return cluster_id


def advertised_endpoint(config: KraftConfig, bound_port: int) -> tuple[str, int]:
    """advertised.listeners, else the listener; a wildcard host advertises the host name and
    port 0 the port actually bound."""
    host, port = config.advertised_listener
    if host in ("0.0.0.0", "::", ""):
        host = socket.gethostname()
    return host, port or bound_port


FILES_PER_PARTITION = 4  # .log, .index, .timeindex of the active segment, and headroom
RESERVED_FILES = 512  # sockets, the metadata log, libraries


def partition_budget() -> int:
    """How many partitions this process can keep open: raises the soft open-files limit to the
    hard one (as `ulimit -n` would) and divides it among partitions."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = 1_048_576 if hard == resource.RLIM_INFINITY else hard
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return max(100, (soft - RESERVED_FILES) // FILES_PER_PARTITION)


class Node:
    def __init__(self, config: KraftConfig) -> None:
        if not (config.is_broker and config.is_controller) or len(config.voters) > 1:
            raise ConfigError(
                "process.roles",
                "only the single combined node (controller,broker with at most one voter) can run "
                "until the Raft quorum is wired in",
            )
        self.config = config
        self.node_id = config.node_id
        self.data_dir = config.data_dir
        self.loader = MetadataLoader()
        self.quorum = LocalQuorum(self.data_dir, self.node_id)
        self.controller = ControllerService(
            self.node_id, self.quorum, self.loader,
            ControllerSettings(
                num_partitions=config["num.partitions"],
                default_replication_factor=config["default.replication.factor"],
                unclean_leader_election_enable=config["unclean.leader.election.enable"],
                broker_session_timeout_ms=config["broker.session.timeout.ms"],
                topic_config_keys=TOPIC_CONFIG_KEYS,
            ),
            config_validator=validate_topic_configs,
        )
        self.view = BrokerMetadataView("", config.topic_defaults())
        self.replica_manager = ReplicaManager(
            self.node_id, self.data_dir, config.log_config(),
            config["log.retention.check.interval.ms"], config["fetch.max.bytes"],
        )
        self.lifecycle = BrokerLifecycle(
            self.controller, self.node_id, config.advertised_listener, config["broker.rack"],
            config["broker.heartbeat.interval.ms"], lambda: self.loader.image.offset,
        )
        info = NodeInfo(
            node_id=self.node_id, roles=config.roles,
            max_request_bytes=config["socket.request.max.bytes"],
            auto_create_topics=config["auto.create.topics.enable"],
        )
        admin = LocalAdmin(self.controller, self.view, config["delete.topic.enable"],
                           partition_budget())
        self.groups = GroupCoordinator(
            self.node_id, self.replica_manager, admin,
            CoordinatorSettings(
                num_partitions=config["offsets.topic.num.partitions"],
                replication_factor=config["offsets.topic.replication.factor"],
                group=GroupConfig(
                    session_timeout_ms=config["group.consumer.session.timeout.ms"],
                    heartbeat_interval_ms=config["group.consumer.heartbeat.interval.ms"],
                ),
            ),
        )
        self.app = build_app(info, self.view, admin, self.replica_manager, cleanup=self._services,
                             group_service=self.groups)
        self._runner: web.AppRunner | None = None
        self.port = config.listener[1]

    # -- services (the app's cleanup_ctx) -----------------------------------------------------

    async def _services(self, app: web.Application) -> AsyncIterator[None]:
        await self.start_services()
        try:
            yield
        finally:
            await self.stop_services()

    async def start_services(self) -> None:
        cluster_id = await asyncio.to_thread(
            ensure_meta_properties, self.data_dir, self.node_id, self.config["cluster.id"]
        )
        self.view.cluster_id = cluster_id
        self.loader.install_publisher(self.view)
        self.loader.install_publisher(self.replica_manager)
        self.loader.install_publisher(self.groups)  # after the replica manager: it reads replicas
        await self.controller.start()
        self.replica_manager.start()
        self.groups.start()
        await self.lifecycle.start()
        log.info("node %d started: cluster %s, roles %s, data in %s", self.node_id, cluster_id,
                 ",".join(self.config.roles), self.data_dir)

    async def stop_services(self) -> None:
        await self.lifecycle.stop()
        await self.groups.close()
        await self.replica_manager.close()
        await self.controller.close()

    # -- HTTP ---------------------------------------------------------------------------------

    async def start(self) -> None:
        """Binds the client listener (so port 0 resolves before the broker registers its
        endpoint), starts the services, then accepts requests."""
        host, port = self.config.listener
        sock = socket.create_server((host, port), backlog=1024)
        self.port = sock.getsockname()[1]
        self.lifecycle.endpoint = advertised_endpoint(self.config, self.port)
        self._runner = web.AppRunner(self.app, access_log=None, handle_signals=False)
        try:
            await self._runner.setup()
        except BaseException:
            sock.close()
            raise
        await web.SockSite(self._runner, sock).start()
        log.info("kraft node %d serving on http://%s:%d", self.node_id, host, self.port)

    async def stop(self) -> None:
        """Stops accepting, lets in-flight requests finish, then stops the services."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
