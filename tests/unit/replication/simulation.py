"""A deterministic simulation of one partition's replication (TigerBeetle's VOPR, etcd's rafttest):
the real cores, a seeded scheduler, faults, and invariants checked after every step.

What runs is the production code: each broker's `kraft.broker.replication.partition.Partition`
(make-leader / make-follower, epoch checks, both sides of a fetch, ISR shrink / expand), the
follower and leader rules under it, the real `LogValidator` and `LeaderEpochFileCache` in an
in-memory log (`memory_log.py`), and as the controller the real handlers
(`kraft.controller.handlers`: register_broker, broker_heartbeat, fence_broker, alter_partition,
elect_leaders, with `metadata/partition_change.py`'s election and ISR rules) replayed into real
images by `kraft.metadata.delta.apply_records`. This module is only the shell around them, doing what
the replica manager, the fetchers, the broker lifecycle and the network do: the actions each core
returns are performed, and every message (fetch request and response, AlterPartition and its answer,
registration, heartbeat, metadata fetch) goes through a network that drops, delays (so reorders)
and duplicates it. Brokers crash (kill -9: the log stays; power loss: the unflushed suffix is lost)
and restart from their last metadata snapshot, re-registering as a new incarnation, as kraft-node
does. Time is simulated (`now_ms`), every random choice comes from one `random.Random(seed)`, so a
seed replays exactly.

Invariants after every step: each core's own (log_start <= HW <= LEO; as leader: in the ISR,
ISR within the replicas); at most one leader per leader epoch, ever; the controller's
registration is sane (leader in the ISR, ISR within the replicas, epochs never go backwards); a
record below any replica's high watermark never changes (what consumers saw is never truncated);
every acknowledged (acks=all) record is on every in-sync replica that is not a restarted
incarnation still unknown to the controller; on every replica, what a read_committed reader sees
below its last stable offset (LSO <= HW <= LEO is each core's own invariant) holds no record of a
transaction that was not decided COMMIT (aborted or still undecided). Transactional producers
write through the leaders they find, verified as KIP-890's coordinator would while their
transaction is undecided, with acks=all; a coordinator decides COMMIT only when every write was
acknowledged, and writes the marker to the leader until the high watermark passes it. After the
run the faults stop, the cluster heals, every transaction ends, and every acknowledged record
must be at its offset in the final leader's log, the replicas equal, and read_committed shows
exactly the committed transactions' records.

Replay a seed with a trace: `python3 tests/unit/replication/simulation.py --seed 1234 --trace`.
"""

from __future__ import annotations

import argparse
import logging
import random
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

if __package__ in (None, ""):  # run as a script: the repository root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from kraft.broker.replication.follower import Append, Backoff, PartitionFetchResponse
from kraft.broker.replication.alter_partition import leader_and_isr
from kraft.broker.replication.leader import IsrProposal, LeaderAndIsr
from kraft.broker.replication.partition import (
    Action, CompleteWaiters, Partition, ReplicaState, SendAlterPartition, StartFetching, StopFetching,
    is_current_registration,
)
from kraft.controller import handlers
from kraft.log.batch import Record, build_batch, decode_records
from kraft.log.config import LogConfig
from kraft.log.control import marker_value
from kraft.log.errors import LogError
from kraft.log.isolation import readable_batches
from kraft.metadata.delta import apply_records
from kraft.metadata.errors import MetadataError
from kraft.metadata.image import MetadataImage
from kraft.metadata.records import (
    NO_LEADER, ClaimController, Endpoint, MetadataRecord, Partition as PartitionRecord, RegisterBroker, Topic,
    UnfenceBroker,
)
from tests.unit.replication.memory_log import MemoryLog
from tests.unit.sim_loop import Incarnation, SimWorld

TOPIC = "sim"
TOPIC_ID = "t-sim"
CONTROLLER = 0  # the controller's address on the simulated network
CONTROLLER_EPOCH = 1


class InvariantViolation(AssertionError):
    pass


@dataclass(frozen=True)
class SimSettings:
    brokers: int = 3
    min_insync_replicas: int = 2
    duration_ms: int = 6_000  # faults and produces, then the heal
    drop: float = 0.05
    duplicate: float = 0.05
    max_delay_ms: int = 60
    replica_lag_time_max_ms: int = 400
    alter_partition_retry_ms: int = 300
    fetch_backoff_ms: int = 30
    fetch_wait_ms: int = 40  # an empty answer: the long poll's wait, before fetching again
    request_timeout_ms: int = 250
    heartbeat_interval_ms: int = 60
    session_timeout_ms: int = 400
    metadata_interval_ms: int = 40
    produce_interval_ms: int = 25
    produce_timeout_ms: int = 500
    fault_interval_ms: int = 300
    restart_after_ms: tuple[int, int] = (50, 900)
    flush_interval_ms: tuple[int, int] = (50, 600)
    power_loss: float = 0.5  # of the crashes (when allowed): lose the unflushed suffix too
    # KIP-903's faults, off by default so the regression seeds keep their schedules: of the fault
    # ticks, a broker applying no metadata for a while (a leader working from an older view); of
    # the messages, one held up in the network far longer than `max_delay_ms` (a copy of an
    # AlterPartition arriving after its joiner restarted, re-registered and was unfenced)
    metadata_stall: float = 0.0
    metadata_stall_ms: tuple[int, int] = (200, 1500)
    long_delay: float = 0.0
    long_delay_ms: tuple[int, int] = (200, 1500)
    transactional_producers: int = 2
    txn_interval_ms: int = 30


