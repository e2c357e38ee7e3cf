"""A deterministic simulation of the control plane: a three-voter metadata quorum, the active
controller and the brokers that follow it (FoundationDB's and TigerBeetle's simulators, etcd's
rafttest), with invariants checked after every step.

Three combined nodes (controller + broker in one process, as `kraft-node --role controller,broker`
runs them; a crash takes both roles down), on a real asyncio loop whose clock is simulated
(`tests/unit/sim_loop.py`): a killed process's tasks and timers never run again, a paused one's
wait. What is kraft's own code:

- the active controller's asyncio shell, `ControllerService` with its `CommitQueue` (request
  groups, the session task that fences expired brokers, answers once committed and published),
  writing through `SimQuorum` (the `Quorum` surface over one voter of the modelled Raft);
- the replicated state machine's rule: every committed Raft entry goes through
  `kraft.controller.raft_state.apply_batch` (`metadata/log_rules.admit`: controller fencing by
  epoch, request-id dedup, batch shape), and the claim a new Raft leader commits before acting is
  `raft_state.claim_record`;
- under the service, the controller's request handlers (`kraft.controller.handlers`:
  register_broker, broker_heartbeat, fence_broker, create_topics, alter_partition with KIP-903
  broker epochs, elect_leaders) and broker sessions in the real `BrokerHeartbeatManager`;
- on every node a real `MetadataLoader` (records -> `MetadataDelta` -> `MetadataImage`): the
  controller's is fed the applied entries and serves brokers from its bounded tail (`read`, or
  `SnapshotNeededError` and a snapshot); the broker's is fed what it fetched and publishes through
  the real `BrokerMetadataPublisher`;
- behind the publisher, the broker's real `ReplicaManager` (`CheckedReplicaManager` only hooks
  checks in): replicas made leader or follower from the image by their `Partition` cores, its
  follower fetchers (`ReplicaFetcherManager`) long-polling each leader's `replica_fetch`, acks=all
  produces completed by the high watermark's advance, ISR shrink (its ISR task) and expand sent
  through the real `ControllerAlterPartition`, truncation on a diverging epoch; its I/O replaced
  through its seams: logs from `open_log` (`memory_log.MemoryLog`, which outlives a crash), each
  follower's channel to a leader from `open_fetch_channel` (`SimFetchChannel`: the real
  `ReplicationChannel` whose fetches are messages, answered at the leader in the wire's
  shapes), AlterPartition through `SimControllerFront` (a message to the controller's service);
- the group coordinator: the real `CoordinatorRuntime` (loads by the real loader into a real
  `GroupShard`, OffsetCommit through its write queue with acks=all) writing through the replica
  manager; the broker's lifecycle is the real `BrokerStateMachine`.

What is modelled: Raft itself. pysyncobj, which kraft runs, ticks in a thread of its own and talks
over TCP, so it cannot be driven step by step; this module has a small Raft (leader election with
randomised timeouts, log replication with the consistency check, commitment of the current term's
entries by a majority, a leader that steps down after `leader_fallback_ms` without hearing a
majority), with what kraft adds to pysyncobj: an AppendEntries never deletes entries it agrees with
(`raft_journal.py`), and a voter whose journal write fails resigns and neither campaigns nor votes
until a write succeeds. The term, vote and log survive a crash (the journal is fsynced); the commit
index and everything applied do not (a restarted node replays once it learns the commit index).
There is no Raft log compaction. The network drops, delays (so reorders) and duplicates every
message; nodes crash and restart, pause (SIGSTOP) and continue;
journals fail for a while. Partition logs survive crashes (kill -9, no power loss).

Invariants after every step: a controller answers a write only once it is committed; at most
one active controller per controller epoch, ever; every
node's committed Raft log is a prefix of the longest committed log, which never changes (so no
committed metadata record is lost or changed); every controller's and broker's published image
equals the image of that prefix of the committed metadata log (`apply_records` from nothing);
in every committed image every partition with a leader is led by an ISR member that is not fenced;
no broker process ever applies a lower leader epoch to a partition than one it applied before, and
no two brokers lead a partition at the same leader epoch; a coordinator that loads a group at the
partition's committed leader epoch holds every offset commit acknowledged before (committed
offsets never go back); kraft's code logs no error. After the run the faults stop and the cluster
must heal, and then every acks=all write a producer saw acknowledged is in every ISR member's log
at its offset (unless its topic was deleted).

Replay a seed with a trace: `python3 tests/unit/controlplane/simulation.py --seed 1234 --trace`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import random
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable

import msgpack
import msgspec

if __package__ in (None, ""):  # run as a script: the repository root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from kraft.broker.broker_state import BrokerState, BrokerStateMachine
from kraft.broker.groups.hashing import OFFSETS_TOPIC
from kraft.broker.groups.membership import GroupConfig
from kraft.broker.groups.shard import GroupShard
from kraft.broker.metadata_publisher import BrokerMetadataPublisher
from kraft.broker.metadata_view import MetadataCache
from kraft.broker.replica import Replica
from kraft.broker.replica_manager import ReplicaManager, ReplicationSettings
from kraft.broker.replication.alter_partition import ControllerAlterPartition
from kraft.broker.replication.channel import ReplicationChannel
from kraft.broker.replication.fetcher import FetcherSettings
from kraft.controller import handlers
from kraft.controller.errors import InvalidBatchError, MetadataStorageError, NotControllerError
from kraft.controller.metadata_loader import MetadataLoader, SnapshotNeededError
from kraft.controller.quorum import stamp_proposal
from kraft.controller.raft_quorum import QuorumTimeoutError
from kraft.controller.raft_state import BatchOutcome, MetadataLogState, NoStateMachine, apply_batch, claim_record
from kraft.controller.service import ControllerService
from kraft.coordinator.runtime import CoordinatorRuntime, RuntimeSettings
from kraft.errors import KraftError
from kraft.server.records import ProduceEntry
from kraft.api.messages.batch import ReplicationAnswer, ReplicationFetch
from kraft.api.routes.batch import fetch_call, fetch_response
from kraft.log.batch import build_batch
from kraft.log.config import LogConfig
from kraft.metadata.delta import LocalReplicaChanges, MetadataDelta, apply_records
from kraft.metadata.image import MetadataImage
from kraft.metadata.partition_change import BrokerState as IsrMember
from kraft.metadata.records import NO_LEADER, Endpoint
from tests.unit.replication.memory_log import MemoryLog
from tests.unit.sim_loop import Incarnation, SimWorld, as_process

CLIENT = 0  # the clients' address on the simulated network
SIM_DATA_DIR = Path("/nonexistent/kraft-controlplane-sim")  # never touched: logs are in memory
NEVER_MS = 10**9  # retention and recovery-point checkpoints: none here (logs in memory)
_encode = msgspec.msgpack.Encoder().encode
_decode_fetch = msgspec.msgpack.Decoder(ReplicationFetch).decode
GROUP = "sim-group"
Reply = Callable[[str | None, dict[str, Any] | None], None]  # (error code, response)


class InvariantViolation(AssertionError):
    pass


@dataclass(frozen=True)
class SimSettings:
    nodes: int = 3
    duration_ms: int = 4_000  # faults and requests, then the heal
    drop: float = 0.05
    duplicate: float = 0.03
    max_delay_ms: int = 25
    election_timeout_ms: tuple[int, int] = (150, 300)
    append_period_ms: int = 40
    leader_fallback_ms: int = 400
    max_entries_per_append: int = 8
    heartbeat_interval_ms: int = 50
    session_timeout_ms: int = 350
    session_check_ms: int = 80
    metadata_interval_ms: int = 30
    controller_tail_records: int = 40  # the controller's loader tail: older offsets need a snapshot
    replica_fetch_wait_ms: int = 100  # replica.fetch.wait.max.ms
    replica_fetch_backoff_ms: int = 40  # replica.fetch.backoff.ms
    replica_fetch_timeout_ms: int = 100  # beyond the wait: a lost fetch costs less than the lag time
    replica_lag_time_max_ms: int = 300
    alter_partition_retry_ms: int = 250
    request_timeout_ms: int = 300
    admin_interval_ms: int = 150  # a client's create-topics / preferred election
    commit_interval_ms: int = 40  # a group's offset commits
    produce_interval_ms: int = 50  # a producer's acks=all writes
    fault_interval_ms: int = 600
    restart_after_ms: tuple[int, int] = (50, 700)
    journal_failure_ms: tuple[int, int] = (50, 600)
    pause_ms: tuple[int, int] = (100, 800)
    # of the faults: a journal that fails for a while, a paused process (SIGSTOP), else a crash
    journal_failure: float = 0.3
    pause: float = 0.25


@dataclass(frozen=True)
class Entry:
    term: int
    batch: tuple[dict[str, Any], ...]


class SimQuorum:
    """The `Quorum` the real `ControllerService` writes through, over one voter of the modelled
    Raft, with `RaftQuorum`'s surface: the active controller is the Raft leader whose claim of
    this term applied; a proposal is appended to the leader's journal and answered once applied
    here (KAFKA_STORAGE_ERROR when the journal write fails, NOT_CONTROLLER when the leader steps
    down first, REQUEST_TIMED_OUT after the request timeout: the outcome is unknown)."""

    def __init__(self, sim: Simulation, node: Node) -> None:
        self.sim = sim
        self.node = node
        self._batch_callbacks: list[Callable[[list[tuple[int, dict[str, Any]]]], None]] = []
        self._proposals: dict[int, asyncio.Future[BatchOutcome]] = {}  # Raft index -> its outcome

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    def on_commit_batch(self, callback: Callable[[list[tuple[int, dict[str, Any]]]], None]) -> None:
        self._batch_callbacks.append(callback)

    def on_snapshot(self, callback: Callable[[int, Any], None]) -> None:
        pass  # no Raft snapshots here

    def leader(self) -> int | None:
        return self.node.leader_id

    def active_controller(self) -> tuple[int, int] | None:
        state = self.node.log_state
        return None if state.controller_id is None else (state.controller_id, state.controller_epoch)

    def is_active_controller(self) -> bool:
        node = self.node
        return (node.role == "leader" and node.active_term == node.term
                and node.log_state.controller_id == node.id)

    @property
    def metadata_offset(self) -> int:
        return self.node.log_state.offset

    @property
    def storage_error(self) -> str | None:
        return "the journal write failed" if self.node.standing_aside else None

    def _redirect_id(self) -> int | None:
        leader = self.node.leader_id
        return leader if leader != self.node.id else None

    async def propose(self, records: list[dict[str, Any]], request_id: str | None = None) -> int:
        node = self.node
        if not self.is_active_controller():
            raise NotControllerError(f"node {node.id} is not the active controller", self._redirect_id())
        batch = stamp_proposal(records, node.log_state.controller_epoch, request_id, node.id)
        index = self.sim._append(node, tuple(batch))
        if index is None:
            raise MetadataStorageError("metadata log append failed: the journal write failed")
        future: asyncio.Future[BatchOutcome] = asyncio.get_running_loop().create_future()
        self._proposals[index] = future
        try:
            outcome = await asyncio.wait_for(future, self.sim.settings.request_timeout_ms / 1000)
        except asyncio.TimeoutError:
            raise QuorumTimeoutError("no commit within the request timeout; outcome unknown") from None
        finally:
            self._proposals.pop(index, None)
        if outcome.status in ("applied", "duplicate"):
            return outcome.last_offset
        if outcome.status == "fenced":
            raise NotControllerError(outcome.reason, outcome.controller_id)
        raise InvalidBatchError(outcome.reason)

    def applied(self, index: int, batch: list[dict[str, Any]], outcome: BatchOutcome) -> None:
        """The Raft entry at `index` applied here: its records to the loader, its proposer answered."""
        if outcome.applied:
            entries = list(zip(range(outcome.first_offset, outcome.last_offset + 1), batch))
            for callback in self._batch_callbacks:
                callback(entries)
        future = self._proposals.pop(index, None)
        if future is not None and not future.done():
            future.set_result(outcome)

    def discard(self) -> None:
        """The leader stepped down: its proposals not applied yet are not committed by it."""
        proposals, self._proposals = self._proposals, {}
        for future in proposals.values():
            if not future.done():
                future.set_exception(NotControllerError("not committed: DISCARDED", self._redirect_id()))


class CheckedReplicaManager(ReplicaManager):
    """The real `ReplicaManager` of a simulated broker, with two checks hooked in (nothing of its
    own rules): before it applies a metadata delta, no registration's leader epoch goes back in
    this process; after it applies a replica's role, no other broker ever led that partition at
    the same leader epoch."""

    def __init__(self, sim: Simulation, node: Node) -> None:
        s = sim.settings
        settings = ReplicationSettings(
            replica_lag_time_max_ms=s.replica_lag_time_max_ms,
            alter_partition_retry_ms=s.alter_partition_retry_ms,
            fetcher=FetcherSettings(max_wait_ms=s.replica_fetch_wait_ms, backoff_ms=s.replica_fetch_backoff_ms,
                                    request_timeout_ms=s.replica_fetch_timeout_ms))
        super().__init__(
            node.id, SIM_DATA_DIR / f"node-{node.id}", sim.log_config,
            retention_check_interval_ms=NEVER_MS, fetch_max_bytes=1 << 20, replication=settings,
            alter_partition=ControllerAlterPartition(
                SimControllerFront(sim, node), node.id, lambda: node.broker_epoch,
                new_request_id=lambda: uuid.UUID(int=node.rng.getrandbits(128)).hex),
            broker_epoch=lambda: node.broker_epoch, clock_ms=lambda: sim.now,
            recovery_point_checkpoint_interval_ms=NEVER_MS, metadata_cache=node.cache,
            open_log=lambda directory, config, topic_id: sim.open_log(node, directory, config, topic_id),
            open_fetch_channel=lambda leader_id: SimFetchChannel(sim, node, leader_id))
        self.sim = sim
        self.node = node

    def apply_delta(self, changes: LocalReplicaChanges, image: MetadataImage) -> None:
        for key, reg in (*changes.leaders.items(), *changes.followers.items()):
            self.sim.check_leader_epoch(self.node, (changes.topic_ids[key[0]], key[1]), reg.leader_epoch)
        super().apply_delta(changes, image)

    def _apply_role(self, replica: Replica) -> None:
        super()._apply_role(replica)
        if replica.core is not None and replica.core.is_leader:
            self.sim.check_one_leader(self.node, (replica.state.topic_id, replica.partition),
                                      replica.core.leader_epoch)


class SimFetchChannel(ReplicationChannel):
    """A follower's real `ReplicationChannel` to one leader (numbered fetches, the answer to the
    fetch waited for taken and any other dropped, `interrupt`, the timeout), with the
    simulation's network for its WebSocket: each fetch is a message (lost, delayed, duplicated
    like any), answered at the leader by `Simulation.serve_replica_fetch`."""

    def __init__(self, sim: Simulation, node: Node, leader_id: int) -> None:
        super().__init__(node.id, leader_id, _no_sockets, _no_sockets)
        self.sim = sim
        self.node = node

    async def _open(self, endpoint: tuple[str, int], timeout_s: float) -> Any:
        return self  # nothing to connect: `send_bytes` is the simulation's network

    async def send_bytes(self, data: bytes) -> None:
        sim, follower, leader = self.sim, self.node.id, self.leader_id
        sim.send(follower, leader, "fetch", lambda: sim.serve_replica_fetch(
            sim.nodes[leader], follower, data, lambda answer: sim.send(
                leader, follower, "fetch answer", lambda: self._received(msgpack.unpackb(answer, raw=False)))))


def _no_sockets() -> Any:
    raise AssertionError("the simulation opens no sockets")


class SimControllerFront:
    """The controller as `ControllerAlterPartition` reaches it (`ControllerFront`): the request
    is a message to the controller this broker believes active, served by its real
    `ControllerService`; a refusal raises its error, no answer within the request timeout
    REQUEST_TIMED_OUT (the outcome unknown, as over HTTP)."""

    def __init__(self, sim: Simulation, node: Node) -> None:
        self.sim = sim
        self.node = node

    async def alter_partition(self, broker_id: int, broker_epoch: int, topic: str, partition: int,
                              leader_epoch: int, partition_epoch: int, new_isr: list[IsrMember], *,
                              request_id: str | None = None) -> dict[str, Any]:
        sim = self.sim
        sim._count("alter_partition")
        answer: asyncio.Future[tuple[str | None, Any]] = asyncio.get_running_loop().create_future()

        def answered(error: str | None, response: Any) -> None:
            if not answer.done():
                answer.set_result((error, response))

        sim._to_controller(self.node, f"alter partition {topic}-{partition}", lambda c, reply: sim._serve(
            c, "alter_partition", lambda service: service.alter_partition(
                broker_id, broker_epoch, topic, partition, leader_epoch, partition_epoch, new_isr,
                request_id=request_id), reply), answered)
        try:
            async with asyncio.timeout(sim.settings.request_timeout_ms / 1000):
                error, response = await answer
        except TimeoutError:
            raise KraftError("REQUEST_TIMED_OUT", "no answer from the controller") from None
        if error is not None:
            raise KraftError(error, f"AlterPartition of {topic}-{partition} refused")
        return response


class SimGroupCoordinator(CoordinatorRuntime[GroupShard]):
    """The real coordinator runtime of `__consumer_offsets` (elections and resignations from the
    real publisher, loads by the real loader into a real `GroupShard`, one write at a time per
    partition, answered once committed) over the broker's `ReplicaManager`; a load is checked
    against the offset commits acknowledged before."""

    def __init__(self, sim: Simulation, node: Node) -> None:
        self.sim = sim
        self.node = node
        self._epochs: dict[int, int] = {}  # partition -> the leader epoch of its election
        assert node.replicas is not None
        super().__init__(OFFSETS_TOPIC, node.replicas, self._new_shard, lambda: sim.now,
                         RuntimeSettings(write_timeout_ms=sim.settings.request_timeout_ms))

    def on_election(self, partition: int, leader_epoch: int) -> None:
        self._epochs[partition] = leader_epoch
        super().on_election(partition, leader_epoch)

    def _new_shard(self, partition: int) -> GroupShard:
        return CheckedShard(partition, self, self._epochs[partition])


class GroupEnv:
    """The group shards' `GroupEnvironment`: member-less offset commits need none of it."""

    def __init__(self, node: Node) -> None:
        self.node = node

    @property
    def image(self) -> MetadataImage:
        return self.node.cache.image

    def regex_topics(self, image: MetadataImage) -> Any:
        raise NotImplementedError

    def group_changed(self, partition: int, group_id: str) -> None:
        pass

    def unloaded(self, partition: int) -> None:
        pass


