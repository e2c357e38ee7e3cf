"""DeleteRecords on three real nodes (RF 3): `kraft delete-records --offset-json-file` through a
broker that does not lead the partition (it forwards), then reads below the new log start answer
OFFSET_OUT_OF_RANGE on the leader, and after a kill -9 of the leader on the new leader too, and
again on the old one once it leads again (its checkpointed log start); get-offsets earliest
answers the new log start; every replica's retention deletes the segments wholly below it; bad
input answers Kafka's errors and changes nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from kraft.api.client import Admin, Producer
from harness import REPLICATION_OVERRIDES, Cluster, partition_offsets, partition_state, wait_for

pytestmark = pytest.mark.cluster

KRAFT = [sys.executable, "-c", "from kraft.api.cli import main; main()"]
TOPIC = "dr"
OVERRIDES = {**REPLICATION_OVERRIDES, "log.retention.check.interval.ms": 300}


def kraft(node, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(KRAFT + [args[0], "--bootstrap-server", node.bootstrap, *args[1:]],
                          capture_output=True, text=True, timeout=120)


def offsets_file(tmp_path: Path, content: object, name: str = "offsets.json") -> str:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


def read_at(node, offset: int) -> requests.Response:
    return requests.get(f"{node.url}/v1/topics/{TOPIC}/partitions/0/records",
                        params={"offset": offset, "max_records": 1}, timeout=10)


def leader_of(cluster: Cluster, via: int, not_in: tuple[int, ...] = ()) -> int:
    def agreed() -> int | None:
        leader = partition_state(cluster, via, TOPIC)["leader"]
        return leader if leader > 0 and leader not in not_in else None
    return wait_for(agreed, 30, what=f"a leader of {TOPIC}-0 other than {not_in}")


def segment_bases(cluster: Cluster, node_id: int) -> list[int]:
    return sorted(int(p.stem) for p in (cluster.node(node_id).data_dir / f"{TOPIC}-0").glob("*.log"))


def test_delete_records_across_a_leader_kill(tmp_path: Path) -> None:
    with Cluster(tmp_path, controllers=3, combined=True, overrides=OVERRIDES) as cluster:
        cluster.start()
        bootstrap = ",".join(n.bootstrap for n in cluster.nodes.values())
        with Admin(bootstrap) as admin:
            admin.create_topic(TOPIC, 1, 3, {"segment.bytes": 1024})
        wait_for(lambda: all(sorted(partition_state(cluster, i, TOPIC)["isr"]) == [1, 2, 3] for i in (1, 2, 3)),
                 60, what="ISR [1, 2, 3] on every node")
        with Producer(bootstrap, acks="all") as producer:
            for i in range(100):
                producer.send(TOPIC, value=b"record-%03d" % i, partition=0).get(30)  # one batch each
        leader = leader_of(cluster, 1)
        other = cluster.node(next(i for i in (1, 2, 3) if i != leader))

        answer = kraft(other, "delete-records", "--offset-json-file",
                       offsets_file(tmp_path, {"version": 1, "partitions": [{"topic": TOPIC, "partition": 0, "offset": 40}]}))
        assert answer.returncode == 0, answer.stderr
        assert answer.stdout == ("Executing records delete operation\nRecords delete operation completed:\n"
                                 f"partition: {TOPIC}-0\tlow_watermark: 40\n")
        below = read_at(cluster.node(leader), 10)
        assert below.status_code == 416 and below.json()["error_code"] == "OFFSET_OUT_OF_RANGE"
        assert read_at(cluster.node(leader), 40).json()["records"][0]["value"] == "record-040"
        earliest = kraft(other, "get-offsets", "--topic", TOPIC, "--time", "earliest")
        assert earliest.stdout.strip() == f"{TOPIC}:0:40", earliest.stderr
        # Retention removes, on every replica, the segments wholly below the new log start.
        wait_for(lambda: all((bases := segment_bases(cluster, i))[0] <= 40 < (bases + [10**9])[1] for i in (1, 2, 3)),
                 30, what="the segments below offset 40 deleted on every replica")

        # Bad input: Kafka's errors, and nothing changes.
        for offsets, error in [
            ({"partitions": [{"topic": TOPIC, "partition": 0, "offset": 101}]}, "OFFSET_OUT_OF_RANGE"),
            ({"partitions": [{"topic": TOPIC, "partition": 7, "offset": 1}]}, "UNKNOWN_TOPIC_OR_PARTITION"),
            ({"partitions": [{"topic": "no-such-topic", "partition": 0, "offset": 1}]}, "UNKNOWN_TOPIC_OR_PARTITION"),
        ]:
            answer = kraft(other, "delete-records", "--offset-json-file", offsets_file(tmp_path, offsets))
            assert answer.returncode == 0 and f"\terror: {error}: " in answer.stdout, answer.stdout + answer.stderr
        for text, message in [
            ("{\"partitions\": [", "The input string is not a valid JSON"),
            ({"version": 2, "partitions": []}, "Not supported version field value 2"),
            ({"partitions": [{"topic": TOPIC, "partition": 0, "offset": 50}, {"topic": TOPIC, "partition": 0, "offset": 60}]},
             f"duplicate topic partitions: {TOPIC}-0"),
            ({"partitions": [{"topic": TOPIC, "partition": 0}]}, "No such field exists: `offset`"),
        ]:
            answer = kraft(other, "delete-records", "--offset-json-file", offsets_file(tmp_path, text))
            assert answer.returncode == 2 and message in answer.stderr and answer.stdout == "", answer.stderr
        offsets = partition_offsets(cluster.node(leader), TOPIC)
        assert (offsets["log_start_offset"], offsets["high_watermark"]) == (40, 100)

        # The new leader had learnt the log start from its fetches.
        cluster.kill(leader)
        survivor = next(i for i in (1, 2, 3) if i != leader)
        second = leader_of(cluster, survivor, not_in=(leader,))
        below = read_at(cluster.node(second), 10)
        assert below.status_code == 416 and below.json()["error_code"] == "OFFSET_OUT_OF_RANGE"
        assert partition_offsets(cluster.node(second), TOPIC)["log_start_offset"] == 40
        earliest = kraft(cluster.node(survivor), "get-offsets", "--topic", TOPIC, "--time", "-2")
        assert earliest.stdout.strip() == f"{TOPIC}:0:40", earliest.stderr

        # The killed leader checkpointed its log start: back in the ISR and preferred leader
        # again, it answers the same.
        cluster.restart(leader)
        wait_for(lambda: sorted(partition_state(cluster, survivor, TOPIC)["isr"]) == [1, 2, 3], 60,
                 what="the old leader back in the ISR")
        elected = kraft(cluster.node(survivor), "leader-election", "--election-type", "preferred",
                        "--topic", TOPIC, "--partition", "0")
        assert elected.returncode == 0, elected.stderr
        assert leader_of(cluster, leader, not_in=(second,)) == leader  # as its own metadata says
        wait_for(lambda: read_at(cluster.node(leader), 10).status_code == 416, 30,
                 what="the old leader answering for itself")
        assert read_at(cluster.node(leader), 10).json()["error_code"] == "OFFSET_OUT_OF_RANGE"
        assert read_at(cluster.node(leader), 40).json()["records"][0]["value"] == "record-040"
