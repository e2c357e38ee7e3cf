"""The pure parts of the Kafka tools' flags: --by-duration, --add-config, --topic-partitions,
--time, --offset-json-file, and the outputs of --list --state, --delete-offsets and
delete-records."""

from __future__ import annotations

import click
import pytest

from kraft.api.cli.configs import parse_add_config
from kraft.api.cli.consumer_groups import delete_offsets_lines, export_csv, list_state_lines, parse_duration_ms
from kraft.api.cli.delete_records import parse_offset_json, result_lines
from kraft.api.cli.get_offsets import offset_lines, parse_rules, parse_time
from kraft.api.client import DeletedRecords, KraftError, TopicPartition


@pytest.mark.parametrize("text, ms", [
    ("PT15M", 900_000), ("P1DT2H", 93_600_000), ("PT0.5S", 500), ("PT1H30M", 5_400_000), ("pt10s", 10_000),
    ("P2D", 172_800_000), ("-PT1M", -60_000),
])
def test_by_duration_is_javas_duration(text: str, ms: int) -> None:
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["15m", "P", "PT", "P1H", "1 hour", ""])
def test_bad_durations(text: str) -> None:
    with pytest.raises(click.BadParameter):
        parse_duration_ms(text)


def test_add_config_keeps_commas_in_brackets() -> None:
    assert parse_add_config("a=1,b=[x,y,z],c= 3") == {"a": "1", "b": "x,y,z", "c": "3"}
    for bad in ("a", "a=1,,b=2", "a=[1,2", "=1"):
        with pytest.raises(click.BadParameter):
            parse_add_config(bad)


def test_topic_partition_rules() -> None:
    rules = parse_rules("t1:1,t2:0-3,t3,t4:5-")
    allowed = lambda topic, p: any(r.allowed(TopicPartition(topic, p)) for r in rules)  # noqa: E731
    assert allowed("t1", 1) and not allowed("t1", 0)
    assert allowed("t2", 2) and not allowed("t2", 3)  # the upper end is exclusive
    assert allowed("t3", 99) and allowed("t4", 5) and not allowed("t4", 4)
    assert not allowed("t5", 0)
    below = parse_rules(":-2")[0]  # any topic, partitions below 2
    assert below.allowed(TopicPartition("x", 1)) and not below.allowed(TopicPartition("x", 2))
    with pytest.raises(click.BadParameter, match="Invalid rule specification"):
        parse_rules("t:x")


def test_time_and_sorting() -> None:
    assert [parse_time(v) for v in ("-1", "latest", "-2", "earliest", "1700000000000")] == [
        "latest", "latest", "earliest", "earliest", 1_700_000_000_000]
    for bad in ("-7", "soon"):
        with pytest.raises(click.BadParameter, match="Malformed time argument"):
            parse_time(bad)
    for unsupported in ("-3", "max-timestamp", "-5"):
        with pytest.raises(click.BadParameter, match="is not supported here"):
            parse_time(unsupported)
    # Kafka sorts by the `topic-partition` text: t-10 before t-2; no offset, no line.
    offsets = {TopicPartition("t", 2): 5, TopicPartition("t", 10): 7, TopicPartition("t", 3): None}
    assert offset_lines(offsets) == ["t:10:7", "t:2:5"]


def test_fixed_width_outputs() -> None:
    assert list_state_lines([{"group_id": "g", "state": "Empty"}]) == [
        "GROUP" + " " * 20 + " STATE" + " " * 15, "g" + " " * 24 + " Empty" + " " * 15]
    lines = delete_offsets_lines("g", ["t:0"], [{"topic": "t", "partition": 0}])
    assert lines == ["Request succeed for deleting offsets with topic t:0 group g", "",
                     f"{'TOPIC':<30} {'PARTITION':<15} {'STATUS':<15}", f"{'t':<30} {'0':<15} {'Successful':<15}"]
    assert export_csv([["g", "t", 0, 5]], with_group=False) == "t,0,5\n"
    assert export_csv([["g", "t", 0, 5]], with_group=True) == "g,t,0,5\n"


def test_offset_json_file_is_read_as_kafkas_delete_records_command_reads_it() -> None:
    text = '{"partitions": [{"topic": "t", "partition": 1, "offset": 40}, {"topic": "u", "partition": 0, "offset": -1}]}'
    assert parse_offset_json(text) == {TopicPartition("t", 1): 40, TopicPartition("u", 0): -1}  # version 1 by default
    assert parse_offset_json('{"version": 1, "partitions": []}') == {}
    for bad, message in [
        ("{not json", "The input string is not a valid JSON"),
        ('[{"topic": "t"}]', "not a JSON object"),
        ('{"version": 2, "partitions": []}', "Not supported version field value 2"),
        ('{"version": 1}', "Missing partitions field"),
        ('{"partitions": {"topic": "t"}}', "not a JSON array"),
        ('{"partitions": [{"topic": "t", "partition": 0}]}', "No such field exists: `offset`"),
        ('{"partitions": [{"topic": "t", "partition": "0", "offset": 1}]}', "`partition` to be an integer"),
        ('{"partitions": [{"topic": 7, "partition": 0, "offset": 1}]}', "`topic` to be a string"),
        ('{"partitions": [{"topic": "t", "partition": 0, "offset": 1.5}]}', "`offset` to be an integer"),
        ('{"partitions": [{"topic": "t", "partition": 0, "offset": 1}, {"topic": "t", "partition": 0, "offset": 2}]}',
         "Offset json file contains duplicate topic partitions: t-0"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse_offset_json(bad)


def test_delete_records_lines() -> None:
    results = {TopicPartition("t", 0): DeletedRecords(40),
               TopicPartition("t", 1): DeletedRecords(-1, KraftError("OFFSET_OUT_OF_RANGE", "above the high watermark"))}
    assert result_lines(results) == ["partition: t-0\tlow_watermark: 40",
                                     "partition: t-1\terror: OFFSET_OUT_OF_RANGE: above the high watermark"]
