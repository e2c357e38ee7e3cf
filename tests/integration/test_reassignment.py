"""Partition reassignment with real `kraft-node` processes (kafka-reassign-partitions, KIP-455).

Three combined nodes, a topic with RF 2 on [x, y]: `kraft reassign-partitions --execute` moves it to
[y, z] (the leader x leaves) while an acks=all producer runs. Afterwards --verify reports it
completed, describe shows [y, z] on every node, x's log directory is gone, every acknowledged
record is at its offset, and the new replicas hold identical bytes up to the high watermark. Bad
plans fail with Kafka's error names and change nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from kraft.api.cli import main as cli_main
from kraft.bench.chaos.clients import AckedProducer, audit, read_partition
from tests.harness import (
    REPLICATION_OVERRIDES, Cluster, partition_offsets, partition_state, raw_log, wait_for,
)

TOPIC = "moving"
OVERRIDES = REPLICATION_OVERRIDES


def reassign(cluster: Cluster, tmp_path: Path, plan: Any, *flags: str) -> Result:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    return CliRunner().invoke(cli_main, ["reassign-partitions", "--bootstrap-server", cluster.node(1).bootstrap,
                                         "--reassignment-json-file", str(path), *flags])


def plan(replicas: list[int], topic: str = TOPIC, partition: int = 0) -> dict[str, Any]:
    return {"version": 1, "partitions": [{"topic": topic, "partition": partition, "replicas": replicas}]}


@pytest.mark.cluster
@pytest.mark.timeout(180)
def test_move_replicas_while_producing(tmp_path: Path) -> None:
    with Cluster(tmp_path, controllers=3, combined=True, overrides=OVERRIDES) as cluster:
        cluster.start()
        cluster.create_topic(TOPIC, 1, 2)
        state = wait_for(lambda: (s := partition_state(cluster, 1, TOPIC))["leader"] > 0 and len(s["isr"]) == 2 and s,
                         30, what="the topic in sync")
        old_leader = state["leader"]
        kept = next(b for b in state["replicas"] if b != old_leader)
        added = next(b for b in (1, 2, 3) if b not in state["replicas"])
        bootstrap = ",".join(n.bootstrap for n in cluster.nodes.values())
        producer = AckedProducer(bootstrap, TOPIC).start()
        try:
            producer.wait_acked_more(200, 60)
            result = reassign(cluster, tmp_path, plan([kept, added]), "--execute")
            assert result.exit_code == 0, result.output
            assert "Successfully started partition reassignments for moving-0" in result.output
            assert json.dumps(state["replicas"]).replace(" ", "") in result.output  # the rollback plan
            wait_for(lambda: all(partition_state(cluster, n, TOPIC)["replicas"] == [kept, added] for n in (1, 2, 3)),
                     60, what=f"replicas [{kept}, {added}] on every node")
            producer.wait_acked_more(200, 60)  # acks=all goes on under the new leader
        finally:
            producer.stop()
        final = partition_state(cluster, 1, TOPIC)
        assert final["leader"] == kept and sorted(final["isr"]) == sorted([kept, added])
        verify = reassign(cluster, tmp_path, plan([kept, added]), "--verify")
        assert verify.exit_code == 0, verify.output
        assert "Reassignment of partition moving-0 is completed." in verify.output
        describe = CliRunner().invoke(cli_main, ["topics", "--describe", "--topic", TOPIC,
                                                 "--bootstrap-server", cluster.node(kept).bootstrap])
        assert f"Leader: {kept}\tReplicas: {kept},{added}\t" in describe.output, describe.output
        old_dir = cluster.node(old_leader).data_dir / f"{TOPIC}-0"
        wait_for(lambda: not old_dir.exists() and not any(
            p.name.startswith(f"{TOPIC}-0") for p in old_dir.parent.iterdir()), 30, what="the old replica deleted")

        offsets = wait_for(lambda: (o := partition_offsets(cluster.node(kept), TOPIC))["high_watermark"] == o["log_end_offset"] and o,
                           30, what="the high watermark at the log end")
        high_watermark = offsets["high_watermark"]
        report = audit(producer.acked, read_partition(bootstrap, TOPIC, 0, high_watermark), {})
        assert report.acked >= 400 and report.lost == 0, report
        assert report.log_records == high_watermark
        cluster.stop()
    logs = [raw_log(cluster.node(b).data_dir / f"{TOPIC}-0", high_watermark) for b in (kept, added)]
    assert logs[0] == logs[1] and logs[0]


@pytest.mark.cluster
@pytest.mark.timeout(120)
def test_bad_plans_change_nothing(tmp_path: Path) -> None:
    with Cluster(tmp_path, controllers=3, combined=True, overrides=OVERRIDES) as cluster:
        cluster.start()
        cluster.create_topic(TOPIC, 2, 2)
        before = wait_for(lambda: (s := partition_state(cluster, 1, TOPIC))["leader"] > 0 and s, 30, what="a leader")
        for bad, error in [
            (plan([1, 2], topic="missing"), "UNKNOWN_TOPIC_OR_PARTITION"),
            (plan([1, 2], partition=5), "UNKNOWN_TOPIC_OR_PARTITION"),
            (plan([3, 3]), "INVALID_REPLICA_ASSIGNMENT"),
            (plan([1, 99]), "INVALID_REPLICA_ASSIGNMENT"),
            # all or none: the good first entry is not applied either
            ({"version": 1, "partitions": [*plan([3, 2])["partitions"], *plan([1, 99], partition=1)["partitions"]]},
             "INVALID_REPLICA_ASSIGNMENT"),
        ]:
            result = reassign(cluster, tmp_path, bad, "--execute")
            assert result.exit_code == 1 and f"Error: {error}" in result.output, (bad, result.output)
        cancel = reassign(cluster, tmp_path, plan([1, 2]), "--cancel")
        assert cancel.exit_code == 1 and "NO_REASSIGNMENT_IN_PROGRESS" in cancel.output, cancel.output
        malformed = reassign(cluster, tmp_path, {"version": 1, "partitions": [{"topic": TOPIC}]}, "--execute")
        assert malformed.exit_code == 2, malformed.output
        after = partition_state(cluster, 1, TOPIC)
        assert (after["replicas"], after["isr"], after["leader_epoch"]) == (
            before["replicas"], before["isr"], before["leader_epoch"])
        verify = reassign(cluster, tmp_path, plan(before["replicas"][::-1]), "--verify")
        assert f"but replica set is {before['replicas']} rather than" in verify.output, verify.output

        topics = tmp_path / "topics.json"
        topics.write_text(json.dumps({"version": 1, "topics": [{"topic": TOPIC}]}))
        generated = CliRunner().invoke(cli_main, [
            "reassign-partitions", "--bootstrap-server", cluster.node(1).bootstrap, "--generate",
            "--topics-to-move-json-file", str(topics), "--broker-list", "2,3"])
        assert generated.exit_code == 0, generated.output
        proposed = json.loads(generated.output.split("Proposed partition reassignment configuration\n")[1])
        assert sorted(p["partition"] for p in proposed["partitions"]) == [0, 1]
        assert all(sorted(p["replicas"]) == [2, 3] for p in proposed["partitions"])
