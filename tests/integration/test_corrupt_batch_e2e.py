"""A corrupt batch in a closed segment of a real node (issue 11): after kill -9 the node keeps
every later segment, quarantines the batch, answers CORRUPT_MESSAGE for it (never an empty read),
serves every other record, and checkpoints the recovery point periodically."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest
import requests

from harness import read_values, start_node, wait_for
from kraft.bench.chaos.clients import read_partition
from kraft.log.batch import build_batch, iter_batches
from kraft.log.checkpoint import PartitionCheckpoint

pytestmark = pytest.mark.cluster

TOPIC = "rot"
BATCHES, PER_BATCH = 60, 100
RECORD_COUNT_POS = 57  # a header field the CRC covers
MSGPACK = {"Content-Type": "application/msgpack", "Accept": "application/msgpack"}


def _value(offset: int) -> str:
    return f"v{offset:05d}-" + "x" * 600


def _produce(url: str) -> None:
    for b in range(BATCHES):
        batch = build_batch([(None, _value(b * PER_BATCH + i).encode(), (), 1_700_000_000_000)
                             for i in range(PER_BATCH)])
        body = {"acks": 1, "partitions": [{"topic": TOPIC, "partition": 0, "records": batch}]}
        r = requests.post(f"{url}/v1/produce", data=msgpack.packb(body), headers=MSGPACK, timeout=10)
        assert r.status_code == 200 and "error_code" not in msgpack.unpackb(r.content)["partitions"][0]


def _read(url: str, offset: int) -> requests.Response:
    return requests.get(f"{url}/v1/topics/{TOPIC}/partitions/0/records",
                        params={"offset": offset, "max_records": 10_000}, timeout=10)


def _flip_batch_holding(segment: Path, offset: int) -> None:
    data = bytearray(segment.read_bytes())
    [pos] = [p for p, h in iter_batches(bytes(data)) if h.base_offset <= offset <= h.last_offset]
    data[pos + RECORD_COUNT_POS + 3] ^= 0x40
    segment.write_bytes(bytes(data))


def test_corrupt_batch_in_a_closed_segment_after_kill_9(tmp_path: Path) -> None:
    node = start_node(tmp_path, log_segment_bytes=1_048_576)
    try:
        assert requests.post(f"{node.url}/v1/topics", json={"name": TOPIC}, timeout=10).status_code == 201
        _produce(node.url)
        directory = node.data_dir / f"{TOPIC}-0"
        segments = sorted(directory.glob("*.log"))
        assert len(segments) >= 3 and int(segments[1].stem) > 1600  # 1500-1599: a closed segment
        node.kill()  # no checkpoint yet (60 s interval): every segment is re-validated
        _flip_batch_holding(segments[0], 1500)

        node.start()
        for offset in (1500, 1599):
            r = _read(node.url, offset)
            assert r.status_code == 400, r.text
            assert r.json()["error_code"] == "CORRUPT_MESSAGE" and str(offset) in r.json()["message"]
        fetch = {"max_wait_ms": 0, "partitions": [{"topic": TOPIC, "partition": 0, "fetch_offset": 1500}]}
        [answer] = msgpack.unpackb(requests.post(f"{node.url}/v1/fetch", data=msgpack.packb(fetch),
                                                 headers=MSGPACK, timeout=10).content)["partitions"]
        assert answer["error_code"] == "CORRUPT_MESSAGE" and not answer["records"]
        # everything else is there: nothing after the corrupt batch was deleted
        assert sorted(directory.glob("*.log")) == segments
        expected = [(o, _value(o)) for o in range(BATCHES * PER_BATCH) if not 1500 <= o < 1600]
        assert read_values(node.url, TOPIC, 0, 1500) + read_values(node.url, TOPIC, 1600, 6000) == expected
        assert "quarantined" in node.log_path.read_text()
        metrics = requests.get(f"{node.url}/metrics", timeout=10).text
        assert f'kraft_log_quarantined_regions{{partition="0",topic="{TOPIC}"}} 1.0' in metrics

        # the periodic checkpoint moves the recovery point past the closed segments
        node.kill()
        node.overrides["log.flush.offset.checkpoint.interval.ms"] = 100
        node.start()
        active = int(segments[-1].stem)
        checkpoint = wait_for(
            lambda: (c := PartitionCheckpoint.read(directory)) and c.recovery_point >= active and c,
            timeout=30, what="the recovery point checkpointed")
        assert checkpoint.quarantined == ((1500, 1600),)
        node.kill()
        node.start()
        assert _read(node.url, 1500).json()["error_code"] == "CORRUPT_MESSAGE"
        assert read_values(node.url, TOPIC, 1600, 6000) == expected[1500:]
    finally:
        if node.running:
            node.kill()


def test_the_chaos_final_read_steps_over_a_quarantined_range_and_reports_it(tmp_path: Path) -> None:
    """`kraft-bench chaos` reads every partition at the end (`read_partition`): a range the leader
    quarantined answers CORRUPT_MESSAGE, and the read goes on past it (it used to abort the run),
    naming the range so that the checker counts it (and any acknowledged record in it as lost)."""
    node = start_node(tmp_path, log_segment_bytes=1_048_576)
    try:
        assert requests.post(f"{node.url}/v1/topics", json={"name": TOPIC}, timeout=10).status_code == 201
        _produce(node.url)
        [first, *_] = sorted((node.data_dir / f"{TOPIC}-0").glob("*.log"))
        node.kill()
        _flip_batch_holding(first, 1500)
        node.start()
        quarantined: list[tuple[int, int]] = []
        records = read_partition(node.bootstrap, TOPIC, 0, BATCHES * PER_BATCH, 60, quarantined)
        assert quarantined == [(1500, 1600)]
        assert [(o, v.decode()) for o, v in records] == [
            (o, _value(o)) for o in range(BATCHES * PER_BATCH) if not 1500 <= o < 1600]
    finally:
        if node.running:
            node.kill()
