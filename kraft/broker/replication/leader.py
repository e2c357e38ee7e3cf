"""The leader's side of replication for one partition, sans-I/O (time comes in as `now_ms`).

Owns what the leader knows about its followers (each one's log end offset and last caught-up
time, updated on every follower fetch), the high-watermark rule, the divergence check a follower
fetch goes through, and the ISR shrink / expand proposals sent to the controller as AlterPartition.
The caller owns the log, the clock and the network.

Rules, after Kafka (Partition.scala, ReplicaState):
- High watermark = the smallest log end offset over the *maximal* ISR (the committed ISR plus the
  members a pending AlterPartition adds; KIP-497: "the leader will use the maximal ISR ... for
  advancing the high watermark", so a replica about to join cannot be elected without the data
  the HW covers), never moving backwards, and only while the committed ISR has at least
  min(replication factor, min.insync.replicas) members (KIP-966: "the HW can only advance if the
  ISR size is at least min ISR").
- A follower is caught up when its LEO reached the leader's LEO, or when it reached the leader's
  LEO as of its previous fetch (then it was caught up at that fetch's time). It leaves the ISR
  after `replica.lag.time.max.ms` without being caught up.
- A follower joins the ISR when its LEO >= the HW and >= the start offset of this leader epoch
  (Kafka's isFollowerInSync), and it may (unfenced, still a replica, and its position was
  reported by the broker process registered now: KIP-903's broker epoch, so the position of a
  process that died and lost its unflushed suffix never brings its successor into the ISR). The
  proposal names each member's broker epoch, so the controller refuses a join that this
  leader's older view of the metadata let through (INELIGIBLE_REPLICA).
- The low watermark (DeleteRecords) is the smallest log start offset of the leader and the
  followers on live brokers, each as its last fetch reported it (Kafka's lowWatermarkIfLeader).
- One AlterPartition in flight per partition; the ISR used for the min-ISR checks is the committed
  one, never the proposal: from the metadata, or from the controller's answer accepting it
  (Kafka's handleAlterPartitionUpdate: the metadata carrying it may come much later, and a leader
  that went on from its older view would drop the accepted change and count a member the
  controller removed). A proposal stays pending (its joiners count for the HW) until the metadata
  or an answer shows a newer partition epoch, the controller refused it for a reason that proves
  nothing was applied (a stale refusal of a duplicated copy says nothing about whether an earlier
  copy committed), or `retry_after_ms` passed (then it is computed and sent afresh). A proposal
  given up that way may still have committed (its answer lost): its joiners go on counting for the
  HW until the metadata or an answer shows a newer partition epoch, after which no copy of it can
  commit any more.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

from kraft.metadata.partition_change import NO_BROKER_EPOCH, BrokerState

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


@dataclass(frozen=True)
class EpochEndOffset:
    """The end offset of an epoch on the leader (KIP-101/279), or (-1, -1) when unknown; the fetch
    response's `diverging_epoch` (KIP-320/595)."""

    epoch: int
    end_offset: int


def diverging_epoch(
    end_offset_for_epoch: Callable[[int], tuple[int, int]], last_fetched_epoch: int, fetch_offset: int
) -> EpochEndOffset | None:
    """None when a follower fetching at `fetch_offset` whose last batch has `last_fetched_epoch`
    agrees with the leader's log; else where the follower must truncate to.

    Kafka's Partition.fetchRecords: "if (epochEndOffset.leaderEpoch < fetchEpoch ||
    epochEndOffset.endOffset < fetchOffset)" the response carries the diverging epoch."""
    if last_fetched_epoch < 0:
        return None  # no epoch to check (empty log): the offset check alone applies
    epoch, end_offset = end_offset_for_epoch(last_fetched_epoch)
    if epoch < last_fetched_epoch or end_offset < fetch_offset:
        return EpochEndOffset(epoch, end_offset)
    return None


