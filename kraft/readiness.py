"""When a node is ready to serve: `/v1/health`'s `ready` and `reason`, and `?ready=true`'s 503
until then (a readiness probe, or a script that must not create topics on a half-formed cluster).

Per role, a node is ready when
- it has caught up with the metadata log once: applied everything committed as far as it last
  learned (a controller from its Raft log's commit index, a broker-only node from the high
  watermark the active controller reports with each metadata fetch). Like Kafka's broker, which
  becomes RUNNING once caught up, this is latched: a burst of new records does not make a node
  unready again;
- controller role: it knows the Raft leader and the active controller;
- broker role: it is registered and unfenced (`BrokerLifecycle.state == "RUNNING"`), so the
  active controller counts it for placement (a new topic's replication factor).
"""

from __future__ import annotations

from dataclasses import dataclass

# why a broker in each of Kafka's states but RUNNING is not ready (`kraft.broker.broker_state`)
BROKER_NOT_READY = {
    "NOT_RUNNING": "broker not started",
    "STARTING": "broker not yet registered, or catching up with its registration",
    "RECOVERY": "broker registered but fenced (waiting to be unfenced, or it missed heartbeats)",
    "PENDING_CONTROLLED_SHUTDOWN": "broker shutting down",
    "SHUTTING_DOWN": "broker shutting down",
}


@dataclass(frozen=True)
class MetadataProgress:
    """How far this node's metadata is, in one unit (Raft indices, or metadata offsets + 1)."""

    applied: int
    committed: int  # as far as the node last learned; < 0 when it has learned nothing yet


@dataclass(frozen=True)
class Readiness:
    ready: bool
    reason: str | None = None  # why not, for operators

    def to_dict(self) -> dict[str, object]:
        return {"ready": self.ready} if self.ready else {"ready": False, "reason": self.reason}


class ReadinessCheck:
    """Remembers whether the node has caught up once; `check` judges the rest afresh each time."""

    def __init__(self) -> None:
        self.caught_up = False

    def check(self, progress: MetadataProgress, *, active_controller: int | None, broker_state: str | None,
              quorum_leader_known: bool = True) -> Readiness:
        """`broker_state` None: no broker role; `quorum_leader_known`: the Raft leader (a voter)."""
        if not quorum_leader_known:
            return Readiness(False, "the controller quorum has no leader")
        if active_controller is None:
            return Readiness(False, "no active controller known")
        if not self.caught_up:
            if progress.committed < 0:
                return Readiness(False, "metadata log position of the active controller not yet known")
            if progress.applied < progress.committed:
                return Readiness(False, f"metadata log not caught up (applied {progress.applied} "
                                        f"of {progress.committed})")
            self.caught_up = True
        reason = BROKER_NOT_READY.get(broker_state or "")
        return Readiness(True) if reason is None else Readiness(False, reason)
