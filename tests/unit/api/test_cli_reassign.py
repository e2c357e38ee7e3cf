"""`kraft reassign-partitions` pure parts: Kafka's plan format, --verify lines, --generate."""

from __future__ import annotations

import json
import random

import click
import pytest

from kraft.api.cli import generate_plan, parse_reassignment_plan, plan_json, verify_lines
from kraft.api.client import TopicPartition
from kraft.api.client.admin import PartitionReassignment

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def test_plan_round_trips_through_kafkas_format() -> None:
    plan = {T0: (2, 3), T1: (3, 1)}
    text = plan_json(plan)
    assert text.startswith('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3]}')
    assert parse_reassignment_plan(json.loads(text)) == plan


@pytest.mark.parametrize("bad", [
    [], {"version": 2, "partitions": []}, {"version": 1},
    {"version": 1, "partitions": [{"topic": "t", "partition": 0}]},
    {"version": 1, "partitions": [{"topic": "t", "partition": -1, "replicas": [1]}]},
    {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": ["1"]}]},
    {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1]}] * 2},
])
def test_malformed_plans_are_usage_errors(bad) -> None:
    with pytest.raises(click.BadParameter):
        parse_reassignment_plan(bad)


def test_verify_lines() -> None:
    plan = {T0: (2, 3), T1: (3, 1)}
    lines = verify_lines(plan, {T0: (2, 3, 1), T1: (1, 2)},
                         {T0: PartitionReassignment((2, 3, 1), (3,), (1,))})
    assert lines == ["Status of partition reassignment:",
                     "Reassignment of partition t-0 is still in progress.",
                     "There is no active reassignment of partition t-1, but replica set is [1, 2] rather than [3, 1]."]
    assert verify_lines({T0: (2, 3)}, {T0: (2, 3)}, {})[1] == "Reassignment of partition t-0 is completed."


def test_generate_keeps_the_replication_factor_on_the_given_brokers() -> None:
    current = {TopicPartition("t", p): (1, 2) for p in range(6)}
    proposed = generate_plan(current, [3, 4, 5], random.Random(7))
    assert proposed.keys() == current.keys()
    assert all(len(r) == 2 and len(set(r)) == 2 and set(r) <= {3, 4, 5} for r in proposed.values())
    with pytest.raises(click.UsageError):
        generate_plan(current, [3], random.Random(7))
