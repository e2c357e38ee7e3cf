"""`kraft console-consumer`: kafka-console-consumer. Prints records with Kafka's
DefaultMessageFormatter properties; `--include` subscribes to a topic regex through a group."""

from __future__ import annotations

import random
import re
import time
from dataclasses import dataclass
from typing import Any

import click

from kraft.api.cli.common import (
    KraftCommand,
    bootstrap_option,
    parse_bool,
    parse_properties,
    read_properties_file,
    security_kwargs,
    version_option,
)
from kraft.api.client import Consumer, ConsumerRecord, TopicPartition

# Kafka consumer config -> Consumer keyword, with its type.
CONSUMER_PROPERTIES: dict[str, tuple[str, type]] = {
    "auto.offset.reset": ("auto_offset_reset", str),
    "fetch.max.wait.ms": ("fetch_max_wait_ms", int),
    "fetch.min.bytes": ("fetch_min_bytes", int),
    "fetch.max.bytes": ("fetch_max_bytes", int),
    "max.partition.fetch.bytes": ("max_partition_fetch_bytes", int),
    "max.poll.records": ("max_poll_records", int),
    "request.timeout.ms": ("request_timeout_ms", int),
    "retry.backoff.ms": ("retry_backoff_ms", int),
    "metadata.max.age.ms": ("metadata_max_age_ms", int),
    "group.id": ("group_id", str),
    "client.id": ("client_id", str),
    "enable.auto.commit": ("enable_auto_commit", bool),
    "auto.commit.interval.ms": ("auto_commit_interval_ms", int),
    "max.poll.interval.ms": ("max_poll_interval_ms", int),
    "group.remote.assignor": ("group_remote_assignor", str),
    "isolation.level": ("isolation_level", str),
}


def consumer_kwargs(properties: dict[str, str], option: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, text in properties.items():
        if name not in CONSUMER_PROPERTIES:
            raise click.BadParameter(f"unknown consumer property {name!r}; known: {', '.join(sorted(CONSUMER_PROPERTIES))}",
                                     param_hint=option)
        keyword, kind = CONSUMER_PROPERTIES[name]
        if kind is bool:
            out[keyword] = parse_bool(text, name)
        elif kind is int:
            try:
                out[keyword] = int(text)
            except ValueError:
                raise click.BadParameter(f"{name} must be an integer, got {text!r}", param_hint=option) from None
        else:
            out[keyword] = text
    return out


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


@click.command("console-consumer", cls=KraftCommand)
@bootstrap_option
@version_option
@click.option("--topic", help="The topic to consume.")
@click.option("--include", help="A regular expression of topics to consume (through a consumer group).")
@click.option("--partition", type=click.IntRange(min=0), help="Read only this partition.")
@click.option("--offset", help="Start offset with --partition: earliest, latest or a number (default latest).")
@click.option("--from-beginning", is_flag=True, help="Start at the earliest offset instead of the end.")
@click.option("--max-messages", type=click.IntRange(min=1), help="Exit after this many records.")
@click.option("--timeout-ms", type=click.IntRange(min=0), help="Exit when no record arrives for this long.")
@click.option("--property", "properties", multiple=True, metavar="KEY=VALUE", help="print.key, print.offset, print.partition, print.timestamp, print.headers, print.value, key.separator, line.separator.")
@click.option("--consumer-property", "consumer_properties", multiple=True, metavar="KEY=VALUE",
              help="Consumer config, Kafka names (group.id, auto.offset.reset, ...); wins over --consumer.config.")
@click.option("--consumer.config", "consumer_config", type=click.Path(dir_okay=False),
              help="A .properties file of consumer configs.")
@click.option("--group", help="Consume as a member of this consumer group (offsets are committed).")
@click.option("--isolation-level", type=click.Choice(["read_uncommitted", "read_committed"]),
              help="read_committed leaves out transactional records that are not committed (and stops at "
                   "open transactions); read_uncommitted (the default) reads them all.")
def console_consumer(
    bootstrap_server: str,
    topic: str | None,
    include: str | None,
    partition: int | None,
    offset: str | None,
    from_beginning: bool,
    max_messages: int | None,
    timeout_ms: int | None,
    properties: tuple[str, ...],
    consumer_properties: tuple[str, ...],
    consumer_config: str | None,
    group: str | None,
    isolation_level: str | None,
) -> None:
    """Print records of a topic to stdout (kafka-console-consumer). With --group the consumer
    joins the group, starts from its committed offsets and commits as it goes."""
    if (topic is None) == (include is None):
        raise click.UsageError("exactly one of --topic and --include is required")
    if include is not None:
        try:
            re.compile(include)
        except re.error as e:
            raise click.BadParameter(f"not a regular expression: {e}", param_hint="--include") from e
        if partition is not None:
            raise click.UsageError("--include cannot be used with --partition")
    file_props = read_properties_file(consumer_config, "--consumer.config") if consumer_config else {}
    file_props.pop("bootstrap.servers", None)
    kwargs = {**security_kwargs(), **consumer_kwargs(file_props, "--consumer.config")}
    kwargs.update(consumer_kwargs(parse_properties(consumer_properties, "--consumer-property"), "--consumer-property"))
    if group is not None and kwargs.get("group_id") not in (None, group):
        raise click.UsageError(f"--group {group} and group.id={kwargs['group_id']} disagree")
    if isolation_level is not None:  # Kafka's console consumer: the flag sets isolation.level
        kwargs["isolation_level"] = isolation_level
    group = group or kwargs.pop("group_id", None)
    kwargs.pop("group_id", None)
    if include is not None and group is None:
        group = f"console-consumer-{random.randrange(100_000)}"  # Kafka's console consumer does the same
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
    kwargs.setdefault("auto_offset_reset", "earliest" if start == "earliest" else "latest")
    kwargs.setdefault("auto_commit_interval_ms", 1000)
    with Consumer(bootstrap_server, group_id=group, **kwargs) as consumer:
        if include is not None:
            consumer.subscribe(pattern=include)
        elif group is not None:
            assert topic is not None
            consumer.partitions_for_topic(topic)  # fails fast on an unknown topic or no cluster
            consumer.subscribe([topic])  # from the committed offsets, else auto_offset_reset
        else:
            assert topic is not None
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

