"""Network partitions on 127.0.0.1: a TCP proxy in front of every node listener (client API and
controller quorum) that can cut and heal the link from one node to another.

Nodes are configured to reach each other through the proxies (advertised listeners and quorum
voter entries name proxy ports), so every connection between nodes passes one. The proxy tells
which node opened a connection from the kernel's socket table: the peer's port names a socket in
/proc/net/tcp whose inode one node process holds (Linux only). Connections from anyone else (the
harness's clients) are never cut.

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


def socket_owner(peer_port: int, local_port: int, pids: dict[int, int]) -> int | None:
    """The node whose process holds the socket 127.0.0.1:`peer_port` connected to `local_port`."""
    wanted_local, wanted_remote = f"0100007F:{peer_port:04X}", f"0100007F:{local_port:04X}"
    inode = None
    try:
        with open("/proc/net/tcp") as f:
            next(f)
            for line in f:
                fields = line.split()
                if fields[1] == wanted_local and fields[2] == wanted_remote:
                    inode = fields[9]
                    break
    except OSError:
        return None
    if inode is None:
        return None
    target = f"socket:[{inode}]"
    for pid, node_id in pids.items():
        fd_dir = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"{fd_dir}/{fd}") == target:
                    return node_id
            except OSError:
                continue
    return None


class LinkProxies:
    """One asyncio loop in a daemon thread serving every proxy listener."""

    def __init__(self, pids: PidMap) -> None:
        self._pids = pids
        self._cut: set[tuple[int, int]] = set()
        self._healed: dict[tuple[int, int], asyncio.Event] = {}
        self._servers: list[asyncio.base_events.Server] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="chaos-proxies", daemon=True)
        self._thread.start()
        self.connections: dict[tuple[int | None, int], int] = {}  # (source, destination) -> accepted

    def _run(self, coro: object, timeout: float = 10.0) -> object:
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
        """Connections from node `source` to node `destination` carry nothing until `heal`."""
        async def do() -> None:
            self._cut.add((source, destination))
            self._healed.setdefault((source, destination), asyncio.Event()).clear()
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

    # -- forwarding -------------------------------------------------------------------------------

    async def _open(self, link: tuple[int | None, int]) -> None:
        while link in self._cut:
            await self._healed[link].wait()  # type: ignore[index]

    async def _serve(self, destination: int, target_port: int, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        peer_port = writer.get_extra_info("peername")[1]
        local_port = writer.get_extra_info("sockname")[1]
        source = await self._loop.run_in_executor(None, socket_owner, peer_port, local_port, self._pids())
        link = (source, destination)
        self.connections[link] = self.connections.get(link, 0) + 1
        try:
            await self._open(link)
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target_port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(self._pump(link, reader, up_writer), self._pump(link, up_reader, writer),
                             return_exceptions=True)

    async def _pump(self, link: tuple[int | None, int], reader: asyncio.StreamReader,
                    writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                await self._open(link)
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