class CheckedShard(GroupShard):
    """A group shard whose load the simulation checks: it holds every acknowledged commit."""

    def __init__(self, partition: int, coordinator: SimGroupCoordinator, leader_epoch: int) -> None:
        super().__init__(partition, GroupEnv(coordinator.node), GroupConfig(), 7 * 24 * 3600 * 1000, 600_000)
        self.coordinator = coordinator
        self.leader_epoch = leader_epoch

    def on_loaded(self, now_ms: int) -> Any:
        c = self.coordinator
        c.sim.check_loaded_offsets(c.node, self.partition, self.leader_epoch, self)
        return super().on_loaded(now_ms)


class KraftErrors(logging.Handler):
    """An ERROR logged by kraft's code fails the run (`Simulation.run_until`)."""

    def __init__(self, sim: Simulation) -> None:
        super().__init__(logging.ERROR)
        self.sim = sim

    def emit(self, record: logging.LogRecord) -> None:
        failure = "" if record.exc_info is None or record.exc_info[1] is None else (
            f" ({type(record.exc_info[1]).__name__}: {record.exc_info[1]})")
        self.sim.note_violation(f"kraft logged an error ({record.name}): {record.getMessage()}{failure}")


class NoMetrics:
    def on_delta(self, delta: MetadataDelta) -> None:
        pass


