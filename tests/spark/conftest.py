"""Fixtures of the Spark connector tests: one local SparkSession per run, and a broker.

The broker is a real `kraft-node` (tests/harness.py) when the node code is importable, else the
in-process `FakeBroker` speaking the same routes; `pytest -v` shows which in the report header.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))

from fake_broker import FakeBroker  # noqa: E402
from spark_support import KraftFixture  # noqa: E402


@pytest.fixture(scope="session")
def fake_broker() -> Iterator[KraftFixture]:
    """Always the fake: for what a real broker cannot be made to do on demand (retention now) or
    a broker without a feature (no idempotence, for the exactly-once sink's refusal)."""
    fake = FakeBroker()
    try:
        yield KraftFixture(fake.bootstrap, fake)
    finally:
        fake.close()


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KraftFixture]:
    """A real kraft-node for the connector's tests."""
    from harness import shutdown_all, start_node

    node = start_node(tmp_path_factory.mktemp("spark-node"))
    try:
        yield KraftFixture(node.bootstrap, None)
    finally:
        shutdown_all([node])


@pytest.fixture(scope="session")
def commit_gates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The transactional sink's test hook (spark_connector/transactional.py): a directory named
    after a sink's transactional id prefix in here holds that sink's driver before each EndTxn.
    Set before Spark starts: the driver's Python workers inherit the JVM's environment."""
    return tmp_path_factory.mktemp("commit-gates")


@pytest.fixture(scope="session")
def spark(commit_gates: Path) -> Iterator[Any]:
    pytest.importorskip("pyspark", reason="needs the spark extra: pip install .[spark]")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from kraft import spark_connector
    from kraft.spark_connector.transactional import COMMIT_GATES_ENV

    os.environ[COMMIT_GATES_ENV] = str(commit_gates)

    session = (
        SparkSession.builder.master("local[2]")
        .appName("kraft-connector-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.task.maxFailures", "1")
        .getOrCreate()
    )
    spark_connector.register(session)
    yield session
    session.stop()
