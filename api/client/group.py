"""The consumer's side of a group (KIP-848): finding the coordinator, the heartbeat that carries
the subscription and owned partitions and returns the target assignment, offset commit and fetch.

`GroupCoordinatorClient` sends requests to the group's coordinator, finding it again after
NOT_COORDINATOR (the answer names it), COORDINATOR_NOT_AVAILABLE or a network error.
`GroupMembership` is the member's state (id, epoch, assignment) and reacts to what the coordinator
answers. `HeartbeatThread` heartbeats in the background between polls, as Kafka's consumer does, so
slow processing does not cost the member its partitions before `max_poll_interval_ms`; the answers
it gets are kept for `poll` to apply (callbacks run in the caller's thread only). One lock orders
every exchange of the member with the coordinator (heartbeats from either thread, commits): each
request carries the epoch of the latest answer. Each thread has its own HTTP connection (the
transport keeps one per thread).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterable, Mapping
from urllib.parse import quote

from kraft.api.client.retry import call_with_retries
from kraft.api.client.transport import Address, Transport
from kraft.api.client.types import OffsetAndMetadata, TopicPartition
from kraft.api.errors import KraftError
from kraft.api.errors import KraftError

log = logging.getLogger("kraft.client.group")
REDISCOVER = frozenset({"NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE", "NETWORK_EXCEPTION",
                        "REQUEST_TIMED_OUT"})
# The member must rejoin: the coordinator no longer knows it at this epoch.
REJOIN = frozenset({"FENCED_MEMBER_EPOCH", "UNKNOWN_MEMBER_ID"})


def group_path(group_id: str, suffix: str = "") -> str:
    return f"/v1/groups/{quote(group_id, safe='')}{suffix}"


def tps_to_wire(tps: Iterable[TopicPartition]) -> list[dict[str, Any]]:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(tps):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]


def tps_from_wire(items: Iterable[Mapping[str, Any]]) -> set[TopicPartition]:
    return {TopicPartition(str(i["topic"]), int(p)) for i in items for p in i["partitions"]}


class GroupCoordinatorClient:
    def __init__(self, transport: Transport, group_id: str, timeout_s: float, backoff_s: float) -> None:
        self.transport = transport
        self.group_id = group_id
        self.timeout_s = timeout_s
        self.backoff_s = backoff_s
        self.coordinator: Address | None = None

    def _path(self, suffix: str) -> str:
        return group_path(self.group_id, suffix)

    def find_coordinator(self) -> Address:
        answer = self.transport.request("GET", self._path("/coordinator"))
        c = answer["coordinator"]
        self.coordinator = (str(c["host"]), int(c["port"]))
        return self.coordinator

    def _once(self, method: str, suffix: str, body: Any, params: dict[str, Any] | None) -> Any:
        address = self.coordinator or self.find_coordinator()
        try:
            return self.transport.request(method, self._path(suffix), body, params=params, address=address)
        except KraftError as e:
            if e.error_code in REDISCOVER:
                named = e.extra.get("coordinator")
                self.coordinator = ((str(named["host"]), int(named["port"]))
                                    if isinstance(named, dict) and named.get("host") else None)
            raise

    def request(self, method: str, suffix: str = "", body: Any = None, *,
                params: dict[str, Any] | None = None, retry: bool = True) -> Any:
        if not retry:
            return self._once(method, suffix, body, params)
        return call_with_retries(lambda: self._once(method, suffix, body, params),
                                 timeout_s=self.timeout_s, backoff_s=self.backoff_s)

    def commit(self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata], member_id: str, member_epoch: int) -> None:
        """Offsets as ints, or kafka-python's OffsetAndMetadata (its metadata string is stored)."""
        entries = []
        for tp, o in sorted(offsets.items()):
            entry: dict[str, Any] = {"topic": tp.topic, "partition": tp.partition}
            if isinstance(o, OffsetAndMetadata):
                entry["offset"] = int(o.offset)
                if o.metadata:
                    entry["metadata"] = o.metadata
            else:
                entry["offset"] = int(o)
            entries.append(entry)
        answer = self.request("POST", "/offsets", {"member_id": member_id, "member_epoch": member_epoch,
                                                   "offsets": entries})
        # the coordinator answers each offset (Kafka's per-partition errors): a refused one is
        # the caller's error, as kafka-python's commit raises a partition's error
        refused = [o for o in (answer or {}).get("offsets", ()) if o.get("error_code")]
        if refused:
            raise KraftError(refused[0]["error_code"], "offsets not committed: " + ", ".join(
                f"{o['topic']}-{o['partition']} ({o['error_code']})" for o in refused),
                partitions=[f"{o['topic']}-{o['partition']}" for o in refused])

    def committed_with_metadata(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata | None]:
        wanted = set(tps)
        topics = sorted({tp.topic for tp in wanted})
        answer = self.request("GET", "/offsets", params={"topics": ",".join(topics)} if topics else None)
        found = {
            TopicPartition(o["topic"], int(o["partition"])): OffsetAndMetadata(int(o["offset"]), str(o.get("metadata") or ""))
            for o in answer.get("offsets", ())
        }
        return {tp: found.get(tp) for tp in wanted}

    def committed(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        return {tp: None if o is None else o.offset for tp, o in self.committed_with_metadata(tps).items()}


@dataclass
class HeartbeatResult:
    assignment: set[TopicPartition] | None  # None: no answer (retry later)
    lost: bool = False  # fenced or unknown: every partition is lost, rejoin


class GroupMembership:
    """The member: subscription, id, epoch, and when the next heartbeat is due.

    `owned` is what the consumer holds (set by `poll` as it applies assignments); the background
    thread reports it, and leaves its answers in `take_pending` for `poll`."""

    def __init__(self, client: GroupCoordinatorClient, client_id: str, assignor: str | None,
                 rebalance_timeout_ms: int) -> None:
        self.client = client
        self.client_id = client_id
        self.assignor = assignor
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.topics: tuple[str, ...] = ()
        self.pattern: str | None = None
        self.member_id = ""
        self.member_epoch = 0
        self.heartbeat_interval_s = 1.0
        self.next_heartbeat = 0.0
        self._send_subscription = True
        self.lock = threading.RLock()  # one exchange with the coordinator at a time
        self.owned: frozenset[TopicPartition] = frozenset()
        self.last_poll = time.monotonic()
        self.wakeup = threading.Event()  # a heartbeat is due now
        self._pending: HeartbeatResult | None = None

    @property
    def joined(self) -> bool:
        return self.member_epoch > 0

    def subscribe(self, topics: Iterable[str], pattern: str | None) -> None:
        self.topics = tuple(topics)
        self.pattern = pattern
        self._send_subscription = True
        self.request_heartbeat()

    def request_heartbeat(self) -> None:
        self.next_heartbeat = 0.0
        self.wakeup.set()

    def heartbeat_due(self) -> bool:
        return time.monotonic() >= self.next_heartbeat

    def take_pending(self) -> HeartbeatResult | None:
        """The background thread's latest answer not yet applied (a loss wins over assignments)."""
        with self.lock:
            pending, self._pending = self._pending, None
            return pending

    def background_tick(self) -> None:
        """Called by `HeartbeatThread`: leaves the group when `poll` has not been called for the
        rebalance timeout (max.poll.interval.ms: the partitions then go to live members), else
        heartbeats when due."""
        with self.lock:
            if not self.joined:
                return  # joining (epoch 0) is `poll`'s, which then applies the assignment
            if time.monotonic() - self.last_poll > self.rebalance_timeout_ms / 1000:
                log.warning("member %s of group %s: poll() not called for %d ms (max_poll_interval_ms): "
                            "leaving the group", self.member_id, self.client.group_id, self.rebalance_timeout_ms)
                self.leave()
                self._pending = HeartbeatResult(set(), lost=True)
                return
            if not self.heartbeat_due():
                return
            result = self.heartbeat(self.owned)
            if result.lost or (result.assignment is not None and not (self._pending and self._pending.lost)):
                self._pending = result

    def heartbeat(self, owned: Iterable[TopicPartition]) -> HeartbeatResult:
        """One heartbeat; retriable failures leave the state as it is (retried after a backoff).
        Under the lock, so the id and epoch sent are those of the latest answer."""
        with self.lock:
            body: dict[str, Any] = {
                "member_id": self.member_id, "member_epoch": self.member_epoch,
                "client_id": self.client_id, "rebalance_timeout_ms": self.rebalance_timeout_ms,
                "owned_partitions": tps_to_wire(owned),
            }
            if self._send_subscription or self.member_epoch == 0:
                body["subscribed_topics"] = list(self.topics)
                if self.pattern is not None:
                    body["subscribed_topic_regex"] = self.pattern
                if self.assignor is not None:
                    body["server_assignor"] = self.assignor
            try:
                answer = self.client.request("POST", "/heartbeat", body, retry=False)
            except KraftError as e:
                if e.error_code in REJOIN:
                    if e.error_code == "UNKNOWN_MEMBER_ID":
                        self.member_id = ""
                    self.member_epoch = 0
                    self.next_heartbeat = 0.0
                    return HeartbeatResult(set(), lost=True)
                if not e.retriable:
                    raise
                self.next_heartbeat = time.monotonic() + self.client.backoff_s
                return HeartbeatResult(None)
            self._send_subscription = False
            self.member_id = str(answer["member_id"])
            self.member_epoch = int(answer["member_epoch"])
            self.heartbeat_interval_s = int(answer["heartbeat_interval_ms"]) / 1000
            self.next_heartbeat = time.monotonic() + self.heartbeat_interval_s
            return HeartbeatResult(tps_from_wire(answer.get("assignment", ())))

    def seconds_to_heartbeat(self) -> float:
        """How long the background thread may sleep: until the next heartbeat while joined."""
        if not self.joined:
            return HeartbeatThread.MAX_WAIT_S
        return min(HeartbeatThread.MAX_WAIT_S, max(0.01, self.next_heartbeat - time.monotonic()))

    def commit(self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata]) -> None:
        """Commits as this member, with the epoch of the latest heartbeat answer."""
        with self.lock:
            self.client.commit(offsets, self.member_id, self.member_epoch)

    def leave(self) -> None:
        """Best effort: the coordinator frees the partitions at once instead of after the session
        timeout."""
        with self.lock:
            if not self.member_id:
                return
            try:
                self.client.request("POST", "/heartbeat", {"member_id": self.member_id, "member_epoch": -1},
                                    retry=False)
            except KraftError:
                pass
            self.member_id, self.member_epoch = "", 0
            self.request_heartbeat()  # a later poll rejoins at once


class HeartbeatThread:
    """Heartbeats of a subscribed consumer between its polls (a daemon thread)."""

    MAX_WAIT_S = 1.0

    def __init__(self, membership: GroupMembership) -> None:
        self.membership = membership
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"kraft-heartbeat-{membership.client.group_id}",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stops without leaving (the caller leaves, or the member is meant to time out)."""
        self._stop.set()
        self.membership.wakeup.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(self.membership.client.timeout_s + 1)

    def _run(self) -> None:
        m = self.membership
        while not self._stop.is_set():
            m.wakeup.wait(m.seconds_to_heartbeat())
            m.wakeup.clear()
            if self._stop.is_set():
                return
            try:
                m.background_tick()
            except Exception:  # noqa: BLE001 - the thread must outlive one bad answer; poll sees it
                log.exception("background heartbeat of group %s failed", m.client.group_id)
                time.sleep(m.client.backoff_s)