@dataclass
class Node:
    """One combined controller + broker process, and what survives its crashes."""

    id: int
    # Raft, durable (an fsynced journal)
    term: int = 0
    voted_for: int | None = None
    log: list[Entry] = field(default_factory=list)
    # partition logs, durable (no power loss here: kill -9 only): directory name -> (topic id, log)
    logs: dict[str, tuple[str, MemoryLog]] = field(default_factory=dict)
    journal_failed_until: int = 0
    paused_until: int = 0  # SIGSTOP until then
    # the process
    alive: bool = True
    incarnation: int = 0
    role: str = "follower"
    leader_id: int | None = None
    commit_index: int = 0
    votes: set[int] = field(default_factory=set)
    next_index: dict[int, int] = field(default_factory=dict)
    match_index: dict[int, int] = field(default_factory=dict)
    heard_from: dict[int, int] = field(default_factory=dict)  # peer -> last answer (leader)
    election_at: int = 0
    standing_aside: bool = False  # a journal write failed: no campaign, no vote
    applied_index: int = 0
    log_state: MetadataLogState = field(default_factory=MetadataLogState)
    controller_loader: MetadataLoader = field(default_factory=MetadataLoader)
    active_term: int = -1  # the term whose claim applied
    claimed_epoch: int = 0
    claim_index: int = 0  # the Raft index of this term's claim (0: none pending)
    process: Incarnation | None = None  # this incarnation's (what it schedules dies with it)
    quorum: SimQuorum | None = None
    service: ControllerService | None = None
    rng: random.Random = field(default_factory=random.Random)
    # the broker
    broker_loader: MetadataLoader = field(default_factory=MetadataLoader)
    cache: MetadataCache = field(default_factory=MetadataCache)
    state: BrokerStateMachine = field(default_factory=BrokerStateMachine)
    broker_epoch: int = -1
    registering: bool = False
    controller_guess: int = 1
    replicas: CheckedReplicaManager | None = None
    held_fetches: dict[int, asyncio.Task[None]] = field(default_factory=dict)  # follower -> its fetch held here
    leader_epochs: dict[tuple[str, int], int] = field(default_factory=dict)  # by topic id: this process applied
    groups: SimGroupCoordinator | None = None
    published: list[tuple[str, MetadataImage]] = field(default_factory=list)  # images to check


