"""A real node whose data dir is a tiny tmpfs: once the disk is full, topic creation and produce
answer KAFKA_STORAGE_ERROR (retriable, at once: nothing hangs) and health names the metadata log's
failure; once space is freed both work again, without a restart, and nothing half-written shows."""

from __future__ import annotations

from pathlib import Path

import requests

from full_disk import fill, tiny_tmpfs
from harness import NodeProcess, shutdown_all

TIMEOUT_S = 30  # far above an answer's time; only a hang reaches it


def create_topic(node: NodeProcess, name: str, partitions: int) -> requests.Response:
    return requests.post(f"{node.url}/v1/topics", json={"name": name, "partitions": partitions},
                         timeout=TIMEOUT_S)


def produce(node: NodeProcess, topic: str, values: list[str]) -> requests.Response:
    return requests.post(f"{node.url}/v1/topics/{topic}/records",
                         json={"records": [{"partition": 0, "value": v} for v in values]}, timeout=TIMEOUT_S)


def assert_storage_error(answer: requests.Response) -> None:
    assert answer.status_code == 503, answer.text
    body = answer.json()
    assert body["error_code"] == "KAFKA_STORAGE_ERROR" and body["retriable"] is True, body


def test_full_disk_then_space_returns(tmp_path: Path) -> None:
    with tiny_tmpfs(tmp_path / "data", size="8m") as data_dir:
        # its log file stays outside, on tmp_path; started ready (its broker unfenced) to create topics
        node = NodeProcess(node_id=1, data_dir=data_dir, wait_ready_on_start=True)
        try:
            node.start()
            assert create_topic(node, "kept", 1).status_code == 201
            assert produce(node, "kept", ["a", "b"]).status_code == 200

            filler = fill(data_dir)
            big = ["x" * 1000] * 20  # more than the page the log's last write may have left
            assert_storage_error(create_topic(node, "wanted", 60))  # 60 partition records: pages of log
            assert_storage_error(produce(node, "kept", big))
            assert "No space left" in node.health()["metadata_log_error"]
            assert_storage_error(create_topic(node, "wanted", 60))  # still refused, still answered

            filler.unlink()
            assert create_topic(node, "wanted", 60).status_code == 201
            assert node.health()["metadata_log_error"] is None
            stored = produce(node, "kept", big)
            assert stored.status_code == 200, stored.text
            assert stored.json()["partitions"] == [{"partition": 0, "base_offset": 2, "record_count": 20}]
            got = requests.get(f"{node.url}/v1/topics/kept/partitions/0/records",
                               params={"offset": 0, "max_records": 100}, timeout=TIMEOUT_S).json()
            assert [r["value"] for r in got["records"]] == ["a", "b"] + big
        finally:
            shutdown_all([node])
