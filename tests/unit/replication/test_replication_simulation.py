"""A deterministic simulation of one partition, RF 3, min.insync.replicas 2: a controller, three
brokers running the real pure cores (LeaderState, diverging_epoch, on_fetch_response, the epoch
cache, PartitionChangeBuilder), metadata that reaches each broker late, crashes and restarts,
lost AlterPartitions and time passing. Hypothesis drives random fault sequences; afterwards every
write acknowledged with acks=all is in the final leader's log at its offset, and every replica
holds a prefix of the leader's log."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.broker.replication.follower import Append, PartitionFetchResponse, Truncate, on_fetch_response
from kraft.broker.replication.leader import IsrProposal, LeaderState, diverging_epoch
from log.epoch_cache import LeaderEpochFileCache
from metadata.errors import MetadataError
from metadata.image import PartitionRegistration
from metadata.partition_change import PartitionChangeBuilder, check_isr_change
from metadata.records import NO_LEADER

MIN_ISR = 2
LAG_MS = 1_000
BROKERS = (1, 2, 3)


@dataclass
class Broker:
    id: int
    alive: bool = True
    log: list[tuple[int, int]] = field(default_factory=list)  # (epoch, value) per offset
    cache: LeaderEpochFileCache = field(default_factory=lambda: LeaderEpochFileCache(None))
    hw: int = 0
    known: PartitionRegistration | None = None
    leader_state: LeaderState | None = None

    @property
    def leo(self) -> int:
        return len(self.log)

    def end_offset_for(self, epoch: int) -> tuple[int, int]:
        return self.cache.end_offset_for(epoch, self.leo)

    def apply_metadata(self, reg: PartitionRegistration, now: int) -> None:
        self.known = reg
        if reg.leader != self.id:
            self.leader_state = None
            return
        if self.leader_state is None or self.leader_state.leader_epoch != reg.leader_epoch:
            if self.cache.latest_epoch is None or self.cache.latest_epoch < reg.leader_epoch:
                self.cache.assign(reg.leader_epoch, self.leo)
            self.leader_state = LeaderState.become_leader(
                self.id, reg.leader_epoch, self.leo, reg.partition_epoch, reg.replicas, reg.isr, now)
        else:
            self.leader_state.on_metadata(reg.partition_epoch, reg.replicas, reg.isr)

    def advance_hw(self) -> None:
        if self.leader_state is not None:
            self.hw = self.leader_state.high_watermark(self.leo, self.hw, MIN_ISR)

    def truncate(self, offset: int) -> None:
        del self.log[offset:]
        self.cache.truncate_from_end(offset)
        self.hw = min(self.hw, offset)


class Cluster:
    def __init__(self) -> None:
        self.now = 0
        self.reg = PartitionRegistration(replicas=BROKERS, isr=BROKERS, leader=1)
        self.fenced: set[int] = set()
        self.brokers = {b: Broker(b) for b in BROKERS}
        for b in self.brokers.values():
            b.apply_metadata(self.reg, 0)
        self.pending_acks: list[tuple[int, int, int, int]] = []  # broker, epoch, offset, value
        self.acked: list[tuple[int, int]] = []  # (offset, value)
        self.next_value = 0

    # -- controller ---------------------------------------------------------------------------

    def _change(self, builder: PartitionChangeBuilder) -> None:
        change = builder.build()
        if change is not None:
            self.reg = self.reg.merge(change)

    def _builder(self) -> PartitionChangeBuilder:
        return PartitionChangeBuilder("t", 0, self.reg, lambda b: b != NO_LEADER and b not in self.fenced)

    def fence(self, broker: int) -> None:
        self.fenced.add(broker)
        isr = tuple(b for b in self.reg.isr if b != broker) or self.reg.isr
        self._change(self._builder().set_target_isr(isr))

    def unfence(self, broker: int) -> None:
        self.fenced.discard(broker)
        if self.reg.leader == NO_LEADER:
            self._change(self._builder())

    def alter_partition(self, leader: int, proposal: IsrProposal) -> bool:
        reg = self.reg
        if (reg.leader != leader or proposal.leader_epoch != reg.leader_epoch
                or proposal.partition_epoch != reg.partition_epoch):
            return False
        try:
            isr = check_isr_change(reg, proposal.new_isr, lambda b: b not in self.fenced)
        except MetadataError:
            return False
        self._change(self._builder().set_target_isr(isr))
        return True

    # -- broker actions -----------------------------------------------------------------------

    def produce(self, b: int) -> None:
        broker = self.brokers[b]
        state = broker.leader_state
        if not broker.alive or state is None or len(state.isr) < MIN_ISR:
            return  # not leader, or NOT_ENOUGH_REPLICAS before appending
        value = self.next_value
        self.next_value += 1
        broker.log.append((state.leader_epoch, value))
        self.pending_acks.append((b, state.leader_epoch, broker.leo - 1, value))
        broker.advance_hw()

    def fetch(self, f: int) -> None:
        follower = self.brokers[f]
        reg = follower.known
        if not follower.alive or reg is None or reg.leader in (f, NO_LEADER):
            return
        leader = self.brokers[reg.leader]
        state = leader.leader_state
        if (not leader.alive or state is None or leader.known is None
                or leader.known.leader_epoch != reg.leader_epoch or f not in state.followers):
            return  # FENCED / UNKNOWN_LEADER_EPOCH / NOT_LEADER_OR_FOLLOWER: back off
        latest = follower.cache.latest_entry
        div = diverging_epoch(leader.end_offset_for, -1 if latest is None else latest.epoch,
                              follower.leo)
        records: list[tuple[int, int]] = []
        if div is not None:
            resp = PartitionFetchResponse(leader.hw, 0, leader.leo, b"", div)
        elif follower.leo > leader.leo:
            resp = PartitionFetchResponse(leader.hw, 0, leader.leo, b"", None, "OFFSET_OUT_OF_RANGE")
        else:
            state.on_follower_fetch(f, follower.leo, leader.leo, self.now)
            leader.advance_hw()
            records = leader.log[follower.leo:]
            resp = PartitionFetchResponse(leader.hw, 0, leader.leo, b"x" if records else b"")
        action = on_fetch_response(resp, follower.leo, follower.end_offset_for,
                                   None if latest is None else latest.start_offset)
        if isinstance(action, Truncate):
            follower.truncate(action.offset)
        elif isinstance(action, Append):
            for epoch, value in records:
                if follower.cache.latest_epoch != epoch:
                    follower.cache.assign(epoch, follower.leo)
                follower.log.append((epoch, value))
            # appending from the leader: the follower's whole log is a prefix of the leader's
            assert follower.log == leader.log[:follower.leo]
            follower.hw = max(follower.hw, min(action.leader_high_watermark, follower.leo))

    def isr_check(self, b: int, lose: bool) -> None:
        broker = self.brokers[b]
        state = broker.leader_state
        if not broker.alive or state is None:
            return
        proposal = state.propose_isr_change(broker.leo, broker.hw, self.now, LAG_MS,
                                            lambda r: r not in self.fenced, 5 * LAG_MS)
        if proposal is not None and not lose and not self.alter_partition(b, proposal):
            state.on_alter_failed(proposal)

    def crash(self, b: int) -> None:
        broker = self.brokers[b]
        broker.alive = False
        broker.leader_state = None
        self.fence(b)

    def restart(self, b: int) -> None:
        broker = self.brokers[b]
        if not broker.alive:
            broker.alive = True
            self.unfence(b)
            broker.apply_metadata(self.reg, self.now)

    def settle_acks(self) -> None:
        still = []
        for b, epoch, offset, value in self.pending_acks:
            broker = self.brokers[b]
            state = broker.leader_state
            if state is None or state.leader_epoch != epoch:
                continue  # the producer gets NOT_LEADER_OR_FOLLOWER: not acknowledged
            if broker.hw > offset:
                self.acked.append((offset, value))
            else:
                still.append((b, epoch, offset, value))
        self.pending_acks = still

    def step(self, op: str, b: int) -> None:
        if op == "produce":
            self.produce(b)
        elif op == "fetch":
            self.fetch(b)
        elif op == "deliver" and self.brokers[b].alive:
            self.brokers[b].apply_metadata(self.reg, self.now)
        elif op == "tick":
            self.now += 400 * b
        elif op in ("isr", "isr_lost"):
            self.isr_check(b, lose=op == "isr_lost")
        elif op == "crash" and sum(x.alive for x in self.brokers.values()) > 1:
            self.crash(b)
        elif op == "restart":
            self.restart(b)
        self.settle_acks()

    def heal(self) -> None:
        """Everyone back, metadata everywhere, fetch until the followers caught up."""
        for b in BROKERS:
            self.restart(b)
        for _ in range(20):
            for b in BROKERS:
                self.brokers[b].apply_metadata(self.reg, self.now)
            for b in BROKERS:
                self.fetch(b)
                self.fetch(b)
            self.now += 400
            for b in BROKERS:
                self.isr_check(b, lose=False)
            self.settle_acks()


OPS = st.tuples(
    st.sampled_from(["produce", "produce", "fetch", "fetch", "fetch", "deliver", "tick", "isr",
                     "isr_lost", "crash", "restart"]),
    st.sampled_from(BROKERS),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(OPS, max_size=120))
def test_no_acknowledged_write_is_lost(ops: list[tuple[str, int]]) -> None:
    cluster = Cluster()
    for op, b in ops:
        cluster.step(op, b)
    cluster.heal()
    leader = cluster.brokers[cluster.reg.leader]
    assert leader.leader_state is not None
    for offset, value in cluster.acked:
        assert offset < leader.leo and leader.log[offset][1] == value, (offset, value, leader.log)
    for broker in cluster.brokers.values():
        assert broker.log == leader.log[:broker.leo]
        assert broker.hw <= broker.leo


def test_simulation_acknowledges_writes_and_survives_a_leader_crash() -> None:
    """The simulation itself works: writes get acknowledged, and a crash elects another leader."""
    cluster = Cluster()
    for _ in range(3):
        cluster.step("produce", 1)
    for b in (2, 3, 2, 3):
        cluster.step("fetch", b)
    assert sorted(cluster.acked) == [(0, 0), (1, 1), (2, 2)]
    cluster.step("crash", 1)
    assert cluster.reg.leader == 2
    cluster.heal()
    assert [v for _, v in cluster.brokers[2].log] == [0, 1, 2]
