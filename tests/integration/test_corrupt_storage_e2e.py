"""Storage damage on a real node, reproduced as issue 22 found it (items 13, 14, 15): stop (or
kill) the node, damage a file, restart, read. Rot is never taken for a torn tail, missing offsets
are never skipped silently, and a directory of an earlier topic is never served as a new one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import requests

from harness import Cluster, NodeProcess, partition_offsets, read_values, start_node, wait_for
from kraft.log.batch import iter_batches

pytestmark = pytest.mark.cluster


def _create(url: str, topic: str) -> None:
    r = requests.post(f"{url}/v1/topics", json={"name": topic, "partitions": 1}, timeout=10)
    assert r.status_code == 201, r.text


def _produce(url: str, topic: str, count: int, per_request: int = 10, size: int = 8) -> None:
    for start in range(0, count, per_request):
        values = [f"{topic}-{i:05d}".ljust(size, "x") for i in range(start, min(count, start + per_request))]
        r = requests.post(f"{url}/v1/topics/{topic}/records?acks=all",
                          json={"records": [{"value": v, "partition": 0} for v in values]}, timeout=30)
        assert r.status_code == 200, r.text


def _read(url: str, topic: str, offset: int) -> requests.Response:
    return requests.get(f"{url}/v1/topics/{topic}/partitions/0/records",
                        params={"offset": offset, "max_records": 10_000}, timeout=10)


def _expected(topic: str, offsets: range, size: int = 8) -> list[tuple[int, str]]:
    return [(o, f"{topic}-{o:05d}".ljust(size, "x")) for o in offsets]


def _corrupt_read(url: str, topic: str, offset: int) -> str:
    r = _read(url, topic, offset)
    assert r.status_code == 400 and r.json()["error_code"] == "CORRUPT_MESSAGE", r.text
    return r.json()["message"]


def _rotten_first_batch(tmp_path: Path, topic: str, count: int) -> NodeProcess:
    """A node with `count` acked records of `topic` in batches of 10 whose first batch rotted:
    a bit flipped at position 100 of the active segment before the first recovery-point
    checkpoint, then a kill -9 and a restart (the node is running)."""
    node = start_node(tmp_path, log_flush_offset_checkpoint_interval_ms=3_600_000)
    try:
        _create(node.url, topic)
        _produce(node.url, topic, count)
        node.kill()
        [segment] = sorted((node.data_dir / f"{topic}-0").glob("*.log"))
        data = bytearray(segment.read_bytes())
        [(_, hit)] = [(p, h) for p, h in iter_batches(bytes(data)) if p <= 100 < p + h.size_in_bytes]
        assert hit.base_offset == 0 and hit.record_count == 10
        data[100] ^= 0x08
        segment.write_bytes(bytes(data))
        node.start()
    except BaseException:
        if node.running:
            node.kill()
        raise
    return node


def test_a_flipped_byte_in_the_metadata_log_stops_the_lone_node(tmp_path: Path) -> None:
    """Item 13: topics t0..t7 (50 acked records each), a byte flipped at the first t4 record of
    the metadata log. The node cut the log there as a torn tail (WARNING), forgot t4..t7 and
    served on; re-creating t5 served the old t5's records. Now it refuses to start, naming the
    file, the byte and the way out; the way out drops t4..t7 knowingly; and the re-created t5
    starts empty, the old directory set aside as stray."""
    node = start_node(tmp_path)
    try:
        for i in range(8):
            _create(node.url, f"t{i}")
            _produce(node.url, f"t{i}", 50)
        assert node.stop() == 0
        path = node.data_dir / "__cluster_metadata-0" / f"{0:020d}.log"
        data = bytearray(path.read_bytes())
        at = data.index(b"\xa2t4")  # the msgpack string "t4": the Topic record of t4
        data[at + 1] ^= 0x01
        path.write_bytes(bytes(data))

        node.start(wait=False)
        assert node.proc is not None and node.proc.wait(60) == 1
        log_text = node.log_path.read_text()
        refusal = re.search(rf"cannot start: the metadata log {re.escape(str(path))} is corrupt at "
                            rf"byte (\d+) of {len(data)} .*--override metadata.log.recovery=truncate",
                            log_text)
        assert refusal is not None and int(refusal.group(1)) <= at, node.log_tail()
        assert "Traceback" not in log_text
        assert path.read_bytes() == bytes(data)  # nothing cut

        node.overrides["metadata.log.recovery"] = "truncate"
        node.start()
        assert "dropping every record from offset" in node.log_path.read_text()
        for i in range(4):
            assert read_values(node.url, f"t{i}", 0, 50) == _expected(f"t{i}", range(50))
        for i in range(4, 8):
            assert requests.get(f"{node.url}/v1/topics/t{i}", timeout=10).status_code == 404
        old_directory = node.data_dir / "t5-0"
        assert old_directory.is_dir()  # what the forgotten t5 left behind

        _create(node.url, "t5")  # a new topic id
        wait_for(lambda: partition_offsets(node, "t5")["log_end_offset"] == 0, 30,
                 what="the new t5, empty")
        assert _read(node.url, "t5", 0).json()["records"] == []
        [stray] = node.data_dir.glob("t5-0.*-stray")
        assert len(list(stray.glob("*.log"))) >= 1
        assert re.search(r"t5-0: .* belongs to topic id \S+, not \S+; set aside as t5-0\.\w+-stray",
                         node.log_path.read_text())
        _produce(node.url, "t5", 5)
        assert read_values(node.url, "t5", 0, 5) == _expected("t5", range(5))
    finally:
        if node.running:
            node.kill()


@pytest.mark.parametrize("restart", ["stop", "kill -9"])
@pytest.mark.parametrize("damage", ["cut to half", "deleted"])
def test_a_truncated_or_deleted_closed_segment_answers_corrupt_message(
        tmp_path: Path, damage: str, restart: str) -> None:
    """Item 14: segment.bytes=4096, 1,500 acked records in several segments; a closed segment
    cut to half (at a batch boundary) or deleted: a read at the first missing offset answered
    the next segment's records, nothing logged. Now the missing range is quarantined: reads in
    it answer CORRUPT_MESSAGE naming it, it is logged at ERROR, the rest is served."""
    node = start_node(tmp_path, log_segment_bytes=4096)
    try:
        _create(node.url, "seg")
        _produce(node.url, "seg", 1500)
        directory = node.data_dir / "seg-0"
        segments = sorted(directory.glob("*.log"))
        assert len(segments) >= 5
        victim, following = segments[2], segments[3]
        (node.stop if restart == "stop" else node.kill)()
        base, next_base = int(victim.stem), int(following.stem)
        if damage == "deleted":
            start = base
            victim.unlink()
        else:
            data = victim.read_bytes()
            batches = list(iter_batches(data))
            pos, header = batches[len(batches) // 2]
            start = header.base_offset
            victim.write_bytes(data[:pos])

        node.start()
        message = _corrupt_read(node.url, "seg", start)
        assert f"[{start}, {next_base})" in message
        _corrupt_read(node.url, "seg", next_base - 1)
        assert read_values(node.url, "seg", 0, start) == _expected("seg", range(start))
        assert read_values(node.url, "seg", next_base, 1500) == _expected("seg", range(next_base, 1500))
        assert re.search(rf"ERROR .*seg-0: offsets \[{start}, {next_base}\) of segment \d{{20}}\.log "
                         rf"\(no bytes on disk\) are missing and quarantined: ", node.log_path.read_text())
        metrics = requests.get(f"{node.url}/metrics", timeout=10).text
        assert 'kraft_log_quarantined_regions{partition="0",topic="seg"} 1.0' in metrics
    finally:
        if node.running:
            node.kill()


def test_a_flipped_byte_in_the_active_segment_is_rot_not_a_torn_tail(tmp_path: Path) -> None:
    """Item 15: before the first recovery-point checkpoint, a bit flipped at position 100 of the
    active segment and a kill -9 cut 190 acked records, 18 valid batches among them. Now only the
    hit batch is quarantined; the 18 after it are served."""
    node = _rotten_first_batch(tmp_path, "active", 200)  # 20 batches of 10
    try:
        assert partition_offsets(node, "active")["log_end_offset"] == 200
        assert "[0, 10)" in _corrupt_read(node.url, "active", 0)
        assert read_values(node.url, "active", 10, 200) == _expected("active", range(10, 200))
        assert "truncated" not in node.log_path.read_text()
    finally:
        if node.running:
            node.kill()


def test_a_voter_with_peers_repairs_a_flipped_byte_in_its_raft_journal(tmp_path: Path) -> None:
    """Item 13 for a Raft voter: a byte flipped in the middle of a follower voter's journal. It
    drops its journal from there, stays out of elections, gets the entries back from the leader
    and then votes again; no topic is lost anywhere."""
    with Cluster(tmp_path, 3, combined=True) as cluster:
        cluster.start()
        for i in range(6):
            cluster.create_topic(f"m{i}")
        active = cluster.active_controller()
        voter = cluster.node(next(i for i in cluster.voter_ids if i != active))
        voter.stop()
        journal = voter.data_dir / "__cluster_metadata-0" / "raft-journal.log"
        data = bytearray(journal.read_bytes())
        at = data.index(b"m3")
        data[at] ^= 0x01
        journal.write_bytes(bytes(data))

        voter.start()
        wait_for(lambda: "repaired from the leader" in voter.log_path.read_text(), 60,
                 what="the voter repaired its journal from the leader")
        log_text = voter.log_path.read_text()
        assert re.search(r"raft journal .*raft-journal\.log: damaged at byte \d+ .* neither votes nor "
                         r"stands for election", log_text)
        cluster.create_topic("after")
        names = {f"m{i}" for i in range(6)} | {"after"}
        cluster.wait_for_metadata(lambda m: names <= {t["name"] for t in m["topics"]},
                                  nodes=[voter.node_id], what="every topic on the repaired voter")


def test_a_group_consumer_raises_corrupt_message_naming_the_partition_and_offset(tmp_path: Path) -> None:
    """As Kafka's consumer raises a CorruptRecordException to the application (naming the
    partition and offset) rather than retrying, kraft's group consumer raises CORRUPT_MESSAGE
    for a quarantined batch at its position, and after a seek past it reads on."""
    from kraft.api.client import Consumer, TopicPartition
    from kraft.errors import KraftError

    node = _rotten_first_batch(tmp_path, "rot", 30)  # [0, 10) quarantined
    try:
        consumer = Consumer("rot", bootstrap_servers=node.bootstrap, group_id="rot-readers",
                            auto_offset_reset="earliest", enable_auto_commit=False)
        try:
            def raised() -> KraftError | None:
                try:
                    consumer.poll(timeout_ms=500)
                except KraftError as e:
                    return e
                return None

            error = wait_for(raised, 60, what="the consumer's CORRUPT_MESSAGE")
            assert error.error_code == "CORRUPT_MESSAGE" and "rot-0 at offset 0" in str(error), error
            assert (error.extra["topic"], error.extra["partition"], error.extra["offset"]) == ("rot", 0, 0)
            tp = TopicPartition("rot", 0)
            assert consumer.position(tp) == 0  # nothing skipped on the consumer's behalf
            consumer.seek(tp, 10)
            got: list[tuple[int, bytes]] = []
            wait_for(lambda: got.extend((r.offset, r.value) for rs in consumer.poll(timeout_ms=500).values()
                                        for r in rs) or len(got) >= 20, 60, what="the records after the seek")
            assert [o for o, _ in got] == list(range(10, 30))
        finally:
            consumer.close(autocommit=False)
    finally:
        if node.running:
            node.kill()
