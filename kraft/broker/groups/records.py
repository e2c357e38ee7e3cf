"""The records of `__consumer_offsets` (pure): msgpack keys and values, and the replay that folds a
partition's records back into groups.

Keys (the compaction key, so the last record per key wins):
- offset commit: `[1, group_id, topic, partition]` -> `{"offset", "metadata", "commit_timestamp"}`
- group metadata: `[2, group_id]` -> the group's membership snapshot: a KIP-848 group's
  (`group_value`), or with `"type": "classic"` a classic group's (`classic_group_value`). One key
  per group id, so a group that changes protocol (only possible while empty) replaces its record.
A null value is a tombstone (offset or group deleted). Every value carries `"v": 1`.
See docs/groups.md.
"""

from __future__ import annotations

from typing import Any, Iterable

import msgpack

from kraft.broker.groups.classic import ClassicConfig, ClassicGroup, ClassicMember, ClassicState
from kraft.broker.groups.membership import ConsumerGroup, GroupConfig, Member, OffsetAndMetadata

OFFSET_COMMIT_KEY = 1
GROUP_METADATA_KEY = 2
VERSION = 1

_packb = msgpack.Packer(use_bin_type=True).pack


def offset_key(group_id: str, topic: str, partition: int) -> bytes:
    return _packb([OFFSET_COMMIT_KEY, group_id, topic, partition])


def offset_value(o: OffsetAndMetadata) -> bytes:
    return _packb({"v": VERSION, "offset": o.offset, "metadata": o.metadata,
                   "commit_timestamp": o.commit_timestamp_ms})


def group_key(group_id: str) -> bytes:
    return _packb([GROUP_METADATA_KEY, group_id])


def _tps(tps: Iterable[tuple[str, int]]) -> list[list[Any]]:
    return [[t, p] for t, p in sorted(tps)]


def group_value(group: ConsumerGroup) -> bytes:
    """The whole membership (members, epochs, current and target assignments): a new coordinator
    must know who holds what, or it could hand a partition to a second owner."""
    return _packb({
        "v": VERSION,
        "assignor": group.assignor,
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "subscribed_counts": group.subscribed_counts,
        "empty_since": group.empty_since_ms,
        "members": [
            {
                "member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host,
                "principal": m.principal, "subscribed_topics": list(m.subscribed_topics),
                "subscribed_topic_regex": m.subscribed_topic_regex,
                "rebalance_timeout_ms": m.rebalance_timeout_ms,
                "member_epoch": m.member_epoch, "previous_member_epoch": m.previous_member_epoch,
                "assigned": _tps(m.assigned), "pending_revocation": _tps(m.pending_revocation),
                "target": _tps(group.target.get(m.member_id, ())),
            }
            for m in sorted(group.members.values(), key=lambda m: m.member_id)
        ],
    })


def classic_group_value(group: ClassicGroup, empty_since_ms: int | None) -> bytes:
    """The whole classic group, its rebalance in progress included: a waiting JoinGroup or
    SyncGroup is answered from the state this record replays into (`ClassicGroup.join_answer`)."""
    return _packb({
        "v": VERSION,
        "type": "classic",
        "state": group.state.value,
        "protocol_type": group.protocol_type,
        "protocol_name": group.protocol_name,
        "generation_id": group.generation_id,
        "leader_id": group.leader_id,
        "pending_members": sorted(group.pending_members.items()),
        "rebalance_deadline": group.rebalance_deadline_ms,
        "delay_until": group.delay_until_ms,
        "empty_since": empty_since_ms,
        "members": [
            {
                "member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                "client_host": m.client_host, "session_timeout_ms": m.session_timeout_ms,
                "rebalance_timeout_ms": m.rebalance_timeout_ms,
                "protocols": [[name, metadata] for name, metadata in m.protocols],
                "assignment": m.assignment, "awaiting_join": m.awaiting_join,
            }
            for m in group.members.values()  # in join order: the first is the leader's successor
        ],
    })


def restore_classic(group_id: str, config: ClassicConfig, value: dict[str, Any]) -> ClassicGroup:
    group = ClassicGroup(
        group_id, config, ClassicState(value["state"]), value["protocol_type"], value["protocol_name"],
        int(value["generation_id"]), value["leader_id"],
        pending_members={str(k): int(v) for k, v in value["pending_members"]},
        rebalance_deadline_ms=value["rebalance_deadline"], delay_until_ms=value["delay_until"],
    )
    for m in value["members"]:
        member = ClassicMember(
            str(m["member_id"]), m["group_instance_id"], str(m["client_id"]), str(m["client_host"]),
            int(m["session_timeout_ms"]), int(m["rebalance_timeout_ms"]),
            tuple((str(name), bytes(metadata)) for name, metadata in m["protocols"]),
            bytes(m["assignment"]), bool(m["awaiting_join"]),
        )
        group.members[member.member_id] = member
    group.check_invariants()
    return group


def _tp_set(raw: Any) -> frozenset[tuple[str, int]]:
    return frozenset((str(t), int(p)) for t, p in raw)


