"""A full disk under a real in-process node, injected at the file layer (runs on every machine;
tests/integration/test_full_disk_e2e.py does the same on a real full tmpfs): topic creation and
produce answer KAFKA_STORAGE_ERROR at once, health names the metadata log's failure, and both work
again once space returns, without a restart."""

from __future__ import annotations

import time
from typing import Any

import pytest

from full_disk import BudgetedFile, DiskBudget, enospc
from harness import free_port, wait_until
from kraft.controller import log_store
from kraft.log import segment as log_segment
from routes_testing import create_topic, expect_error, read_all


async def test_full_disk_then_space_returns(make_client, monkeypatch: pytest.MonkeyPatch) -> None:
    budget = DiskBudget()
    opened = log_store._open_segment
    monkeypatch.setattr(log_store, "_open_segment", lambda path: BudgetedFile(opened(path), budget))
    write = log_segment._pwrite_all

    def budgeted(file: Any, data: bytes, position: int) -> None:
        granted = budget.take(len(data))
        write(file, bytes(data)[:granted], position)
        if granted < len(data):
            raise enospc()

    monkeypatch.setattr(log_segment, "_pwrite_all", budgeted)
    client = await make_client()  # its metadata log and partition logs write through the budget
    await create_topic(client, "kept")
    produce = {"records": [{"value": "a"}], "acks": 1}
    assert (await client.post("/v1/topics/kept/records", json=produce)).status == 200

    budget.free = 10  # a part of the next write fits
    body = await expect_error(await client.post("/v1/topics", json={"name": "wanted"}), 503, "KAFKA_STORAGE_ERROR")
    assert body["retriable"] is True
    assert "No space left" in (await (await client.get("/v1/health")).json())["metadata_log_error"]
    budget.free = 10
    await expect_error(await client.post("/v1/topics", json={"name": "wanted"}), 503, "KAFKA_STORAGE_ERROR")
    budget.free = 10
    body = await expect_error(await client.post("/v1/topics/kept/records", json={"records": [{"value": "b"}]}),
                              503, "KAFKA_STORAGE_ERROR")
    assert body["retriable"] is True and body["partitions"][0]["error_code"] == "KAFKA_STORAGE_ERROR"

    budget.free = None
    await create_topic(client, "wanted")
    assert (await (await client.get("/v1/health")).json())["metadata_log_error"] is None
    stored = await client.post("/v1/topics/kept/records", json={"records": [{"value": "b"}], "acks": 1})
    assert (await stored.json())["offsets"] == [{"partition": 0, "offset": 1}]
    assert [r["value"] for r in (await read_all(client, "kept"))["records"]] == ["a", "b"]


async def test_full_disk_under_a_raft_voter(make_client, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same on a node running the Raft quorum (`controller.quorum.voters` set, here one
    voter): its journal's append fails, and topic creation used to answer 504 REQUEST_TIMED_OUT
    after 5 s with `metadata_log_error: null` (pysyncobj logged the error and dropped the
    command). The voter then resigns until a write succeeds, and leads again once space is back."""
    budget = DiskBudget()
    budget.patch_raft_journal(monkeypatch)
    client = await make_client(controller_quorum_voters=f"1@127.0.0.1:{free_port()}", node_id=1)

    async def created(name: str) -> bool:
        return (await client.post("/v1/topics", json={"name": name})).status == 201

    async def health() -> dict[str, Any]:
        return await (await client.get("/v1/health")).json()

    async def resigned() -> dict[str, Any] | None:
        found = await health()
        return found if found["active_controller"] is False else None

    async def no_log_error() -> bool:
        return (await health())["metadata_log_error"] is None

    # the broker registers with its controller after the Raft election
    await wait_until(lambda: created("kept"), interval=0.1, what="the first topic created")

    budget.free = 10  # a part of the next write fits
    started = time.monotonic()  # answered at once (the request timeout is 5 s)
    body = await expect_error(await client.post("/v1/topics", json={"name": "wanted", "partitions": 30}),
                              503, "KAFKA_STORAGE_ERROR")
    assert body["retriable"] is True and "No space left" in body["message"]
    assert time.monotonic() - started < 2.5
    # then the voter resigns (issue 26): a lone one leaves the cluster without an active
    # controller until a write succeeds
    found = await wait_until(resigned, 10, interval=0.1, what="the voter resigned")
    assert "No space left" in found["metadata_log_error"]

    budget.free = None  # its probe finds space within a second, and it leads again
    await wait_until(lambda: created("wanted"), interval=0.1, what="a topic created once space is back")
    # a pending save of the journal's meta file: within a second
    await wait_until(no_log_error, 5, interval=0.1, what="the metadata log error cleared")
    topics = (await (await client.get("/v1/topics")).json())["topics"]
    assert sorted(t["name"] if isinstance(t, dict) else t for t in topics) == ["kept", "wanted"]
