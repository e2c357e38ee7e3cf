"""`kraft leader-election`: kafka-leader-election (preferred leaders)."""

from __future__ import annotations

import sys
from typing import Any

import click

from kraft.api.cli.common import KraftCommand, admin_client, bootstrap_option, version_option
from kraft.api.client import TopicPartition


def election_lines(partitions: list[dict[str, Any]]) -> tuple[list[str], bool]:
    """kafka-leader-election's report, and whether any partition failed."""
    done = [f"{p['topic']}-{p['partition']}" for p in partitions if not p.get("error_code")]
    not_needed = [f"{p['topic']}-{p['partition']}" for p in partitions if p.get("error_code") == "ELECTION_NOT_NEEDED"]
    failed = [p for p in partitions if p.get("error_code") not in (None, "ELECTION_NOT_NEEDED")]
    lines = []
    if done:
        lines.append(f"Successfully completed leader election (PREFERRED) for partitions {', '.join(done)}")
    if not_needed:
        lines.append(f"Valid replica already elected for partitions {', '.join(not_needed)}")
    if failed:
        lines.append("Error completing leader election (PREFERRED) for partitions: " + ", ".join(
            f"{p['topic']}-{p['partition']}: {p['error_code']}: {p.get('message', '')}" for p in failed))
    if not partitions:
        lines.append("No partitions needed a leader election")
    return lines, bool(failed)


@click.command("leader-election", cls=KraftCommand)
@bootstrap_option
@version_option
@click.option("--election-type", type=click.Choice(["preferred", "PREFERRED"]), required=True,
              help="Only preferred: the first replica in the assignment becomes leader again.")
@click.option("--topic", help="The topic (with --partition).")
@click.option("--partition", type=click.IntRange(min=0), help="The partition (with --topic).")
@click.option("--all-topic-partitions", is_flag=True, help="Every partition whose leader is not the preferred one.")
def leader_election(bootstrap_server: str, election_type: str, topic: str | None, partition: int | None,
                    all_topic_partitions: bool) -> None:
    """Elect preferred leaders (kafka-leader-election)."""
    if all_topic_partitions == (topic is not None) or (topic is None) != (partition is None):
        raise click.UsageError("give either --topic with --partition, or --all-topic-partitions")
    wanted = None if all_topic_partitions else [TopicPartition(topic, partition)]
    with admin_client(bootstrap_server) as admin:
        results = admin.elect_leaders(election_type.lower(), wanted)
    lines, failed = election_lines(results)
    click.echo("\n".join(lines))
    if failed:
        sys.exit(1)


