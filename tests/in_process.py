"""An in-process node for the route tests: a real `Node` (controller + broker on a temp data dir)
whose one listener is the HTTP application served by aiohttp's test server, so the tests use
aiohttp's TestClient. The node drives it through its real lifecycle (bind, services, serve, stop)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from kraft.api.server import build_app
from kraft.config import load_config
from kraft.node import Node
from kraft.server.services import BrokerServices
from harness import free_port


class NodeClient(TestClient):
    """aiohttp's TestClient of a node: closing it stops the node (as a client of the node's own
    app did when the app owned the node's lifecycle), which closes the connection last-but-one."""

    __test__ = False  # not a test class

    def __init__(self, server: TestServer) -> None:
        super().__init__(server)
        self.node: Node | None = None

    async def close(self) -> None:
        if self.node is not None:
            await self.node.stop()

    async def close_connection(self) -> None:
        await super().close()


class TestClientListener:
    """A `Listener` serving the node's HTTP application through aiohttp's TestServer."""

    name = "CLIENT"
    __test__ = False  # not a test class

    def __init__(self, port: int) -> None:
        self.port = port
        self.client: NodeClient | None = None

    def bind(self) -> tuple[str, int]:
        return "127.0.0.1", self.port

    async def start(self, services: BrokerServices) -> None:
        self.client = NodeClient(TestServer(build_app(services), host="127.0.0.1", port=self.port))
        await self.client.start_server()

    async def stop(self) -> None:
        if self.client is not None:
            await self.client.close_connection()

    def endpoints(self, advertised: tuple[str, int]) -> list[dict[str, Any]]:
        return []

    def open_connections(self) -> int:
        return 0


async def start_node(data_dir: Path, **overrides: Any) -> tuple[Node, NodeClient]:
    """A started node on `data_dir` (config keys with `_` for `.` in `overrides`) and its client;
    closing the client stops the node."""
    port = free_port()
    settings = {"log.dirs": str(data_dir), "listeners": f"127.0.0.1:{port}"}
    settings.update({k.replace("_", "."): v for k, v in overrides.items()})
    listener = TestClientListener(port)
    node = Node(load_config(settings), listeners=[listener])
    await node.start()
    assert listener.client is not None
    listener.client.node = node
    return node, listener.client
