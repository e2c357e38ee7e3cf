"""In-process fixtures for the route tests: a real single node (controller + broker) on a temp
data dir, served by aiohttp's test server (tests/in_process.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import AsyncIterator, Awaitable, Callable

import pytest
from aiohttp.test_utils import TestClient

from in_process import start_node

# --import-mode=importlib does not put test folders on sys.path: the helpers module needs it.
sys.path.insert(0, str(Path(__file__).parent))

ClientFactory = Callable[..., Awaitable[TestClient]]


@pytest.fixture
async def make_client(tmp_path: Path) -> AsyncIterator[ClientFactory]:
    """`await make_client(**overrides)`: a client of a fresh node; config keys with `_` for `.`.
    Clients are closed (and nodes stopped) at the end; `data_dir` reuses a directory."""
    clients: list[TestClient] = []

    async def factory(data_dir: Path | None = None, **overrides: object) -> TestClient:
        _, client = await start_node(data_dir or tmp_path / f"node{len(clients)}", **overrides)
        clients.append(client)
        return client

    yield factory
    for client in clients:
        await client.close()  # stops its node


@pytest.fixture
async def client(make_client: ClientFactory) -> TestClient:
    return await make_client()
