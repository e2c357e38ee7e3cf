"""A seeded transactional workload for the storage tests: plain and transactional batches of a few
producers (kraft's and Kafka's v2 at random: a log written through both APIs), COMMIT and ABORT markers, high-watermark moves and checkpoints, against a PartitionLog,
with the oracle of what read_committed must show (imported by the test modules of this folder)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from kraft.log import kafka_batch
from kraft.log.batch import build_batch
from kraft.log.isolation import readable_batches
from kraft.log.partition_log import PartitionLog
from kraft.log.records import decode_records

LEADER_EPOCH = 0


@dataclass
class Producer:
    producer_id: int
    sequence: int = 0
    open_values: list[bytes] = field(default_factory=list)  # of its open transaction

    @property
    def in_transaction(self) -> bool:
        return bool(self.open_values)


def transactional_batch(producer_id: int, sequence: int, values: list[bytes], epoch: int = 0,
                        transactional: bool = True, key: bytes | None = None, v2: bool = False) -> bytes:
    """kraft's batch, or with `v2` a Kafka producer's."""
    return (kafka_batch.build_batch if v2 else build_batch)(
        [(key, v, None, 1_000) for v in values], producer_id=producer_id, producer_epoch=epoch,
        base_sequence=sequence, transactional=transactional)


class TxnWorkload:
    """Random operations on `log`; `committed` is what read_committed readers must see, in
    offset order (plain records and committed transactions' records)."""

    def __init__(self, log: PartitionLog, seed: int, producers: int = 3) -> None:
        self.log = log
        self.rng = random.Random(seed)
        self.producers = [Producer(100 + i) for i in range(producers)]
        self.offsets: dict[bytes, int] = {}  # value -> offset
        self.committed: set[bytes] = set()
        self.aborted: set[bytes] = set()
        self.count = 0
        self.ends = [0]  # log end offsets after each append: where a high watermark can stand

    def _value(self) -> bytes:
        self.count += 1
        return b"v%d" % self.count

    def step(self, checkpoints: bool = True) -> None:
        log, rng = self.log, self.rng
        roll = rng.random()
        producer = rng.choice(self.producers)
        if roll < 0.15:
            values = [self._value() for _ in range(rng.randint(1, 3))]
            build = kafka_batch.build_batch if rng.random() < 0.5 else build_batch
            info = log.append_as_leader(build([(None, v, None, 1_000) for v in values]), LEADER_EPOCH, 1_000)
            self._placed(values, info.first_offset)
            self.committed.update(values)
        elif roll < 0.6:
            if not producer.in_transaction:
                log.verify_transaction(producer.producer_id, 0)
            values = [self._value() for _ in range(rng.randint(1, 3))]
            info = log.append_as_leader(
                transactional_batch(producer.producer_id, producer.sequence, values, v2=rng.random() < 0.5),
                LEADER_EPOCH, 1_000)
            producer.sequence += len(values)
            producer.open_values += values
            self._placed(values, info.first_offset)
        elif roll < 0.85:
            commit = rng.random() < 0.5
            log.append_control(producer.producer_id, 0, 0, commit, LEADER_EPOCH, 1_000)
            (self.committed if commit else self.aborted).update(producer.open_values)
            producer.open_values = []
            self.ends.append(log.log_end_offset)
        elif roll < 0.95:
            log.high_watermark = rng.choice([e for e in self.ends if e >= log.high_watermark])
        elif checkpoints:
            if rng.random() < 0.5:
                log.checkpoint()
            else:
                log.flush_closed_segments()

    def _placed(self, values: list[bytes], first_offset: int) -> None:
        for i, value in enumerate(values):
            self.offsets[value] = first_offset + i
        self.ends.append(self.log.log_end_offset)


def read_all(log: PartitionLog, read_committed: bool) -> tuple[bytes, tuple]:
    """Every batch a reader gets from the log start (to the LSO for read_committed, else the
    high watermark), and the aborted transactions answered with them."""
    data, aborted, offset = b"", (), log.log_start_offset
    while True:
        info = log.read(offset, 10**7, max_offset=log.high_watermark, read_committed=read_committed)
        if not info.records:
            return data, aborted
        data += info.records
        aborted += info.aborted_transactions or ()
        offset = info.next_offset


def visible_values(data: bytes, aborted: tuple | None) -> list[bytes | None]:
    """The values an application reads of `data` (`log/isolation.py`'s rule)."""
    pairs = None if aborted is None else [(t.producer_id, t.first_offset) for t in aborted]
    return [r.value for pos, _, visible in readable_batches(data, pairs) if visible
            for r in decode_records(data, pos)]
