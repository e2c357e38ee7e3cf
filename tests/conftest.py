"""Shared fixtures: a session-scoped single real `kraft-node` process for end-to-end tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

sys.path.insert(0, str(Path(__file__).parent))

# No timing thresholds in tests: under parallel load an example can take far longer than
# Hypothesis's default 200 ms deadline, which would fail a correct property as "flaky".
settings.register_profile("kraft", deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("kraft")

from harness import NodeProcess, shutdown_all, start_node  # noqa: E402


@pytest.fixture(scope="session")
def node(tmp_path_factory: pytest.TempPathFactory):
    """One combined node shared by the tests of a worker (xdist runs one per worker)."""
    started: list[NodeProcess] = []
    n = start_node(tmp_path_factory.mktemp("node"))
    started.append(n)
    yield n
    shutdown_all(started)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under `--dist loadgroup`: all Spark tests share one worker (one JVM), and the tests of a
    module that starts real processes stay together, so its module-scoped cluster starts once."""
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        if item.get_closest_marker("spark"):
            item.add_marker(pytest.mark.xdist_group("spark"))
        elif "unit" not in Path(str(item.fspath)).parts:
            item.add_marker(pytest.mark.xdist_group(Path(str(item.fspath)).stem))
