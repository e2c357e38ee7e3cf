"""One kraft node: its roles wired together and its lifecycle.

Controller role: the metadata quorum (`RaftQuorum` on pysyncobj when `controller.quorum.voters`
is configured, `LocalQuorum` for the embedded single node without one) with the
`ControllerService`, and the controller API (`ControllerEndpoint`, `/v1/controller/...`). Broker
role: the `ReplicaManager`, the group coordinator and the HTTP routes' metadata view, all metadata
publishers of the `MetadataLoader`, and the broker's registration and heartbeats
(`BrokerLifecycle`). A controller's loader follows its quorum; a broker-only node's loader follows
the active controller over HTTP (`MetadataFollower`). Every node reaches the active controller
through its `ControllerChannel` and so accepts every admin request (design §7).

Over those parts the node builds its protocol-neutral services (`kraft/server`: one
`BrokerServices`) and serves them through the listeners it is given (`kraft/server/listener.py`;
the process entry point picks them: the HTTP API's `HttpListener`). The node owns the lifecycle:
listeners bind first (the port is known before the broker registers it), the services start, then
the listeners accept; at shutdown, in Kafka's order, the controlled shutdown runs while the node
still serves, then the node stops shrinking ISRs, the listeners stop accepting and finish what
they serve, and the services stop last (logs flushed, checkpoints written).
`<data>/meta.properties` records the cluster id and node id, like Kafka's; the cluster id comes
from the metadata log (or ZooKeeper) and a node of another cluster refuses to join
(`cluster_identity.py`): the node stops itself then (`fail`), exiting 1.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import socket
import time
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from kraft.errors import KraftError
from kraft.broker.admin import LocalAdmin
from kraft.broker.groups.coordinator import CoordinatorSettings, GroupCoordinator
from kraft.broker.groups.hashing import OFFSETS_TOPIC
from kraft.broker.groups.classic import ClassicConfig
from kraft.broker.groups.membership import GroupConfig
from kraft.broker.lifecycle import BrokerLifecycle, LifecycleChannel
from kraft.broker.log_dirs import LogDirs
from kraft.broker.metadata_follower import BrokerSnapshotStore, MetadataFollower
from kraft.broker.stage_trace import StageTrace
from kraft.broker.metadata_publisher import BrokerMetadataPublisher
from kraft.broker.metadata_view import BrokerMetadataView
from kraft.broker.producer_ids import ProducerIdManager
from kraft.broker.transactions.coordinator import TransactionCoordinator, TransactionSettings
from kraft.broker.transactions.partition_leaders import LocalTxnPartitions, TxnPartitionLeaders
from kraft.broker.transactions.records import TRANSACTION_STATE_TOPIC
from kraft.broker.replica_manager import ReplicaManager, ReplicationSettings
from kraft.broker.replication.alter_partition import ControllerAlterPartition
from kraft.config import ConfigError, KraftConfig, parse_host_port, validate_topic_configs
from kraft.controller.channel import ControllerChannel
from kraft.controller.client import ControllerClient, ControllerDirectory
from kraft.controller.endpoint import ControllerEndpoint
from kraft.controller.handlers import ControllerSettings
from kraft.controller.heap import HeapFreezer
from kraft.controller.metadata_loader import MetadataLoader
from kraft.controller.quorum import LocalQuorum, Quorum
from kraft.controller.raft_quorum import (
    METADATA_DIR, RaftQuorum, RaftQuorumConfig, read_secret_file, resolve_secret,
)
from kraft.cluster_identity import ClusterIdentity, ClusterIdGate, new_cluster_id
from kraft.controller.service import ControllerService
from kraft.dir_lock import DirectoryInUseError, DirectoryLock, lock_directories, release_all
from kraft.metrics import NodeMetrics
from kraft.readiness import MetadataProgress, ReadinessCheck
from kraft.security.authn import ClientAuthenticator
from kraft.security.node_auth import NodeCredential
from kraft.broker.acl_admin import AclAdmin
from kraft.broker.quotas import ClientQuotaManager, QuotaMetrics
from kraft.security.authorizer import StandardAuthorizer, authorizer_settings
from kraft.security.peers import PeerSecurity
from kraft.security.service import NodeSecurity
from kraft.security.principal import parse_rules
from kraft.security.scram import parse_scram_config
from kraft.security.scram import scram_upsertion
from kraft.security.tls import peer_context, server_context
from kraft.security.users import ScramUsers
from kraft.server.authorization import Authorization
from kraft.server.broker_configs import BrokerConfigs
from kraft.server.controller_apis import ControllerApis
from kraft.server.replica_admin import ReplicaAdminApis
from kraft.server.group_apis import GroupApis
from kraft.server.listener import Listener
from kraft.server.metadata import NodeInfo
from kraft.server.quotas import Quotas
from kraft.server.record_apis import RecordApis
from kraft.server.security_apis import SecurityApis
from kraft.server.services import BrokerServices
from kraft.server.topic_apis import TopicApis
from kraft.server.transaction_apis import TransactionApis
from kraft.log.config import TOPIC_CONFIG_KEYS
from kraft.log.file_cache import NO_LIMIT_FILES, OPEN_FILES, default_open_files_max

log = logging.getLogger("kraft.node")

@dataclass(frozen=True)
class ScramBootstrap:
    """One `--add-scram 'SCRAM-SHA-256=[name=admin,password=...]'`."""

    mechanism: str
    user: str
    password: str
    iterations: int = 4096

    def __repr__(self) -> str:  # never the password
        return f"ScramBootstrap({self.mechanism}, {self.user})"

    @classmethod
    def parse(cls, text: str) -> "ScramBootstrap":
        mechanism, sep, body = text.partition("=")
        mechanism = mechanism.strip().upper()
        if not sep or mechanism not in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            raise ConfigError("--add-scram", "expected SCRAM-SHA-256=[name=USER,password=PASSWORD] (or SCRAM-SHA-512)")
        try:
            fields = parse_scram_config(body)
            return cls(mechanism, fields["name"], fields["password"], int(fields.get("iterations", 4096)))
        except (ValueError, KeyError):
            raise ConfigError("--add-scram", "expected SCRAM-SHA-256=[name=USER,password=PASSWORD"
                                             "[,iterations=N]]") from None


def read_quorum_secret(config: KraftConfig) -> str:
    """controller.quorum.secret, else the first line of controller.quorum.secret.file, else (a
    lone voter) one generated and kept in the data dir."""
    path = config["controller.quorum.secret.file"]
    if not config["controller.quorum.secret"] and path:
        return read_secret_file(path)
    return resolve_secret(config["controller.quorum.secret"], config.data_dir, len(config.voters))


def advertised_endpoint(config: KraftConfig, bound_port: int) -> tuple[str, int]:
    """advertised.listeners, else the listener; a wildcard host advertises the host name and
    port 0 the port actually bound."""
    host, port = config.advertised_listener
    if host in ("0.0.0.0", "::", ""):
        host = socket.gethostname()
    return host, port or bound_port


def raise_open_files_limit() -> int:
    """Raises the soft open-files limit (RLIMIT_NOFILE) to the hard one, as `ulimit -n` would;
    returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = NO_LIMIT_FILES if hard == resource.RLIM_INFINITY else hard
    if soft == resource.RLIM_INFINITY or soft >= target:
        log.info("open-files limit (RLIMIT_NOFILE) is %d", target)
        return target
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError) as e:
        log.warning("open-files limit (RLIMIT_NOFILE) stays %d, raising it to %d failed: %s",
                    soft, target, e)
        return soft
    log.info("open-files limit (RLIMIT_NOFILE) raised from %d to %d", soft, target)
    return target


