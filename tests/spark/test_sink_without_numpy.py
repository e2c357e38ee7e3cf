"""The connector needs only what the spark extra declares (issue 11, item 9): a value-only write
(the shape of Spark's Kafka sink used most), a keyed one, and reading them back work with numpy
hidden from the driver and from Spark's Python workers (the dev extras bring numpy here; a fresh
`pip install .[spark]` does not). tests/integration/test_extras_venv.py checks the same in a real
clean virtualenv."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

HERE = Path(__file__).parent


def test_value_only_write_without_numpy(broker, tmp_path):
    pytest.importorskip("pyspark", reason="needs the spark extra: pip install .[spark]")
    topic = broker.new_topic()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(HERE / "no_numpy"), *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.run([sys.executable, str(HERE / "value_only_write.py"), broker.bootstrap, topic],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    assert proc.stdout.splitlines()[0] == "numpy: absent"
    assert proc.stdout.splitlines()[-1] == "read: [(None, b'a'), (b'k', b'b')]"
    assert [(key, value) for _, key, value in broker.records(topic, 0)] == [(None, b"a"), (b"k", b"b")]
