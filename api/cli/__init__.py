"""The `kraft` command: Kafka's command-line tools over the Python client, one module per tool
(as Kafka's `tools/` has one class per tool).

`kraft topics` (kafka-topics), `kraft configs` (kafka-configs), `kraft get-offsets`
(kafka-get-offsets), `kraft delete-records` (kafka-delete-records), `kraft console-producer`,
`kraft console-consumer`, `kraft consumer-groups` (kafka-consumer-groups), `kraft cluster
describe`, `kraft metadata-quorum` (kafka-metadata-quorum), `kraft leader-election`
(kafka-leader-election), `kraft reassign-partitions` (kafka-reassign-partitions), `kraft log-dirs`
(kafka-log-dirs), `kraft acls` (kafka-acls), `kraft transactions` (kafka-transactions). Flags keep
Kafka's names and every command takes `--version`. A KraftError prints `Error: <ERROR_CODE>: message`
on stderr and exits 1; bad usage exits 2 (click's convention).
"""

from __future__ import annotations

import click

from kraft.api.cli.acls import acls
from kraft.api.cli.cluster import cluster
from kraft.api.cli.common import KraftGroup, version_option
from kraft.api.cli.configs import configs
from kraft.api.cli.console_consumer import MessageFormatter, console_consumer
from kraft.api.cli.console_producer import LineReader, console_producer
from kraft.api.cli.consumer_groups import consumer_groups
from kraft.api.cli.delete_records import delete_records
from kraft.api.cli.get_offsets import get_offsets
from kraft.api.cli.leader_election import election_lines, leader_election
from kraft.api.cli.log_dirs import log_dirs
from kraft.api.cli.metadata_quorum import metadata_quorum, quorum_replication_lines, quorum_status_lines
from kraft.api.cli.reassign_partitions import generate_plan, parse_reassignment_plan, plan_json, reassign_partitions, verify_lines
from kraft.api.cli.topics import format_topic_description, topics
from kraft.api.cli.transactions import transactions

__all__ = [
    "LineReader", "MessageFormatter", "election_lines", "format_topic_description", "generate_plan", "main",
    "parse_reassignment_plan", "plan_json", "quorum_replication_lines", "quorum_status_lines", "verify_lines",
]


@click.group(cls=KraftGroup, context_settings={"help_option_names": ["-h", "--help"]})
@version_option
def main() -> None:
    """kraft: admin and console clients for a kraft cluster (Kafka's tools, same flags)."""


for _command in (topics, configs, acls, get_offsets, delete_records, console_producer, console_consumer,
                 consumer_groups, cluster, metadata_quorum, leader_election, reassign_partitions, log_dirs,
                 transactions):
    main.add_command(_command)
