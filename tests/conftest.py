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


def _scope(item: pytest.Item) -> str:
    """What the ordering keeps together: the item's xdist group (one unit of `--dist loadgroup`),
    else its module (xdist hands out an ungrouped test on its own; its module stays in one piece
    here so module fixtures are not set up again on a worker)."""
    groups = sorted(str(mark.args[0]) for mark in item.iter_markers("xdist_group"))
    return "@" + "_".join(groups) if groups else item.nodeid.rsplit("::", 1)[0]


def _rank(item: pytest.Item) -> int:
    """Longest first: slow suites and the Spark group (one JVM for all), then the tests that start
    real processes and the spread ones (long enough to be worth spreading), then the unit tests,
    whose many short units fill in at the end."""
    if item.get_closest_marker("slow") or item.get_closest_marker("spark"):
        return 0
    return 2 if "unit" in Path(str(item.fspath)).parts and not item.get_closest_marker("spread") else 1


# tryfirst: xdist's worker names each item's group (the node id's @suffix) in its own
# pytest_collection_modifyitems; run after it, the groups added here were never seen and every
# test was a unit of its own (module clusters and the Spark JVM started on both workers)
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under `--dist loadgroup`: all Spark tests share one worker (one JVM), the tests of a module
    that starts real processes stay together, so its module-scoped cluster starts once, and each
    test marked `spread` is a group of its own. The units are then ordered longest first (xdist
    takes them in this order: pyproject's --no-loadscope-reorder), so no long one starts last
    while the other worker idles."""
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        if item.get_closest_marker("spark"):
            item.add_marker(pytest.mark.xdist_group("spark"))
        elif item.get_closest_marker("spread"):
            # no "]" in a group name: xdist takes a node id ending in one as ungrouped
            item.add_marker(pytest.mark.xdist_group(item.nodeid.replace("[", "(").replace("]", ")")))
        elif "unit" not in Path(str(item.fspath)).parts:
            item.add_marker(pytest.mark.xdist_group(Path(str(item.fspath)).stem))
    first: dict[str, int] = {}  # a unit's place: its first item's; a unit's items keep their order
    rank: dict[str, int] = {}
    allowed: dict[str, float] = {}  # within a rank, the unit whose tests may run longest goes first
    for index, item in enumerate(items):
        scope = _scope(item)
        first.setdefault(scope, index)
        rank[scope] = min(rank.get(scope, 2), _rank(item))
        timeout = item.get_closest_marker("timeout")
        allowed[scope] = max(allowed.get(scope, 0.0), float(timeout.args[0]) if timeout and timeout.args else 0.0)
    items.sort(key=lambda item: (rank[_scope(item)], -allowed[_scope(item)], first[_scope(item)]))
