"""Durability of a single node: kill -9 mid-produce loses no acknowledged record, and a torn or
corrupted segment tail is cut at the last valid batch on restart (design §5)."""

from __future__ import annotations

import threading
from pathlib import Path

import msgpack
import pytest
import requests

from harness import start_node, wait_for
from kraft.log.batch import build_batch, iter_batches

pytestmark = pytest.mark.cluster


def fetch_all(node, topic, partition=0):
    out, offset = [], 0
    while True:
        r = requests.get(f"{node.url}/v1/topics/{topic}/partitions/{partition}/records",
                         params={"offset": offset, "max_records": 5000, "timeout_ms": 0}, timeout=10).json()
        out += [(x["offset"], x["value"]) for x in r["records"]]
        if r["next_offset"] >= r["high_watermark"]:
            return out, r
        offset = r["next_offset"]


def segment_files(data_dir: Path, topic: str) -> list[Path]:
    return sorted(data_dir.rglob(f"{topic}-0/*.log"))


def test_kill_9_mid_produce_loses_no_acked_record(tmp_path):
    node = start_node(tmp_path)
    topic = "durable"
    assert requests.post(f"{node.url}/v1/topics", json={"name": topic}, timeout=10).status_code == 201
    acked: list[tuple[int, str]] = []
    stop = threading.Event()

    def produce():
        session = requests.Session()
        i = 0
        while not stop.is_set():
            values = [f"r{i}-{j}" for j in range(20)]
            try:
                r = session.post(f"{node.url}/v1/topics/{topic}/records?acks=1",
                                 json={"records": [{"value": v} for v in values]}, timeout=5)
            except requests.RequestException:
                return  # the node is gone: this request was never acknowledged
            if r.status_code == 200:
                acked.extend((o["offset"], v) for o, v in zip(r.json()["offsets"], values))
            i += 1

    t = threading.Thread(target=produce)
    t.start()
    wait_for(lambda: len(acked) >= 2000, timeout=60, what="2000 acked records")
    node.kill()
    stop.set()
    t.join(10)
    node.start()
    stored, last = fetch_all(node, topic)
    stored_map = dict(stored)
    missing = [(o, v) for o, v in acked if stored_map.get(o) != v]
    assert not missing, f"{len(missing)} acknowledged records lost, first {missing[:3]}"
    assert [o for o, _ in stored] == list(range(len(stored)))  # dense offsets, in order
    node.stop()


def test_torn_and_corrupt_tail_is_truncated_on_restart(tmp_path):
    node = start_node(tmp_path)
    topic = "torn"
    assert requests.post(f"{node.url}/v1/topics", json={"name": topic}, timeout=10).status_code == 201
    hdr = {"Content-Type": "application/msgpack", "Accept": "application/msgpack"}
    for i in range(10):
        batch = build_batch([(None, f"b{i}-{j}".encode(), (), 1_700_000_000_000) for j in range(10)])
        body = {"acks": 1, "partitions": [{"topic": topic, "partition": 0, "records": batch}]}
        assert requests.post(f"{node.url}/v1/produce", data=msgpack.packb(body), headers=hdr, timeout=10).status_code == 200
    assert node.stop() == 0

    (seg,) = segment_files(node.data_dir, topic)
    data = bytearray(seg.read_bytes())
    positions = [pos for pos, _ in iter_batches(bytes(data))]
    assert len(positions) == 10
    # Corrupt a payload byte of batch 8 and tear batch 9 in half: batches 0..7 must survive.
    data[positions[8] + 70] ^= 0x55
    torn = data[: positions[9] + (len(data) - positions[9]) // 2]
    seg.write_bytes(bytes(torn))

    node.start()
    stored, last = fetch_all(node, topic)
    assert [o for o, _ in stored] == list(range(80))
    assert stored[-1][1] == "b7-9"
    assert last["high_watermark"] == 80
    assert "CORRUPT" in node.log_path.read_text().upper() or "TRUNCAT" in node.log_path.read_text().upper()
    # The node appends after the cut: new records get offsets 80.. and nothing corrupt is served.
    r = requests.post(f"{node.url}/v1/topics/{topic}/records", json={"records": [{"value": "after"}]}, timeout=10)
    assert r.json()["offsets"] == [{"partition": 0, "offset": 80}]
    node.stop()


def test_sigterm_is_a_clean_shutdown(tmp_path):
    node = start_node(tmp_path)
    assert requests.post(f"{node.url}/v1/topics", json={"name": "clean"}, timeout=10).status_code == 201
    requests.post(f"{node.url}/v1/topics/clean/records", json={"records": [{"value": "x"}]}, timeout=10)
    assert node.stop() == 0
    node.start()
    stored, _ = fetch_all(node, "clean")
    assert stored == [(0, "x")]
    node.stop()
