"""In-process fixtures for the route tests: a real single node (controller + broker) on a temp
data dir, served by aiohttp's test server."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import AsyncIterator, Awaitable, Callable

import pytest
from aiohttp.test_utils import TestClient, TestServer

from kraft.config import load_config
from kraft.node import Node
from harness import free_port

# --import-mode=importlib does not put test folders on sys.path: the helpers module needs it.
sys.path.insert(0, str(Path(__file__).parent))

ClientFactory = Callable[..., Awaitable[TestClient]]


@pytest.fixture
async def make_client(tmp_path: Path) -> AsyncIterator[ClientFactory]:
    """`await make_client(**overrides)`: a client of a fresh node; config keys with `_` for `.`.
    Clients are closed (and nodes stopped) at the end; `data_dir` reuses a directory."""
    clients: list[TestClient] = []

    async def factory(data_dir: Path | None = None, **overrides: object) -> TestClient:
        port = free_port()
        settings = {"log.dirs": str(data_dir or tmp_path / f"node{len(clients)}"),
                    "listeners": f"127.0.0.1:{port}"}
        settings.update({k.replace("_", "."): v for k, v in overrides.items()})
        node = Node(load_config(settings))
        client = TestClient(TestServer(node.app, host="127.0.0.1", port=port))
        await client.start_server()
        clients.append(client)
        return client

    yield factory
    for client in clients:
        await client.close()


@pytest.fixture
async def client(make_client: ClientFactory) -> TestClient:
    return await make_client()
