"""The workload of a chaos run and the history it records, one JSON object per line.

Threads in the harness process, talking to the cluster through the proxies (clients are never cut
off, nodes are cut off from each other):

- `ProducerWorker`: acks=all, idempotent or not, unique values `<name>-<seq>` sent round-robin to
  the partitions of one topic; records `ack` (topic, partition, seq, value, offset) or `fail` for
  every record whose future completes;
- `GroupConsumerWorker`: a consumer in a group, subscribed to the produced topics; records every
  record it is shown (`seen`) and every commit the coordinator acknowledged (`commit`);
- `MetadataWorker`: creates and deletes topics and adds partitions; records what was sent and
  what was acknowledged (`meta`);
- `LeaderMonitor`: samples the partitions' leaders and ISRs and records when a partition cannot
  take an acks=all write (`avail`): no leader, a leader the harness has down, or an ISR smaller
  than `min.insync.replicas`.

The checker (`kraft.bench.chaos.checker`) reads only this file.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Callable, Iterable

import requests

from kraft.api.client import Admin, Consumer, KraftError, Producer, TopicPartition


class History:
    """Appends events (dicts) as JSON lines with `t`, seconds since the run started (`wall_start`
    on the wall clock, to place what the nodes logged)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._file = open(path, "w")
        self._lock = threading.Lock()
        self._start = time.monotonic()
        self.wall_start = time.time()

    def now(self) -> float:
        return round(time.monotonic() - self._start, 3)

    def add(self, kind: str, **fields: Any) -> None:
        """An event now; one that happened earlier (read from a node's log) gives its own `t`."""
        line = json.dumps({"k": kind, "t": self.now(), **fields}, separators=(",", ":"))
        with self._lock:
            self._file.write(line + "\n")

    def close(self) -> None:
        with self._lock:
            self._file.close()


def load_history(path: str) -> list[dict[str, Any]]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


