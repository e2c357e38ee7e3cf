"""`kraft topics`: kafka-topics (create, list, describe, alter, delete)."""

from __future__ import annotations

import dataclasses
import re

import click

from kraft.api.cli.common import (
    KraftCommand,
    Progress,
    admin_client,
    bootstrap_option,
    ignore_errors,
    parse_properties,
    version_option,
)
from kraft.api.client import Admin, KraftError, TopicDescription
ALTER_PARTITIONS_WARNING = ("WARNING: If partitions are increased for a topic that has a key, the partition logic "
                            "or ordering of the messages will be affected")


def format_topic_description(d: TopicDescription) -> list[str]:
    """kafka-topics --describe output: a topic line, then one tab-indented line per partition."""
    configs = ",".join(f"{k}={v}" for k, v in sorted(d.configs.items()))
    lines = [
        f"Topic: {d.name}\tTopicId: {d.topic_id}\tPartitionCount: {len(d.partitions)}\t"
        f"ReplicationFactor: {d.replication_factor}\tConfigs: {configs}"
    ]
    for p in d.partitions:
        leader = "none" if p.leader is None else str(p.leader)
        lines.append(
            f"\tTopic: {d.name}\tPartition: {p.partition}\tLeader: {leader}\t"
            f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}"
        )
    return lines


def _lacking_partitions(
    admin: Admin, d: TopicDescription, under_replicated: bool, under_min_isr: bool
) -> TopicDescription:
    """`d` with only its under-replicated (ISR < replicas) and/or under-min-ISR partitions."""
    min_isr = 1
    if under_min_isr:
        configs = admin.describe_configs(d.name)
        min_isr = int({**configs.defaults, **configs.configs}.get("min.insync.replicas", "1"))
    return dataclasses.replace(d, partitions=tuple(
        p for p in d.partitions
        if (under_replicated and len(p.isr) < len(p.replicas))
        or (under_min_isr and len(p.isr) < min_isr)
    ))


@click.command(cls=KraftCommand)
@bootstrap_option
@version_option
@click.option("--create", is_flag=True, help="Create a topic.")
@click.option("--list", "list_", is_flag=True, help="List topic names.")
@click.option("--describe", is_flag=True, help="Describe topics (all, or --topic).")
@click.option("--delete", is_flag=True, help="Delete a topic.")
@click.option("--alter", is_flag=True, help="Add partitions (--partitions) or change configs.")
@click.option("--topic", help="The topic (a regular expression for --list).")
@click.option("--partitions", type=click.IntRange(min=1), help="Partition count (create) or new total (alter).")
@click.option("--replication-factor", type=click.IntRange(min=1), help="Replication factor (create).")
@click.option("--config", "configs", multiple=True, metavar="KEY=VALUE", help="A topic config override; repeatable.")
@click.option("--delete-config", multiple=True, metavar="KEY", help="Remove a config override (alter); repeatable.")
@click.option("--if-not-exists", is_flag=True, help="Create only if the topic does not exist.")
@click.option("--if-exists", is_flag=True, help="Alter, delete or describe only if the topic exists.")
@click.option("--exclude-internal", is_flag=True, help="Leave internal topics out of --list/--describe.")
@click.option("--under-replicated-partitions", is_flag=True,
              help="Describe only partitions whose ISR is smaller than their replica set.")
@click.option("--under-min-isr-partitions", is_flag=True,
              help="Describe only partitions whose ISR is smaller than min.insync.replicas.")
