"""Network partitions on 127.0.0.1: a TCP proxy in front of every node listener (client API and
controller quorum) that can cut and heal the link from one node to another.

Nodes are configured to reach each other through the proxies (advertised listeners and quorum
voter entries name proxy ports), so every connection between nodes passes one. The proxy tells
which node opened a connection from the kernel's socket table: the peer's port names a socket in
/proc/net/tcp whose inode one node process holds (Linux only). Connections from anyone else (the
harness's clients) are never cut.

Attribution reads the kernel's tables, which is slow with thousands of sockets: it happens only
while a link is cut (for the connections open when the cut starts and those accepted during it),
in batches; with no cut the proxies only copy bytes.

A cut link behaves like a network that drops packets: connections from A to B stop carrying bytes
in both directions (nothing is closed; the peers see silence and time out), and new ones are
accepted but stay silent. Healing lets the stalled bytes through, as TCP retransmission would.
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Callable

PidMap = Callable[[], dict[int, int]]  # pid -> node id of the running node processes


def socket_owners(sockets: list[tuple[int, int]], pids: dict[int, int]) -> dict[tuple[int, int], int]:
    """For each (peer port, proxy port) pair, the node whose process holds the socket
    127.0.0.1:peer connected to the proxy port, when a node does: one pass over /proc/net/tcp and
    over each node's descriptors, however many sockets are asked about."""
    wanted = {(f"0100007F:{peer:04X}", f"0100007F:{local:04X}"): (peer, local) for peer, local in sockets}
    inodes: dict[str, tuple[int, int]] = {}
    try:
        with open("/proc/net/tcp") as f:
            next(f)
            for line in f:
                fields = line.split()
                key = wanted.get((fields[1], fields[2]))
                if key is not None:
                    inodes[f"socket:[{fields[9]}]"] = key
    except OSError:
        return {}
    owners: dict[tuple[int, int], int] = {}
    for pid, node_id in pids.items():
        fd_dir = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                key = inodes.get(os.readlink(f"{fd_dir}/{fd}"))
            except OSError:
                continue
            if key is not None:
                owners[key] = node_id
    return owners


class _Connection:
    __slots__ = ("destination", "peer", "local", "source", "resolved")

    def __init__(self, destination: int, peer: int, local: int) -> None:
        self.destination, self.peer, self.local = destination, peer, local
        self.source: int | None = None
        self.resolved = asyncio.Event()  # set once `source` is known (None: not a node)

    @property
    def link(self) -> tuple[int | None, int]:
        return self.source, self.destination


class LinkProxies:
    """One asyncio loop in a daemon thread serving every proxy listener."""

    def __init__(self, pids: PidMap) -> None:
        self._pids = pids
        self._cut: set[tuple[int, int]] = set()
        self._healed: dict[tuple[int, int], asyncio.Event] = {}
        self._servers: list[asyncio.base_events.Server] = []
        self._open_connections: set[_Connection] = set()
        self._unresolved: list[_Connection] = []
        self._resolver: asyncio.Task[None] | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="chaos-proxies", daemon=True)
        self._thread.start()
        self.connections: dict[tuple[int | None, int], int] = {}  # attributed (source, destination) -> count

    def _run(self, coro: object, timeout: float = 60.0) -> object:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)  # type: ignore[arg-type]

    def listen(self, node_id: int, target_port: int) -> int:
        """A proxy on a free 127.0.0.1 port forwarding to `target_port` of node `node_id`; its port."""
        async def start() -> int:
            server = await asyncio.start_server(
                lambda r, w: self._serve(node_id, target_port, r, w), "127.0.0.1", 0)
            self._servers.append(server)
            return server.sockets[0].getsockname()[1]
        return self._run(start())  # type: ignore[return-value]

    # -- cutting ----------------------------------------------------------------------------------

    def cut(self, source: int, destination: int) -> None:
        """Connections from node `source` to node `destination` carry nothing until `heal`;
        returns once every open connection is attributed (so the cut holds for them)."""
        async def do() -> None:
            self._cut.add((source, destination))
            self._healed.setdefault((source, destination), asyncio.Event()).clear()
            pending = [c for c in self._open_connections if not c.resolved.is_set()]
            for connection in pending:
                self._resolve(connection)
            for connection in pending:
                await connection.resolved.wait()
        self._run(do())

    def heal(self, source: int, destination: int) -> None:
        async def do() -> None:
            self._cut.discard((source, destination))
            self._healed.setdefault((source, destination), asyncio.Event()).set()
        self._run(do())

    def isolate(self, node_id: int, others: list[int]) -> list[tuple[int, int]]:
        """Cuts every link between `node_id` and `others`, both ways; the links cut."""
        links = [link for other in others if other != node_id for link in ((node_id, other), (other, node_id))]
        for source, destination in links:
            self.cut(source, destination)
        return links

    def heal_all(self) -> None:
        for source, destination in list(self._cut):
            self.heal(source, destination)

    @property
    def cut_links(self) -> set[tuple[int, int]]:
        return set(self._cut)

    # -- attribution ------------------------------------------------------------------------------

    def _resolve(self, connection: _Connection) -> None:
        """Queues `connection` for the next batch lookup (one runs at a time)."""
        if connection in self._unresolved or connection.resolved.is_set():
            return
        self._unresolved.append(connection)
        if self._resolver is None or self._resolver.done():
            self._resolver = self._loop.create_task(self._resolve_batches())

    async def _resolve_batches(self) -> None:
        while self._unresolved:
            batch, self._unresolved = self._unresolved, []
            owners = await self._loop.run_in_executor(
                None, socket_owners, [(c.peer, c.local) for c in batch], self._pids())
            for connection in batch:
                connection.source = owners.get((connection.peer, connection.local))
                self.connections[connection.link] = self.connections.get(connection.link, 0) + 1
                connection.resolved.set()

    # -- forwarding -------------------------------------------------------------------------------

    async def _open(self, connection: _Connection) -> None:
        """Returns when `connection` may carry bytes: at once while nothing is cut."""
        while self._cut:
            if not connection.resolved.is_set():
                self._resolve(connection)
                await connection.resolved.wait()
            link = connection.link
            if link not in self._cut:
                return
            await self._healed[link].wait()  # type: ignore[index]

    async def _serve(self, destination: int, target_port: int, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        connection = _Connection(destination, writer.get_extra_info("peername")[1],
                                 writer.get_extra_info("sockname")[1])
        self._open_connections.add(connection)
        try:
            await self._open(connection)
            try:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target_port)
            except OSError:
                writer.close()
                return
            await asyncio.gather(self._pump(connection, reader, up_writer), self._pump(connection, up_reader, writer),
                                 return_exceptions=True)
        finally:
            self._open_connections.discard(connection)

    async def _pump(self, connection: _Connection, reader: asyncio.StreamReader,
                    writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                await self._open(connection)
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()

    def close(self) -> None:
        async def stop() -> None:
            for event in self._healed.values():
                event.set()
            self._cut.clear()
            for server in self._servers:
                server.close()
        self._run(stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
