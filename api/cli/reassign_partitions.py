"""`kraft reassign-partitions`: kafka-reassign-partitions (generate, execute, verify, cancel)
and its planner (Kafka's round-robin placement over the given brokers)."""

from __future__ import annotations

import json
import random
from typing import Any, Iterable

import click

from kraft.api.cli.common import KraftCommand, admin_client, bootstrap_option, parse_broker_list, version_option
from kraft.api.client import Admin, TopicPartition
from kraft.api.client.admin import PartitionReassignment
from kraft.metadata.placement import BrokerPlacement, place_replicas


Plan = dict[TopicPartition, tuple[int, ...]]


def _is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _json_file(path: str, option: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise click.BadParameter(f"cannot read {path}: {e}", param_hint=option) from None


def parse_reassignment_plan(data: Any) -> Plan:
    """Kafka's plan: {"version":1,"partitions":[{"topic","partition","replicas":[...]}]}
    ("log_dirs" is accepted and ignored)."""
    def bad(why: str) -> click.BadParameter:
        return click.BadParameter(why, param_hint="--reassignment-json-file")

    if not isinstance(data, dict) or data.get("version") != 1 or not isinstance(data.get("partitions"), list):
        raise bad('expected {"version": 1, "partitions": [...]}')
    plan: Plan = {}
    for i, entry in enumerate(data["partitions"]):
        if not (isinstance(entry, dict) and isinstance(entry.get("topic"), str) and _is_id(entry.get("partition"))
                and isinstance(entry.get("replicas"), list) and all(_is_id(b) for b in entry["replicas"])):
            raise bad(f"partitions[{i}] must be {{topic, partition, replicas: [broker ids]}}")
        tp = TopicPartition(entry["topic"], entry["partition"])
        if tp in plan:
            raise bad(f"partition {tp.topic}-{tp.partition} appears twice")
        plan[tp] = tuple(entry["replicas"])
    return plan


def plan_json(plan: Plan) -> str:
    return json.dumps({"version": 1, "partitions": [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas)}
        for tp, replicas in sorted(plan.items())
    ]}, separators=(",", ":"))


def _current_assignment(admin: Admin, topics: Iterable[str]) -> Plan:
    current: Plan = {}
    for name in sorted(set(topics)):
        for p in admin.describe_topic(name).partitions:
            current[TopicPartition(name, p.partition)] = p.replicas
    return current


def _names(tps: Iterable[TopicPartition]) -> str:
    return ",".join(f"{tp.topic}-{tp.partition}" for tp in sorted(tps))


def verify_lines(plan: Plan, current: Plan, in_progress: dict[TopicPartition, PartitionReassignment]) -> list[str]:
    """kafka-reassign-partitions --verify: one status line per partition of the plan."""
    lines = ["Status of partition reassignment:"]
    for tp, target in sorted(plan.items()):
        name = f"{tp.topic}-{tp.partition}"
        if tp in in_progress:
            lines.append(f"Reassignment of partition {name} is still in progress.")
        elif current.get(tp) == target:
            lines.append(f"Reassignment of partition {name} is completed.")
        else:
            replicas = list(current.get(tp, ()))
            lines.append(f"There is no active reassignment of partition {name}, "
                         f"but replica set is {replicas} rather than {list(target)}.")
    return lines


def generate_plan(current: Plan, brokers: list[int], rng: random.Random) -> Plan:
    """A new assignment of every partition in `current` over `brokers`, keeping each topic's
    replication factor (Kafka's round-robin placement from a random start)."""
    placements = [BrokerPlacement(b) for b in brokers]
    proposed: Plan = {}
    for topic in sorted({tp.topic for tp in current}):
        partitions = sorted(tp.partition for tp in current if tp.topic == topic)
        rf = len(current[TopicPartition(topic, partitions[0])])
        if rf > len(brokers):
            raise click.UsageError(
                f"topic {topic} has replication factor {rf} but only {len(brokers)} brokers are given")
        assignment = place_replicas(len(partitions), rf, placements, start_index=rng.randrange(len(brokers)),
                                    replica_shift=rng.randrange(len(brokers)))
        proposed.update({TopicPartition(topic, p): replicas for p, replicas in zip(partitions, assignment)})
    return proposed


def _topics_to_move(path: str) -> list[str]:
    data = _json_file(path, "--topics-to-move-json-file")
    topics = data.get("topics") if isinstance(data, dict) else None
    if not isinstance(topics, list) or not topics or not all(
            isinstance(t, dict) and isinstance(t.get("topic"), str) for t in topics):
        raise click.BadParameter('expected {"version": 1, "topics": [{"topic": "..."}]}',
                                 param_hint="--topics-to-move-json-file")
    return [t["topic"] for t in topics]


@click.command("reassign-partitions", cls=KraftCommand)
@bootstrap_option
@version_option
@click.option("--reassignment-json-file", type=click.Path(dir_okay=False), help="The plan (execute, verify, cancel).")
@click.option("--topics-to-move-json-file", type=click.Path(dir_okay=False), help="Topics to move (generate).")
@click.option("--broker-list", help="Brokers to move the topics to, e.g. 1,2,3 (generate).")
@click.option("--execute", is_flag=True, help="Start the reassignments of the plan.")
@click.option("--verify", is_flag=True, help="Report whether the plan's reassignments completed.")
@click.option("--cancel", is_flag=True, help="Cancel the plan's reassignments in progress.")
@click.option("--generate", is_flag=True, help="Propose a plan moving the topics to the brokers.")
def reassign_partitions(bootstrap_server: str, reassignment_json_file: str | None, topics_to_move_json_file: str | None,
                        broker_list: str | None, execute: bool, verify: bool, cancel: bool, generate: bool) -> None:
    """Move partition replicas between brokers (kafka-reassign-partitions)."""
    if execute + verify + cancel + generate != 1:
        raise click.UsageError("give exactly one of --execute, --verify, --cancel, --generate")
    with admin_client(bootstrap_server) as admin:
        if generate:
            if topics_to_move_json_file is None or broker_list is None:
                raise click.UsageError("--generate needs --topics-to-move-json-file and --broker-list")
            brokers, topics = parse_broker_list(broker_list), _topics_to_move(topics_to_move_json_file)
            current = _current_assignment(admin, topics)
            click.echo(f"Current partition replica assignment\n{plan_json(current)}\n")
            click.echo(f"Proposed partition reassignment configuration\n"
                       f"{plan_json(generate_plan(current, brokers, random.Random()))}")
            return
        if reassignment_json_file is None:
            raise click.UsageError("--reassignment-json-file is required")
        plan = parse_reassignment_plan(_json_file(reassignment_json_file, "--reassignment-json-file"))
        if execute:
            current = _current_assignment(admin, {tp.topic for tp in plan})
            click.echo("Current partition replica assignment\n\n"
                       f"{plan_json({tp: r for tp, r in current.items() if tp in plan})}\n\n"
                       "Save this to use as the --reassignment-json-file option during rollback")
            admin.alter_partition_reassignments(dict(plan))
            click.echo(f"Successfully started partition reassignments for {_names(plan)}")
        elif cancel:
            admin.alter_partition_reassignments({tp: None for tp in plan})
            click.echo(f"Successfully cancelled partition reassignments for: {_names(plan)}")
        else:
            in_progress = admin.list_partition_reassignments()
            current = _current_assignment(admin, {tp.topic for tp in plan})
            click.echo("\n".join(verify_lines(plan, current, in_progress)))

