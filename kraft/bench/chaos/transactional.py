"""The transactional workload of a chaos run (`--workload transactional`), added to the standard
one, on its own topic; the history events it records, for the checker (`txn_check`):

- `TransactionalProducerWorker`: transactions of a few records over every partition of the topic
  under one transactional id, committing two in three and aborting the third (seeded). Before
  EndTxn it records `txn_end` (the transaction and whether it commits); after it, `txn`: its
  records ([partition, value]) and its outcome: `committed` (commit_transaction returned),
  `aborted` (abort_transaction returned, also after a failed send or commit) or `unknown` (a fatal
  error, or a commit that failed and could not be aborted: its EndTxn may have been logged). After
  an unknown outcome a new producer of the same transactional id fences the old one and ends its
  transaction, as an application would. A failed transaction's `txn` event carries the error. Values are `<transactional id>.<n>.<k>`: the transaction
  is the value without its last part.
- `ReadCommittedWorker`: a read_committed consumer reading every partition from the start for
  the whole run; records each record it is shown (`txn_seen`).
"""

from __future__ import annotations

import random

from kraft.api.client import Consumer, KraftError, Producer, TopicPartition
from kraft.api.client.transactions import TransactionFatalError
from kraft.bench.chaos.workload import History, Worker


def transaction_of(value: str) -> str:
    return value.rpartition(".")[0]


class TransactionalProducerWorker(Worker):
    def __init__(self, name: str, bootstrap: str, topic: str, partitions: int, history: History, seed: int,
                 records: int = 6, pause_s: float = 0.2, transaction_timeout_ms: int = 15_000) -> None:
        super().__init__()
        self.name, self.bootstrap, self.topic, self.partitions = name, bootstrap, topic, partitions
        self.history, self.records, self.pause_s = history, records, pause_s
        self.transaction_timeout_ms = transaction_timeout_ms
        self.rng = random.Random(f"{seed}-{name}")
        self.acked = 0  # records of committed transactions (the run's progress line sums `acked`)

    def _producer(self) -> Producer | None:
        producer = Producer(self.bootstrap, transactional_id=self.name, linger_ms=5, retry_backoff_ms=100,
                            request_timeout_ms=5_000, delivery_timeout_ms=60_000, max_block_ms=60_000,
                            transaction_timeout_ms=self.transaction_timeout_ms)
        try:
            producer.init_transactions()  # fences a previous producer of the id and ends its transaction
        except KraftError as e:
            self.history.add("txn_init_fail", producer=self.name, error=e.error_code)
            producer.close(0)
            return None
        return producer

    def run(self) -> None:
        producer: Producer | None = None
        n = 0
        try:
            while not self._stop.is_set():
                if producer is None:
                    producer = self._producer()
                    if producer is None:
                        self._stop.wait(1.0)
                        continue
                txn = f"{self.name}.{n}"
                n += 1
                commit = self.rng.random() >= 1 / 3
                records = [(k % self.partitions, f"{txn}.{k}") for k in range(self.records)]
                outcome, error = self._transaction(producer, txn, records, commit)
                self.history.add("txn", producer=self.name, txn=txn, records=[list(r) for r in records],
                                 outcome=outcome, **({"error": error} if error else {}))
                if outcome == "committed":
                    self.acked += len(records)
                elif outcome == "unknown":
                    producer.close(0)
                    producer = None
                self._stop.wait(self.pause_s)
        finally:
            if producer is not None:
                producer.close(30)

    def _transaction(self, producer: Producer, txn: str, records: list[tuple[int, str]],
                     commit: bool) -> tuple[str, str | None]:
        """The outcome, and the error that decided it (None when it went as asked)."""
        try:
            producer.begin_transaction()
            for partition, value in records:
                producer.send(self.topic, value.encode(), partition=partition)
            self.history.add("txn_end", producer=self.name, txn=txn, commit=commit)
            if commit:
                producer.commit_transaction()
                return "committed", None
            producer.abort_transaction()
            return "aborted", None
        except TransactionFatalError as e:
            return "unknown", e.error_code
        except KraftError as e:  # a send or the commit failed: abort it if it can still be aborted
            try:
                producer.abort_transaction()
                return "aborted", e.error_code
            except KraftError as again:
                return "unknown", f"{e.error_code}, then {again.error_code}"


class ReadCommittedWorker(Worker):
    def __init__(self, name: str, bootstrap: str, topic: str, partitions: int, history: History) -> None:
        super().__init__()
        self.name, self.bootstrap, self.topic, self.partitions, self.history = name, bootstrap, topic, partitions, history
        self.seen = 0

    def run(self) -> None:
        consumer = Consumer(self.bootstrap, isolation_level="read_committed", enable_auto_commit=False,
                            auto_offset_reset="earliest", fetch_max_wait_ms=200, request_timeout_ms=5_000)
        consumer.assign([TopicPartition(self.topic, p) for p in range(self.partitions)])
        try:
            while not self._stop.is_set():
                try:
                    polled = consumer.poll(500)
                except KraftError:
                    continue  # a leader moving: poll again
                for tp, records in polled.items():
                    for r in records:
                        self.history.add("txn_seen", consumer=self.name, part=tp.partition, offset=r.offset,
                                         value=(r.value or b"").decode(errors="replace"))
                        self.seen += 1
        finally:
            consumer.close(autocommit=False)
