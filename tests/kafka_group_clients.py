"""Test support: one consumer group member of a real Kafka client library (kafka-python,
confluent-kafka, aiokafka) running in its own thread: it subscribes, polls, records what it
owns and what it read, and commits what it read after each poll, until stopped. The three
libraries drive the classic group protocol each their own way (kafka-python's and aiokafka's
coordinators, librdkafka's); a thread each lets their JoinGroups wait on one another as real
processes' do."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

SESSION_MS = 10_000
HEARTBEAT_MS = 300


class GroupMember:
    def __init__(self, client: str, bootstrap: str, group: str, topic: str, assignor: str,
                 instance_id: str | None = None, client_id: str = "kraft-test") -> None:
        self.client, self.bootstrap, self.group, self.topic = client, bootstrap, group, topic
        self.assignor, self.instance_id, self.client_id = assignor, instance_id, client_id
        self.assigned: frozenset[tuple[str, int]] = frozenset()
        self.read: dict[tuple[str, int], int] = {}  # next offset to read per partition
        self.records = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"{client} {group}", daemon=True)

    def start(self) -> "GroupMember":
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Closes the consumer (a dynamic member leaves the group; a static one does not)."""
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"{self.client} consumer did not close"
        if self.error is not None:
            raise self.error

    def _saw(self, topic: str, partition: int, offset: int) -> None:
        self.read[(topic, partition)] = offset + 1
        self.records += 1

    def _run(self) -> None:
        try:
            {"kafka-python": self._kafka_python, "confluent-kafka": self._confluent,
             "aiokafka": lambda: asyncio.run(self._aiokafka())}[self.client]()
        except BaseException as e:  # noqa: BLE001 - reported by stop()
            self.error = e

    def _kafka_python(self) -> None:
        from kafka import KafkaConsumer
        from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
        from kafka.coordinator.assignors.range import RangePartitionAssignor
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

        assignor = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                    "cooperative-sticky": CooperativeStickyAssignor}[self.assignor]
        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap, group_id=self.group, client_id=self.client_id,
            auto_offset_reset="earliest", enable_auto_commit=False, partition_assignment_strategy=[assignor],
            session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS, group_instance_id=self.instance_id,
            fetch_max_wait_ms=100)
        consumer.subscribe([self.topic])
        try:
            while not self._stop.is_set():
                batch = consumer.poll(timeout_ms=100)
                for tp, records in batch.items():
                    for r in records:
                        self._saw(tp.topic, tp.partition, r.offset)
                self.assigned = frozenset((tp.topic, tp.partition) for tp in consumer.assignment())
                if batch:
                    consumer.commit()
        finally:
            consumer.close()

    def _confluent(self) -> None:
        from confluent_kafka import Consumer

        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap, "group.id": self.group, "client.id": self.client_id,
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "partition.assignment.strategy": self.assignor,
            "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": HEARTBEAT_MS, "fetch.wait.max.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000,
        }
        if self.instance_id is not None:
            config["group.instance.id"] = self.instance_id
        consumer = Consumer(config)
        consumer.subscribe([self.topic])
        try:
            while not self._stop.is_set():
                message = consumer.poll(0.1)
                if message is not None and message.error() is None:
                    self._saw(message.topic(), message.partition(), message.offset())
                    consumer.commit(message, asynchronous=False)
                self.assigned = frozenset((tp.topic, tp.partition) for tp in consumer.assignment())
        finally:
            consumer.close()

    async def _aiokafka(self) -> None:
        import aiokafka.coordinator.assignors.range as range_module
        import aiokafka.coordinator.assignors.roundrobin as roundrobin_module
        from aiokafka import AIOKafkaConsumer

        assignor = {"range": range_module.RangePartitionAssignor,
                    "roundrobin": roundrobin_module.RoundRobinPartitionAssignor}[self.assignor]
        consumer = AIOKafkaConsumer(
            self.topic, bootstrap_servers=self.bootstrap, group_id=self.group, client_id=self.client_id,
            auto_offset_reset="earliest", enable_auto_commit=False, partition_assignment_strategy=(assignor,),
            session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS, group_instance_id=self.instance_id,
            fetch_max_wait_ms=100)
        await consumer.start()
        try:
            while not self._stop.is_set():
                batch = await consumer.getmany(timeout_ms=100)
                for tp, records in batch.items():
                    for r in records:
                        self._saw(tp.topic, tp.partition, r.offset)
                self.assigned = frozenset((tp.topic, tp.partition) for tp in consumer.assignment())
                if batch:
                    await consumer.commit()
        finally:
            await consumer.stop()


def split_evenly(members: list[GroupMember], partitions: set[tuple[str, int]]) -> bool:
    """Every partition owned by exactly one member, and each member's share within one of the
    others'."""
    owned = [m.assigned for m in members]
    if set().union(*owned) != partitions or sum(len(a) for a in owned) != len(partitions):
        return False
    return max(len(a) for a in owned) - min(len(a) for a in owned) <= 1