@dataclass
class FollowerState:
    """Kafka's ReplicaState, as the leader sees one follower."""

    log_end_offset: int = UNDEFINED_OFFSET  # unknown until the follower fetches
    last_caught_up_time_ms: int = 0
    last_fetch_leader_log_end_offset: int = UNDEFINED_OFFSET
    last_fetch_time_ms: int = 0
    broker_epoch: int = -1  # of the broker process that reported the position (KIP-903)
    log_start_offset: int = UNDEFINED_OFFSET  # as the follower last reported it (DeleteRecords)

    def update_fetch_state(self, fetch_offset: int, leader_log_end_offset: int, now_ms: int,
                           broker_epoch: int = -1, log_start_offset: int = UNDEFINED_OFFSET) -> None:
        # Kafka: caught up now if it reached the leader's LEO; caught up as of the previous fetch
        # if it reached the LEO the leader had then.
        if fetch_offset >= leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_end_offset = fetch_offset
        self.broker_epoch = broker_epoch
        self.log_start_offset = log_start_offset
        self.last_fetch_leader_log_end_offset = leader_log_end_offset
        self.last_fetch_time_ms = now_ms

    def is_caught_up(self, leader_log_end_offset: int, now_ms: int, lag_max_ms: int) -> bool:
        return (self.log_end_offset == leader_log_end_offset
                or now_ms - self.last_caught_up_time_ms <= lag_max_ms)


@dataclass(frozen=True)
class IsrProposal:
    """An AlterPartition request: the ISR the leader wants, against the epochs it knows, each
    member with the broker epoch of the process whose position the leader counted (KIP-903;
    NO_BROKER_EPOCH for the leader itself, named by the request, and for a member not heard from
    in this leader epoch)."""

    leader_epoch: int
    partition_epoch: int
    new_isr_with_epochs: tuple[BrokerState, ...]

    @property
    def new_isr(self) -> tuple[int, ...]:
        return tuple(m.broker_id for m in self.new_isr_with_epochs)


@dataclass(frozen=True)
class LeaderAndIsr:
    """The partition as the controller committed an AlterPartition (its answer)."""

    leader: int
    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...]


