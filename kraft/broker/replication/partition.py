"""One replica's leader / follower / ISR decisions, sans-I/O (Kafka's Partition.scala).

`Partition` owns the role this broker plays for one partition at the registration it last applied:
make-leader and make-follower, the leader-epoch checks of requests, the leader's side of a follower
fetch (divergence, the follower's position, the high watermark, ISR expansion), the follower's side
of a fetch answer (truncate by diverging epoch, append, learn the high watermark), ISR shrink and
the AlterPartition round trip. It works on a synchronous log (`kraft.log.partition_log.PartitionLog`, or
the simulation's in-memory log with the same methods), takes the time as `now_ms` (monotonic), and
returns what the caller must do as actions: start or stop fetching, send an AlterPartition, wake the
produces and long polls waiting on the high watermark or the role. It never touches the network,
a clock or a task; the replica manager's asyncio shell performs the actions, and the deterministic
simulation (`tests/unit/replication/`) drives this same class.

Invariants, asserted after every step: log_start_offset <= last_stable_offset <= high_watermark
<= log_end_offset (the last stable offset: no open transaction below it, `log/producer_state.py`;
followers compute it from their own log, as Kafka's do); as
leader, this broker is in the ISR, the ISR is a subset of the replicas, and the leader epoch of the
registration it leads at never goes backwards.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from kraft.errors import KraftError
from kraft.broker.replication.follower import (
    Append, Backoff, FollowerAction, PartitionFetchResponse, Truncate, TruncateFully, on_fetch_response,
)
from kraft.broker.replication.leader import EpochEndOffset, IsrProposal, LeaderAndIsr, LeaderState, diverging_epoch
from kraft.metadata.image import MetadataImage
from kraft.metadata.records import NO_LEADER

log = logging.getLogger("kraft.broker")

NO_EPOCH = -1
HIGH_WATERMARK = -1  # DeleteRecords' offset for "up to the high watermark"
# AlterPartition refusals that prove nothing was applied: the controller checked this request at
# the current partition epoch (so no identical copy committed before it) and refused its content
NOT_APPLIED_ERRORS = frozenset({"INVALID_REQUEST", "INELIGIBLE_REPLICA", "OPERATION_NOT_ATTEMPTED"})
# the default of transaction.partition.verification.grace.ms: how long a new leader answers a
# transaction's unverified first batch with a retriable error, for the coordinator's verification
# to reach it (KIP-890, docs/transactions.md)
TXN_VERIFICATION_GRACE_MS = 30_000


@dataclass
class ReplicaState:
    """What the metadata says about this partition (updated on every metadata change)."""

    topic_id: str
    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    removing_replicas: tuple[int, ...] = ()


# -- actions (what the shell performs) ---------------------------------------------------------


@dataclass(frozen=True)
class StartFetching:
    """Follow the partition from `leader_id` at `leader_epoch` (idempotent)."""

    leader_id: int
    leader_epoch: int


@dataclass(frozen=True)
class StopFetching:
    pass


@dataclass(frozen=True)
class SendAlterPartition:
    """Ask the controller for this ISR; answer with `on_alter_partition_response`."""

    proposal: IsrProposal


@dataclass(frozen=True)
class CompleteWaiters:
    """The high watermark advanced (or the replicas changed): acks=all produces up to
    `high_watermark` complete, long polls answer. With `role_changed` (no longer leading at the
    epoch they were appended in) every waiting produce looks again, and fails."""

    high_watermark: int
    role_changed: bool = False


Action = StartFetching | StopFetching | SendAlterPartition | CompleteWaiters


@dataclass(frozen=True)
class FollowerFetchDecision:
    """The leader's answer to one partition of a follower fetch, before reading: an error, a
    diverging epoch, or read up to the log end (`error` and `diverging` both None)."""

    error: KraftError | None = None
    diverging: EpochEndOffset | None = None
    actions: tuple[Action, ...] = ()


def is_current_registration(image: MetadataImage, node_id: int, broker_epoch: int) -> bool:
    """Whether `image` holds this broker process's own registration (`broker_epoch` as the
    controller answered it; -1 before the answer)."""
    registration = image.cluster.broker(node_id)
    return broker_epoch >= 0 and registration is not None and registration.broker_epoch == broker_epoch


class ReplicaLog(Protocol):
    """What the core needs of a partition log (PartitionLog's names)."""

    leader_epoch_cache: Any
    high_watermark: int

    @property
    def log_start_offset(self) -> int: ...
    @property
    def last_stable_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    @property
    def config(self) -> Any: ...
    @property
    def quarantined(self) -> tuple[Any, ...]: ...
    def take_read_quarantine(self) -> bool: ...
    def assign_epoch_start(self, epoch: int, start_offset: int) -> bool: ...
    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]: ...
    def append_as_follower(self, batches: bytes, now_ms: int | None = None) -> Any: ...
    def truncate_to(self, offset: int) -> None: ...
    def truncate_fully_and_start_at(self, offset: int, now_ms: int | None = None) -> None: ...
    def maybe_increment_log_start_offset(self, offset: int) -> bool: ...


