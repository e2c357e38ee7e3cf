"""The connector's BrokerClient against a node that is not up yet: a refused connection is
retried with backoff within `kraft.request.timeout.ms`, as Kafka's clients retry a disconnect
(it failed the query at once; tests/spark/test_restart.py is the whole query)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from harness import NodeProcess, shutdown_all
from kraft.spark_connector.broker import BrokerClient

pytestmark = pytest.mark.cluster


def test_metadata_and_health_wait_for_a_node_that_comes_up(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    node = NodeProcess(node_id=1, data_dir=tmp_path / "data-1", wait_ready_on_start=True)
    client = BrokerClient([node.bootstrap], request_timeout_ms=60_000)
    starter = threading.Thread(target=node.start)  # nothing listens on the port until the node binds it
    try:
        with caplog.at_level(logging.INFO, logger="kraft.spark_connector.broker"):
            starter.start()
            assert client.health()["status"] == "ok"
            assert client.metadata(refresh=True).brokers == {1: node.bootstrap}
        assert any("retrying after NETWORK_EXCEPTION" in m and "Connection refused" in m for m in caplog.messages)
    finally:
        starter.join(60)
        client.close()
        shutdown_all([node])
    with pytest.raises(Exception) as refused:  # the node is gone: the error comes once the timeout is spent
        BrokerClient([node.bootstrap], request_timeout_ms=300).metadata()
    assert "NETWORK_EXCEPTION" in str(refused.value) and "Connection refused" in str(refused.value)
