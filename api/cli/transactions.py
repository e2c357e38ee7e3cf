"""`kraft transactions`: kafka-transactions.sh's list, describe and describe-producers, with its
columns (TransactionsCommand). `abort` (WriteTxnMarkers for a hanging transaction) is not offered:
markers are the cluster's own nodes' to write here, and KIP-890's verification keeps a late write
from opening a hanging transaction (docs/transactions.md)."""

from __future__ import annotations

import time
from typing import Any

import click

from kraft.api.cli.common import KraftCommand, KraftGroup, admin_client, bootstrap_option, format_table, version_option

LIST_HEADERS = ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
DESCRIBE_HEADERS = ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                    "TopicPartitions"]
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


@click.group("transactions", cls=KraftGroup)
@version_option
def transactions() -> None:
    """List and describe transactions and the producers of a partition (kafka-transactions)."""


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
