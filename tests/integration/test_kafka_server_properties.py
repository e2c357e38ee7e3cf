"""Kafka's stock KRaft `server.properties`, Kafka 3's and Kafka 4's (tests/fixtures, ports and log
dir changed), starts a working combined node with `kraft-node --config`: it serves produce and
consume, and warns once about the Kafka keys it does not use, naming them."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from harness import free_port, wait_for

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# fixture -> Kafka keys of that file kraft does not use, which the warning must name
STOCK_FILES = {
    "kafka-kraft-server.properties": ["num.network.threads", "num.io.threads"],
    "kafka4-kraft-server.properties": ["num.network.threads", "share.coordinator.state.topic.replication.factor",
                                       "share.coordinator.state.topic.min.isr"],
}
NODE = [sys.executable, "-c", "from kraft.main import main; main()"]
KRAFT = [sys.executable, "-c", "from kraft.api.cli import main; main()"]


def _ready(port: int) -> dict | None:
    """`/v1/health?ready=true`, as a user's script waits before creating topics: 503 (an
    HTTPError, so None) until the broker has registered and been unfenced; before that a
    CreateTopics fails with INVALID_REPLICATION_FACTOR (no unfenced broker), as Kafka's does."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/health?ready=true", timeout=1) as r:
            return json.load(r)
    except OSError:
        return None


@pytest.mark.parametrize("fixture", sorted(STOCK_FILES))
def test_stock_kafka_server_properties_start_a_combined_node(fixture: str, tmp_path: Path) -> None:
    client, controller = free_port(), free_port()
    text = ((FIXTURES / fixture).read_text().replace(":9092", f":{client}").replace(":9093", f":{controller}")
            .replace("/tmp/kraft-combined-logs", str(tmp_path / "kraft-combined-logs")))
    config = tmp_path / "server.properties"
    config.write_text(text)
    proc = subprocess.Popen(NODE + ["--config", str(config)], stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        wait_for(lambda: proc.poll() is not None or _ready(client), timeout=60, what="the node to be ready")
        assert proc.poll() is None
        bootstrap = f"localhost:{client}"
        run = lambda *args, **kw: subprocess.run(KRAFT + list(args), capture_output=True, text=True, timeout=60, **kw)  # noqa: E731
        created = run("topics", "--create", "--topic", "stock", "--bootstrap-server", bootstrap)
        assert created.returncode == 0 and created.stdout == "Created topic stock.\n", created.stderr
        sent = run("console-producer", "--topic", "stock", "--bootstrap-server", bootstrap, input="a\nb\n")
        assert sent.returncode == 0, sent.stderr
        got = run("console-consumer", "--topic", "stock", "--from-beginning", "--max-messages", "2",
                  "--bootstrap-server", bootstrap)
        assert got.stdout.splitlines() == ["a", "b"], got.stderr
        assert (tmp_path / "kraft-combined-logs" / "stock-0").is_dir()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    warnings = [line for line in stderr.splitlines() if "ignoring Kafka configuration keys" in line]
    assert len(warnings) == 1 and all(key in warnings[0] for key in STOCK_FILES[fixture]), warnings
