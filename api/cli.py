"""The `kraft` command: Kafka's command-line tools over the Python client.

`kraft topics` (kafka-topics), `kraft console-producer`, `kraft console-consumer`,
`kraft consumer-groups` (kafka-consumer-groups), `kraft cluster describe`, `kraft metadata-quorum`
(kafka-metadata-quorum), `kraft leader-election` (kafka-leader-election), `kraft reassign-partitions`
(kafka-reassign-partitions). Flags keep Kafka's names. A KraftError prints
`Error: <ERROR_CODE>: message` on stderr and exits 1; bad usage exits 2 (click's convention).
New tools (consumer-groups, metadata-quorum, leader-election, reassign-partitions) are further
commands or groups of `main`.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Iterable

import click

from api.client import Admin, Consumer, ConsumerRecord, KraftError, Producer, TopicDescription, TopicPartition
from api.client.admin import PartitionReassignment
from api.client.transport import parse_bootstrap
from log.batch import COMPRESSIONS
from metadata.placement import BrokerPlacement, place_replicas

# Admin calls from the CLI give up sooner than a long-running client would (Kafka: 60 s).
CLI_API_TIMEOUT_MS = 15_000


class KraftGroup(click.Group):
    """Turns KraftError into click's error exit: `Error: CODE: message`, status 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KraftError as e:
            raise click.ClickException(str(e)) from e


