"""The chaos link proxy with plain sockets: a connection is attributed to the process that opened
it, a cut link carries nothing (bytes wait, nothing is closed) and healing delivers what waited;
connections from anyone else are never cut."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from typing import Iterator

import pytest

from kraft.bench.chaos.proxy import LinkProxies

# A child process standing for node 1: connects to the proxy, then sends each line of its stdin
# and prints each line the other end sends back.
CLIENT = """
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
f = s.makefile("rwb", buffering=0)
for line in sys.stdin.buffer:
    f.write(line)
    sys.stdout.buffer.write(f.readline())
    sys.stdout.buffer.flush()
"""


@pytest.fixture
def echo_port() -> Iterator[int]:
    """An echo server standing for node 2's listener."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(4096):
                conn.sendall(data)

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1]
    server.close()


def test_cut_stalls_the_link_heal_delivers_and_others_pass(echo_port: int):
    children: dict[int, int] = {}
    proxies = LinkProxies(lambda: dict(children))
    port = proxies.listen(2, echo_port)
    child = subprocess.Popen([sys.executable, "-c", CLIENT, str(port)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE)
    children[child.pid] = 1
    try:
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write(b"before\n")
        child.stdin.flush()
        assert child.stdout.readline() == b"before\n"

        proxies.cut(1, 2)
        assert proxies.connections == {(1, 2): 1}  # the open connection, attributed at the cut
        child.stdin.write(b"during\n")
        child.stdin.flush()
        answered: list[bytes] = []
        reader = threading.Thread(target=lambda: answered.append(child.stdout.readline()), daemon=True)
        reader.start()
        # the harness itself (no node) still gets through while 1 -> 2 is cut
        with socket.create_connection(("127.0.0.1", port), timeout=30) as other:
            other.sendall(b"outsider\n")
            assert other.makefile("rb").readline() == b"outsider\n"
        assert not answered and child.poll() is None  # stalled, not closed

        proxies.heal(1, 2)
        reader.join(30)
        assert answered == [b"during\n"]
    finally:
        child.kill()
        child.wait(10)
        proxies.close()


def test_isolate_cuts_both_ways_and_heal_all_opens_everything():
    proxies = LinkProxies(dict)
    try:
        assert sorted(proxies.isolate(3, [1, 2, 3])) == [(1, 3), (2, 3), (3, 1), (3, 2)]
        assert proxies.cut_links == {(1, 3), (2, 3), (3, 1), (3, 2)}
        proxies.heal_all()
        assert proxies.cut_links == set()
    finally:
        proxies.close()