class Worker:
    name = "worker"

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "Worker":
        self._thread = threading.Thread(target=self._guarded, name=f"chaos-{self.name}", daemon=True)
        self._thread.start()
        return self

    def _guarded(self) -> None:
        try:
            self.run()
        except Exception as e:  # noqa: BLE001 - a dead worker is reported, not fatal
            self.history.add("worker_error", worker=self.name, error=repr(e))

    def run(self) -> None:
        raise NotImplementedError

    def stop(self, timeout_s: float = 120.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    history: History


class ProducerWorker(Worker):
    def __init__(self, name: str, bootstrap: str, topic: str, partitions: int, idempotent: bool,
                 history: History, batch: int = 20, pause_s: float = 0.2) -> None:
        super().__init__()
        self.name, self.bootstrap, self.topic, self.partitions = name, bootstrap, topic, partitions
        self.idempotent, self.history, self.batch, self.pause_s = idempotent, history, batch, pause_s
        self.acked = 0
        self.failed = 0

    def run(self) -> None:
        producer = Producer(self.bootstrap, acks="all", enable_idempotence=self.idempotent, linger_ms=5,
                            retry_backoff_ms=100, request_timeout_ms=5_000, delivery_timeout_ms=60_000)
        seq = 0
        try:
            while not self._stop.is_set():
                for _ in range(self.batch):
                    value = f"{self.name}-{seq}"
                    partition = seq % self.partitions
                    future = producer.send(self.topic, value=value.encode(), partition=partition)
                    future.produce_result.add_done_callback(
                        lambda r, f=future, s=seq, v=value, p=partition: self._done(f, s, v, p))
                    seq += 1
                producer.flush(90)
                self._stop.wait(self.pause_s)
        finally:
            producer.close(90)

    def _done(self, future: Any, seq: int, value: str, partition: int) -> None:
        try:
            offset = future.get(0).offset
        except KraftError as e:
            self.failed += 1
            self.history.add("fail", producer=self.name, topic=self.topic, part=partition, seq=seq,
                             value=value, error=e.error_code)
            return
        self.acked += 1
        self.history.add("ack", producer=self.name, idem=self.idempotent, topic=self.topic, part=partition,
                         seq=seq, value=value, offset=offset)


class GroupConsumerWorker(Worker):
    def __init__(self, name: str, bootstrap: str, group: str, topics: list[str], history: History) -> None:
        super().__init__()
        self.name, self.bootstrap, self.group, self.topics, self.history = name, bootstrap, group, topics, history
        self.seen = 0
        self.commits = 0

    def run(self) -> None:
        consumer = Consumer(self.bootstrap, group_id=self.group, client_id=self.name, enable_auto_commit=False,
                            auto_offset_reset="earliest", fetch_max_wait_ms=200, request_timeout_ms=5_000)
        try:
            consumer.subscribe(self.topics)
            while not self._stop.is_set():
                try:
                    polled = consumer.poll(500)
                except KraftError:
                    continue  # a leader or the coordinator moving: poll again
                positions: dict[TopicPartition, int] = {}
                for tp, records in polled.items():
                    for r in records:
                        self.history.add("seen", consumer=self.name, topic=tp.topic, part=tp.partition,
                                         offset=r.offset, value=(r.value or b"").decode(errors="replace"))
                        self.seen += 1
                    if records:
                        positions[tp] = records[-1].offset + 1
                if not positions:
                    continue
                try:
                    consumer.commit(positions)
                except KraftError as e:
                    self.history.add("commit_fail", consumer=self.name, error=e.error_code)
                    continue
                self.commits += 1
                for tp, offset in positions.items():
                    self.history.add("commit", group=self.group, consumer=self.name, topic=tp.topic,
                                     part=tp.partition, offset=offset)
        finally:
            try:
                consumer.close()
            except KraftError:
                pass


class MetadataWorker(Worker):
    """Every `interval_s`: create a topic; every third time delete the oldest one it created;
    every other time add a partition to `grow_topic`."""

    name = "metadata"

    def __init__(self, bootstrap: str, grow_topic: str, history: History, interval_s: float = 8.0) -> None:
        super().__init__()
        self.bootstrap, self.grow_topic, self.history, self.interval_s = bootstrap, grow_topic, history, interval_s

    def _op(self, op: str, topic: str, call: Callable[[], Any], **fields: Any) -> bool:
        self.history.add("meta", op=op, phase="sent", topic=topic, **fields)
        try:
            call()
        except KraftError as e:
            self.history.add("meta", op=op, phase="error", topic=topic, error=e.error_code, **fields)
            return False
        self.history.add("meta", op=op, phase="ok", topic=topic, **fields)
        return True

    def run(self) -> None:
        admin = Admin(self.bootstrap, request_timeout_ms=10_000, api_timeout_ms=30_000)
        created: list[str] = []
        grow_count = 1
        n = 0
        try:
            while not self._stop.wait(self.interval_s):
                name = f"chaos-meta-{n}"
                if self._op("create", name, lambda: admin.create_topic(name, 1, 2), partitions=1):
                    created.append(name)
                if n % 3 == 2 and created:
                    victim = created.pop(0)
                    self._op("delete", victim, lambda: admin.delete_topic(victim))
                if n % 2 == 1:
                    target = grow_count + 1
                    if self._op("add_partitions", self.grow_topic,
                                lambda: admin.create_partitions(self.grow_topic, target), partitions=target):
                        grow_count = target
                n += 1
        finally:
            admin.close()


class LeaderMonitor(Worker):
    """Every `interval_s`, the leaders and ISRs of `topics` as the first answering node sees them;
    a partition is unavailable while its leader is -1 or a node the harness has down (`down()`),
    or its ISR is below `min_insync_replicas` (an acks=all produce fails NOT_ENOUGH_REPLICAS)."""

    name = "monitor"

    def __init__(self, urls: Callable[[], list[str]], topics: list[str], down: Callable[[], set[int]],
                 history: History, min_insync_replicas: int = 1, interval_s: float = 0.5) -> None:
        super().__init__()
        self.urls, self.topics, self.down, self.history, self.interval_s = urls, topics, down, history, interval_s
        self.min_insync_replicas = min_insync_replicas
        self._state: dict[tuple[str, int], bool] = {}

    def _leaders(self) -> Iterable[tuple[str, int, int, list[int]]] | None:
        for url in self.urls():
            try:
                meta = requests.get(f"{url}/v1/metadata", params={"topics": ",".join(self.topics)}, timeout=1).json()
            except (requests.RequestException, ValueError):
                continue
            return [(t["name"], p["partition"], p["leader"], p.get("isr", [])) for t in meta.get("topics", ())
                    for p in t.get("partitions", ())]
        return None

    def run(self) -> None:
        while not self._stop.wait(self.interval_s):
            leaders = self._leaders()
            if leaders is None:
                continue
            down = self.down()
            for topic, partition, leader, isr in leaders:
                ok = leader >= 0 and leader not in down and len(isr) >= self.min_insync_replicas
                if self._state.get((topic, partition)) != ok:
                    self._state[(topic, partition)] = ok
                    self.history.add("avail", topic=topic, part=partition, ok=ok, leader=leader, isr=isr)
