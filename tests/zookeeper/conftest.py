"""A real ZooKeeper server for the ZooKeeper-mode tests, one per test session (per xdist worker)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from kraft.zk.ensemble import ZooKeeperEnsemble, zookeeper_available  # noqa: E402


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory):
    if not zookeeper_available():
        pytest.skip("needs the Debian zookeeper package and java (scripts/test.sh installs them)")
    server = ZooKeeperEnsemble(tmp_path_factory.mktemp("zookeeper")).start()
    yield server
    server.stop()