class Partition:
    def __init__(
        self, node_id: int, topic: str, partition: int, log: ReplicaLog, *,
        replica_lag_time_max_ms: int, alter_partition_retry_ms: int,
        txn_verification_grace_ms: int = TXN_VERIFICATION_GRACE_MS,
        is_unfenced: Callable[[int], bool] = lambda _: True,
        registered_broker_epoch: Callable[[int], int | None] | None = None,
        can_alter_partition: bool = True,
    ) -> None:
        """`is_unfenced` and `registered_broker_epoch` answer from the broker's current metadata:
        a follower joins the ISR only unfenced and with a position reported by the process
        registered now (None: broker epochs are not checked); without `can_alter_partition` (no
        controller channel) the ISR never changes from here."""
        self.node_id = node_id
        self.topic = topic
        self.partition = partition
        self.log = log
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.alter_partition_retry_ms = alter_partition_retry_ms
        self.txn_verification_grace_ms = txn_verification_grace_ms
        self.is_unfenced = is_unfenced
        self.registered_broker_epoch = registered_broker_epoch
        self.can_alter_partition = can_alter_partition
        self.state: ReplicaState | None = None  # the registration applied last
        self.leader_state: LeaderState | None = None  # set while leading at state.leader_epoch

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.partition} on {self.node_id})"

    # -- role -------------------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.leader_state is not None

    @property
    def leader_epoch(self) -> int:
        return NO_EPOCH if self.state is None else self.state.leader_epoch

    def apply_registration(self, state: ReplicaState, now_ms: int, *, may_lead: bool = True) -> list[Action]:
        """Leader or follower as the registration says (Kafka's makeLeader / makeFollower).

        Without `may_lead` (the metadata does not hold this broker process's own registration
        yet, see `is_current_registration`) a registration naming this broker leader gives it no
        role: a restarted broker replaying metadata from before its restart must not lead at an
        epoch it led before, since its log may have lost a suffix (power loss) that the followers
        of that epoch hold, and the same epoch would then acknowledge other records at offsets
        they already have. Its registration removes it from the ISR and the leadership first.

        A registration older than the state this leader took from an AlterPartition answer
        (`on_alter_partition_response`) changes nothing."""
        current = self.state
        if (self.leader_state is not None and current is not None and state.leader == self.node_id
                and state.leader_epoch == current.leader_epoch and state.partition_epoch < current.partition_epoch):
            return []
        if state.leader == self.node_id and may_lead:
            actions = self.make_leader(state, now_ms)
        elif state.leader == self.node_id:
            actions = self._no_role(state)
        else:
            actions = self.make_follower(state, now_ms)
        self.check_invariants()
        return actions

    def make_leader(self, state: ReplicaState, now_ms: int) -> list[Action]:
        assert state.leader == self.node_id, (self, state)
        previous, self.state = self.state, state
        current, plog = self.leader_state, self.log
        actions: list[Action] = []
        if current is None or current.leader_epoch != state.leader_epoch:
            assert previous is None or state.leader_epoch >= previous.leader_epoch, (previous, state)
            actions.append(StopFetching())
            latest = plog.leader_epoch_cache.latest_epoch
            if latest is None or latest < state.leader_epoch:
                # Kafka's makeLeader: "maybeAssignEpochStartOffset(leaderEpoch, logEndOffset)",
                # so followers of older epochs learn where their epoch ends on this leader.
                plog.assign_epoch_start(state.leader_epoch, plog.log_end_offset)
            self.leader_state = LeaderState.become_leader(
                self.node_id, state.leader_epoch, plog.log_end_offset, state.partition_epoch,
                state.replicas, state.isr, now_ms,
            )
            actions.append(CompleteWaiters(plog.high_watermark, role_changed=True))  # older epochs' acks=all fail
            log.info("%s-%d: leader at epoch %d from offset %d, isr %s", self.topic, self.partition,
                     state.leader_epoch, plog.log_end_offset, list(state.isr))
            if plog.quarantined:
                log.error("%s-%d: leads with quarantined corrupt offsets %s, whose reads answer "
                          "CORRUPT_MESSAGE: restart this broker (or reassign the partition) so "
                          "an in-sync replica leads and this one refetches them", self.topic,
                          self.partition, [(r.start_offset, r.end_offset) for r in plog.quarantined])
        else:
            current.on_metadata(state.partition_epoch, state.replicas, state.isr)
            # the replicas or their brokers changed: a DeleteRecords waiting on the low watermark
            # (which counts the live replicas) looks again
            actions.append(CompleteWaiters(plog.high_watermark))
        actions += self.maybe_advance_high_watermark()  # the ISR may have changed
        actions += self._maybe_propose_isr(now_ms)
        return actions

    def make_follower(self, state: ReplicaState, now_ms: int) -> list[Action]:
        assert state.leader != self.node_id, (self, state)
        self.state = state
        actions: list[Action] = []
        if self.leader_state is not None:
            self.leader_state = None
            actions.append(CompleteWaiters(self.log.high_watermark, role_changed=True))
            log.info("%s-%d: no longer leader (epoch %d, leader %d)", self.topic, self.partition,
                     state.leader_epoch, state.leader)
        if self.log.quarantined and state.leader != NO_LEADER:  # only with a leader to refetch from
            self._refetch_quarantined()
        if state.leader == NO_LEADER:
            actions.append(StopFetching())
        else:
            actions.append(StartFetching(state.leader, state.leader_epoch))
        return actions

    def _no_role(self, state: ReplicaState) -> list[Action]:
        if self.state is None or self.state.leader_epoch != state.leader_epoch or self.is_leader:
            log.info("%s-%d: not leading at epoch %d until this broker's registration is in the "
                     "metadata", self.topic, self.partition, state.leader_epoch)
        self.state = state
        return self.stop()

    def go_offline(self, state: ReplicaState) -> list[Action]:
        """The log could not record the role `state` gives this broker (`apply_registration`
        raised an OSError, e.g. the leader-epoch checkpoint on a full disk): no role until the
        caller applies a registration again, as Kafka's offline partition. Epoch checks answer
        by `state` meanwhile; produces waiting on the high watermark fail."""
        self.state = state
        return self.stop()

    def stop(self) -> list[Action]:
        """The replica is going away (topic deleted, moved off this broker)."""
        was_leader, self.leader_state = self.leader_state is not None, None
        actions: list[Action] = [StopFetching()]
        if was_leader:
            actions.append(CompleteWaiters(self.log.high_watermark, role_changed=True))
        return actions

    def _refetch_quarantined(self) -> None:
        """A follower drops its log from the first corrupt region recovery (or a read)
        quarantined and fetches the rest again from the leader (as after a truncation to the
        leader's log); a leader keeps its regions quarantined, since no one else is known to hold
        them intact."""
        plog = self.log
        start = min(r.start_offset for r in plog.quarantined)
        log.warning("%s-%d: truncating to %d, the start of a quarantined corrupt region (log end "
                    "%d), to refetch it and everything after it from the leader", self.topic,
                    self.partition, start, plog.log_end_offset)
        try:
            plog.truncate_to(start)
        except Exception:  # in the metadata publisher or a fetcher: one bad log must not stop it
            log.exception("%s-%d: truncating to %d failed; the region stays quarantined",
                          self.topic, self.partition, start)

    # -- request checks ---------------------------------------------------------------------------

    def check_leader_epoch(self, current_leader_epoch: int) -> KraftError | None:
        """Kafka's checkCurrentLeaderEpoch: a request naming an older epoch than the applied
        registration is fenced, a newer one is not known here yet."""
        if current_leader_epoch == NO_EPOCH:
            return None
        local = self.leader_epoch
        if current_leader_epoch < local:
            return KraftError("FENCED_LEADER_EPOCH", f"{self.topic}-{self.partition}: leader epoch "
                                                     f"{current_leader_epoch} is older than {local}")
        if current_leader_epoch > local:
            return KraftError("UNKNOWN_LEADER_EPOCH", f"{self.topic}-{self.partition}: leader epoch "
                                                      f"{current_leader_epoch} is newer than {local}")
        return None

    def is_following(self, leader_epoch: int) -> bool:
        """Whether a fetcher of `leader_epoch` still acts for this partition."""
        return self.leader_state is None and self.leader_epoch == leader_epoch

    # -- leader side ------------------------------------------------------------------------------

    def check_produce(self, acks: int) -> KraftError | None:
        """Before appending as leader: Kafka refuses acks=all when "inSyncSize < minIsr"."""
        if self.leader_state is None or self.state is None:
            return KraftError("NOT_LEADER_OR_FOLLOWER",
                              f"node {self.node_id} is not the leader of {self.topic}-{self.partition}")
        min_isr = self.log.config.min_insync_replicas
        if acks == -1 and len(self.state.isr) < min_isr:
            return KraftError(
                "NOT_ENOUGH_REPLICAS",
                f"{self.topic}-{self.partition} has {len(self.state.isr)} in-sync replicas, "
                f"min.insync.replicas is {min_isr}",
            )
        return None

    def awaits_txn_verification(self, now_ms: int) -> bool:
        """Whether a transactional batch refused for lacking its coordinator's verification
        (KIP-890) may still get it here: the partition had a leader before this one (epoch > 0),
        whose verifications stayed in that leader's memory, and this broker took over less than
        `txn_verification_grace_ms` ago, so the coordinator's new one may be on its way."""
        state = self.leader_state
        return (state is not None and state.leader_epoch > 0
                and now_ms - state.since_ms < self.txn_verification_grace_ms)

    def produce_completed(self, leader_epoch: int, next_offset: int) -> bool | None:
        """An acks=all produce appended at `leader_epoch` up to `next_offset`: True once the high
        watermark passed it while still leading at that epoch, None while waiting, False when
        the epoch ended (the offsets may hold other records now: not acknowledged)."""
        state = self.leader_state
        if state is None or state.leader_epoch != leader_epoch:
            return False
        return True if self.log.high_watermark >= next_offset else None

    def under_min_isr(self) -> bool:
        return self.leader_state is not None and self.leader_state.under_min_isr(
            self.log.config.min_insync_replicas)

    def maybe_advance_high_watermark(self) -> list[Action]:
        """As leader: the HW by LeaderState's rule (never backwards)."""
        state, plog = self.leader_state, self.log
        if state is None:
            return []
        new_hw = state.high_watermark(plog.log_end_offset, plog.high_watermark,
                                      plog.config.min_insync_replicas)
        if new_hw <= plog.high_watermark:
            return []
        plog.high_watermark = new_hw
        self.check_invariants()
        return [CompleteWaiters(new_hw)]

    def on_leader_append(self, now_ms: int) -> list[Action]:
        """After an append as leader: the HW may move (a lone or caught-up ISR)."""
        return self.maybe_advance_high_watermark()

    def on_fetch_request(
        self, replica_id: int, fetch_offset: int, last_fetched_epoch: int, now_ms: int,
        record_position: bool = True, replica_epoch: int = -1, log_start_offset: int = -1,
    ) -> FollowerFetchDecision:
        """The leader's side of one partition of a follower fetch (already epoch-checked):
        divergence, range, then the follower's position and log start (reported by the process
        of broker epoch `replica_epoch`), the HW, the low watermark and an ISR expansion."""
        state, plog = self.leader_state, self.log
        if state is None:
            return FollowerFetchDecision(KraftError(
                "NOT_LEADER_OR_FOLLOWER",
                f"node {self.node_id} is not the leader of {self.topic}-{self.partition}"))
        if replica_id not in state.followers:
            return FollowerFetchDecision(KraftError(
                "NOT_LEADER_OR_FOLLOWER",
                f"broker {replica_id} is not a replica of {self.topic}-{self.partition}"))
        divergence = diverging_epoch(plog.end_offset_for_epoch, last_fetched_epoch, fetch_offset)
        if divergence is not None:
            return FollowerFetchDecision(diverging=divergence)
        error = self.check_in_range(fetch_offset)
        if error is not None:
            return FollowerFetchDecision(error)
        actions: list[Action] = []
        if record_position:
            risen = log_start_offset > state.followers[replica_id].log_start_offset
            state.on_follower_fetch(replica_id, fetch_offset, plog.log_end_offset, now_ms,
                                    replica_epoch, log_start_offset)
            actions += self.maybe_advance_high_watermark()
            if risen and not actions:  # the low watermark may have risen: DeleteRecords look again
                actions.append(CompleteWaiters(plog.high_watermark))
            actions += self._maybe_propose_isr(now_ms)
        return FollowerFetchDecision(actions=tuple(actions))

    def check_delete_records(self, offset: int) -> int:
        """Kafka's deleteRecordsOnLeader checks: the log start offset a DeleteRecords to `offset`
        (HIGH_WATERMARK: the high watermark) asks for. Raises NOT_LEADER_OR_FOLLOWER,
        POLICY_VIOLATION (a topic whose cleanup.policy lacks delete: compaction owns its log
        start) or OFFSET_OUT_OF_RANGE (negative, or above the high watermark)."""
        plog, tp = self.log, f"{self.topic}-{self.partition}"
        if self.leader_state is None:
            raise KraftError("NOT_LEADER_OR_FOLLOWER", f"node {self.node_id} is not the leader of {tp}")
        if not plog.config.delete:
            raise KraftError("POLICY_VIOLATION", f"Records of partition {tp} can not be deleted due to "
                                                 f"the configured policy (cleanup.policy="
                                                 f"{plog.config.cleanup_policy})")
        target = plog.high_watermark if offset == HIGH_WATERMARK else offset
        if target < 0:
            raise KraftError("OFFSET_OUT_OF_RANGE", f"The offset {target} for partition {tp} is not valid")
        if target > plog.high_watermark:
            raise KraftError("OFFSET_OUT_OF_RANGE", f"The offset {target} for partition {tp} is above "
                                                    f"its high watermark {plog.high_watermark}")
        return target

    def low_watermark(self) -> int:
        """As leader: the smallest log start offset of the live replicas (LeaderState's rule)."""
        assert self.leader_state is not None, self
        return self.leader_state.low_watermark(self.log.log_start_offset, self.is_unfenced)

    def check_in_range(self, fetch_offset: int) -> KraftError | None:
        plog = self.log
        if plog.log_start_offset <= fetch_offset <= plog.log_end_offset:
            return None
        return KraftError("OFFSET_OUT_OF_RANGE",
                          f"offset {fetch_offset} is outside [{plog.log_start_offset}, "
                          f"{plog.log_end_offset}] of {self.topic}-{self.partition}")

    def maybe_shrink_isr(self, now_ms: int) -> list[Action]:
        """Kafka's isr-expiration task: the HW (the ISR may have changed) and an AlterPartition
        for followers that stopped catching up (or caught up)."""
        return self.maybe_advance_high_watermark() + self._maybe_propose_isr(now_ms)

    def _maybe_propose_isr(self, now_ms: int) -> list[Action]:
        state, plog = self.leader_state, self.log
        if state is None or self.state is None or not self.can_alter_partition:
            return []
        removing = self.state.removing_replicas

        def may_join(r: int) -> bool:
            if not self.is_unfenced(r) or r in removing:
                return False
            registered = self.registered_broker_epoch
            return registered is None or state.followers[r].broker_epoch == registered(r)

        proposal = state.propose_isr_change(
            plog.log_end_offset, plog.high_watermark, now_ms, self.replica_lag_time_max_ms,
            may_join, self.alter_partition_retry_ms,
        )
        if proposal is None:
            return []
        log.info("%s-%d: asking the controller to change the ISR %s -> %s", self.topic,
                 self.partition, list(state.isr), list(proposal.new_isr))
        return [SendAlterPartition(proposal)]

    def on_alter_partition_response(self, proposal: IsrProposal, error_code: str | None,
                                    committed: LeaderAndIsr | None = None) -> list[Action]:
        """The controller's answer. Accepted with the state it committed: that ISR and partition
        epoch are this leader's at once (the metadata carrying them may come much later). Refused
        in a way that proves nothing was applied (`NOT_APPLIED_ERRORS`): the committed ISR
        stands, propose again. Any other refusal or no answer (e.g. INVALID_UPDATE_VERSION for a
        duplicate of a copy that committed): the proposal stays pending, its joiners still count
        for the HW, until the metadata shows the outcome or `alter_partition_retry_ms` passes."""
        if error_code is None:
            return [] if committed is None else self._take_committed_isr(proposal, committed)
        if self.leader_state is not None:
            log.warning("%s-%d: AlterPartition %s refused: %s", self.topic, self.partition,
                        list(proposal.new_isr), error_code)
            if error_code in NOT_APPLIED_ERRORS:
                self.leader_state.on_alter_failed(proposal)
        return []

    def _take_committed_isr(self, proposal: IsrProposal, committed: LeaderAndIsr) -> list[Action]:
        """An accepted AlterPartition, committed as proposed (same leader and epoch, the proposed
        ISR): its ISR and partition epoch replace this leader's. Anything else the controller
        changed with it (a reassignment completing) waits for the metadata."""
        state, leader = self.state, self.leader_state
        if (leader is None or state is None or committed.leader != self.node_id
                or committed.leader_epoch != leader.leader_epoch or committed.isr != proposal.new_isr
                or committed.partition_epoch <= state.partition_epoch):
            return []
        self.state = dataclasses.replace(state, isr=committed.isr, partition_epoch=committed.partition_epoch)
        leader.on_metadata(committed.partition_epoch, state.replicas, committed.isr)
        actions: list[Action] = [CompleteWaiters(self.log.high_watermark)]  # min-ISR waits look again
        actions += self.maybe_advance_high_watermark()
        self.check_invariants()
        return actions

    # -- follower side ----------------------------------------------------------------------------

    def fetch_position(self) -> tuple[int, int, int]:
        """(fetch_offset, last_fetched_epoch, high_watermark) for the next fetch. A region
        quarantined while following (a read met it) is dropped first, as `make_follower` drops
        what recovery quarantined, so this fetch refetches it from the leader."""
        plog = self.log
        if self.state is not None and self.state.leader != NO_LEADER and plog.take_read_quarantine():
            self._refetch_quarantined()
        latest = plog.leader_epoch_cache.latest_epoch
        return plog.log_end_offset, NO_EPOCH if latest is None else latest, plog.high_watermark

    def on_fetch_response(self, response: PartitionFetchResponse, now_ms: int) -> FollowerAction:
        """Applies one partition of the leader's answer (the caller checked `is_following`);
        returns what was done (Backoff: wait before fetching this partition again)."""
        assert self.leader_state is None, self
        plog = self.log
        cache = plog.leader_epoch_cache
        latest = cache.latest_entry
        action = on_fetch_response(
            response, plog.log_end_offset,
            lambda epoch: cache.end_offset_for(epoch, plog.log_end_offset),
            None if latest is None else latest.start_offset,
        )
        if isinstance(action, Append):
            if action.records:
                plog.append_as_follower(action.records)
            high_watermark = min(action.leader_high_watermark, plog.log_end_offset)
            if high_watermark > plog.high_watermark:
                plog.high_watermark = high_watermark
            if action.leader_log_start_offset > plog.log_start_offset:
                plog.maybe_increment_log_start_offset(
                    min(action.leader_log_start_offset, plog.high_watermark))
        elif isinstance(action, Truncate):
            log.info("%s-%d: truncating to %d (log end %d) to match the leader", self.topic,
                     self.partition, action.offset, plog.log_end_offset)
            plog.truncate_to(action.offset)
        elif isinstance(action, TruncateFully):
            log.info("%s-%d: restarting the log at the leader's log start %d", self.topic,
                     self.partition, action.offset)
            plog.truncate_fully_and_start_at(action.offset)
        else:
            assert isinstance(action, Backoff)
        self.check_invariants()
        return action

    # -- invariants -------------------------------------------------------------------------------

    def check_invariants(self) -> None:
        plog = self.log
        assert plog.log_start_offset <= plog.last_stable_offset <= plog.high_watermark <= plog.log_end_offset, (
            self, plog.log_start_offset, plog.last_stable_offset, plog.high_watermark, plog.log_end_offset)
        state = self.leader_state
        if state is not None:
            assert self.node_id in state.isr, (self, state.isr)
            assert set(state.maximal_isr) <= set(state.replicas), (self, state.isr, state.replicas)
            assert self.state is not None and state.leader_epoch == self.state.leader_epoch, self
