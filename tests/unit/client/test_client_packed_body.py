"""A body in parts reaches the socket whole and in order: writev's partial writes resumed where
they stopped, and more parts than one writev takes."""

from __future__ import annotations

import os
import random
import socket
import threading

import msgpack

from kraft.api.client.packed_body import PackedBody, bin_header, send_parts


def test_parts_arrive_whole_and_in_order_through_partial_writes() -> None:
    rand = random.Random(7)
    parts = [os.urandom(rand.choice((0, 1, 7, 300, 5_000))) for _ in range(1100)]  # more than IOV_MAX
    parts[500] = os.urandom(1 << 20)
    send, recv = socket.socketpair()
    with send, recv:
        send.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)  # writev stops part-way, often
        send.settimeout(30)
        out = bytearray()
        reader = threading.Thread(target=lambda: _read_into(recv, out, sum(map(len, parts))))
        reader.start()
        send_parts(send, parts)
        reader.join(60)
    assert bytes(out) == b"".join(parts)


def _read_into(sock: socket.socket, out: bytearray, size: int) -> None:
    while len(out) < size:
        chunk = sock.recv(1 << 16)
        if not chunk:
            return
        out.extend(chunk)


def test_bin_headers_are_msgpacks() -> None:
    for size in (0, 1, 255, 256, 65535, 65536, 1 << 20):
        data = b"\0" * size
        assert bin_header(size) + data == msgpack.packb(data, use_bin_type=True)
    assert PackedBody([b"ab", b"", b"cde"]).size == 5
