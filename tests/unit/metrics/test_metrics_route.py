"""`GET /metrics` and the request-metrics middleware on an in-process node: both exposition
formats, Kafka API names per route, error names, and messages in equal to the records produced."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import AsyncIterator, Awaitable, Callable

import pytest
from aiohttp.test_utils import TestClient
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from kraft.api.openapi import openapi_document
from kraft.api.routes.services import SERVICES
from in_process import start_node

ClientFactory = Callable[..., Awaitable[TestClient]]


@pytest.fixture
async def make_client(tmp_path: Path) -> AsyncIterator[ClientFactory]:
    clients: list[TestClient] = []

    async def factory(**overrides: object) -> TestClient:
        _, client = await start_node(tmp_path / f"node{len(clients)}",
                                     **{k.replace(".", "_"): v for k, v in overrides.items()})
        clients.append(client)
        return client

    yield factory
    for client in clients:
        await client.close()


async def samples(client: TestClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = await client.get("/metrics")
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(await response.text())
            for s in family.samples}


def get(found: dict, name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


async def produce_until_accepted(client: TestClient, topic: str, records: list[dict]) -> None:
    """A new topic's replica opens asynchronously: retry NOT_LEADER_OR_FOLLOWER (retriable)."""
    for _ in range(200):
        response = await client.post(f"/v1/topics/{topic}/records", json={"records": records})
        if response.status == 200:
            return
        assert (await response.json())["retriable"], await response.text()
    raise AssertionError(f"{topic} never accepted the records")


async def test_the_scrape_is_encoded_off_the_event_loop(make_client: ClientFactory) -> None:
    """Collecting and encoding are ∝ the series (per partition with topic labels): the route does
    them in a thread, so a large scrape never stalls the loop."""
    client = await make_client()
    threads: list[int] = []

    class Recorder(Collector):
        def collect(self):  # type: ignore[no-untyped-def]
            threads.append(threading.get_ident())
            return []

    client.server.app[SERVICES].metrics.registry.register(Recorder())
    await samples(client)
    assert threads and threading.get_ident() not in threads


async def test_produce_fetch_and_errors_are_counted_with_kafka_names(make_client: ClientFactory) -> None:
    client = await make_client()
    created = await client.post("/v1/topics", json={"name": "orders", "partitions": 2})
    assert created.status == 201
    await produce_until_accepted(client, "orders", [{"value": f"v{i}", "partition": i % 2} for i in range(5)])
    await produce_until_accepted(client, "orders", [{"value": "w", "partition": 1}])
    read = await client.get("/v1/topics/orders/partitions/0/records?offset=0")
    assert read.status == 200
    out_of_range = await client.get("/v1/topics/orders/partitions/0/records?offset=999")
    assert out_of_range.status == 416
    assert (await client.get("/v1/no-such-route")).status == 404

    found = await samples(client)
    t = "kafka_server_brokertopicmetrics_"
    assert get(found, t + "messagesin_total", topic="orders") == 6
    assert get(found, t + "bytesin_total", topic="orders") > 0
    assert get(found, t + "bytesout_total", topic="orders") > 0
    assert get(found, t + "failedfetchrequests_total", topic="orders") == 1
    requests = "kafka_network_requestmetrics_"
    assert get(found, requests + "requests_total", request="CreateTopics") == 1
    assert get(found, requests + "requests_total", request="FetchConsumer") == 2
    assert get(found, requests + "errors_total", request="FetchConsumer", error="OFFSET_OUT_OF_RANGE") == 1
    assert get(found, requests + "errors_total", request="Unknown", error="NOT_FOUND") == 1
    assert get(found, requests + "totaltimems_count", request="FetchConsumer") == 2
    # scrapes and probes are not Kafka requests
    assert get(found, requests + "requests_total", request="/metrics") == 0
    assert not any(dict(labels).get("request") == "/metrics" for _, labels in found)
    assert get(found, "kafka_server_replicamanager_leadercount") == 2
    assert get(found, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert get(found, "kafka_controller_kafkacontroller_globalpartitioncount") == 2
    assert get(found, "kafka_log_log_logendoffset", topic="orders", partition="1") == 3  # v1, v3, w
    assert get(found, "kafka_server_raftmetrics_current_state", state="leader") == 1
    assert get(found, "process_cpu_seconds_total") > 0


async def test_openmetrics_when_accept_asks(make_client: ClientFactory) -> None:
    client = await make_client()
    response = await client.get("/metrics", headers={
        "Accept": "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"})
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("application/openmetrics-text; version=1.0.0")
    text = await response.text()
    assert text.endswith("# EOF\n")
    names = {f.name for f in parse_openmetrics(text)}
    assert "kafka_controller_kafkacontroller_activecontrollercount" in names
    assert "kafka_network_requestmetrics_requests" in names  # OpenMetrics counters drop _total


async def test_topic_labels_can_be_turned_off(make_client: ClientFactory) -> None:
    client = await make_client(**{"metrics.topic.labels.enable": "false"})
    assert (await client.post("/v1/topics", json={"name": "a", "partitions": 1})).status == 201
    await produce_until_accepted(client, "a", [{"value": "x"}, {"value": "y"}])
    found = await samples(client)
    assert get(found, "kafka_server_brokertopicmetrics_messagesin_total") == 2
    assert not any("topic" in dict(labels) or "partition" in dict(labels) for _, labels in found)


def test_metrics_route_is_documented() -> None:
    operation = openapi_document()["paths"]["/metrics"]["get"]
    assert set(operation["responses"]["200"]["content"]) == {"text/plain", "application/openmetrics-text"}