@dataclass
class LeaderState:
    node_id: int
    leader_epoch: int
    epoch_start_offset: int  # the leader's LEO when it became leader in this epoch
    partition_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]  # committed
    followers: dict[int, FollowerState] = field(default_factory=dict)
    pending: IsrProposal | None = None
    pending_since_ms: int = 0
    # joiners of proposals given up at this partition epoch with their outcome unknown
    unresolved_joiners: frozenset[int] = frozenset()
    since_ms: int = 0  # when this broker became leader at this epoch

    @classmethod
    def become_leader(
        cls, node_id: int, leader_epoch: int, epoch_start_offset: int, partition_epoch: int,
        replicas: Iterable[int], isr: Iterable[int], now_ms: int,
    ) -> LeaderState:
        """Fresh follower states: ISR members count as caught up now (Kafka's resetReplicaState),
        so they get `replica.lag.time.max.ms` to fetch before they are shrunk out."""
        isr = tuple(isr)
        assert node_id in isr, (node_id, isr)
        state = cls(node_id, leader_epoch, epoch_start_offset, partition_epoch, tuple(replicas), isr,
                    since_ms=now_ms)
        for r in state.replicas:
            if r != node_id:
                state.followers[r] = FollowerState(last_caught_up_time_ms=now_ms if r in isr else 0)
        return state

    # -- metadata ---------------------------------------------------------------------------------

    def on_metadata(self, partition_epoch: int, replicas: Iterable[int], isr: Iterable[int]) -> None:
        """The committed registration moved on in the same leader epoch (ISR change, reassignment)."""
        if partition_epoch < self.partition_epoch:
            return  # an older image (never expected: metadata only moves forward)
        replicas, isr = tuple(replicas), tuple(isr)
        assert self.node_id in isr, (self.node_id, isr)
        if partition_epoch > self.partition_epoch:
            # committed (ours or another change): propose again from here; no older proposal can
            # commit any more, and this state holds what any of them did
            self.pending, self.unresolved_joiners = None, frozenset()
        self.partition_epoch, self.replicas, self.isr = partition_epoch, replicas, isr
        for r in replicas:
            if r != self.node_id and r not in self.followers:
                self.followers[r] = FollowerState()
        for r in list(self.followers):
            if r not in replicas:
                del self.followers[r]

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The committed ISR plus the members a pending expansion adds (KIP-497), and those of
        expansions given up whose outcome is unknown."""
        joining = set(self.unresolved_joiners)
        if self.pending is not None:
            joining.update(self.pending.new_isr)
        return self.isr + tuple(r for r in self.replicas if r in joining and r not in self.isr)

    # -- follower fetches -------------------------------------------------------------------------

    def on_follower_fetch(self, replica_id: int, fetch_offset: int, leader_log_end_offset: int,
                          now_ms: int, broker_epoch: int = -1,
                          log_start_offset: int = UNDEFINED_OFFSET) -> bool:
        """Records a follower's position and log start, as reported by the process of
        `broker_epoch`; False when `replica_id` is not a follower of ours."""
        follower = self.followers.get(replica_id)
        if follower is None:
            return False
        assert fetch_offset <= leader_log_end_offset, (fetch_offset, leader_log_end_offset)
        follower.update_fetch_state(fetch_offset, leader_log_end_offset, now_ms, broker_epoch,
                                    log_start_offset)
        return True

    def low_watermark(self, leader_log_start_offset: int, is_alive: Callable[[int], bool]) -> int:
        """Kafka's lowWatermarkIfLeader: the smallest log start offset of the leader and of the
        followers on live brokers, as each last reported it (-1 before its first fetch). A
        DeleteRecords is answered once it reaches the requested offset."""
        low = leader_log_start_offset
        for replica_id, follower in self.followers.items():
            if is_alive(replica_id):
                low = min(low, follower.log_start_offset)
        return low

    def high_watermark(self, leader_log_end_offset: int, current: int, min_insync_replicas: int) -> int:
        """The high watermark after this step: never below `current`."""
        if len(self.isr) < min(len(self.replicas), min_insync_replicas):
            return current
        candidate = leader_log_end_offset
        for r in self.maximal_isr:
            if r != self.node_id:
                follower = self.followers.get(r)
                candidate = min(candidate, follower.log_end_offset if follower else UNDEFINED_OFFSET)
        return max(current, candidate)

    def under_min_isr(self, min_insync_replicas: int) -> bool:
        return len(self.isr) < min_insync_replicas

    # -- ISR changes ------------------------------------------------------------------------------

    def out_of_sync_replicas(self, leader_log_end_offset: int, now_ms: int, lag_max_ms: int) -> list[int]:
        return [r for r in self.isr if r != self.node_id
                and not self.followers[r].is_caught_up(leader_log_end_offset, now_ms, lag_max_ms)]

    def in_sync_candidates(self, high_watermark: int, may_join: Callable[[int], bool]) -> list[int]:
        """`may_join(r)` also decides whether follower r's recorded position (its `broker_epoch`)
        comes from the process registered now."""
        return [r for r in self.replicas if r not in self.isr and r in self.followers and may_join(r)
                and self.followers[r].log_end_offset >= max(high_watermark, self.epoch_start_offset)]

    def propose_isr_change(
        self, leader_log_end_offset: int, high_watermark: int, now_ms: int, lag_max_ms: int,
        may_join: Callable[[int], bool], retry_after_ms: int,
    ) -> IsrProposal | None:
        """The AlterPartition to send now, or None (nothing to change, or one is in flight and
        younger than `retry_after_ms`). The caller sends it, then calls `on_alter_failed` or waits
        for the committed metadata (`on_metadata`)."""
        if self.pending is not None:
            if now_ms - self.pending_since_ms < retry_after_ms:
                return None
            # lost in flight, or its answer was: the metadata never showed it, try again (its
            # joiners may be in the ISR already)
            self.unresolved_joiners |= {r for r in self.pending.new_isr if r not in self.isr}
            self.pending = None
        shrink = set(self.out_of_sync_replicas(leader_log_end_offset, now_ms, lag_max_ms))
        expand = self.in_sync_candidates(high_watermark, may_join)
        if not shrink and not expand:
            return None
        new_isr = tuple(r for r in self.isr if r not in shrink) + tuple(expand)
        self.pending = IsrProposal(self.leader_epoch, self.partition_epoch, tuple(
            BrokerState(r, NO_BROKER_EPOCH if r == self.node_id else self.followers[r].broker_epoch)
            for r in new_isr))
        self.pending_since_ms = now_ms
        return self.pending

    def on_alter_failed(self, proposal: IsrProposal) -> None:
        """The controller refused `proposal` having applied nothing: the committed ISR stands."""
        if self.pending == proposal:
            self.pending = None