# the settings of `--stalls` and of the stall sweep: metadata stalls and held-up messages
STALLS = SimSettings(metadata_stall=0.3, long_delay=0.02)


@dataclass
class Broker:
    id: int
    log: MemoryLog
    image: MetadataImage
    snapshot: MetadataImage  # what a restart loads (kraft-node's broker.snapshot)
    broker_epoch: int
    incarnation: int = 0
    alive: bool = True
    core: Partition | None = None
    fetching: tuple[int, int] | None = None  # (leader, leader epoch) per the last StartFetching
    fetch_request: int = 0  # the id of the fetch in flight (0: none)
    registered: bool = True  # this incarnation's registration committed (answer received)
    lost_data: bool = False  # restarted after a power loss, not yet registered again
    stalled_until: int = 0  # applies no metadata before this time (a metadata stall)


@dataclass
class PendingProduce:
    broker: int
    incarnation: int
    leader_epoch: int
    first_offset: int
    next_offset: int
    value: bytes
    deadline_ms: int
    on_done: Callable[[bool], None] | None = None  # acknowledged (True) or failed / timed out


@dataclass
class TxnClient:
    """A transactional producer with its coordinator's view of its transaction."""

    producer_id: int
    epoch: int = 0
    sequence: int = 0
    txn: int = 0  # the open transaction's id, 0: none
    writes_left: int = 0
    in_flight: bool = False  # a write or the marker waits for its acknowledgement
    failed: bool = False  # a write of this transaction failed: it must abort
    decision: bool | None = None  # True COMMIT / False ABORT, decided, marker not yet acknowledged


