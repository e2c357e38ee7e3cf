"""`GET /v1/health` says whether the node is ready (issue 11, item 7); `?ready=true` answers 503
until it is, for readiness probes and scripts that wait before creating topics."""

from __future__ import annotations

from aiohttp.test_utils import TestClient

from harness import free_port
from routes_testing import expect_error


async def test_a_running_node_is_ready(client: TestClient) -> None:
    plain = await client.get("/v1/health")
    assert plain.status == 200 and (await plain.json())["ready"] is True
    probe = await client.get("/v1/health?ready=true")
    body = await probe.json()
    assert (probe.status, body["status"], body["ready"]) == (200, "ok", True), body
    assert "reason" not in body


async def test_a_broker_without_a_controller_is_not_ready(make_client) -> None:
    """A broker-only node whose controllers are not there (yet): alive, but not ready."""
    nowhere = f"127.0.0.1:{free_port()}"
    client = await make_client(process_roles="broker", controller_quorum_voters=f"1@{nowhere}",
                               controller_quorum_bootstrap_servers=nowhere, node_id="2",
                               controller_quorum_secret="readiness-test-secret")
    plain = await client.get("/v1/health")
    body = await plain.json()
    assert (plain.status, body["status"], body["ready"]) == (200, "ok", False), body
    probe = await client.get("/v1/health", params={"ready": "true"})
    body = await probe.json()
    assert (probe.status, body["status"], body["ready"]) == (503, "not_ready", False), body
    assert body["reason"] == "no active controller known", body
    assert body["broker_state"] == "STARTING"


async def test_the_ready_parameter_is_true_or_false(client: TestClient) -> None:
    await expect_error(await client.get("/v1/health?ready=yes"), 400, "INVALID_REQUEST")
    assert (await client.get("/v1/health?ready=false")).status == 200
