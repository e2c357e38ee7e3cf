"""`kraft delete-records`: kafka-delete-records (DeleteRecordsCommand). Reads Kafka's offset JSON
file, deletes each partition's records before its offset (-1: up to the high watermark) and
prints what Kafka's tool prints: each partition's low watermark, or its error (the exit status
stays 0 then, as Kafka's). A file Kafka's tool would refuse is refused before anything is sent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from kraft.api.cli.common import KraftCommand, admin_client, bootstrap_option, version_option
from kraft.api.client import DeletedRecords, TopicPartition

OFFSET_JSON_FORMAT = '{"partitions":\n  [{"topic": "foo", "partition": 1, "offset": 1}],\n "version":1\n}'


def parse_offset_json(text: str) -> dict[TopicPartition, int]:
    """Kafka's parseOffsetJsonStringWithoutDedup, then its duplicate check: version 1 (the
    default), a `partitions` list of {topic, partition, offset}. Raises ValueError with Kafka's
    message."""
    try:
        data = json.loads(text)
    except ValueError:
        raise ValueError("The input string is not a valid JSON") from None
    if not isinstance(data, dict):
        raise ValueError("The input string is not a JSON object")
    version = data.get("version", 1)
    if version != 1 or isinstance(version, bool):
        raise ValueError(f"Not supported version field value {version}")
    if "partitions" not in data:
        raise ValueError("Missing partitions field")
    if not isinstance(data["partitions"], list):
        raise ValueError("The partitions field is not a JSON array")
    offsets: dict[TopicPartition, int] = {}
    duplicates: list[str] = []
    for item in data["partitions"]:
        tp = TopicPartition(_field(item, "topic", str), _field(item, "partition", int))
        if tp in offsets and f"{tp.topic}-{tp.partition}" not in duplicates:
            duplicates.append(f"{tp.topic}-{tp.partition}")
        offsets[tp] = _field(item, "offset", int)
    if duplicates:
        raise ValueError(f"Offset json file contains duplicate topic partitions: {','.join(duplicates)}")
    return offsets


def _field(item: Any, name: str, kind: type) -> Any:
    if not isinstance(item, dict):
        raise ValueError(f"Expected a JSON object in partitions, got {json.dumps(item)}")
    if name not in item:
        raise ValueError(f"No such field exists: `{name}` in {json.dumps(item)}")
    value = item[name]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ValueError(f"Expected `{name}` to be {'a string' if kind is str else 'an integer'}, "
                         f"got {json.dumps(value)}")
    return value


def result_lines(results: dict[TopicPartition, DeletedRecords]) -> list[str]:
    return [f"partition: {tp.topic}-{tp.partition}\t" + (f"low_watermark: {r.low_watermark}" if r.error is None
                                                         else f"error: {r.error}")
            for tp, r in results.items()]


@click.command("delete-records", cls=KraftCommand)
@bootstrap_option
@version_option
@click.option("--offset-json-file", required=True, type=click.Path(dir_okay=False),
              help=f"The JSON file with offset per partition. The format to use is:\n{OFFSET_JSON_FORMAT}")
def delete_records(bootstrap_server: str, offset_json_file: str) -> None:
    """Delete the records of partitions before an offset (kafka-delete-records)."""
    try:
        offsets = parse_offset_json(Path(offset_json_file).read_text(encoding="utf-8"))
    except OSError as e:
        raise click.BadParameter(f"cannot read {offset_json_file}: {e.strerror}",
                                 param_hint="--offset-json-file") from None
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--offset-json-file") from None
    click.echo("Executing records delete operation")
    with admin_client(bootstrap_server) as admin:
        results = admin.delete_records(offsets, raise_errors=False)
    click.echo("Records delete operation completed:")
    for line in result_lines(results):
        click.echo(line)
