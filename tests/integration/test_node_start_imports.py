"""What a starting node imports (issue 26: a restarted broker back in every ISR fast). A restarted
node spends most of its way back importing, which on a loaded 2-core machine took seconds; the
node imports what a client, a tool, a test or an optional mode needs only where that is used.

The check is by module name, not by time: a real `kraft-node` (the entry point kraft-node runs,
in a process of its own) starts a lone node and, once it serves, writes the names in its
`sys.modules`; none of the heavy modules below may be among them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness import free_port

pytestmark = pytest.mark.cluster

# Imported only where used: test libraries (kio registers hypothesis strategies when it can),
# the Spark connector, ZooKeeper mode's client, other Kafka clients, the bench and the CLI, the
# Python client, X.509 parsing (TLS client certificates only).
NOT_AT_START = ["hypothesis", "pytest", "numpy", "pandas", "pyspark", "py4j", "kazoo", "kraft.zk",
                "confluent_kafka", "kafka", "aiokafka", "kraft.bench", "kraft.api.cli", "kraft.api.client",
                "cryptography.x509"]

# In the node's own process: start it as kraft-node does, and once it answers /v1/health write
# sys.modules and stop it with SIGTERM (its clean shutdown).
_SCRIPT = """
import json, os, signal, sys, threading, time, urllib.request
out, port, data = sys.argv[1], sys.argv[2], sys.argv[3]

def report():
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/health", timeout=2).read()
            break
        except OSError:
            time.sleep(0.05)
    with open(out, "w") as f:
        json.dump(sorted(sys.modules), f)
    os.kill(os.getpid(), signal.SIGTERM)

threading.Thread(target=report, daemon=True).start()
sys.argv = ["kraft-node", "--node-id", "1", "--listen", f"127.0.0.1:{port}", "--data-dir", data]
from kraft.main import main
main()
"""


def test_a_starting_node_does_not_import_what_it_does_not_use(tmp_path: Path):
    out = tmp_path / "modules.json"
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, str(out), str(free_port()), str(tmp_path / "data")],
                          capture_output=True, text=True, timeout=180)
    assert out.exists(), proc.stderr[-3000:]
    modules = set(json.loads(out.read_text()))
    assert "kraft.node" in modules and "kraft.kafka.handlers" in modules  # it did start
    imported = [m for m in NOT_AT_START if m in modules]
    assert imported == [], f"a starting node imported {imported}"
    # the Kafka listener's request and response types are imported as requests use them, not all
    # at start (several hundred modules: most of a starting node's time on its loop)
    kio_types = sorted(m for m in modules if m.startswith("kio.schema.") and m.endswith((".request", ".response")))
    assert kio_types == []