LOCAL_REGISTRATION_TIMEOUT_S = 30.0


def node_directories(config: KraftConfig) -> list[Path]:
    """Every directory the node writes: the log directories and, but in ZooKeeper mode, the
    metadata log's (the local log or the Raft journal; a broker's metadata snapshot)."""
    if config.zookeeper_mode:
        return config.log_dirs
    return [*config.log_dirs, config.data_dir / METADATA_DIR]


def lock_node_directories(config: KraftConfig) -> list[DirectoryLock]:
    """Locks `node_directories`. A log directory after the first that cannot be locked for an I/O
    reason (a failed disk) is left out: it starts offline (`LogDirs.load`), the others serve."""
    first, *others = node_directories(config)
    extra = set(config.log_dirs[1:])
    locks = lock_directories([first, *(d for d in others if d not in extra)])
    for directory in others:
        if directory not in extra:
            continue
        try:
            locks.append(DirectoryLock.acquire(directory))
        except DirectoryInUseError:
            release_all(locks)
            raise
        except OSError as e:
            log.error("cannot lock log directory %s: %s; it starts offline", directory, e)
    return locks


class Node:
    def __init__(self, config: KraftConfig, add_scram: Sequence[ScramBootstrap] = (),
                 on_fatal: Callable[[], None] = lambda: None, listeners: Sequence[Listener] = ()) -> None:
        """`on_fatal()`: the node cannot go on (`fatal_error` says why) and must be stopped.
        `listeners`: how clients reach the node; the first one's port is the broker's endpoint."""
        # before anything is written (the secret file, the metadata log): a second process on
        # these directories would be a second node of this id (DirectoryInUseError)
        self._dir_locks = lock_node_directories(config)
        try:
            self._wire(config, add_scram, on_fatal, listeners)
        except BaseException:
            release_all(self._dir_locks)
            raise

    def _wire(self, config: KraftConfig, add_scram: Sequence[ScramBootstrap], on_fatal: Callable[[], None],
              listeners: Sequence[Listener]) -> None:
        self.config = config
        self.add_scram = list(add_scram)
        self._add_scram_task: asyncio.Task[None] | None = None
        self._log_dir_reports: set[asyncio.Task[None]] = set()  # ZooKeeper mode's, while being written
        self.node_id = config.node_id
        self.data_dir = config.data_dir
        self.fatal_error: str | None = None
        self._on_fatal = on_fatal
        self.identity = ClusterIdentity(self.data_dir, self.node_id, config["cluster.id"], on_inconsistent=self.fail)
        self.endpoint = advertised_endpoint(config, config.listener[1])
        # a broker-only node serves no metadata log: it keeps no tail of records
        self.loader = MetadataLoader(max_retained_records=100_000 if config.is_controller else 0)
        HeapFreezer().install()  # full collections walk only what the heap grew by (process-wide)
        self.directory = ControllerDirectory(
            bootstrap=[parse_host_port(a) for a in config["controller.quorum.bootstrap.servers"]])
        # every node, in every mode, signs its inter-node requests with the cluster's secret
        secret = read_quorum_secret(config)
        self.peers = PeerSecurity(NodeCredential(self.node_id, secret), peer_context(config))
        self.tls = server_context(config)
        self.client = ControllerClient(self.directory, security=self.peers)
        settings = ControllerSettings(
            num_partitions=config["num.partitions"],
            default_replication_factor=config["default.replication.factor"],
            unclean_leader_election_enable=config["unclean.leader.election.enable"],
            broker_session_timeout_ms=config["broker.session.timeout.ms"],
            topic_config_keys=TOPIC_CONFIG_KEYS,
        )
        self.zk: Any = None
        if config.zookeeper_mode:
            # metadata from ZooKeeper (kraft/zk): no quorum, follower or broker lifecycle; kazoo
            # (the zk extra) is imported only in this mode
            from kraft.zk.mode import ZkServices
            self.zk = ZkServices(config, self.loader, settings, validate_topic_configs, lambda: self.cluster_id)
        self.quorum: Quorum | None = None
        self.controller: ControllerService | None = None
        if config.is_controller and self.zk is None:
            self.quorum = (RaftQuorum(RaftQuorumConfig.from_kraft_config(config, secret), identity=self.identity)
                           if config.voters else
                           LocalQuorum(self.data_dir, self.node_id, log_recovery=config["metadata.log.recovery"],
                                       cluster_id=self.identity.proposal))
            self.controller = ControllerService(self.node_id, self.quorum, self.loader, settings,
                                                config_validator=validate_topic_configs)
        self.channel = ControllerChannel(self.controller, self.client, self.loader, settings)
        # what the admin front, ISR changes and producer ids go through
        front: Any = self.channel if self.zk is None else self.zk.admin
        if self.zk is None:
            self.controller_api = ControllerEndpoint(self.node_id, self.controller, self.quorum, self.loader,
                                                     self.directory, self.client, lambda: self.cluster_id)
        else:
            from kraft.zk.mode import ZkControllerEndpoint
            self.controller_api = ZkControllerEndpoint(self.node_id, self.zk, self.loader, self.directory,
                                                       self.client, lambda: self.cluster_id)
        self.directory.refresh = self.controller_api.refresh_directory
        self.follower = None if config.is_controller or self.zk is not None else MetadataFollower(
            self.node_id, self.loader, self.client, BrokerSnapshotStore(self.data_dir / METADATA_DIR),
            check_cluster_id=self.identity.check)
        self.lifecycle = None if not config.is_broker or self.zk is not None else self._broker_lifecycle(settings)
        self.view = BrokerMetadataView(lambda: self.cluster_id, config.topic_defaults())
        broker_epoch = (lambda: self.lifecycle.broker_epoch) if self.lifecycle is not None else (lambda: -1)
        if self.zk is not None:
            broker_epoch = lambda: self.zk.registration.broker_epoch  # noqa: E731
        self.log_dirs = LogDirs(config.log_dirs, self.node_id)
        self.log_dirs.load()
        self.replica_manager = ReplicaManager(
            self.node_id, self.data_dir, config.log_config(),
            config["log.retention.check.interval.ms"], config["fetch.max.bytes"],
            replication=ReplicationSettings.from_config(config),
            alter_partition=ControllerAlterPartition(front, self.node_id, broker_epoch),
            broker_epoch=broker_epoch,
            recovery_point_checkpoint_interval_ms=config["log.flush.offset.checkpoint.interval.ms"],
            metadata_cache=self.view,
            log_dirs=self.log_dirs,
        )
        if (lifecycle := self.lifecycle) is not None:
            lifecycle.offline_report = lambda: self.replica_manager.offline_report
            self.loader.on_image(lambda image: lifecycle.on_metadata_offset(image.offset))
            self.replica_manager.on_log_dir_failure = lifecycle.heartbeat_now
        if self.zk is not None:
            self.replica_manager.on_log_dir_failure = self._report_log_dir_failure_to_zk
        info = NodeInfo(
            node_id=self.node_id, roles=config.roles,
            max_request_bytes=config["socket.request.max.bytes"],
            auto_create_topics=config["auto.create.topics.enable"],
            fetch_max_bytes=config["fetch.max.bytes"],
        )
        open_files_limit = raise_open_files_limit()
        OPEN_FILES.capacity = config["log.open.files.max"] or default_open_files_max(open_files_limit)
        # every segment file, active or not, borrows a descriptor from this cache (a partition
        # never written has no file), so the partition count is not bounded by the limit
        log.info("open files: %d for segment files (log.open.files.max)", OPEN_FILES.capacity)
        admin = LocalAdmin(front, self.view, config["delete.topic.enable"])
        self.groups = GroupCoordinator(
            self.node_id, self.replica_manager, admin,
            CoordinatorSettings(
                num_partitions=config["offsets.topic.num.partitions"],
                replication_factor=config["offsets.topic.replication.factor"],
                group=GroupConfig(
                    session_timeout_ms=config["group.consumer.session.timeout.ms"],
                    heartbeat_interval_ms=config["group.consumer.heartbeat.interval.ms"],
                    classic=ClassicConfig(
                        initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
                        min_session_timeout_ms=config["group.min.session.timeout.ms"],
                        max_session_timeout_ms=config["group.max.session.timeout.ms"],
                        max_size=config["group.max.size"],
                    ),
                ),
                offsets_retention_ms=config["offsets.retention.minutes"] * 60_000,
                offsets_retention_check_interval_ms=config["offsets.retention.check.interval.ms"],
            ),
            metadata_cache=self.view,
        )
        producer_ids = ProducerIdManager(front, self.node_id, broker_epoch)
        self.transactions = TransactionCoordinator(
            self.node_id, self.replica_manager, admin, producer_ids,
            TxnPartitionLeaders(self.node_id, LocalTxnPartitions(self.replica_manager, self.groups),
                                lambda: self.view.image),
            TransactionSettings(
                num_partitions=config["transaction.state.log.num.partitions"],
                replication_factor=config["transaction.state.log.replication.factor"],
                min_isr=config["transaction.state.log.min.isr"],
                max_timeout_ms=config["transaction.max.timeout.ms"],
                id_expiration_ms=config["transactional.id.expiration.ms"],
                id_expiration_check_interval_ms=config["transaction.remove.expired.transaction.cleanup.interval.ms"],
            ),
            metadata_cache=self.view,
        )
        self.metrics = NodeMetrics(self.node_id, topic_labels=config["metrics.topic.labels.enable"])
        self.metrics.watch_broker(self.replica_manager, config["transaction.max.timeout.ms"])
        self.publisher = BrokerMetadataPublisher(self.node_id, self.view, self.replica_manager,
                                                 {OFFSETS_TOPIC: self.groups.runtime,
                                                  TRANSACTION_STATE_TOPIC: self.transactions.runtime},
                                                 self.metrics, leader_watchers=(self.transactions,))
        self._loop_probe: asyncio.Task[None] | None = None
        if self.controller is not None:
            self.metrics.watch_controller(self.controller, self.quorum)
        self.metrics.watch_groups(self.groups)
        self.metrics.watch_transactions(self.transactions)
        if self.lifecycle is not None:
            self.lifecycle.security_protocol = config.security_protocol
        self.replica_manager.fetchers.security = self.peers
        self.groups.leader_offsets.peers.security = self.peers
        self.transactions.leaders.peers.security = self.peers
        if self.zk is not None:
            self.zk.controller.pusher.security = self.peers
        trace = StageTrace(config["stage.trace.events"]) if config["stage.trace.events"] else None
        if trace is not None:
            self.replica_manager.trace = trace
        self.services = self._build_services(config, info, admin, producer_ids, trace)
        self.readiness = ReadinessCheck()
        self.listeners = list(listeners)
        self._services_started = False
        self._serving: list[Listener] = []
        self.metrics.watch_connections(config.listener_name or config.security_protocol,
                                       lambda: sum(listener.open_connections() for listener in self._serving))

    def _build_services(self, config: KraftConfig, info: NodeInfo, admin: LocalAdmin,
                        producer_ids: ProducerIdManager, trace: StageTrace | None) -> BrokerServices:
        """The protocol-neutral services every listener serves (kraft/server). ZooKeeper mode keeps
        no ACLs, quotas or SCRAM credentials."""
        security = self._security(config)
        authorizer = None
        settings = None if self.zk is not None else authorizer_settings(config)
        if settings is not None:
            authorizer = StandardAuthorizer(lambda: self.loader.image, settings, self.metrics.registry)
            self.groups.regexes.authorizer = authorizer  # regexes resolve to what one may Describe
        authorization = Authorization(authorizer, node_refused=lambda: security.refused("cluster_authorization"))
        quotas = Quotas()
        if self.zk is None:
            manager = ClientQuotaManager(lambda: self.loader.image.client_quotas,
                                         config["quota.window.size.seconds"] * 1000, config["quota.window.num"])
            QuotaMetrics(manager, lambda: int(time.monotonic() * 1000), self.metrics.registry)
            quotas = Quotas(manager, configured=lambda: bool(self.loader.image.client_quotas.entities))
        topics = TopicApis(info, self.view, admin, authorization)
        acls = None if self.zk is not None else AclAdmin(self.channel, lambda: self.loader.image)
        users = None if self.zk is not None else ScramUsers(lambda: self.loader.image, self.channel)
        return BrokerServices(
            node=info, metadata=self.view, authorization=authorization, quotas=quotas,
            records=RecordApis(self.replica_manager, topics, authorization, quotas, producer_ids),
            topics=topics, groups=GroupApis(self.groups, authorization),
            transactions=TransactionApis(self.transactions, self.groups, self.transactions.leaders.local, authorization),
            security=SecurityApis(acls, users, authorization),
            controller=ControllerApis(self.controller_api, authorization, None if self.zk is not None else self.client),
            replicas=ReplicaAdminApis(self.replica_manager, [str(d.path) for d in self.log_dirs.dirs], authorization,
                                      lambda: {str(d.path) for d in self.log_dirs.offline}),
            broker_configs=BrokerConfigs(self.node_id, self.config, authorization),
            metrics=self.metrics, status=self.status, node_security=security, tls=self.tls,
            controller_api=self.controller_api, zookeeper=self.zk, trace=trace)

    def _report_log_dir_failure_to_zk(self) -> None:
        """ZooKeeper mode: a log directory went offline (on the loop): tell the controller."""
        _, replicas = self.replica_manager.offline_report
        self._log_dir_reports.add(task := asyncio.get_running_loop().create_task(
            self.zk.registration.report_log_dir_failure([(t, p) for t, p in replicas])))
        task.add_done_callback(self._log_dir_reports.discard)

    def _broker_lifecycle(self, settings: ControllerSettings) -> BrokerLifecycle:
        """The broker's registration and heartbeats, on a thread with a controller client of its
        own (so its connection and its address book are its own too)."""
        remote = ControllerChannel(None, ControllerClient(self._lifecycle_directory(), security=self.peers),
                                   self.loader, settings, read_your_writes=False)

        def local_is_active() -> bool:  # from the lifecycle thread: reads one tuple the loop replaces
            claim = None if self.quorum is None else self.quorum.active_controller()
            return claim is not None and claim[0] == self.node_id

        return BrokerLifecycle(
            LifecycleChannel(remote, self.controller, local_is_active), self.node_id, self.endpoint,
            self.config["broker.rack"], self.config["broker.heartbeat.interval.ms"],
            lambda: self.loader.image.offset, lambda: self.identity.cluster_id, close_controller=remote.client.close,
            refused=self.fail)

    def _lifecycle_directory(self) -> ControllerDirectory:
        """An address book for the lifecycle thread, refreshed from this node's (its endpoints and
        believed controller) and its quorum's: copies of dicts and tuples the node's loop
        replaces or updates, which a copy reads whole."""
        mirror = ControllerDirectory(bootstrap=list(self.directory.bootstrap))

        def refresh() -> None:
            known = dict(self.directory.endpoints)
            if isinstance(self.quorum, RaftQuorum):
                known.update(self.quorum.controller_endpoints())
            mirror.endpoints.update(known)
            claim = None if self.quorum is None else self.quorum.active_controller()
            leader = claim[0] if claim is not None else self.directory.leader_id
            if mirror.leader_id is None:
                mirror.leader_id = leader if leader is not None else self.loader.image.controller_id

        mirror.refresh = refresh
        return mirror

    @property
    def cluster_id(self) -> str:
        """The cluster id as far as this node knows it ("" before it does)."""
        return self.identity.cluster_id or ""

    def fail(self, reason: str) -> None:
        """This node cannot go on: logs why (once) and asks to be stopped (`on_fatal`)."""
        if self.fatal_error is None:
            self.fatal_error = reason
            log.error("node %d stops: %s", self.node_id, reason)
            self._on_fatal()

    def _security(self, config: KraftConfig) -> NodeSecurity:
        security = NodeSecurity(self.peers.credential, self.peers, self.metrics.registry)
        try:
            rules = parse_rules(config["ssl.principal.mapping.rules"])
        except ValueError as e:
            raise ConfigError("ssl.principal.mapping.rules", str(e)) from None
        security.authenticator = ClientAuthenticator(config.security_protocol, config["sasl.enabled.mechanisms"],
                                                     rules, lambda: self.loader.image)
        return security

    async def _bootstrap_scram(self) -> None:
        """--add-scram: the first credentials, as kafka-storage format writes them; a user who has
        a credential for the mechanism already keeps it (every node may be given the same flag)."""
        for entry in self.add_scram:
            while self.loader.image.scram.get(entry.user, entry.mechanism) is None:
                try:
                    await self.channel.alter_user_scram_credentials(
                        [scram_upsertion(entry.user, entry.mechanism, entry.password, entry.iterations)], [])
                except KraftError as e:  # e.g. no controller yet; the message never holds the password
                    log.info("--add-scram %s for %s: %s; retrying", entry.mechanism, entry.user, e.error_code)
                    await asyncio.sleep(1)

    def status(self) -> dict[str, Any]:
        """The controller and broker state `/v1/health` reports, and whether the node is ready
        (kraft/readiness.py)."""
        leader = self.controller_api.leader_id()
        raft = self.quorum.status() if isinstance(self.quorum, RaftQuorum) else None
        if raft is not None:
            progress = MetadataProgress(raft.last_applied_index, raft.leader_commit_index)
        elif self.follower is not None:
            progress = MetadataProgress(self.loader.image.offset + 1, self.follower.high_watermark)
        else:  # the embedded quorum and ZooKeeper mode have nothing to catch up with
            progress = MetadataProgress(0, 0)
        broker_state = (self.lifecycle.state if self.lifecycle is not None else
                        self.zk.registration.state if self.zk is not None else None)
        readiness = self.readiness.check(progress, active_controller=leader, broker_state=broker_state,
                                         quorum_leader_known=raft is None or raft.leader_id is not None)
        return {
            **readiness.to_dict(),
            "cluster_id": self.cluster_id,
            "active_controller": self.controller_api.is_active(),
            "controller_id": -1 if leader is None else leader,
            "metadata_offset": self.loader.image.offset,  # applied (published), not only fetched
            "broker_state": broker_state,
            # why the metadata log cannot be written now (a full disk); None while it can
            "metadata_log_error": None if self.quorum is None else self.quorum.storage_error,
        }

    # -- services ---------------------------------------------------------------------------

    async def start_services(self) -> None:
        if self.zk is not None:
            # Kafka's /cluster/id: the first node creates it (cluster.id, else a random id), and a
            # node whose meta.properties names another cluster is refused
            zk_cluster_id = await self.zk.connect(self.config["cluster.id"] or new_cluster_id())
            self.identity.learn(zk_cluster_id, "ZooKeeper's /cluster/id")
        self._loop_probe = self.metrics.start_loop_probe()
        # the metadata log's cluster id is checked (and learned) before the broker sees an image
        self.loader.install_publisher(ClusterIdGate(self.identity, self.publisher))
        if self.controller is not None:
            self.directory.learn(self.node_id, *self.endpoint)
            if isinstance(self.quorum, RaftQuorum):
                self.quorum.announce_endpoint(*self.endpoint)
            await self.controller.start()
        self.replica_manager.start()
        if self.zk is not None:
            await self.zk.start(self.endpoint)
        if self.follower is not None:
            await self.follower.start()
        if self.lifecycle is not None:
            await self.lifecycle.start()
            if isinstance(self.quorum, LocalQuorum):
                # the embedded node serves requests only once its broker is up: it is the cluster
                await self.lifecycle.wait_unfenced(LOCAL_REGISTRATION_TIMEOUT_S)
        if self.add_scram and self.zk is None:
            self._add_scram_task = asyncio.get_running_loop().create_task(self._bootstrap_scram())
        log.info("node %d started: cluster %s, roles %s, data in %s", self.node_id, self.cluster_id or "not known yet",
                 ",".join(self.config.roles), self.data_dir)

    async def stop_services(self) -> None:
        if self._add_scram_task is not None:
            self._add_scram_task.cancel()
        if self.zk is not None:  # closing the session deletes our znodes: leaderships move at once
            await self.zk.stop()
        if self.lifecycle is not None:
            await self.lifecycle.stop(controlled=False)  # `controlled_shutdown` asked already, if it could
        if self.follower is not None:
            await self.follower.stop()
        if self._loop_probe is not None:
            self._loop_probe.cancel()
        await self.transactions.close()
        await self.groups.close()
        await self.replica_manager.close()
        if self.controller is not None:
            await self.controller.close()
        await self.client.close()
        await self.identity.close()
        release_all(self._dir_locks)  # the last write is done

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Binds the listeners (so port 0 resolves before the broker registers its endpoints),
        starts the services, then the listeners accept requests. A failure leaves what started
        for `stop`."""
        if not self.listeners:
            raise ConfigError("listeners", "the node has no listener to serve on")
        _, port = [listener.bind() for listener in self.listeners][0]
        self.endpoint = advertised_endpoint(self.config, port)
        kafka_endpoints = [e for listener in self.listeners for e in listener.endpoints(self.endpoint)]
        if self.lifecycle is not None:
            self.lifecycle.endpoint = self.endpoint
            self.lifecycle.kafka_endpoints = kafka_endpoints
        await self.start_services()
        self._services_started = True
        for listener in self.listeners:
            self._serving.append(listener)
            await listener.start(self.services)
        host, scheme = self.config.listener[0], "https" if self.tls is not None else "http"
        log.info("kraft node %d serving on %s://%s:%d (%s; metrics at %s://%s:%d/metrics)", self.node_id,
                 scheme, host, port, self.config.security_protocol, scheme, host, port)
        for endpoint in kafka_endpoints:
            log.info("Kafka listener %s on %s:%d (%s)", endpoint["name"], endpoint["host"], endpoint["port"],
                     endpoint["security_protocol"])

    async def controlled_shutdown(self) -> None:
        """Moves this broker's leaderships away (Kafka's controlled shutdown) while the node still
        serves: its followers keep fetching, so the ISRs stay whole and the controller can move
        every leadership to an in-sync replica. Closing the listener first would stop those
        fetches, the leader would shrink its ISRs to itself, and nothing could move."""
        if self.zk is not None:
            if self.zk.controlled_shutdown_enable:
                await self.zk.controlled_shutdown()
        elif self.lifecycle is not None:
            # the controller fences us and moves our leaderships, when there is anyone to take them
            others = [b for b in self.loader.image.live_brokers() if b.broker_id != self.node_id]
            await self.lifecycle.stop(controlled=bool(others))

    async def stop(self) -> None:
        """Kafka's order: the controlled shutdown while still serving, then no ISR shrinks and no
        waiting for replication from here, then the listeners stop accepting and let in-flight
        requests finish, and the services stop last. Stops only what started; a second call
        does nothing."""
        if self._serving:
            await self.controlled_shutdown()
            self.replica_manager.begin_shutdown()
        self._serving = []
        listeners, self.listeners = self.listeners, []
        for listener in listeners:  # a bound one that never served closes its socket
            await listener.stop()
        if self._services_started:
            self._services_started = False
            await self.stop_services()