def _check_bootstrap(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    try:
        parse_bootstrap(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from e
    return value


bootstrap_option = click.option(
    "--bootstrap-server",
    default="127.0.0.1:9092",
    show_default=True,
    envvar="KRAFT_BOOTSTRAP_SERVER",
    callback=_check_bootstrap,
    help="Comma-separated host:port of brokers to connect to.",
)


def parse_properties(values: Iterable[str], option: str) -> dict[str, str]:
    """KEY=VALUE pairs (Kafka's --property / --config syntax)."""
    out = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint=option)
        out[key.strip()] = value
    return out


def parse_bool(value: str, name: str) -> bool:
    text = value.strip().lower()
    if text not in ("true", "false"):
        raise click.BadParameter(f"{name} must be true or false, got {value!r}", param_hint="--property")
    return text == "true"


@click.group(cls=KraftGroup, context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """kraft: admin and console clients for a kraft cluster (Kafka's tools, same flags)."""


# -- topics -----------------------------------------------------------------------------------


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


def _ignore(codes: set[str], call: Callable[[], Any]) -> Any:
    try:
        return call()
    except KraftError as e:
        if e.error_code not in codes:
            raise
        return None


@main.command()
@bootstrap_option
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
    if action == "list" and topic is not None:
        try:
            re.compile(topic)
        except re.error as e:
            raise click.BadParameter(f"not a regular expression: {e}", param_hint="--topic") from e

    missing = {"UNKNOWN_TOPIC_OR_PARTITION"} if if_exists else set()
    with Admin(bootstrap_server, api_timeout_ms=CLI_API_TIMEOUT_MS) as admin:
        if action == "create":
            assert topic is not None
            created = _ignore(
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
            if topic is not None:
                found = _ignore(missing, lambda: admin.describe_topic(topic))
                descriptions = [found] if found is not None else []
            else:
                names = [t.name for t in admin.list_topics(include_internal=not exclude_internal)]
                # A topic deleted between the list and its describe is skipped, as Kafka does.
                descriptions = [d for d in (_ignore({"UNKNOWN_TOPIC_OR_PARTITION"}, lambda n=n: admin.describe_topic(n)) for n in names) if d]
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
            _ignore(missing, lambda: admin.delete_topic(topic))
        else:
            assert topic is not None
            if partitions is not None:
                _ignore(missing, lambda: admin.create_partitions(topic, partitions))
            if config_map or delete_config:
                changes: dict[str, str | None] = {**config_map, **{k: None for k in delete_config}}
                _ignore(missing, lambda: admin.alter_configs(topic, changes))


# -- console producer -------------------------------------------------------------------------

# Kafka producer property -> Producer keyword (int-valued unless listed in _STR_PRODUCER_PROPS).
PRODUCER_PROPERTIES = {
    "acks": "acks",
    "linger.ms": "linger_ms",
    "batch.size": "batch_size",
    "compression.type": "compression_type",
    "retries": "retries",
    "retry.backoff.ms": "retry_backoff_ms",
    "max.request.size": "max_request_size",
    "delivery.timeout.ms": "delivery_timeout_ms",
    "request.timeout.ms": "request_timeout_ms",
    "buffer.memory": "buffer_memory",
    "max.block.ms": "max_block_ms",
}
_STR_PRODUCER_PROPS = {"acks", "compression.type"}


def producer_kwargs(properties: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in properties.items():
        if name not in PRODUCER_PROPERTIES:
            raise click.BadParameter(f"unknown producer property {name!r}; known: {', '.join(sorted(PRODUCER_PROPERTIES))}", param_hint="--producer-property")
        if name in _STR_PRODUCER_PROPS:
            out[PRODUCER_PROPERTIES[name]] = value
        else:
            try:
                out[PRODUCER_PROPERTIES[name]] = int(value)
            except ValueError:
                raise click.BadParameter(f"{name} must be an integer, got {value!r}", param_hint="--producer-property") from None
    return out


@dataclass(frozen=True)
class LineReader:
    """Turns console lines into (key, value), as Kafka's LineMessageReader does."""

    parse_key: bool = False
    key_separator: str = "\t"

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> LineReader:
        unknown = set(props) - {"parse.key", "key.separator"}
        if unknown:
            raise click.BadParameter(f"unknown reader properties {sorted(unknown)}; known: parse.key, key.separator", param_hint="--property")
        return cls(parse_bool(props.get("parse.key", "false"), "parse.key"), props.get("key.separator", "\t"))

    def parse(self, line: str, line_number: int) -> tuple[str | None, str]:
        if not self.parse_key:
            return None, line
        key, sep, value = line.partition(self.key_separator)
        if not sep:
            raise KraftError("INVALID_RECORD", f"no key separator {self.key_separator!r} found on line number {line_number}: {line!r}")
        return key, value


@main.command("console-producer")
@bootstrap_option
@click.option("--topic", required=True, help="The topic to produce to.")
@click.option("--property", "properties", multiple=True, metavar="KEY=VALUE", help="Line reader property: parse.key, key.separator.")
@click.option("--producer-property", "producer_properties", multiple=True, metavar="KEY=VALUE", help="Producer config, Kafka names (acks, linger.ms, ...).")
@click.option("--request-required-acks", help="acks: 0, 1, -1/all (default all).")
@click.option("--compression-codec", type=click.Choice(COMPRESSIONS), help="Batch compression.")
def console_producer(
    bootstrap_server: str,
    topic: str,
    properties: tuple[str, ...],
    producer_properties: tuple[str, ...],
    request_required_acks: str | None,
    compression_codec: str | None,
) -> None:
    """Send each line of stdin as a record (kafka-console-producer)."""
    reader = LineReader.from_properties(parse_properties(properties, "--property"))
    kwargs: dict[str, Any] = {"acks": "all", "max_block_ms": CLI_API_TIMEOUT_MS}
    kwargs.update(producer_kwargs(parse_properties(producer_properties, "--producer-property")))
    if request_required_acks is not None:
        kwargs["acks"] = request_required_acks
    if compression_codec is not None:
        kwargs["compression_type"] = compression_codec
    errors: list[KraftError] = []

    def on_done(future: Any) -> None:
        error = future.exception()
        if error is not None:
            errors.append(error)

    with Producer(bootstrap_server, **kwargs) as producer:
        # Lines are decoded one by one: bytes that are not UTF-8 name their line, not a traceback.
        for number, raw in enumerate(click.get_binary_stream("stdin"), start=1):
            try:
                line = raw.rstrip(b"\r\n").decode("utf-8")
            except UnicodeDecodeError as e:
                raise KraftError("INVALID_RECORD", f"line number {number} is not UTF-8 text ({e.reason} at byte "
                                                   f"{e.start}); send binary data with a client") from None
            key, value = reader.parse(line, number)
            producer.send(topic, value=value, key=key).add_done_callback(on_done)
        producer.flush()
    if errors:
        raise KraftError(errors[0].error_code, f"{len(errors)} record(s) not delivered: {errors[0].message}")


# -- console consumer -------------------------------------------------------------------------


@dataclass(frozen=True)
class MessageFormatter:
    """Kafka's DefaultMessageFormatter: optional timestamp, partition, offset, key, then value."""

    print_timestamp: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    print_key: bool = False
    print_value: bool = True
    key_separator: str = "\t"
    line_separator: str = "\n"

    _BOOLS = ("print.timestamp", "print.partition", "print.offset", "print.headers", "print.key", "print.value")

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> MessageFormatter:
        known = set(cls._BOOLS) | {"key.separator", "line.separator"}
        unknown = set(props) - known
        if unknown:
            raise click.BadParameter(f"unknown formatter properties {sorted(unknown)}; known: {', '.join(sorted(known))}", param_hint="--property")
        flags = {name.replace(".", "_"): parse_bool(props[name], name) for name in cls._BOOLS if name in props}
        return cls(
            **flags,
            key_separator=props.get("key.separator", "\t"),
            line_separator=props.get("line.separator", "\n"),
        )

    def format(self, r: ConsumerRecord) -> str:
        fields = []
        if self.print_timestamp:
            fields.append(f"CreateTime:{r.timestamp}")
        if self.print_partition:
            fields.append(f"Partition:{r.partition}")
        if self.print_offset:
            fields.append(f"Offset:{r.offset}")
        if self.print_headers:
            fields.append(",".join(f"{k}:{_text(v)}" for k, v in r.headers) if r.headers else "NO_HEADERS")
        if self.print_key:
            fields.append(_text(r.key))
        if self.print_value:
            fields.append(_text(r.value))
        return self.key_separator.join(fields) + self.line_separator


def _text(data: bytes | None) -> str:
    return "null" if data is None else data.decode("utf-8", errors="replace")


def parse_start_offset(value: str | None) -> str | int | None:
    if value is None or value in ("earliest", "latest"):
        return value
    if value.isdigit():
        return int(value)
    raise click.BadParameter(f"must be earliest, latest or a non-negative offset, got {value!r}", param_hint="--offset")


@main.command("console-consumer")
@bootstrap_option
@click.option("--topic", required=True, help="The topic to consume.")
@click.option("--partition", type=click.IntRange(min=0), help="Read only this partition.")
@click.option("--offset", help="Start offset with --partition: earliest, latest or a number (default latest).")
@click.option("--from-beginning", is_flag=True, help="Start at the earliest offset instead of the end.")
@click.option("--max-messages", type=click.IntRange(min=1), help="Exit after this many records.")
@click.option("--timeout-ms", type=click.IntRange(min=0), help="Exit when no record arrives for this long.")
@click.option("--property", "properties", multiple=True, metavar="KEY=VALUE", help="print.key, print.offset, print.partition, print.timestamp, print.headers, print.value, key.separator, line.separator.")
@click.option("--group", help="Consume as a member of this consumer group (offsets are committed).")
def console_consumer(
    bootstrap_server: str,
    topic: str,
    partition: int | None,
    offset: str | None,
    from_beginning: bool,
    max_messages: int | None,
    timeout_ms: int | None,
    properties: tuple[str, ...],
    group: str | None,
) -> None:
    """Print records of a topic to stdout (kafka-console-consumer). With --group the consumer
    joins the group, starts from its committed offsets and commits as it goes."""
    start = parse_start_offset(offset)
    if group is not None and (partition is not None or start is not None):
        raise click.UsageError("--group cannot be used with --partition or --offset")
    if start is not None and partition is None:
        raise click.UsageError("--offset needs --partition")
    if start is not None and from_beginning:
        raise click.UsageError("--from-beginning and --offset cannot be used together")
    formatter = MessageFormatter.from_properties(parse_properties(properties, "--property"))
    if from_beginning:
        start = "earliest"
    out = click.get_text_stream("stdout")
    count = 0
    reset = "earliest" if start == "earliest" else "latest"
    with Consumer(bootstrap_server, auto_offset_reset=reset, group_id=group,
                  auto_commit_interval_ms=1000) as consumer:
        if group is not None:
            consumer.partitions_for_topic(topic)  # fails fast on an unknown topic or no cluster
            consumer.subscribe([topic])  # from the committed offsets, else auto_offset_reset
        else:
            tps = [TopicPartition(topic, partition)] if partition is not None else consumer.partitions_for_topic(topic)
            consumer.assign(tps)
            if isinstance(start, int):
                consumer.seek(tps[0], start)
            elif start == "earliest":
                consumer.seek_to_beginning()
            else:
                consumer.seek_to_end()
        last_record = time.monotonic()
        try:
            while max_messages is None or count < max_messages:
                wait_ms = 1000 if timeout_ms is None else max(0, min(1000, timeout_ms - int((time.monotonic() - last_record) * 1000)))
                got = consumer.poll(timeout_ms=wait_ms, max_records=None if max_messages is None else max_messages - count)
                if not got:
                    if timeout_ms is not None and (time.monotonic() - last_record) * 1000 >= timeout_ms:
                        break
                    continue
                last_record = time.monotonic()
                for records in got.values():
                    out.write("".join(formatter.format(r) for r in records))
                    count += len(records)
                out.flush()
        except KeyboardInterrupt:
            pass
    click.echo(f"Processed a total of {count} messages", err=True)


# -- consumer groups --------------------------------------------------------------------------


def format_table(headers: list[str], rows: list[list[Any]]) -> list[str]:
    """Left-aligned columns as kafka-consumer-groups prints them; None prints as "-"."""
    cells = [headers] + [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return [" ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]


def describe_offsets_rows(d: dict[str, Any]) -> list[list[Any]]:
    members = {m["member_id"]: m for m in d.get("members", ())}
    rows = []
    for o in d.get("offsets", ()):
        m = members.get(o.get("member_id") or "")
        rows.append([d["group_id"], o["topic"], o["partition"], o["current_offset"], o["log_end_offset"],
                     o["lag"], m and m["member_id"], m and m["host"], m and (m["client_id"] or None)])
    return rows


def _assignment_text(items: list[dict[str, Any]]) -> str:
    return ",".join(f"{a['topic']}({','.join(map(str, a['partitions']))})" for a in items) or "-"


def describe_group_lines(d: dict[str, Any], view: str, verbose: bool) -> list[str]:
    if view == "state":
        c = d.get("coordinator")
        coordinator = f"{c['host']}:{c['port']} ({c['node_id']})" if c else None
        return format_table(["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
                            [[d["group_id"], coordinator, d["assignor"], d["state"], len(d["members"])]])
    if view == "members":
        headers = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        if verbose:
            headers[2:2] = ["EPOCH"]
            headers.append("ASSIGNMENT")
        rows = []
        for m in d["members"]:
            count = sum(len(a["partitions"]) for a in m["assignment"])
            row = [d["group_id"], m["member_id"], m["host"], m["client_id"] or None, count]
            if verbose:
                row[2:2] = [m["member_epoch"]]
                row.append(_assignment_text(m["assignment"]))
            rows.append(row)
        return format_table(headers, rows)
    return format_table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                         "CONSUMER-ID", "HOST", "CLIENT-ID"], describe_offsets_rows(d))


def parse_reset_topic(value: str) -> tuple[str, list[int] | None]:
    """Kafka's --topic for --reset-offsets: `topic` or `topic:0,1,2`."""
    topic, sep, parts = value.partition(":")
    if not sep:
        return topic, None
    try:
        return topic, [int(p) for p in parts.split(",") if p.strip()]
    except ValueError:
        raise click.BadParameter(f"expected topic or topic:0,1,... got {value!r}", param_hint="--topic") from None


def parse_datetime_ms(value: str) -> int:
    """--to-datetime: ISO 8601 (YYYY-MM-DDTHH:mm:SS.sss, optional zone; none means local time)."""
    try:
        return int(datetime.fromisoformat(value).timestamp() * 1000)
    except ValueError:
        raise click.BadParameter(f"expected YYYY-MM-DDTHH:mm:SS.sss, got {value!r}", param_hint="--to-datetime") from None


@main.command("consumer-groups")
@bootstrap_option
@click.option("--list", "list_", is_flag=True, help="List all consumer groups.")
@click.option("--describe", is_flag=True, help="Describe a group: offsets and lag (default), --members or --state.")
@click.option("--delete", is_flag=True, help="Delete a group without active members.")
@click.option("--reset-offsets", is_flag=True, help="Reset the offsets of a group without active members.")
@click.option("--group", help="The consumer group.")
@click.option("--members", is_flag=True, help="With --describe: the members.")
@click.option("--verbose", is_flag=True, help="With --members: epochs and assignments too.")
@click.option("--state", is_flag=True, help="With --describe: coordinator, strategy, state and member count.")
@click.option("--offsets", is_flag=True, help="With --describe: committed offsets and lag (the default).")
@click.option("--topic", "topics", multiple=True, help="With --reset-offsets: topic or topic:0,1; repeatable.")
@click.option("--to-earliest", is_flag=True, help="Reset to the log start offset.")
@click.option("--to-latest", is_flag=True, help="Reset to the log end offset.")
@click.option("--to-offset", type=click.IntRange(min=0), help="Reset to this offset.")
@click.option("--to-datetime", help="Reset to the first offset at or after this time (YYYY-MM-DDTHH:mm:SS.sss).")
@click.option("--shift-by", type=int, help="Move the committed offsets by this many (negative: back).")
@click.option("--dry-run", is_flag=True, help="Show the new offsets without committing them.")
@click.option("--execute", is_flag=True, help="Commit the new offsets.")
def consumer_groups(
    bootstrap_server: str, list_: bool, describe: bool, delete: bool, reset_offsets: bool,
    group: str | None, members: bool, verbose: bool, state: bool, offsets: bool,
    topics: tuple[str, ...], to_earliest: bool, to_latest: bool, to_offset: int | None,
    to_datetime: str | None, shift_by: int | None, dry_run: bool, execute: bool,
) -> None:
    """List, describe, delete consumer groups and reset their offsets (kafka-consumer-groups)."""
    actions = [n for n, on in (("list", list_), ("describe", describe), ("delete", delete),
                                ("reset-offsets", reset_offsets)) if on]
    if len(actions) != 1:
        raise click.UsageError("exactly one of --list, --describe, --delete, --reset-offsets is required")
    action = actions[0]
    if action != "list" and not group:
        raise click.UsageError(f"--{action} needs --group")
    views = [n for n, on in (("members", members), ("state", state), ("offsets", offsets)) if on]
    if len(views) > 1 or (views and action != "describe"):
        raise click.UsageError("--members, --state and --offsets are exclusive options of --describe")
    if verbose and not members:
        raise click.UsageError("--verbose applies to --describe --members only")
    strategies = [n for n, on in (("earliest", to_earliest), ("latest", to_latest), ("offset", to_offset is not None),
                                  ("datetime", to_datetime is not None), ("shift", shift_by is not None)) if on]
    if action == "reset-offsets":
        if len(strategies) != 1:
            raise click.UsageError("--reset-offsets needs exactly one of --to-earliest, --to-latest, "
                                   "--to-offset, --to-datetime, --shift-by")
        if dry_run == execute:
            raise click.UsageError("--reset-offsets needs exactly one of --dry-run, --execute")
        if not topics:
            raise click.UsageError("--reset-offsets needs --topic")
    elif strategies or topics or dry_run or execute:
        raise click.UsageError("--topic, --to-*, --shift-by, --dry-run and --execute apply to --reset-offsets only")

    with Admin(bootstrap_server, api_timeout_ms=CLI_API_TIMEOUT_MS) as admin:
        if action == "list":
            listed, unreachable = admin.list_groups_with_errors()
            for g in listed:
                click.echo(g["group_id"])
            for node_id, e in sorted(unreachable.items()):
                click.echo(f"Warning: broker {node_id} did not answer ({e.error_code}); its groups are missing",
                           err=True)
        elif action == "describe":
            assert group is not None
            d = admin.describe_group(group)
            if not d["members"] and (views or ["offsets"])[0] != "state":
                click.echo(f"Consumer group '{group}' has no active members.")
            click.echo("\n".join(["", *describe_group_lines(d, (views or ["offsets"])[0], verbose)]))
        elif action == "delete":
            assert group is not None
            admin.delete_group(group)
            click.echo(f"Deletion of requested consumer groups ('{group}') was successful.")
        else:
            assert group is not None
            strategy = strategies[0]
            value = {"offset": to_offset, "shift": shift_by,
                     "datetime": to_datetime and parse_datetime_ms(to_datetime)}.get(strategy)
            rows = []
            for spec in topics:
                topic, partitions = parse_reset_topic(spec)
                for o in admin.reset_group_offsets(group, [topic], strategy, value, partitions, dry_run=dry_run):
                    rows.append([group, o["topic"], o["partition"], o["new_offset"]])
            click.echo("\n".join(["", *format_table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], rows)]))


# -- cluster ----------------------------------------------------------------------------------


@main.group()
def cluster() -> None:
    """Cluster-wide information."""


@cluster.command("describe")
@bootstrap_option
def cluster_describe(bootstrap_server: str) -> None:
    """Cluster id, active controller and brokers."""
    from rich.console import Console
    from rich.table import Table

    with Admin(bootstrap_server, api_timeout_ms=CLI_API_TIMEOUT_MS) as admin:
        d = admin.describe_cluster()
    click.echo(f"Cluster ID: {d.cluster_id}")
    click.echo(f"Controller: {'none' if d.controller_id is None else d.controller_id}")
    table = Table("ID", "HOST", "PORT", "RACK", title="Brokers", box=None, title_justify="left")
    for b in d.brokers:
        table.add_row(str(b.node_id), b.host, str(b.port), b.rack or "")
    Console(file=click.get_text_stream("stdout"), soft_wrap=True).print(table)


# -- metadata-quorum and leader-election (the active controller's API) ---------------------------


def quorum_status_lines(q: dict[str, Any]) -> list[str]:
    """kafka-metadata-quorum describe --status."""
    fields = [
        ("ClusterId", q["cluster_id"]), ("LeaderId", q["leader_id"]), ("LeaderEpoch", q["leader_epoch"]),
        ("HighWatermark", q["high_watermark"]), ("MaxFollowerLag", q["max_follower_lag"]),
        ("MaxFollowerLagTimeMs", q["max_follower_lag_time_ms"]),
        ("CurrentVoters", "[" + ",".join(map(str, q["current_voters"])) + "]"),
        ("CurrentObservers", "[" + ",".join(map(str, q["current_observers"])) + "]"),
    ]
    return [f"{name + ':':<24}{value}" for name, value in fields]


def quorum_replication_lines(q: dict[str, Any]) -> list[str]:
    """kafka-metadata-quorum describe --replication."""
    rows = [[r["node_id"], r["log_end_offset"], r["lag"], r["last_fetch_timestamp"],
             r["last_caught_up_timestamp"], r["status"]] for r in q["replication"]]
    return format_table(["NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp",
                         "Status"], rows)


@main.group("metadata-quorum")
@bootstrap_option
@click.pass_context
def metadata_quorum(ctx: click.Context, bootstrap_server: str) -> None:
    """The controller quorum (kafka-metadata-quorum)."""
    ctx.obj = bootstrap_server


@metadata_quorum.command("describe")
@click.option("--status", is_flag=True, help="Leader, epoch, high watermark, lag, voters and observers.")
@click.option("--replication", is_flag=True, help="Per node: log end offset, lag, fetch times, status.")
@click.pass_obj
def metadata_quorum_describe(bootstrap_server: str, status: bool, replication: bool) -> None:
    """Describe the metadata quorum: --status or --replication."""
    if status == replication:
        raise click.UsageError("give exactly one of --status and --replication")
    with Admin(bootstrap_server, api_timeout_ms=CLI_API_TIMEOUT_MS) as admin:
        q = admin.describe_quorum()
    click.echo("\n".join(quorum_status_lines(q) if status else quorum_replication_lines(q)))


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


@main.command("leader-election")
@bootstrap_option
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
    with Admin(bootstrap_server, api_timeout_ms=CLI_API_TIMEOUT_MS) as admin:
        results = admin.elect_leaders(election_type.lower(), wanted)
    lines, failed = election_lines(results)
    click.echo("\n".join(lines))
    if failed:
        sys.exit(1)



# -- reassign-partitions ------------------------------------------------------------------------

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


def _broker_list(value: str) -> list[int]:
    try:
        brokers = [int(b) for b in value.split(",") if b.strip()]
    except ValueError:
        raise click.BadParameter(f"expected broker ids like 1,2,3, got {value!r}", param_hint="--broker-list") from None
    if not brokers or len(set(brokers)) != len(brokers) or min(brokers) < 0:
        raise click.BadParameter(f"expected distinct broker ids, got {value!r}", param_hint="--broker-list")
    return brokers


@main.command("reassign-partitions")
@bootstrap_option
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
    with Admin(bootstrap_server, api_timeout_ms=CLI_API_TIMEOUT_MS) as admin:
        if generate:
            if topics_to_move_json_file is None or broker_list is None:
                raise click.UsageError("--generate needs --topics-to-move-json-file and --broker-list")
            brokers, topics = _broker_list(broker_list), _topics_to_move(topics_to_move_json_file)
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


if __name__ == "__main__":
    sys.exit(main())