def restore_group(group: ConsumerGroup, value: dict[str, Any]) -> None:
    """Loads a group metadata value into `group` (offsets untouched)."""
    group.assignor = str(value["assignor"])
    group.group_epoch = int(value["group_epoch"])
    group.assignment_epoch = int(value["assignment_epoch"])
    group.subscribed_counts = {str(k): int(v) for k, v in value["subscribed_counts"].items()}
    empty_since = value.get("empty_since")  # absent in records written before offset retention
    group.empty_since_ms = None if empty_since is None else int(empty_since)
    group.members = {}
    group.target = {}
    for m in value["members"]:
        member = Member(
            str(m["member_id"]), str(m["client_id"]), str(m["client_host"]),
            tuple(m["subscribed_topics"]), m["subscribed_topic_regex"], int(m["rebalance_timeout_ms"]),
            principal=str(m.get("principal", "")),  # absent before regexes were authorized
            member_epoch=int(m["member_epoch"]), previous_member_epoch=int(m["previous_member_epoch"]),
            assigned=_tp_set(m["assigned"]), pending_revocation=_tp_set(m["pending_revocation"]),
        )
        group.members[member.member_id] = member
        group.target[member.member_id] = _tp_set(m["target"])


def group_from_value(group_id: str, config: GroupConfig, value: bytes) -> ConsumerGroup:
    """A group with the membership of a group metadata value (no offsets): what a handler
    changes instead of the state, so the state changes only when the record is replayed."""
    group = ConsumerGroup(group_id, config)
    restore_group(group, msgpack.unpackb(value, raw=False))
    return group


def _offset(v: Any) -> OffsetAndMetadata | None:
    """An offset commit value (None: a tombstone)."""
    if v is None:
        return None
    return OffsetAndMetadata(int(v["offset"]), str(v.get("metadata") or ""), int(v["commit_timestamp"]))


class GroupsReplay:
    """Folds the records of one `__consumer_offsets` partition, in offset order, into groups.
    A record that does not decode is skipped and counted (it never stops a load)."""

    def __init__(self, config: GroupConfig) -> None:
        self.config = config
        self.groups: dict[str, ConsumerGroup] = {}
        # transactional offset commits waiting for their producer's marker (Kafka's
        # pendingTransactionalOffsetCommits): producer id -> (group, topic, partition) -> offset
        self.pending: dict[int, dict[tuple[str, str, int], OffsetAndMetadata | None]] = {}
        self.skipped = 0

    def group(self, group_id: str) -> ConsumerGroup:
        g = self.groups.get(group_id)
        if g is None:
            g = self.groups[group_id] = ConsumerGroup(group_id, self.config)
        return g

    def replay(self, key: bytes | None, value: bytes | None, producer_id: int = -1) -> str | None:
        """Folds one record; the group id of a group metadata record (None for others).
        `producer_id` >= 0: a transactional offset commit, held until its producer's marker."""
        try:
            k = msgpack.unpackb(key, raw=False) if key is not None else None
            if not isinstance(k, list) or len(k) < 2 or not isinstance(k[1], str):
                raise ValueError(f"bad key {k!r}")
        except (ValueError, TypeError, msgpack.UnpackException):
            self.skipped += 1
            return None
        group_id = k[1]
        try:
            v = msgpack.unpackb(value, raw=False) if value is not None else None
            if producer_id >= 0:
                self._hold(producer_id, k, v)
                return None
            self._apply(k, v)
        except (ValueError, TypeError, KeyError, AttributeError, AssertionError, msgpack.UnpackException):
            self.skipped += 1
        group = self.groups.get(group_id)
        if group is not None and group.is_empty():
            del self.groups[group_id]
        return group_id if k[0] == GROUP_METADATA_KEY else None

    def _hold(self, producer_id: int, k: list[Any], v: Any) -> None:
        if k[0] != OFFSET_COMMIT_KEY:
            raise ValueError(f"a transactional record of key type {k[0]!r}")
        _, group_id, topic, partition = k
        self.pending.setdefault(producer_id, {})[(group_id, topic, int(partition))] = _offset(v)

    def pending_offsets(self, group_id: str) -> set[tuple[str, int]]:
        """The partitions of `group_id` whose transactional offset waits for its marker."""
        return {(t, p) for held in self.pending.values() for (g, t, p) in held if g == group_id}

    def end_transaction(self, producer_id: int, commit: bool) -> None:
        """The producer's marker: its held offsets are committed, or dropped."""
        held = self.pending.pop(producer_id, {})
        if not commit:
            return
        for (group_id, topic, partition), offset in held.items():
            offsets = self.group(group_id).offsets
            if offset is None:
                offsets.pop((topic, partition), None)
            else:
                offsets[(topic, partition)] = offset

    def _apply(self, k: list[Any], v: Any) -> None:
        if k[0] == OFFSET_COMMIT_KEY:
            _, group_id, topic, partition = k
            offsets = self.group(group_id).offsets
            offset = _offset(v)
            if offset is None:
                offsets.pop((topic, int(partition)), None)
            else:
                offsets[(topic, int(partition))] = offset
        elif k[0] == GROUP_METADATA_KEY:
            # Restored into a fresh group so a malformed value leaves the old one intact.
            fresh = ConsumerGroup(k[1], self.config)
            if v is not None and v.get("type") == "classic":
                fresh.classic = restore_classic(k[1], self.config.classic, v)
                fresh.empty_since_ms = v["empty_since"]
            elif v is not None:
                restore_group(fresh, v)
            fresh.offsets = self.group(k[1]).offsets
            self.groups[k[1]] = fresh
        else:
            raise ValueError(f"unknown key type {k[0]!r}")
