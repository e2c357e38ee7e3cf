"""`kraft transactions`: kafka-transactions.sh's list, describe, describe-producers, find-hanging
and abort, with its options and columns (TransactionsCommand).

A hanging transaction is open in a partition (DescribeProducers shows its start offset) while no
coordinator will ever end it: its producer id belongs to no transactional id, or the id's
coordinator does not count the partition in its transaction (Kafka's rule). It holds the
partition's last stable offset, so read_committed readers stop there; `abort` writes its ABORT
marker (docs/transactions.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Iterable

import click

from kraft.api.cli.common import KraftCommand, KraftGroup, admin_client, bootstrap_option, format_table, version_option
from kraft.api.client import KraftError

LIST_HEADERS = ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
DESCRIBE_HEADERS = ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                    "TopicPartitions"]
HANGING_HEADERS = ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                   "LastTimestamp", "Duration(min)"]
PRODUCERS_HEADERS = ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                     "CurrentTransactionStartOffset"]


def list_rows(transactions: list[dict[str, Any]]) -> list[list[Any]]:
    return [[t["transactional_id"], t["coordinator"], t["producer_id"], t["state"]] for t in transactions]


def describe_row(t: dict[str, Any], now_ms: int) -> list[Any]:
    start = t["transaction_start_time_ms"]
    return [t["coordinator"], t["transactional_id"], t["producer_id"], t["producer_epoch"], t["state"],
            t["transaction_timeout_ms"], None if start < 0 else start, None if start < 0 else now_ms - start,
            ",".join(f"{p['topic']}-{p['partition']}" for p in t["topic_partitions"])]


def producer_rows(producers: list[dict[str, Any]]) -> list[list[Any]]:
    return [[p["producer_id"], p["producer_epoch"], p["coordinator_epoch"], p["last_sequence"], p["last_timestamp"],
             None if p["current_txn_start_offset"] < 0 else p["current_txn_start_offset"]] for p in producers]


@dataclass(frozen=True)
class OpenTransaction:
    topic: str
    partition: int
    producer: dict[str, Any]  # DescribeProducers' entry


def open_transactions(topic: str, partition: int, producers: list[dict[str, Any]], now_ms: int,
                      max_timeout_ms: int) -> list[OpenTransaction]:
    """The partition's open transactions whose producer wrote nothing for longer than
    `max_timeout_ms` (Kafka's candidates: no live transaction can be that old)."""
    return [OpenTransaction(topic, partition, p) for p in producers
            if p["current_txn_start_offset"] >= 0 and now_ms - p["last_timestamp"] > max_timeout_ms]


def hanging(candidates: Iterable[OpenTransaction], transactional_ids: dict[int, str],
            descriptions: dict[str, dict[str, Any] | None]) -> list[OpenTransaction]:
    """Kafka's filterHangingTransactions: a candidate hangs when its producer id is no
    transactional id's, or the id's coordinator does not list the partition in its transaction."""
    found = []
    for txn in candidates:
        tid = transactional_ids.get(txn.producer["producer_id"])
        description = None if tid is None else descriptions.get(tid)
        if description is None or {"topic": txn.topic, "partition": txn.partition} not in description["topic_partitions"]:
            found.append(txn)
    return found


def hanging_rows(found: list[OpenTransaction], now_ms: int) -> list[list[Any]]:
    return [[t.topic, t.partition, t.producer["producer_id"], t.producer["producer_epoch"],
             t.producer["coordinator_epoch"], t.producer["current_txn_start_offset"], t.producer["last_timestamp"],
             (now_ms - t.producer["last_timestamp"]) // 60_000] for t in found]


@click.group("transactions", cls=KraftGroup)
@version_option
def transactions() -> None:
    """List, describe and abort transactions, and show the producers of a partition (kafka-transactions)."""


@transactions.command("list", cls=KraftCommand)
@version_option
@bootstrap_option
def list_transactions(bootstrap_server: str) -> None:
    """Every transactional id the brokers coordinate."""
    with admin_client(bootstrap_server) as admin:
        found, errors = admin.list_transactions()
    click.echo("\n".join(format_table(LIST_HEADERS, list_rows(found))))
    for node_id, error in sorted(errors.items()):
        click.echo(f"Error: broker {node_id} did not answer: {error}", err=True)


@transactions.command("describe", cls=KraftCommand)
@version_option
@bootstrap_option
@click.option("--transactional-id", required=True, help="The transactional id to describe.")
def describe_transaction(bootstrap_server: str, transactional_id: str) -> None:
    """The state of one transactional id, from its coordinator."""
    with admin_client(bootstrap_server) as admin:
        described = admin.describe_transactions([transactional_id])[transactional_id]
    click.echo("\n".join(format_table(DESCRIBE_HEADERS, [describe_row(described, int(time.time() * 1000))])))


@transactions.command("describe-producers", cls=KraftCommand)
@version_option
@bootstrap_option
@click.option("--topic", required=True, help="The topic.")
@click.option("--partition", required=True, type=click.IntRange(min=0), help="The partition.")
def describe_producers(bootstrap_server: str, topic: str, partition: int) -> None:
    """The active producers of a partition, from its leader."""
    with admin_client(bootstrap_server) as admin:
        producers = admin.describe_producers(topic, partition)
    click.echo("\n".join(format_table(PRODUCERS_HEADERS, producer_rows(producers))))


def _partitions_to_search(admin: Any, topic: str | None, partition: int | None,
                          broker_id: int | None) -> list[tuple[str, int]]:
    """The partitions of --topic (or of every topic, internal ones included), those with a
    replica on --broker-id when given."""
    if topic is not None and partition is not None:
        return [(topic, partition)]
    metadata = admin.metadata([topic] if topic is not None else None)
    for error in metadata.get("topic_errors") or ():
        raise click.ClickException(f"{error.get('error_code')}: topic {error.get('name')!r}: {error.get('message', '')}")
    return sorted((t["name"], p["partition"]) for t in metadata["topics"] for p in t["partitions"]
                  if broker_id is None or broker_id in p["replicas"])


def _producers(admin: Any, topic: str | None, partition: int | None,
               broker_id: int | None) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """The active producers of the partitions searched, each leader asked once (as Kafka's tool)."""
    described = admin.describe_producers_of(_partitions_to_search(admin, topic, partition, broker_id))
    for answer in described.values():
        if isinstance(answer, KraftError):
            raise answer
    return described


def _transactional_ids(admin: Any, producer_ids: set[int]) -> dict[int, str]:
    listed, errors = admin.list_transactions(producer_ids=sorted(producer_ids))
    if errors:  # a coordinator that did not answer may own one of them: no verdict without it
        raise click.ClickException("cannot tell which transactions hang: brokers " + ", ".join(
            f"{b} ({e})" for b, e in sorted(errors.items())) + " did not answer ListTransactions")
    return {t["producer_id"]: t["transactional_id"] for t in listed if t["producer_id"] in producer_ids}


def _descriptions(admin: Any, transactional_ids: Iterable[str]) -> dict[str, dict[str, Any] | None]:
    found: dict[str, dict[str, Any] | None] = {}
    for tid in transactional_ids:
        try:
            found[tid] = admin.describe_transactions([tid])[tid]
        except KraftError as e:
            if e.error_code != "TRANSACTIONAL_ID_NOT_FOUND":
                raise
            found[tid] = None
    return found


@transactions.command("find-hanging", cls=KraftCommand)
@version_option
@bootstrap_option
@click.option("--broker-id", type=click.IntRange(min=0), help="Search the partitions with a replica on this broker.")
@click.option("--topic", help="Search this topic only (required with --partition).")
@click.option("--partition", type=click.IntRange(min=0), help="Search this partition of --topic only.")
@click.option("--max-transaction-timeout", type=click.IntRange(min=0), default=15, show_default=True,
              help="Minutes: only transactions open longer than this are examined (the cluster's "
                   "transaction.max.timeout.ms, in minutes).")
def find_hanging(bootstrap_server: str, broker_id: int | None, topic: str | None, partition: int | None,
                 max_transaction_timeout: int) -> None:
    """Open transactions that no transaction coordinator will end (kafka-transactions find-hanging)."""
    if topic is None and broker_id is None:
        raise click.UsageError("find-hanging needs --topic or --broker-id to limit the scope of the search")
    if partition is not None and topic is None:
        raise click.UsageError("--partition needs --topic")
    with admin_client(bootstrap_server) as admin:
        now_ms = int(time.time() * 1000)
        candidates = [txn for (t, p), producers in sorted(_producers(admin, topic, partition, broker_id).items())
                      for txn in open_transactions(t, p, producers, now_ms, max_transaction_timeout * 60_000)]
        found: list[OpenTransaction] = []
        if candidates:
            tids = _transactional_ids(admin, {c.producer["producer_id"] for c in candidates})
            found = hanging(candidates, tids, _descriptions(admin, set(tids.values())))
    click.echo("\n".join(format_table(HANGING_HEADERS, hanging_rows(found, int(time.time() * 1000)))))


@transactions.command("abort", cls=KraftCommand)
@version_option
@bootstrap_option
@click.option("--topic", required=True, help="The topic of the partition.")
@click.option("--partition", required=True, type=click.IntRange(min=0), help="The partition.")
@click.option("--start-offset", type=click.IntRange(min=0),
              help="The first offset of the transaction to abort (as describe-producers and find-hanging show it).")
@click.option("--producer-id", type=click.IntRange(min=0), help="Instead of --start-offset: the producer id,")
@click.option("--producer-epoch", type=click.IntRange(0, 2**15 - 1), help="its epoch,")
@click.option("--coordinator-epoch", type=int, help="and the partition's LatestCoordinatorEpoch for it.")
def abort_transaction(bootstrap_server: str, topic: str, partition: int, start_offset: int | None,
                      producer_id: int | None, producer_epoch: int | None, coordinator_epoch: int | None) -> None:
    """Abort a hanging transaction: its ABORT marker, written by the partition's leader."""
    if start_offset is None and producer_id is None:
        raise click.UsageError("The transaction to abort must be identified either with --start-offset or with "
                               "--producer-id, --producer-epoch, and --coordinator-epoch")
    with admin_client(bootstrap_server) as admin:
        if start_offset is not None:
            producer = next((p for p in admin.describe_producers(topic, partition)
                             if p["current_txn_start_offset"] == start_offset), None)
            if producer is None:
                raise click.ClickException(f"Could not find any open transactions starting at offset "
                                           f"{start_offset} on partition {topic}-{partition}")
            producer_id, producer_epoch = producer["producer_id"], producer["producer_epoch"]
            coordinator_epoch = producer["coordinator_epoch"]
        elif producer_epoch is None:
            raise click.UsageError("Missing required argument --producer-epoch")
        elif coordinator_epoch is None:
            raise click.UsageError("Missing required argument --coordinator-epoch")
        admin.abort_transaction(topic, partition, producer_id, producer_epoch, coordinator_epoch)
