"""Issue 11, item 8 against a real node process: a body nested 100,000 levels and a lone UTF-16
surrogate are 400 INVALID_REQUEST (were 500), nothing is written, the node keeps serving; the
console producer names a line that is not UTF-8 instead of dying with a traceback."""

from __future__ import annotations

import subprocess
import sys
import uuid

import requests

from kraft.api.wire import MAX_BODY_DEPTH

KRAFT = [sys.executable, "-c", "from kraft.api.cli import main; main()"]
DEPTH = 100_000


def log_end(node, topic: str) -> int:
    return requests.get(f"{node.url}/v1/topics/{topic}/partitions/0/offsets", timeout=10).json()["log_end_offset"]


def post_json_text(node, path: str, text: bytes) -> dict:
    r = requests.post(f"{node.url}{path}", data=text, headers={"Content-Type": "application/json"}, timeout=30)
    body = r.json()
    assert (r.status_code, body["error_code"]) == (400, "INVALID_REQUEST"), body
    return body


def test_deep_nesting_and_lone_surrogates_change_nothing(node) -> None:
    topic = f"text-{uuid.uuid4().hex[:8]}"
    assert requests.post(f"{node.url}/v1/topics", json={"name": topic}, timeout=10).status_code == 201
    deep = b"[" * DEPTH + b"]" * DEPTH
    for path in ("/v1/topics", f"/v1/topics/{topic}/records", "/v1/produce", "/v1/groups/g1/offsets"):
        body = post_json_text(node, path, deep)
        assert f"JSON nested too deeply (limit {MAX_BODY_DEPTH})" == body["message"]
    for text in (b'{"records":[{"value":"\\ud800"}]}', b'{"records":[{"key":"\\ud800","value":"v"}]}',
                 b'{"records":[{"value":"v","headers":{"\\ud800":"h"}}]}'):
        body = post_json_text(node, f"/v1/topics/{topic}/records", text)
        assert "invalid UTF-16 surrogate" in body["message"]
    post_json_text(node, "/v1/topics/auto-created-by-mistake/records",
                   b'{"records":[{"value":"v","headers":{"\\ud800":"h"}}]}')
    post_json_text(node, "/v1/topics", b'{"name":"c-' + topic.encode() + b'","configs":{"\\udc00":"1"}}')
    assert log_end(node, topic) == 0
    names = [t["name"] for t in requests.get(f"{node.url}/v1/topics", timeout=10).json()["topics"]]
    assert "auto-created-by-mistake" not in names and f"c-{topic}" not in names
    assert requests.get(f"{node.url}/v1/health", timeout=10).json()["status"] == "ok"


def test_console_producer_rejects_a_line_that_is_not_utf8(node) -> None:
    topic = f"text-{uuid.uuid4().hex[:8]}"
    assert requests.post(f"{node.url}/v1/topics", json={"name": topic}, timeout=10).status_code == 201
    proc = subprocess.run(KRAFT + ["console-producer", "--bootstrap-server", node.bootstrap, "--topic", topic],
                          input=b"fine\n\xed\xa0\x80\nnever sent\n", capture_output=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.decode().startswith("Error: INVALID_RECORD: line number 2 is not UTF-8 text"), proc.stderr
    assert log_end(node, topic) == 1  # the line before it went, as Kafka's tool sends line by line