def topics(
    bootstrap_server: str,
    create: bool,
    list_: bool,
    describe: bool,
    delete: bool,
    alter: bool,
    topic: str | None,
    partitions: int | None,
    replication_factor: int | None,
    configs: tuple[str, ...],
    delete_config: tuple[str, ...],
    if_not_exists: bool,
    if_exists: bool,
    exclude_internal: bool,
    under_replicated_partitions: bool,
    under_min_isr_partitions: bool,
) -> None:
    """Create, list, describe, alter and delete topics (kafka-topics)."""
    actions = [name for name, on in (("create", create), ("list", list_), ("describe", describe), ("delete", delete), ("alter", alter)) if on]
    if len(actions) != 1:
        raise click.UsageError("exactly one of --create, --list, --describe, --delete, --alter is required")
    action = actions[0]
    if action in ("create", "delete", "alter") and not topic:
        raise click.UsageError(f"--{action} needs --topic")
    if partitions is not None and action not in ("create", "alter"):
        raise click.UsageError("--partitions applies to --create and --alter only")
    if replication_factor is not None and action != "create":
        raise click.UsageError("--replication-factor applies to --create only")
    if configs and action not in ("create", "alter"):
        raise click.UsageError("--config applies to --create and --alter only")
    if delete_config and action != "alter":
        raise click.UsageError("--delete-config applies to --alter only")
    if if_not_exists and action != "create":
        raise click.UsageError("--if-not-exists applies to --create only")
    if if_exists and action not in ("alter", "delete", "describe"):
        raise click.UsageError("--if-exists applies to --alter, --delete and --describe only")
    if (under_replicated_partitions or under_min_isr_partitions) and action != "describe":
        raise click.UsageError("--under-replicated-partitions and --under-min-isr-partitions apply to "
                               "--describe only")
    if action == "alter" and partitions is None and not configs and not delete_config:
        raise click.UsageError("--alter needs --partitions, --config or --delete-config")
    config_map = parse_properties(configs, "--config")
    if action in ("list", "describe") and topic is not None:
        try:
            re.compile(topic)
        except re.error as e:
            raise click.BadParameter(f"not a regular expression: {e}", param_hint="--topic") from e

    missing = {"UNKNOWN_TOPIC_OR_PARTITION"} if if_exists else set()
    with admin_client(bootstrap_server) as admin:
        if action == "create":
            assert topic is not None
            created = ignore_errors(
                {"TOPIC_ALREADY_EXISTS"} if if_not_exists else set(),
                lambda: admin.create_topic(topic, partitions, replication_factor, config_map or None),
            )
            if created is not None:
                click.echo(f"Created topic {topic}.")
        elif action == "list":
            for t in admin.list_topics(include_internal=not exclude_internal):
                if topic is None or re.fullmatch(topic, t.name):
                    click.echo(t.name)
        elif action == "describe":
            # --topic is a regular expression (Kafka's IncludeList); a name without regex characters is
            # described directly, without listing every topic.
            if topic is not None and re.fullmatch(r"[A-Za-z0-9_-]+", topic):
                names = [topic]
            else:
                names = [t.name for t in admin.list_topics(include_internal=not exclude_internal)
                         if topic is None or re.fullmatch(topic, t.name)]
            if topic is not None and not names and not if_exists:
                raise KraftError("UNKNOWN_TOPIC_OR_PARTITION", f"Topic '{topic}' does not exist as expected")
            # A topic deleted between the list and its describe is skipped, as Kafka does.
            progress = Progress("Described topics", len(names))
            descriptions = []
            for n in names:
                found = ignore_errors(missing if n == topic else {"UNKNOWN_TOPIC_OR_PARTITION"},
                                      lambda n=n: admin.describe_topic(n))
                if found is not None:
                    descriptions.append(found)
                progress.step()
            if under_replicated_partitions or under_min_isr_partitions:
                for d in descriptions:
                    lines = format_topic_description(_lacking_partitions(
                        admin, d, under_replicated_partitions, under_min_isr_partitions))
                    for line in lines[1:]:  # kafka-topics prints only the partition lines
                        click.echo(line)
            else:
                for d in descriptions:
                    click.echo("\n".join(format_topic_description(d)))
        elif action == "delete":
            assert topic is not None
            ignore_errors(missing, lambda: admin.delete_topic(topic))
        else:
            assert topic is not None
            if partitions is not None:
                grown = ignore_errors(missing, lambda: admin.create_partitions(topic, partitions))
                if grown is not None:
                    # Kafka's kafka-topics confirmation (its ZooKeeper-era TopicCommand printed it).
                    click.echo(ALTER_PARTITIONS_WARNING)
                    click.echo("Adding partitions succeeded!")
            if config_map or delete_config:
                changes: dict[str, str | None] = {**config_map, **{k: None for k in delete_config}}
                ignore_errors(missing, lambda: admin.alter_configs(topic, changes))