class Simulation(SimWorld):
    def __init__(self, seed: int, settings: SimSettings = SimSettings(), trace: bool = False) -> None:
        super().__init__(seed, settings, trace)
        self.settings = settings
        self._ids = 0
        self.config = LogConfig(min_insync_replicas=settings.min_insync_replicas)
        ids = tuple(range(1, settings.brokers + 1))
        self.broker_ids = ids
        records: list[MetadataRecord] = [ClaimController(node_id=CONTROLLER,
                                                          controller_epoch=CONTROLLER_EPOCH)]
        for b in ids:
            records += [RegisterBroker(broker_id=b, incarnation_id=f"inc-{b}-0",
                                       endpoints=(Endpoint("HTTP", "127.0.0.1", 9000 + b),),
                                       broker_epoch=b),
                        UnfenceBroker(broker_id=b, broker_epoch=b)]
        replicas = ids[:3]
        records += [Topic(name=TOPIC, topic_id=TOPIC_ID),
                    PartitionRecord(topic_id=TOPIC_ID, partition=0, replicas=replicas, isr=replicas,
                                    leader=replicas[0])]
        self.image = MetadataImage.EMPTY
        self.controller_settings = handlers.ControllerSettings()
        self.last_heartbeat = {b: 0 for b in ids}
        self.latest_incarnation = {b: 0 for b in ids}
        self._commit(records)
        self.brokers = {b: Broker(b, MemoryLog(self.config), self.image, self.image, b) for b in ids}
        # checks
        self.leader_of_epoch: dict[int, int] = {}
        self.controller_epochs = (self.partition().leader_epoch, self.partition().partition_epoch)
        self.committed: dict[int, tuple[int, bytes | None]] = {}  # offset -> (epoch, value) below a HW
        self.acked: dict[int, bytes] = {}  # offset -> value of acknowledged records
        self._acked_order: list[int] = []
        self._checked_hw: dict[int, int] = {}  # broker -> offsets below this were checked
        self._checked_acked: dict[int, tuple[object, int]] = {}  # broker -> (log version, count)
        self.pending: list[PendingProduce] = []
        self.produced = 0
        self.produced_acks_all = 0
        # transactions: the decided outcome of each, the transaction of each transactional value
        self.txn_clients = [TxnClient(5_000 + i) for i in range(settings.transactional_producers)]
        self.txn_outcome: dict[int, bool] = {}
        self.txn_of: dict[bytes, int] = {}
        self._txns = 0
        self._checked_lso: dict[int, tuple[object, int]] = {}  # broker -> (log version, offset)
        for b in ids:
            self._start_broker(self.brokers[b])
        self._every(100, self._expire_sessions)
        self._every(settings.produce_interval_ms, self._produce)
        for client in self.txn_clients:
            self._every(settings.txn_interval_ms, lambda c=client: self._transaction_step(c))
        self._every(settings.fault_interval_ms, self._inject_fault)

    # -- the network and the run -----------------------------------------------------------------

    def _alive(self, b: int, incarnation: int) -> bool:
        broker = self.brokers[b]
        return broker.alive and broker.incarnation == incarnation

    def _send(self, src: int, dst: int, what: str, deliver: Callable[[], None],
              reliable: bool = False) -> None:
        """One message; lost when the destination is down at delivery (requests of a process that
        died meanwhile still arrive: they were on the wire)."""
        def arrive() -> None:
            if dst != CONTROLLER and not self.brokers[dst].alive:
                return
            self._log(f"deliver {what} {src}->{dst}")
            deliver()

        for delay in self._delays(what, src, dst, lossy=not reliable):
            self._at(self.now + delay, arrive)

    def run(self) -> Simulation:
        self.run_until(self.settings.duration_ms)
        self.heal()
        return self

    def after_step(self) -> None:
        self._settle_produces()
        self.check_invariants()

    def _new_id(self) -> int:
        self._ids += 1
        return self._ids

    # -- the controller (real handlers on real images) --------------------------------------------

    def partition(self) -> Any:
        return self.image.partition(TOPIC, 0)

    def _commit(self, records: list[MetadataRecord]) -> None:
        if not records:
            return
        request_id = uuid.UUID(int=self.rng.getrandbits(128)).hex
        stamped = [r.stamped(CONTROLLER_EPOCH, request_id) for r in records]
        _, self.image = apply_records(
            self.image, ((self.image.offset + 1 + i, r) for i, r in enumerate(stamped)))
        self._log(f"controller commits {[type(r).__name__ for r in records]}: {self.partition()}")

    def _controller_register(self, b: int, incarnation: int) -> int | None:
        if incarnation < self.latest_incarnation[b]:
            return None  # an older process's registration, overtaken on the wire
        self.latest_incarnation[b] = incarnation
        result = handlers.register_broker(
            self.image, self.controller_settings, b, f"inc-{b}-{incarnation}",
            [Endpoint("HTTP", "127.0.0.1", 9000 + b)])
        self._commit(list(result.records))
        self.last_heartbeat[b] = self.now
        assert result.response_from_image is not None
        return result.response_from_image(self.image)["broker_epoch"]

    def _controller_heartbeat(self, b: int, broker_epoch: int, offset: int) -> str | None:
        try:
            result = handlers.broker_heartbeat(self.image, self.controller_settings, b, broker_epoch,
                                               offset)
        except MetadataError as e:
            return e.error_code
        self.last_heartbeat[b] = self.now
        self._commit(list(result.records))
        return None

    def _expire_sessions(self) -> None:
        for b in self.broker_ids:
            registration = self.image.cluster.broker(b)
            if (registration is not None and not registration.fenced
                    and self.now - self.last_heartbeat[b] > self.settings.session_timeout_ms):
                self._log(f"controller: session of broker {b} expired")
                self._commit(list(handlers.fence_broker(
                    self.image, self.controller_settings, b).records))

    def _controller_alter_partition(self, b: int, broker_epoch: int,
                                    proposal: IsrProposal) -> tuple[str | None, LeaderAndIsr | None]:
        """The error, or the committed state the answer carries."""
        try:
            result = handlers.alter_partition(
                self.image, b, broker_epoch, TOPIC, 0, proposal.leader_epoch,
                proposal.partition_epoch, list(proposal.new_isr_with_epochs))
        except MetadataError as e:
            return e.error_code, None
        self._commit(list(result.records))
        return None, leader_and_isr(result.response)

    # -- brokers: the replica manager's, fetchers' and lifecycle's jobs ---------------------------

    def _start_broker(self, broker: Broker) -> None:
        process = Incarnation(broker, broker.incarnation)
        self._apply_image(broker, broker.snapshot)
        s = self.settings
        self._every(s.metadata_interval_ms, lambda: self._fetch_metadata(broker), process)
        self._every(s.heartbeat_interval_ms, lambda: self._heartbeat(broker), process)
        self._every(s.replica_lag_time_max_ms // 2, lambda: self._isr_check(broker), process)
        self._every(self.rng.randint(*s.flush_interval_ms), lambda: broker.log.flush(), process)
        self._every(100, lambda: self._register(broker), process)

    def _register(self, broker: Broker) -> None:
        if broker.registered:
            return
        inc = broker.incarnation

        def answer(epoch: int) -> None:
            if self._alive(broker.id, inc) and not broker.registered:
                broker.registered, broker.broker_epoch, broker.lost_data = True, epoch, False
                self._log(f"broker {broker.id} registered at epoch {epoch}")

        def request() -> None:
            epoch = self._controller_register(broker.id, inc)
            if epoch is not None:
                self._send(CONTROLLER, broker.id, "register answer", lambda: answer(epoch))

        self._send(broker.id, CONTROLLER, "register", request)

    def _heartbeat(self, broker: Broker) -> None:
        """BrokerLifecycle's loop: a STALE_BROKER_EPOCH answer means register again."""
        if not broker.registered:
            return
        inc, epoch, offset = broker.incarnation, broker.broker_epoch, broker.image.offset

        def answer(error: str | None) -> None:
            if (error == "STALE_BROKER_EPOCH" and self._alive(broker.id, inc)
                    and broker.broker_epoch == epoch):
                broker.registered, broker.broker_epoch = False, -1

        def request() -> None:
            error = self._controller_heartbeat(broker.id, epoch, offset)
            self._send(CONTROLLER, broker.id, "heartbeat answer", lambda: answer(error))

        self._send(broker.id, CONTROLLER, "heartbeat", request)

    def _fetch_metadata(self, broker: Broker) -> None:
        inc = broker.incarnation

        def answer(image: MetadataImage) -> None:
            if (self._alive(broker.id, inc) and image.offset > broker.image.offset
                    and self.now >= broker.stalled_until):
                self._apply_image(broker, image)

        def request() -> None:
            image = self.image
            self._send(CONTROLLER, broker.id, f"metadata at {image.offset}", lambda: answer(image))

        self._send(broker.id, CONTROLLER, "metadata fetch", request)

    def _apply_image(self, broker: Broker, image: MetadataImage) -> None:
        """The replica manager's publisher, for the one partition."""
        broker.image = image
        if self.rng.random() < 0.3:
            broker.snapshot = image
        registration = image.partition(TOPIC, 0)
        if registration is None or broker.id not in registration.replicas:
            return
        if broker.core is None:
            broker.core = Partition(
                broker.id, TOPIC, 0, broker.log,
                replica_lag_time_max_ms=self.settings.replica_lag_time_max_ms,
                alter_partition_retry_ms=self.settings.alter_partition_retry_ms,
                is_unfenced=lambda r: broker.image.cluster.is_unfenced(r),
                registered_broker_epoch=lambda r: getattr(broker.image.cluster.broker(r),
                                                          "broker_epoch", None),
            )
        state = ReplicaState(TOPIC_ID, registration.leader, registration.leader_epoch,
                             registration.partition_epoch, registration.replicas, registration.isr,
                             registration.removing_replicas)
        self._log(f"broker {broker.id} applies {registration}")
        may_lead = is_current_registration(image, broker.id, broker.broker_epoch)
        self._perform(broker, broker.core.apply_registration(state, self.now, may_lead=may_lead))

    def _perform(self, broker: Broker, actions: list[Action] | tuple[Action, ...]) -> None:
        for action in actions:
            if isinstance(action, StartFetching):
                target = (action.leader_id, action.leader_epoch)
                if broker.fetching != target:
                    broker.fetching = target
                    broker.fetch_request = 0  # the fetcher drops the request in flight
                    self._at(self.now, lambda inc=broker.incarnation: self._fetch(broker, inc))
            elif isinstance(action, StopFetching):
                broker.fetching, broker.fetch_request = None, 0
            elif isinstance(action, SendAlterPartition):
                self._send_alter_partition(broker, action.proposal)
            else:
                assert isinstance(action, CompleteWaiters)  # produces are settled after each step

    def _send_alter_partition(self, broker: Broker, proposal: IsrProposal) -> None:
        inc, epoch = broker.incarnation, broker.broker_epoch

        def answer(error: str | None, committed: LeaderAndIsr | None) -> None:
            if self._alive(broker.id, inc) and broker.core is not None:
                self._perform(broker, broker.core.on_alter_partition_response(proposal, error, committed))

        def request() -> None:
            error, committed = self._controller_alter_partition(broker.id, epoch, proposal)
            self._send(CONTROLLER, broker.id, "alter partition answer", lambda: answer(error, committed))

        self._count("alter_partition")
        self._send(broker.id, CONTROLLER, f"alter partition {proposal}", request)

    def _isr_check(self, broker: Broker) -> None:
        if broker.core is not None:
            self._perform(broker, broker.core.maybe_shrink_isr(self.now))

    # -- fetching ---------------------------------------------------------------------------------

    def _fetch(self, broker: Broker, incarnation: int) -> None:
        """The fetcher's loop, one request in flight; re-armed by the answer or a timeout."""
        core = broker.core
        if (not self._alive(broker.id, incarnation) or broker.fetching is None or core is None
                or broker.fetch_request != 0):
            return
        leader, leader_epoch = broker.fetching
        if not core.is_following(leader_epoch):
            return
        fetch_offset, last_fetched_epoch, _ = core.fetch_position()
        request = broker.fetch_request = self._new_id()
        replica_epoch = broker.broker_epoch

        def timeout() -> None:
            if broker.fetch_request == request and self._alive(broker.id, incarnation):
                broker.fetch_request = 0
                self._fetch(broker, incarnation)

        self._at(self.now + self.settings.request_timeout_ms, timeout)
        self._send(broker.id, leader, f"fetch {fetch_offset}@{last_fetched_epoch} e{leader_epoch}",
                   lambda: self._serve_fetch(self.brokers[leader], broker, incarnation, request,
                                             replica_epoch, leader_epoch, fetch_offset,
                                             last_fetched_epoch))

    def _serve_fetch(self, leader: Broker, follower: Broker, incarnation: int, request: int,
                     replica_epoch: int, current_leader_epoch: int, fetch_offset: int,
                     last_fetched_epoch: int) -> None:
        """The leader's replica_fetch for one partition (ReplicaManager._read_for_follower)."""
        response = self._fetch_answer(leader, follower.id, replica_epoch, current_leader_epoch,
                                      fetch_offset, last_fetched_epoch)
        self._send(leader.id, follower.id, f"fetch answer {response}",
                   lambda: self._on_fetch_answer(follower, incarnation, request,
                                                 current_leader_epoch, response))

    def _fetch_answer(self, leader: Broker, replica_id: int, replica_epoch: int,
                      current_leader_epoch: int, fetch_offset: int,
                      last_fetched_epoch: int) -> PartitionFetchResponse:
        def error(code: str) -> PartitionFetchResponse:
            return PartitionFetchResponse(-1, -1, -1, b"", None, code)

        registration = leader.image.cluster.broker(replica_id)
        if replica_epoch >= 0 and registration is not None and registration.broker_epoch != replica_epoch:
            return error("STALE_BROKER_EPOCH")
        core = leader.core
        if core is None:
            return error("NOT_LEADER_OR_FOLLOWER")
        refused = core.check_leader_epoch(current_leader_epoch)
        if refused is not None:
            return error(refused.error_code)
        if not core.is_leader:
            return error("NOT_LEADER_OR_FOLLOWER")
        plog = leader.log
        decision = core.on_fetch_request(replica_id, fetch_offset, last_fetched_epoch, self.now,
                                         replica_epoch=replica_epoch)
        if decision.error is not None:
            return PartitionFetchResponse(plog.high_watermark, plog.log_start_offset,
                                          plog.log_end_offset, b"", None, decision.error.error_code)
        if decision.diverging is not None:
            return PartitionFetchResponse(plog.high_watermark, plog.log_start_offset,
                                          plog.log_end_offset, b"", decision.diverging)
        self._perform(leader, decision.actions)
        records = plog.read(fetch_offset, self.rng.choice((200, 1 << 20))).records
        return PartitionFetchResponse(plog.high_watermark, plog.log_start_offset,
                                      plog.log_end_offset, records)

    def _on_fetch_answer(self, follower: Broker, incarnation: int, request: int, leader_epoch: int,
                         response: PartitionFetchResponse) -> None:
        if follower.fetch_request != request or not self._alive(follower.id, incarnation):
            return  # the fetcher gave up on this request (timeout, leader change)
        follower.fetch_request = 0
        core = follower.core
        if core is None or not core.is_following(leader_epoch):
            return
        action = core.on_fetch_response(response, self.now)
        if isinstance(action, Backoff):
            delay = self.settings.fetch_backoff_ms
        elif isinstance(action, Append) and not action.records:
            delay = self.settings.fetch_wait_ms
        else:
            delay = 1
        self._at(self.now + delay, lambda: self._fetch(follower, incarnation))

    # -- clients ----------------------------------------------------------------------------------

    def _produce(self) -> None:
        """A producer sends to the broker it believes leads (its metadata may be stale)."""
        if not self.faults:
            return
        view = self.brokers[self.rng.choice(self.broker_ids)].image.partition(TOPIC, 0)
        target = view.leader if view is not None and view.leader != NO_LEADER else self.rng.choice(
            self.broker_ids)
        broker = self.brokers[target]
        core = broker.core
        if not broker.alive or core is None:
            return
        acks = self.rng.choice((-1, -1, -1, 1))
        if core.check_produce(acks) is not None:
            return
        self.produced += 1
        value = b"v%d" % self.produced
        epoch = core.leader_state.leader_epoch
        try:
            info = broker.log.append_as_leader(build_batch([(None, value, [], 1_700_000_000_000)]),
                                               epoch, self.now)
        except ValueError:
            return  # led at an epoch older than its log's (a stale snapshot): the produce fails
        self._log(f"broker {target} appends {value!r} at {info.first_offset} epoch {epoch} acks={acks}")
        self._perform(broker, core.on_leader_append(self.now))
        if acks == -1:
            self.produced_acks_all += 1
            self.pending.append(PendingProduce(target, broker.incarnation, epoch, info.first_offset,
                                               info.last_offset + 1, value,
                                               self.now + self.settings.produce_timeout_ms))

    def _settle_produces(self) -> None:
        still = []
        for p in self.pending:
            broker = self.brokers[p.broker]
            core = broker.core
            if not self._alive(p.broker, p.incarnation) or core is None:
                if p.on_done is not None:
                    p.on_done(False)
                continue
            done = core.produce_completed(p.leader_epoch, p.next_offset)
            if done:
                self._log(f"acknowledged {p.value!r} at {p.first_offset}")
                assert p.first_offset not in self.acked, (p, self.acked[p.first_offset])
                self.acked[p.first_offset] = p.value
                self._acked_order.append(p.first_offset)
            elif done is None and self.now <= p.deadline_ms:
                still.append(p)
                continue
            if p.on_done is not None:
                p.on_done(bool(done))
        self.pending = still

    # -- transactions -----------------------------------------------------------------------------

    def _current_leader(self) -> Broker | None:
        """The partition's leader as the controller's image says, when it leads now."""
        broker = self.brokers.get(self.partition().leader)
        if broker is None or not broker.alive or broker.core is None or not broker.core.is_leader:
            return None
        return broker

    def _transaction_step(self, client: TxnClient) -> None:
        """One move of a transactional producer and its coordinator: begin, write (acks=all),
        decide, write the marker until acknowledged (then bump the epoch after a failed write,
        as KIP-360's producer does, so its sequences start again)."""
        if client.in_flight:
            return
        if client.decision is not None:
            self._write_marker(client)
        elif client.txn == 0:
            if self.faults:
                self._txns += 1
                client.txn, client.writes_left, client.failed = self._txns, self.rng.randint(1, 3), False
        elif client.failed or client.writes_left == 0 or not self.faults:
            commit = not client.failed and self.faults and self.rng.random() < 0.7
            client.decision = self.txn_outcome[client.txn] = commit
            self._count("txn_commit" if commit else "txn_abort")
            self._log(f"coordinator decides {'COMMIT' if commit else 'ABORT'} of txn {client.txn}")
        else:
            self._write_transactional(client)

    def _write_transactional(self, client: TxnClient) -> None:
        broker = self._current_leader()
        if broker is None or broker.core.check_produce(-1) is not None:
            return
        epoch = broker.core.leader_state.leader_epoch
        value = b"t%d-%d" % (client.txn, client.writes_left)
        batch = build_batch([(None, value, [], 1_700_000_000_000)], producer_id=client.producer_id,
                            producer_epoch=client.epoch, base_sequence=client.sequence, transactional=True)
        broker.log.verify_transaction(client.producer_id, client.epoch)  # the coordinator says yes
        try:
            info = broker.log.append_as_leader(batch, epoch, self.now)
        except (LogError, ValueError) as e:
            self._log(f"txn {client.txn} write refused: {e}")
            client.failed = True
            return
        self.txn_of[value] = client.txn
        client.sequence += 1
        client.writes_left -= 1
        client.in_flight = True
        self._perform(broker, broker.core.on_leader_append(self.now))

        def done(acknowledged: bool) -> None:
            client.in_flight = False
            client.failed = client.failed or not acknowledged

        self.produced_acks_all += 1
        self.pending.append(PendingProduce(broker.id, broker.incarnation, epoch, info.first_offset,
                                           info.last_offset + 1, value,
                                           self.now + self.settings.produce_timeout_ms, done))

    def _write_marker(self, client: TxnClient) -> None:
        broker = self._current_leader()
        if broker is None or broker.core.check_produce(-1) is not None:
            return
        epoch = broker.core.leader_state.leader_epoch
        try:
            info = broker.log.append_control(client.producer_id, client.epoch, 0, bool(client.decision),
                                             epoch, self.now)
        except (LogError, ValueError) as e:
            self._log(f"txn {client.txn} marker refused: {e}")
            return
        client.in_flight = True
        self._perform(broker, broker.core.on_leader_append(self.now))
        self.produced_acks_all += 1

        def done(acknowledged: bool) -> None:
            client.in_flight = False
            if acknowledged:
                self._log(f"txn {client.txn} ended")
                if client.failed:
                    client.epoch, client.sequence = client.epoch + 1, 0
                client.txn, client.decision = 0, None

        self.pending.append(PendingProduce(broker.id, broker.incarnation, epoch, info.first_offset,
                                           info.last_offset + 1, marker_value(0),
                                           self.now + self.settings.produce_timeout_ms, done))

    def _check_read_committed(self, broker: Broker) -> None:
        """Below its LSO a replica shows read_committed readers only non-transactional records
        and those of transactions decided COMMIT (checked once per offset while the log keeps
        its records, as `_check_committed`)."""
        plog = broker.log
        version = (id(plog), plog.truncations)
        previous, offset = self._checked_lso.get(broker.id, (None, 0))
        offset = max(plog.log_start_offset, offset if previous == version else 0)
        lso = plog.last_stable_offset
        if offset >= lso:
            return
        for record in read_committed(plog, offset):
            txn = self.txn_of.get(record.value)
            if txn is not None and self.txn_outcome.get(txn) is not True:
                self._fail(f"broker {broker.id}: read_committed shows {record.value!r} at "
                           f"{record.offset} below its LSO {lso}, of a transaction "
                           f"{'aborted' if txn in self.txn_outcome else 'undecided'}")
        self._checked_lso[broker.id] = (version, max(offset, lso))

    # -- faults -----------------------------------------------------------------------------------

    def _inject_fault(self) -> None:
        if not self.faults:
            return
        if self.settings.metadata_stall and self.rng.random() < self.settings.metadata_stall:
            victim = self.rng.choice([b for b in self.brokers.values() if b.alive])
            victim.stalled_until = self.now + self.rng.randint(*self.settings.metadata_stall_ms)
            self._count("metadata_stall")
            self._log(f"STALL broker {victim.id}'s metadata until {victim.stalled_until}")
            return
        if self.rng.random() < 0.15:  # not a fault: an admin's preferred-leader election
            self._commit(list(handlers.elect_leaders(self.image).records))
            return
        dead = [b for b in self.brokers.values() if not b.alive]
        if dead and self.rng.random() < 0.5:
            return  # restarts are scheduled at crash time
        # One data-losing failure at a time (Kafka's promise is for a single failure): no crash
        # while a power-lost broker may still be in the ISR with a short log.
        if any(b.lost_data for b in self.brokers.values()):
            return
        live = [b for b in self.brokers.values() if b.alive]
        if len(live) < 2:
            return
        victim = self.rng.choice(live)
        # A power loss only while redundancy is whole (everyone up and in sync): after one, the
        # sole in-sync replica losing its page cache is a second failure, beyond acks=all's promise.
        reg = self.partition()
        whole = not dead and set(reg.isr) == set(reg.replicas)
        power_loss = whole and self.rng.random() < self.settings.power_loss
        self.crash(victim, power_loss)

    def crash(self, broker: Broker, power_loss: bool) -> None:
        self._count("power_loss" if power_loss else "kill")
        broker.alive = False
        broker.core, broker.fetching, broker.fetch_request = None, None, 0
        if power_loss:
            cut = self.rng.randint(broker.log.recovery_point, broker.log.log_end_offset)
            broker.log = broker.log.after_power_loss(cut)
            broker.lost_data = True
        self._log(f"CRASH broker {broker.id} ({'power loss' if power_loss else 'kill'}), log end "
                  f"{broker.log.log_end_offset}")
        self._at(self.now + self.rng.randint(*self.settings.restart_after_ms), lambda: self._restart(broker))

    def _restart(self, broker: Broker) -> None:
        if broker.alive:
            return
        self._log(f"RESTART broker {broker.id} from the snapshot at {broker.snapshot.offset}")
        broker.alive = True
        broker.incarnation += 1
        broker.registered, broker.broker_epoch = False, -1
        broker.image = MetadataImage.EMPTY
        self._start_broker(broker)

    # -- invariants -------------------------------------------------------------------------------

    def check_invariants(self) -> None:
        reg = self.partition()
        if reg.leader != NO_LEADER and reg.leader not in reg.isr:
            self._fail(f"controller: leader {reg.leader} not in ISR {reg.isr}")
        if not set(reg.isr) <= set(reg.replicas):
            self._fail(f"controller: ISR {reg.isr} not in replicas")
        epochs = (reg.leader_epoch, reg.partition_epoch)
        if epochs < self.controller_epochs:
            self._fail(f"controller epochs went back to {epochs}")
        self.controller_epochs = epochs
        for broker in self.brokers.values():
            core = broker.core
            if broker.alive and core is not None:
                core.check_invariants()
                if core.leader_state is not None:
                    epoch = core.leader_state.leader_epoch
                    other = self.leader_of_epoch.setdefault(epoch, broker.id)
                    if other != broker.id:
                        self._fail(f"two leaders at epoch {epoch}: {other}, {broker.id}")
            self._check_committed(broker)
            self._check_read_committed(broker)
        for b in self.broker_ids:
            broker = self.brokers[b]
            if b not in reg.isr or broker.lost_data:  # lost_data: not yet known as restarted
                self._checked_acked.pop(b, None)
                continue
            version = (id(broker.log), broker.log.truncations)
            previous, done = self._checked_acked.get(b, (None, 0))
            start = done if previous == version else 0
            records = broker.log.records()
            for offset in self._acked_order[start:]:
                held, value = records.get(offset), self.acked[offset]
                if held is None or held[1] != value:
                    self._fail(f"acknowledged {value!r} at {offset} missing on ISR member {b}: {held}")
            self._checked_acked[b] = (version, len(self._acked_order))

    def _check_committed(self, broker: Broker) -> None:
        """Below a replica's HW the log never changes: consumers may have read it. Offsets are
        checked once while the HW stays above them (it drops with any truncation below it)."""
        plog, records = broker.log, broker.log.records()
        start = max(plog.log_start_offset, min(self._checked_hw.get(broker.id, 0), plog.high_watermark))
        for offset in range(start, plog.high_watermark):
            held = records.get(offset)
            if held is None:
                continue
            seen = self.committed.setdefault(offset, held)
            if seen != held:
                self._fail(f"broker {broker.id}: committed offset {offset} holds {held}, was {seen}")
        self._checked_hw[broker.id] = plog.high_watermark

    def _fail(self, message: str) -> None:
        raise InvariantViolation(f"seed {self.seed}, t={self.now}ms, step {self.steps}: {message}")

    # -- the end ----------------------------------------------------------------------------------

    def heal(self) -> None:
        """No more faults: everyone restarts, messages arrive, the ISR fills again; then every
        acknowledged record must be in the leader's log and the replicas equal to it."""
        self.faults = False
        for p in self.pending:
            if p.on_done is not None:
                p.on_done(False)
        self.pending = []
        for broker in self.brokers.values():
            if not broker.alive:
                self._restart(broker)
        end = self.now + 20_000
        while self.now < end:
            self.run_until(self.now + 500)
            reg = self.partition()
            leader = self.brokers.get(reg.leader)
            if (leader is not None and leader.core is not None and leader.core.is_leader
                    and set(reg.isr) == set(reg.replicas)
                    and all(c.txn == 0 for c in self.txn_clients)
                    and all(self.brokers[b].log.log_end_offset == leader.log.log_end_offset
                            and self.brokers[b].log.high_watermark == leader.log.log_end_offset
                            for b in reg.replicas)):
                break
        else:
            raise InvariantViolation(f"seed {self.seed}: the cluster did not heal: {self.partition()}, "
                                     + ", ".join(f"{b.id}: {b.log!r}" for b in self.brokers.values()))
        final = leader.log.records()
        for offset, value in sorted(self.acked.items()):
            if offset not in final or final[offset][1] != value:
                self._fail(f"acknowledged {value!r} at {offset} lost: the leader has {final.get(offset)}")
        for b in reg.replicas:
            if self.brokers[b].log.records() != final:
                self._fail(f"broker {b} differs from the leader")
        plog = leader.log
        seen = {r.value for r in read_committed(plog, plog.log_start_offset) if r.value in self.txn_of}
        committed = {v for v, txn in self.txn_of.items() if self.txn_outcome.get(txn)}
        if plog.log_start_offset == 0 and seen != committed:
            self._fail(f"read_committed shows {sorted(seen - committed)} not committed and misses "
                       f"{sorted(committed - seen)} of committed transactions")


def read_committed(plog: MemoryLog, offset: int) -> Iterator[Record]:
    """The records a read_committed reader sees from `offset` up to the log's LSO."""
    while True:
        info = plog.read(offset, 1 << 20, read_committed=True)
        if not info.records:
            return
        aborted = [(t.producer_id, t.first_offset) for t in info.aborted_transactions]
        for pos, _, visible in readable_batches(info.records, aborted):
            for record in decode_records(info.records, pos) if visible else ():
                if record.offset >= offset:
                    yield record
        offset = info.next_offset


def run_seed(seed: int, settings: SimSettings = SimSettings(), trace: bool = False) -> Simulation:
    return Simulation(seed, settings, trace).run()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--seeds", type=int, default=1, help="run this many seeds from --seed")
    parser.add_argument("--trace", action="store_true", help="print every step")
    parser.add_argument("--stalls", action="store_true",
                        help="add metadata stalls and held-up messages (STALLS)")
    args = parser.parse_args()
    settings = STALLS if args.stalls else SimSettings()
    logging.basicConfig(level=logging.INFO if args.trace else logging.CRITICAL,
                        format="        %(message)s")
    for seed in range(args.seed, args.seed + args.seeds):
        sim = run_seed(seed, settings, trace=args.trace)
        print(f"seed {seed}: {sim.steps} steps, {len(sim.acked)} acknowledged of {sim.produced}, "
              f"{sim.counts}")


if __name__ == "__main__":
    main()