class Simulation(SimWorld):
    def __init__(self, seed: int, settings: SimSettings = SimSettings(), trace: bool = False) -> None:
        super().__init__(seed, settings, trace, shuffle_ties=True)
        self.settings = settings
        self.log_config = LogConfig(min_insync_replicas=2)
        self.controller_settings = handlers.ControllerSettings(
            broker_session_timeout_ms=settings.session_timeout_ms, default_replication_factor=3,
            num_partitions=2)
        self.ids = tuple(range(1, settings.nodes + 1))
        self.nodes = {i: Node(i) for i in self.ids}
        # checks: the committed Raft log, the metadata records it admitted and their images
        self.committed: list[Entry] = []
        self._reference = MetadataLogState()
        self.images: dict[int, MetadataImage] = {-1: MetadataImage.EMPTY}  # at batch ends
        self._last_image = MetadataImage.EMPTY
        self.committed_topic_ids: set[str] = set()  # every topic created in the committed log
        self.active_of_epoch: dict[int, int] = {}
        self.leader_of_epoch: dict[tuple[str, int, int], int] = {}  # (topic id, partition, epoch)
        self.topics_created = 0
        self._violation: str | None = None
        # the latest acknowledged offset commit, as (when the coordinator wrote it, offset)
        self.acked_commit = (-1, -1)
        self._next_commit = 0
        self._committing = False
        # acks=all writes acknowledged to the producer: (topic id, topic, partition, offset, value)
        self.acked_writes: list[tuple[str, str, int, int, bytes]] = []
        self._produced = 0
        for node in self.nodes.values():
            self._boot(node)
        self._every(settings.admin_interval_ms, self._admin)
        self._every(settings.commit_interval_ms, self._commit_offset)
        self._every(settings.produce_interval_ms, self._produce)
        self._every(settings.fault_interval_ms, self._inject_fault)

    # -- the network and the run -----------------------------------------------------------------

    @staticmethod
    def _alive(node: Node, incarnation: int | None) -> bool:
        return node.alive and node.incarnation == incarnation

    def send(self, src: int, dst: int, what: str, deliver: Callable[[], None]) -> None:
        """One message: lost when its destination is down when it arrives, or by the network;
        delivered as the destination's process (what it starts belongs to that process)."""
        target = self.nodes.get(dst)  # None: the clients, never down

        def arrive() -> None:
            if target is not None and target.paused_until > self.now:  # read once the process is continued
                self._at(target.paused_until, arrive)
            elif target is None or target.alive:
                self._log(f"deliver {what} {src}->{dst}")
                as_process(None if target is None else target.process, deliver)

        for delay in self._delays(what, src, dst, lossy=src != dst):
            self._at(self.now + delay, arrive)

    def run(self) -> Simulation:
        self.run_until(self.settings.duration_ms)
        self.heal()
        for node in self.nodes.values():  # the run is over: what never started never will
            assert node.process is not None
            self.loop.killed(node.process)
        return self

    def after_step(self) -> None:
        self.check_invariants()

    # -- processes --------------------------------------------------------------------------------

    def _boot(self, node: Node) -> None:
        """A (re)started process: the durable Raft state and partition logs, nothing else."""
        s = self.settings
        node.alive = True
        node.role, node.leader_id, node.commit_index, node.votes = "follower", None, 0, set()
        node.applied_index, node.log_state = 0, MetadataLogState()
        # the loader's slices by wall-clock time are not the seed's: by record count only
        node.controller_loader = MetadataLoader(max_retained_records=s.controller_tail_records, slice_seconds=1e9)
        node.controller_loader.on_image(lambda image: node.published.append(("controller", image)))
        node.active_term, node.claimed_epoch, node.claim_index = -1, 0, 0
        node.rng = random.Random(self.rng.getrandbits(64))
        node.process = Incarnation(node, node.incarnation)
        node.quorum = SimQuorum(self, node)
        node.service = ControllerService(
            node.id, node.quorum, node.controller_loader, self.controller_settings, rng=node.rng,
            clock_ms=lambda: self.now, session_check_interval_ms=s.session_check_ms,
            new_request_id=lambda rng=node.rng: uuid.UUID(int=rng.getrandbits(128)).hex)
        as_process(node.process, lambda: self.loop.create_task(node.service.start()))
        node.standing_aside = False
        node.broker_loader = MetadataLoader(max_retained_records=0)
        node.broker_loader.on_image(lambda image: node.published.append(("broker", image)))
        node.cache = MetadataCache()
        node.held_fetches, node.leader_epochs = {}, {}
        node.replicas = CheckedReplicaManager(self, node)
        as_process(node.process, lambda: self.loop.call_soon(node.replicas.start))  # its ISR task
        node.groups = SimGroupCoordinator(self, node)
        node.broker_loader.install_publisher(BrokerMetadataPublisher(
            node.id, node.cache, node.replicas, {OFFSETS_TOPIC: node.groups}, NoMetrics()))
        node.state = BrokerStateMachine()
        node.state.start()
        node.broker_epoch, node.registering = -1, False
        node.controller_guess = self.rng.choice(self.ids)
        self._reset_election_timer(node)
        self._every(s.append_period_ms, lambda: self._raft_tick(node), node.process)
        self._every(s.heartbeat_interval_ms, lambda: self._broker_heartbeat(node), node.process)
        self._every(s.metadata_interval_ms, lambda: self._fetch_metadata(node), node.process)

    def crash(self, node: Node) -> None:
        self._count("crash")
        self._log(f"CRASH node {node.id}")
        node.alive = False
        node.incarnation += 1  # its timers stop; nothing it had queued is answered
        assert node.process is not None
        self.loop.killed(node.process)
        self._at(self.now + self.rng.randint(*self.settings.restart_after_ms), lambda: self._restart(node))

    def _restart(self, node: Node) -> None:
        if not node.alive:
            self._log(f"RESTART node {node.id}")
            self._boot(node)

    def _inject_fault(self) -> None:
        if not self.faults:
            return
        live = [n for n in self.nodes.values() if n.alive and n.paused_until <= self.now]
        if len(live) < len(self.nodes) or self.rng.random() < 0.3:
            return  # one node down at a time (a majority stays), and quiet periods
        victim = self.rng.choice(live)
        leaders = [n for n in live if n.role == "leader"]
        if leaders and self.rng.random() < 0.5:  # the active controller, half of the time
            victim = leaders[0]
        draw = self.rng.random()
        if draw < self.settings.pause:
            self._count("pause")
            victim.paused_until = self.now + self.rng.randint(*self.settings.pause_ms)
            self._log(f"PAUSE node {victim.id} until {victim.paused_until}")
        elif draw < self.settings.pause + self.settings.journal_failure:
            self._count("journal_failure")
            victim.journal_failed_until = self.now + self.rng.randint(*self.settings.journal_failure_ms)
            self._log(f"JOURNAL of node {victim.id} fails until {victim.journal_failed_until}")
        else:
            self.crash(victim)

    # -- Raft (modelled) --------------------------------------------------------------------------

    def _journal_write(self, node: Node) -> bool:
        """A journal append or term/vote write: False (nothing written) while the disk fails;
        the first one that fails makes the voter stand aside (kraft's `RaftQuorum`)."""
        if self.now < node.journal_failed_until:
            if not node.standing_aside:
                self._log(f"node {node.id}: journal write failed, standing aside")
                node.standing_aside = True
                if node.role == "leader":
                    self._step_down(node, node.term, None)
            return False
        node.standing_aside = False
        return True

    def _reset_election_timer(self, node: Node) -> None:
        node.election_at = self.now + self.rng.randint(*self.settings.election_timeout_ms)

    def _step_down(self, node: Node, term: int, leader: int | None) -> None:
        if term > node.term:
            node.term, node.voted_for = term, None
        if node.role == "leader":
            self._log(f"node {node.id} steps down in term {node.term}")
            node.quorum.discard()
        node.role, node.leader_id = "follower", leader
        node.active_term, node.claim_index = -1, 0

    def _last(self, node: Node) -> tuple[int, int]:
        return len(node.log), node.log[-1].term if node.log else 0

    def _raft_tick(self, node: Node) -> None:
        if self.now >= node.journal_failed_until and node.standing_aside:
            self._journal_write(node)  # the once-a-second probe: a write that succeeds clears it
        if node.role == "leader":
            heard = sum(1 for p in self.ids if p != node.id
                        and self.now - node.heard_from.get(p, -10**9) <= self.settings.leader_fallback_ms)
            if heard + 1 <= len(self.ids) // 2:
                self._step_down(node, node.term, None)  # pysyncobj's leaderFallbackTimeout
                return
            for peer in self.ids:
                if peer != node.id:
                    self._send_append(node, peer)
        elif self.now >= node.election_at and not node.standing_aside:
            self._campaign(node)

    def _campaign(self, node: Node) -> None:
        self._reset_election_timer(node)
        if not self._journal_write(node):
            return
        node.term += 1
        node.role, node.voted_for, node.votes, node.leader_id = "candidate", node.id, {node.id}, None
        self._log(f"node {node.id} campaigns in term {node.term}")
        term, (last_index, last_term) = node.term, self._last(node)
        for peer in self.ids:
            if peer != node.id:
                self.send(node.id, peer, f"vote? t{term}",
                          lambda p=peer: self._on_vote_request(self.nodes[p], node.id, term, last_index, last_term))

    def _on_vote_request(self, node: Node, candidate: int, term: int, last_index: int, last_term: int) -> None:
        if term > node.term:
            self._step_down(node, term, None)
        my_index, my_term = self._last(node)
        up_to_date = (last_term, last_index) >= (my_term, my_index)
        granted = (term == node.term and node.voted_for in (None, candidate) and up_to_date
                   and not node.standing_aside and self._journal_write(node))
        if granted:
            node.voted_for = candidate
            self._reset_election_timer(node)
        answer_term = node.term
        self.send(node.id, candidate, f"vote {'yes' if granted else 'no'} t{answer_term}",
                  lambda: self._on_vote(self.nodes[candidate], node.id, answer_term, granted))

    def _on_vote(self, node: Node, voter: int, term: int, granted: bool) -> None:
        if term > node.term:
            self._step_down(node, term, None)
            return
        if node.role != "candidate" or term != node.term or not granted:
            return
        node.votes.add(voter)
        if len(node.votes) > len(self.ids) // 2:
            self._become_leader(node)

    def _become_leader(self, node: Node) -> None:
        self._log(f"node {node.id} leads term {node.term}")
        node.role, node.leader_id = "leader", node.id
        node.next_index = {p: len(node.log) + 1 for p in self.ids}
        node.match_index = {p: 0 for p in self.ids}
        node.heard_from = {p: self.now for p in self.ids}
        self._claim(node, node.log_state.controller_epoch + 1)

    def _claim(self, node: Node, epoch: int) -> None:
        """Commit ClaimController(me, epoch) before acting (`RaftQuorum._claim_controller`)."""
        node.claimed_epoch = epoch
        node.claim_index = self._append(node, (claim_record(node.id, epoch),)) or 0

    def _append(self, node: Node, batch: tuple[dict[str, Any], ...]) -> int | None:
        """The leader appends a batch to its journal: its index, or None (the write failed)."""
        if not self._journal_write(node):
            return None
        node.log.append(Entry(node.term, batch))
        node.match_index[node.id] = len(node.log)
        for peer in self.ids:
            if peer != node.id:
                self._send_append(node, peer)
        self._advance_commit(node)
        return len(node.log)

    def _send_append(self, node: Node, peer: int) -> None:
        prev = node.next_index[peer] - 1
        prev_term = node.log[prev - 1].term if prev > 0 else 0
        entries = node.log[prev:prev + self.settings.max_entries_per_append]
        term, commit = node.term, node.commit_index
        self.send(node.id, peer, f"append t{term} {prev}+{len(entries)} c{commit}",
                  lambda: self._on_append(self.nodes[peer], node.id, term, prev, prev_term, entries, commit))

    def _on_append(self, node: Node, leader: int, term: int, prev: int, prev_term: int,
                   entries: list[Entry], commit: int) -> None:
        if term < node.term:
            self._answer_append(node, leader, False, 0)
            return
        if term > node.term or node.role != "follower" or node.leader_id != leader:
            self._step_down(node, term, leader)
        self._reset_election_timer(node)
        if prev > len(node.log) or (prev > 0 and node.log[prev - 1].term != prev_term):
            self._answer_append(node, leader, False, min(prev, len(node.log) + 1))
            return
        # Raft deletes only from the first conflicting entry (kraft's fix of pysyncobj: a late
        # copy of an older AppendEntries must not cut entries this voter acknowledged)
        index = prev
        for n, entry in enumerate(entries):
            index = prev + n + 1
            if index <= len(node.log):
                if node.log[index - 1].term == entry.term:
                    continue
                if not self._journal_write(node):
                    self._answer_append(node, leader, False, 0)
                    return
                assert index > node.commit_index, "a committed entry conflicts"
                del node.log[index - 1:]
            elif not self._journal_write(node):
                self._answer_append(node, leader, False, 0)
                return
            node.log.append(entry)
        match = prev + len(entries)
        self._set_commit(node, min(commit, match))
        self._answer_append(node, leader, True, match)

    def _answer_append(self, node: Node, leader: int, ok: bool, index: int) -> None:
        term = node.term
        self.send(node.id, leader, f"append {'ok' if ok else 'no'} t{term} {index}",
                  lambda: self._on_append_answer(self.nodes[leader], node.id, term, ok, index))

    def _on_append_answer(self, node: Node, peer: int, term: int, ok: bool, index: int) -> None:
        if term > node.term:
            self._step_down(node, term, None)
            return
        if node.role != "leader" or term != node.term:
            return
        node.heard_from[peer] = self.now
        if ok:
            node.match_index[peer] = max(node.match_index[peer], index)
            node.next_index[peer] = max(node.next_index[peer], index + 1)
            self._advance_commit(node)
        elif index > 0:
            node.next_index[peer] = max(1, min(node.next_index[peer] - 1, index))

    def _advance_commit(self, node: Node) -> None:
        """The highest index of this term held by a majority (Raft commits earlier terms' entries
        only through one of its own)."""
        matches = sorted((node.match_index.get(p, 0) for p in self.ids), reverse=True)
        majority = matches[len(self.ids) // 2]
        if majority > node.commit_index and node.log[majority - 1].term == node.term:
            self._set_commit(node, majority)

    def _set_commit(self, node: Node, index: int) -> None:
        if index <= node.commit_index:
            return
        node.commit_index = index
        self._record_committed(node)
        while node.applied_index < node.commit_index:
            node.applied_index += 1
            self._apply(node, node.applied_index, node.log[node.applied_index - 1])

    # -- the replicated state machine (real), under the controller service (real) ---------------

    def _apply(self, node: Node, index: int, entry: Entry) -> None:
        outcome = apply_batch(node.log_state, list(entry.batch), NoStateMachine())
        if index == node.claim_index and node.role == "leader":
            node.claim_index = 0
            if outcome.applied:
                node.active_term = node.term
                self._log(f"node {node.id} is the active controller, epoch {node.claimed_epoch}")
            else:  # someone claimed first: go above
                self._claim(node, max(node.claimed_epoch + 1, outcome.controller_epoch + 1))
        node.quorum.applied(index, list(entry.batch), outcome)

    def active_epoch(self, node: Node) -> int | None:
        """The checks' view of `ControllerService._active_epoch` (without its side effect): the
        Raft leader whose claim of this term applied, and whose image holds it."""
        if not node.alive or not node.quorum.is_active_controller():
            return None
        image = node.controller_loader.image
        if image.controller_id != node.id or image.controller_epoch != node.log_state.controller_epoch:
            return None
        return image.controller_epoch

    def _serve(self, node: Node, what: str, call: Callable[[ControllerService], Awaitable[dict[str, Any]]],
               reply: Reply) -> None:
        """A request arriving at `node`'s controller, answered by its `ControllerService`."""
        async def serve() -> None:
            try:
                response = await call(node.service)
            except Exception as e:
                error = getattr(e, "error_code", None)
                if error is None:  # not an answer: kraft's code failed
                    self._fail(f"controller {node.id}: {what} raised {type(e).__name__}: {e}")
                reply(error, {"leader": getattr(e, "leader_id", None)})
                return
            self._check_answer(node, what, response)
            reply(None, response)

        self.loop.create_task(serve())

    def _serve_metadata(self, node: Node, from_offset: int) -> tuple[str, Any]:
        """The controller's metadata stream: records from its loader's tail, or its image."""
        if not node.service.is_active:
            return "NOT_CONTROLLER", node.service.leader_id()
        loader = node.controller_loader
        try:
            return "records", [(o, r) for o, r in loader.read(from_offset, 50)]
        except SnapshotNeededError:
            return "snapshot", loader.image

    # -- brokers ----------------------------------------------------------------------------------

    def _to_controller(self, node: Node, what: str, serve: Callable[[Node, Reply], None],
                       on_answer: Reply) -> None:
        """A request to the controller this broker believes active; NOT_CONTROLLER redirects."""
        target, incarnation = node.controller_guess, node.incarnation

        def answer(error: str | None, response: Any) -> None:
            if not self._alive(node, incarnation):
                return
            if error == "NOT_CONTROLLER":
                hint = response.get("leader") if isinstance(response, dict) else None
                node.controller_guess = hint if hint in self.ids and hint != target else self.rng.choice(self.ids)
            on_answer(error, response)

        def request() -> None:
            controller = self.nodes[target]
            serve(controller, lambda error, response: self.send(target, node.id, f"{what} answer {error}",
                                                                 lambda: answer(error, response)))

        self.send(node.id, target, what, request)

    def _broker_heartbeat(self, node: Node) -> None:
        """`BrokerLifecycle`: register until answered, then heartbeat; the state machine follows."""
        if node.broker_epoch < 0:
            if node.registering:
                return
            node.registering = True
            incarnation = f"inc-{node.id}-{node.incarnation}"

            def registered(error: str | None, response: dict[str, Any] | None) -> None:
                node.registering = False
                if error is None and response is not None and node.broker_epoch < 0:
                    node.broker_epoch = response["broker_epoch"]
                    self._log(f"broker {node.id} registered at epoch {node.broker_epoch}")

            self._to_controller(node, "register",
                                lambda c, reply: self._serve(c, "register", lambda service: service.register_broker(
                                    node.id, incarnation, [Endpoint("HTTP", "127.0.0.1", 9000 + node.id)]), reply),
                                registered)
            self._at(self.now + self.settings.request_timeout_ms, lambda: setattr(node, "registering", False))
            return
        epoch, offset = node.broker_epoch, node.broker_loader.image.offset

        def answered(error: str | None, response: dict[str, Any] | None) -> None:
            if node.broker_epoch != epoch:
                return
            if error == "STALE_BROKER_EPOCH":
                node.state.on_unknown_epoch()
                node.broker_epoch = -1
            elif error is None and response is not None:
                node.state.on_heartbeat_answer(response["is_caught_up"], response["is_fenced"])

        self._to_controller(node, "heartbeat", lambda c, reply: self._serve(
            c, "heartbeat", lambda service: service.broker_heartbeat(node.id, epoch, offset), reply), answered)

    def _fetch_metadata(self, node: Node) -> None:
        loader = node.broker_loader
        from_offset = loader.image.offset + 1

        def answered(kind: str | None, payload: Any) -> None:
            if kind == "records" and payload and payload[0][0] == loader.image.offset + 1:
                loader.apply_batch(payload)
            elif kind == "snapshot" and payload.offset > loader.image.offset:
                self._count("snapshot")
                loader.load_snapshot(payload)

        def serve(controller: Node, reply: Reply) -> None:
            kind, payload = self._serve_metadata(controller, from_offset)
            if kind == "NOT_CONTROLLER":
                reply("NOT_CONTROLLER", {"leader": payload})
            else:
                reply(kind, payload)

        self._to_controller(node, "metadata fetch", serve, answered)

    def open_log(self, node: Node, directory: Path, config: LogConfig, topic_id: str) -> Any:
        """The broker's `LogFactory`: the partition's log, which outlives the broker's crashes;
        one of an earlier topic of the same name is replaced by an empty log (kraft sets it aside
        as a stray)."""
        held = node.logs.get(directory.name)
        if held is None or held[0] != topic_id:
            held = node.logs[directory.name] = (topic_id, MemoryLog(config))
        held[1].config = config
        return held[1]

    def serve_replica_fetch(self, leader: Node, replica_id: int, raw: bytes, reply: Callable[[bytes], None]) -> None:
        """The leader's end of a replication channel (api/routes/replication_channel.py): a new
        fetch supersedes the one held for that follower; each is answered by the broker's real
        `ReplicaManager.replica_fetch` (the long poll), in the wire's shapes."""
        held = leader.held_fetches.pop(replica_id, None)
        if held is not None:
            held.cancel()
        message = _decode_fetch(raw)
        assert leader.replicas is not None
        replicas = leader.replicas

        async def serve() -> None:
            call = fetch_call(message.fetch)
            try:
                results = await replicas.replica_fetch(call.replica_id, call.replica_epoch, call.entries,
                                                       call.max_wait_ms, call.min_bytes, call.max_bytes)
            except KraftError as e:
                reply(_encode(ReplicationAnswer(id=message.id, error_code=e.error_code, message=e.message)))
                return
            except Exception as e:  # not an answer: kraft's code failed
                self._fail(f"broker {leader.id}: a replica fetch raised {type(e).__name__}: {e}")
            reply(_encode(ReplicationAnswer(id=message.id, fetch=fetch_response(call, results, 0))))

        leader.held_fetches[replica_id] = self.loop.create_task(serve())

    def check_leader_epoch(self, node: Node, key: tuple[str, int], epoch: int) -> None:
        """Before a broker process applies a partition's registration (`key`: topic id, partition)."""
        previous = node.leader_epochs.get(key, -1)
        if epoch < previous:
            self._fail(f"broker {node.id}: {key} leader epoch went back from {previous} to {epoch}")
        node.leader_epochs[key] = epoch

    def check_one_leader(self, node: Node, key: tuple[str, int], leader_epoch: int) -> None:
        """After a broker became a partition's leader (`key`: topic id, partition): one leader
        per leader epoch, ever (a replica becomes leader only when its role is applied)."""
        owner = self.leader_of_epoch.setdefault((*key, leader_epoch), node.id)
        if owner != node.id:
            self._fail(f"{key} led by {owner} and {node.id} at leader epoch {leader_epoch}")

    # -- the admin client -------------------------------------------------------------------------

    def _admin(self) -> None:
        if not self.faults:
            return
        target = self.nodes[self.rng.choice(self.ids)]
        draw, name = self.rng.random(), f"topic-{self.rng.randint(0, 15)}"  # sometimes one that exists
        call: Callable[[ControllerService], Awaitable[dict[str, Any]]]
        if target.cache.image.topic_by_name(OFFSETS_TOPIC) is None:  # the coordinator's, on first use
            call, what = (lambda service: service.create_topics(OFFSETS_TOPIC, 1, 3)), "create_topics"
        elif draw < 0.5 and self.topics_created < 12:
            rf = self.rng.choice((2, 3))
            call, what = (lambda service: service.create_topics(name, 2, rf)), "create_topics"
        elif draw < 0.6:
            call, what = (lambda service: service.delete_topic(name)), "delete_topic"
        elif draw < 0.7:
            count = self.rng.randint(2, 4)
            call, what = (lambda service: service.create_partitions(name, count)), "create_partitions"
        else:
            call, what = (lambda service: service.elect_leaders()), "elect_leaders"

        def answered(error: str | None, response: Any) -> None:
            if error is None and what == "create_topics":
                self.topics_created += 1

        self.send(CLIENT, target.id, what,
                  lambda: self._serve(target, what, call, answered))

    def _commit_offset(self) -> None:
        """A member-less consumer commits ever higher offsets to the coordinator it finds in a
        broker's metadata; one commit in flight."""
        if not self.faults or self._committing:
            return
        view = self.nodes[self.rng.choice(self.ids)].cache.image.partition(OFFSETS_TOPIC, 0)
        if view is None or view.leader == NO_LEADER:
            return
        self._committing, self._next_commit = True, self._next_commit + 1
        offset, coordinator = self._next_commit, self.nodes[view.leader]

        def answered(written_ms: int | None) -> None:
            self._committing = False
            if written_ms is not None:
                self.acked_commit = max(self.acked_commit, (written_ms, offset))
                self._count("offset_commit")

        def request() -> None:
            assert coordinator.groups is not None
            groups = coordinator.groups
            self.loop.create_task(self._offset_commit(groups, offset, lambda written_ms: self.send(
                coordinator.id, CLIENT, "commit answer", lambda: answered(written_ms))))

        self.send(CLIENT, coordinator.id, f"commit {offset}", request)
        self._at(self.now + self.settings.request_timeout_ms, lambda: self._give_up_commit(offset))

    @staticmethod
    async def _offset_commit(groups: SimGroupCoordinator, offset: int,
                             done: Callable[[int | None], None]) -> None:
        """OffsetCommit of `offset` for the group's (`sim`, 0) by a member-less committer, through
        the coordinator runtime's write queue: `done(the coordinator's clock when it wrote it)`,
        or `done(None)` when it failed."""
        written = [-1]

        def commit(shard: GroupShard, now: int) -> Any:
            written[0] = now
            return shard.commit_offsets(GROUP, "", -1, {("sim", 0): (offset, "")}, now)

        try:
            await groups.write(0, "offset_commit", commit)
        except KraftError:
            done(None)  # NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS / the append failed
            return
        done(written[0])

    def _give_up_commit(self, offset: int) -> None:
        if self._next_commit == offset:
            self._committing = False

    def _produce(self) -> None:
        """A producer writes one batch with acks=all to a partition of a topic it finds in a
        broker's metadata, at the leader named there; what is acknowledged is remembered for the
        check after the heal (`check_acknowledged_writes`)."""
        if not self.faults:
            return
        image = self.nodes[self.rng.choice(self.ids)].cache.image
        names = sorted(name for name in image.topics.by_name if name != OFFSETS_TOPIC)
        if not names:
            return
        name = self.rng.choice(names)
        partitions = image.topics.by_name[name].partitions
        index = self.rng.choice(sorted(partitions))
        target = self.nodes.get(partitions[index].leader)
        if target is None:
            return
        self._produced += 1
        value = f"{self.seed}:{self._produced}".encode()
        batch = build_batch([(None, value, [], 1_700_000_000_000 + self.now)])

        async def produce() -> None:
            assert target.replicas is not None
            replica = target.replicas.replica(name, index)  # the topic id of what it appends to
            [result] = await target.replicas.produce([ProduceEntry(name, index, batch)], -1,
                                                     self.settings.request_timeout_ms)
            acked = None if result.error_code is not None or replica is None else (
                replica.state.topic_id, name, index, result.base_offset, value)
            self.send(target.id, CLIENT, f"produce answer {result.error_code}", lambda: self._acknowledged(acked))

        self.send(CLIENT, target.id, f"produce {name}-{index}", lambda: self.loop.create_task(produce()))

    def _acknowledged(self, write: tuple[str, str, int, int, bytes] | None) -> None:
        if write is not None:
            self._count("acked_produce")
            self.acked_writes.append(write)

    def check_acknowledged_writes(self) -> None:
        """Once healed (every partition's ISR full): each acks=all write the producer saw
        acknowledged is in every ISR member's log, at its offset, unless its topic was deleted."""
        image = self._last_image
        for topic_id, name, index, offset, value in self.acked_writes:
            topic = image.topic_by_name(name)
            if topic is None or topic.topic_id != topic_id:
                continue
            for broker in topic.partitions[index].isr:
                held = self.nodes[broker].logs.get(f"{name}-{index}")
                record = held[1].records().get(offset) if held is not None and held[0] == topic_id else None
                if record is None or record[1] != value:
                    self._fail(f"{name}-{index} offset {offset}: acknowledged {value!r} (acks=all), broker "
                               f"{broker} of the ISR {list(topic.partitions[index].isr)} holds "
                               f"{None if record is None else record[1]!r}")

    def check_loaded_offsets(self, node: Node, partition: int, leader_epoch: int, shard: GroupShard) -> None:
        """A coordinator that loaded the group as the partition's leader in the committed metadata
        holds the latest acknowledged commit, or one written after it: OffsetCommit is
        last-writer-wins, so an older commit held up in the network (its coordinator paused) may
        land after a newer one, in Kafka too. Writes of a partition are serialized, so the
        coordinator's clock orders them. (A broker that missed its leadership moving, paused
        while its metadata was old, loads as a leader of an older epoch: it may answer stale
        offsets until its metadata moves on, as in Kafka; a commit it took is not acknowledged,
        its high watermark held by followers that left it, else the next load at the current
        epoch would miss it.)"""
        current = self._last_image.partition(OFFSETS_TOPIC, partition)
        if current is None or current.leader_epoch != leader_epoch:
            self._count("stale_coordinator_load")
            return
        group = shard.groups.get(GROUP)
        held = group.offsets.get(("sim", 0)) if group is not None else None
        loaded = (-1, -1) if held is None else (held.commit_timestamp_ms, held.offset)
        if loaded[0] < self.acked_commit[0]:
            self._fail(f"node {node.id} loaded group {GROUP} at offset {loaded[1]} (written at {loaded[0]} ms), "
                       f"{self.acked_commit[1]} was acknowledged (written at {self.acked_commit[0]} ms): a "
                       "committed offset went back")

    # -- invariants -------------------------------------------------------------------------------

    def _record_committed(self, node: Node) -> None:
        """The node's log up to its commit index must extend (or equal) the committed log."""
        for index in range(1, node.commit_index + 1):
            entry = node.log[index - 1]
            if index <= len(self.committed):
                if self.committed[index - 1] != entry:
                    self._fail(f"node {node.id}: committed entry {index} is {entry}, was {self.committed[index - 1]}")
                continue
            self.committed.append(entry)
            outcome = apply_batch(self._reference, list(entry.batch), NoStateMachine())
            if outcome.applied:
                entries = zip(range(outcome.first_offset, outcome.last_offset + 1), entry.batch)
                _, self._last_image = apply_records(self._last_image, entries)
                self.images[self._last_image.offset] = self._last_image
                self.committed_topic_ids.update(t.topic_id for t in self._last_image.topics.by_name.values())
                self._check_committed_image(self._last_image)

    def _check_answer(self, node: Node, what: str, response: dict[str, Any]) -> None:
        """A controller answers a write only once its records are committed."""
        committed = self._last_image
        if what == "register" and response["broker_epoch"] > committed.offset:
            self._fail(f"controller {node.id} answered a registration at offset {response['broker_epoch']}, "
                       f"the log is committed up to {committed.offset}")
        elif what == "create_topics" and response["topic_id"] not in self.committed_topic_ids:
            self._fail(f"controller {node.id} answered the creation of {response['name']}, not committed")
        elif what == "alter_partition":
            reg = committed.partition(response["topic"], response["partition"])
            topic = committed.topic_by_name(response["topic"])
            if (topic is not None and topic.topic_id == response["topic_id"] and reg is not None
                    and reg.partition_epoch < response["partition_epoch"]):
                self._fail(f"controller {node.id} answered AlterPartition at partition epoch "
                           f"{response['partition_epoch']}, committed: {reg.partition_epoch}")

    def _check_committed_image(self, image: MetadataImage) -> None:
        for name, topic in image.topics.by_name.items():
            for index, reg in topic.partitions.items():
                if reg.leader == NO_LEADER:
                    continue
                if reg.leader not in reg.isr:
                    self._fail(f"offset {image.offset}: {name}-{index} led by {reg.leader} outside its ISR {reg.isr}")
                if not image.cluster.is_unfenced(reg.leader):
                    self._fail(f"offset {image.offset}: {name}-{index} led by fenced broker {reg.leader}")

    def check_invariants(self) -> None:
        if self._violation is not None:
            raise InvariantViolation(self._violation)
        for node in self.nodes.values():
            if not node.alive:
                continue
            if len(node.log) < node.commit_index:
                self._fail(f"node {node.id}: log of {len(node.log)} entries below its commit index {node.commit_index}")
            epoch = self.active_epoch(node) if node.role == "leader" else None
            if epoch is not None:
                other = self.active_of_epoch.setdefault(epoch, node.id)
                if other != node.id:
                    self._fail(f"two active controllers at epoch {epoch}: {other} and {node.id}")
            published, node.published = node.published, []
            for which, image in published:
                self._check_image(node, which, image)

    def _check_image(self, node: Node, which: str, image: MetadataImage) -> None:
        """A published image is the image of a prefix of the committed log."""
        expected = self.images.get(image.offset)
        if expected is None:
            self._fail(f"node {node.id}: {which} image at offset {image.offset}, not the end of a committed batch "
                       f"(committed up to {self._last_image.offset})")
        elif image != expected:
            self._fail(f"node {node.id}: {which} image at offset {image.offset} differs from the committed log's")

    def _fail(self, message: str) -> None:
        # kept too: a check that runs inside a metadata publisher raises into the loader, which
        # logs a failing publisher and goes on; the step's end raises it again
        self.note_violation(message)
        raise InvariantViolation(self._violation)

    def note_violation(self, message: str) -> None:
        """The run fails at the end of this step (the first violation is the one reported)."""
        self._violation = self._violation or f"seed {self.seed}, t={self.now}ms, step {self.steps}: {message}"

    def run_until(self, end_ms: int) -> None:
        """Runs with an error logged by kraft's code as a violation: kraft logs the exceptions
        its background work swallows (a replica manager's task, an ISR check) at ERROR."""
        kraft_log = logging.getLogger("kraft")
        errors, level = KraftErrors(self), kraft_log.level
        kraft_log.addHandler(errors)
        if kraft_log.getEffectiveLevel() > logging.ERROR:
            kraft_log.setLevel(logging.ERROR)
        try:
            super().run_until(end_ms)
        finally:
            kraft_log.removeHandler(errors)
            kraft_log.setLevel(level)

    # -- the end ----------------------------------------------------------------------------------

    def heal(self) -> None:
        """No more faults: everyone restarts, journals work, messages arrive. The quorum must
        elect an active controller, every broker be registered, unfenced and caught up, and every
        partition led with a full ISR."""
        self.faults = False
        for node in self.nodes.values():
            node.journal_failed_until = node.paused_until = 0
            if not node.alive:
                self._restart(node)
        end = self.now + 15_000
        while self.now < end:
            self.run_until(self.now + 250)
            if self._healed():
                self.check_acknowledged_writes()
                return
        raise InvariantViolation(f"seed {self.seed}: the cluster did not heal: " + self.describe())

    def _healed(self) -> bool:
        active = [n for n in self.nodes.values() if self.active_epoch(n) is not None]
        if len(active) != 1:
            return False
        image = active[0].controller_loader.image
        if any(n.broker_loader.image.offset != image.offset or n.state.state is not BrokerState.RUNNING
               for n in self.nodes.values()):
            return False
        return all(reg.leader != NO_LEADER and set(reg.isr) == set(reg.replicas)
                   for t in image.topics.by_name.values() for reg in t.partitions.values())

    def describe(self) -> str:
        return "; ".join(
            f"node {n.id}: {n.role} t{n.term} log {len(n.log)} commit {n.commit_index} "
            f"image {n.controller_loader.image.offset}/{n.broker_loader.image.offset} {n.state.state.value}"
            for n in self.nodes.values())


def run_seed(seed: int, settings: SimSettings = SimSettings(), trace: bool = False) -> Simulation:
    try:
        return Simulation(seed, settings, trace).run()
    except InvariantViolation:
        raise
    except Exception as e:  # kraft's code raised: the seed reproduces it as well
        raise InvariantViolation(f"seed {seed}: {type(e).__name__}: {e}") from e


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--seeds", type=int, default=1, help="run this many seeds from --seed")
    parser.add_argument("--trace", action="store_true", help="print every step")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO if args.trace else logging.CRITICAL, format="        %(message)s")
    for seed in range(args.seed, args.seed + args.seeds):
        sim = run_seed(seed, trace=args.trace)
        print(f"seed {seed}: {sim.steps} steps, {len(sim.committed)} committed entries, "
              f"metadata offset {sim._last_image.offset}, {sim.counts}")


if __name__ == "__main__":
    main()
