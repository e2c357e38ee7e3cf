"""Fuzz every route of the OpenAPI document with schemathesis against a real node: no input may
produce a 5xx, every 4xx carries a Kafka error name, and the node stays up."""

from __future__ import annotations

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings

from harness import shutdown_all, start_node, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    """A node of its own: the fuzzer creates and deletes topics at random."""
    n = start_node(tmp_path_factory.mktemp("fuzz"))
    wait_for_coordinators(n)
    yield n
    shutdown_all([n])


def wait_for_coordinators(node, timeout_s: float = 60.0) -> None:
    """The group and transaction coordinators' topics are created on first use and answer the
    retriable COORDINATOR_NOT_AVAILABLE (503) while they load, as a client retries it: the fuzzer
    judges inputs, so it starts once both coordinators serve."""
    def serves(path: str) -> bool:
        status = requests.get(f"{node.url}{path}", timeout=10).status_code
        assert status in (200, 503), f"{path}: {status}"
        return status == 200
    for path in ("/v1/groups/warm-up/coordinator", "/v1/transactions/warm-up/coordinator"):
        wait_for(lambda: serves(path), timeout_s, interval=0.2, what=f"{path} serving")


@pytest.fixture(scope="module")
def api_schema(node):
    return schemathesis.openapi.from_url(f"{node.url}/v1/openapi.json")


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_input_breaks_the_node(case, node):
    response = case.call(base_url=node.url, timeout=30)
    assert response.status_code < 500, f"{case.method} {case.formatted_path} -> {response.status_code} {response.text[:300]}"
    if response.status_code >= 400:
        body = response.json()
        assert isinstance(body.get("error_code"), str) and body.get("message"), body
    # "stays up", not "answers fast": a fuzzed topic of thousands of partitions may busy it a while
    assert node.health(timeout=30)["status"] == "ok"
