"""The partition budget of `LocalAdmin`: each broker's share of the cluster's replicas is held
against one node's budget (counting every partition of the cluster against one node refused
creations in a 3-broker cluster long before any broker was full)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "metadata"))
from metadata_testing import build, cluster_records, topic_records  # noqa: E402

from kraft.api.errors import KraftError  # noqa: E402
from kraft.broker.admin import LocalAdmin  # noqa: E402


def admin(brokers: int, assignments: list[tuple[int, ...]], budget: int) -> LocalAdmin:
    image = build([*cluster_records(range(1, brokers + 1)), *topic_records("t", "tid", assignments)])
    controller = SimpleNamespace(settings=SimpleNamespace(default_replication_factor=1, num_partitions=1))
    return LocalAdmin(controller, SimpleNamespace(image=image), True, budget)  # type: ignore[arg-type]


def test_each_brokers_share_counts_not_the_whole_cluster() -> None:
    a = admin(3, [(1,), (2,), (3,)] * 30, budget=40)  # 90 partitions, 30 per broker
    a._check_partition_budget(30, 1)  # 40 each: fits
    with pytest.raises(KraftError) as e:
        a._check_partition_budget(33, 1)  # 41 each
    assert e.value.error_code == "POLICY_VIOLATION" and "ulimit -n" in e.value.message


def test_replication_factor_multiplies_the_new_replicas() -> None:
    a = admin(3, [(1, 2, 3)] * 10, budget=20)  # 10 replicas on each broker
    a._check_partition_budget(10, 3)
    with pytest.raises(KraftError):
        a._check_partition_budget(11, 3)
    a._check_partition_budget(30, None)  # the default replication factor, 1: 10 more each
