"""`kraft get-offsets`: kafka-get-offsets (GetOffsetShell). Prints `topic:partition:offset` for
every matching partition, sorted as Kafka sorts them (by `topic-partition` text); a partition
without an offset for the time asked (a timestamp past its last record) is left out."""

from __future__ import annotations

import re
from dataclasses import dataclass

import click

from kraft.api.cli.common import KraftCommand, Progress, admin_client, bootstrap_option, broker_list_option, version_option
from kraft.api.client import KraftError, TopicPartition

INT_MAX = 2**31 - 1
# Kafka's TOPIC_PARTITION_PATTERN: topic regex, then a partition, a range lo-hi (hi exclusive),
# lo- or -hi, or nothing for every partition.
_RULE = re.compile(r"([^:,]*)(?::(?:([0-9]*)|(?:([0-9]*)-([0-9]*))))?")
_TIME_NAMES = {"-1": "latest", "latest": "latest", "-2": "earliest", "earliest": "earliest"}
# Kafka's other specs need its max-timestamp index or tiered storage, which this broker has not.
_UNSUPPORTED_TIMES = {"-3": "max-timestamp", "max-timestamp": "max-timestamp", "-4": "earliest-local",
                      "earliest-local": "earliest-local", "-5": "latest-tiered", "latest-tiered": "latest-tiered",
                      "-6": "earliest-pending-upload", "earliest-pending-upload": "earliest-pending-upload"}


@dataclass(frozen=True)
class Rule:
    topic: re.Pattern[str]
    low: int = 0
    high: int = INT_MAX  # exclusive

    def topic_allowed(self, topic: str) -> bool:
        return self.topic.fullmatch(topic) is not None

    def allowed(self, tp: TopicPartition) -> bool:
        return self.topic_allowed(tp.topic) and self.low <= tp.partition < self.high


def _regex(text: str, option: str) -> re.Pattern[str]:
    try:
        return re.compile(text)
    except re.error as e:
        raise click.BadParameter(f"not a regular expression: {e}", param_hint=option) from None


def parse_rules(topic_partitions: str) -> list[Rule]:
    rules = []
    for spec in topic_partitions.split(","):
        m = _RULE.fullmatch(spec)
        if not m:
            raise click.BadParameter(f"Invalid rule specification: {spec}", param_hint="--topic-partitions")
        topic, single, low, high = (g or None for g in m.groups())
        pattern = _regex(topic or ".*", "--topic-partitions")
        if single is not None:
            rules.append(Rule(pattern, int(single), int(single) + 1))
        else:
            rules.append(Rule(pattern, int(low or 0), int(high) if high else INT_MAX))
    return rules


def parse_time(value: str) -> str | int:
    """--time: -1/latest, -2/earliest, or a timestamp in ms."""
    if value in _TIME_NAMES:
        return _TIME_NAMES[value]
    if value in _UNSUPPORTED_TIMES:
        raise click.BadParameter(f"{_UNSUPPORTED_TIMES[value]} is not supported here; use -1 or latest, -2 or "
                                 "earliest, or a timestamp", param_hint="--time")
    try:
        stamp = int(value)
    except ValueError:
        stamp = -100
    if stamp < 0:
        raise click.BadParameter(f"Malformed time argument {value}. Please use -1 or latest / -2 or earliest, "
                                 "or a specified long format timestamp", param_hint="--time")
    return stamp


def offset_lines(offsets: dict[TopicPartition, int | None]) -> list[str]:
    known = [(tp, o) for tp, o in offsets.items() if o is not None]
    return [f"{tp.topic}:{tp.partition}:{o}" for tp, o in sorted(known, key=lambda x: f"{x[0].topic}-{x[0].partition}")]


@click.command("get-offsets", cls=KraftCommand)
@bootstrap_option
@broker_list_option
@version_option
@click.option("--topic-partitions", help="Comma-separated topic:partition patterns, e.g. t1:1,t2:0-3,t3,t4:5-,t5:-3.")
@click.option("--topic", help="The topic (a regular expression); all topics when omitted.")
@click.option("--partitions", help="Comma-separated partition ids; all when omitted.")
@click.option("--time", "time_", default="latest", show_default=True,
              help="-1 or latest, -2 or earliest, or a timestamp (ms): the first offset at or after it.")
@click.option("--exclude-internal-topics", is_flag=True, help="Leave internal topics out.")
def get_offsets(bootstrap_server: str, topic_partitions: str | None, topic: str | None, partitions: str | None,
                time_: str, exclude_internal_topics: bool) -> None:
    """Print partition offsets as topic:partition:offset (kafka-get-offsets)."""
    if topic_partitions is not None and (topic is not None or partitions is not None):
        raise click.UsageError("--topic-partitions cannot be used with --topic or --partitions")
    spec = parse_time(time_)
    if topic_partitions is not None:
        rules = parse_rules(topic_partitions)
    else:
        wanted: set[int] | None = None
        if partitions:
            try:
                wanted = {int(p) for p in partitions.split(",")}
            except ValueError:
                raise click.BadParameter("--partitions expects a comma separated list of numeric partition ids, "
                                         f"but received: {partitions}", param_hint="--partitions") from None
        pattern = _regex(topic or ".*", "--topic")
        rules = [Rule(pattern)] if wanted is None else [Rule(pattern, p, p + 1) for p in sorted(wanted)]
    with admin_client(bootstrap_server) as admin:
        names = [t.name for t in admin.list_topics(include_internal=not exclude_internal_topics)
                 if any(r.topic_allowed(t.name) for r in rules)]
        progress = Progress("Described topics", len(names))
        tps = []
        for name in names:
            tps += [TopicPartition(name, p.partition) for p in admin.describe_topic(name).partitions]
            progress.step()
        tps = [tp for tp in tps if any(r.allowed(tp) for r in rules)]
        if not tps:
            raise KraftError("INVALID_REQUEST", "Could not match any topic-partitions with the specified filters")
        found = admin.list_offsets({tp: spec for tp in tps})
    lines = offset_lines({tp: o.offset for tp, o in found.items()})
    if lines:
        click.echo("\n".join(lines))
