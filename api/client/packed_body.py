"""A request body already packed as msgpack, in parts written one after another without joining
them: the produce request's record batches go from the batches the producer framed straight to
the socket (one `writev`), not copied into one body first (docs/benchmarks.md, issue 25's
fourth round)."""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass

_IOV_MAX = 1024  # Linux's limit on buffers per writev


@dataclass(frozen=True, slots=True)
class PackedBody:
    parts: list[bytes]  # the msgpack body, in order

    @property
    def size(self) -> int:
        return sum(map(len, self.parts))


def bin_header(size: int) -> bytes:
    """msgpack's header of a bin of `size` bytes, the smallest that fits (as msgpack packs one)."""
    if size < 0x100:
        return b"\xc4" + size.to_bytes(1, "big")
    if size < 0x10000:
        return b"\xc5" + size.to_bytes(2, "big")
    return b"\xc6" + size.to_bytes(4, "big")


def send_parts(sock: socket.socket, parts: list[bytes]) -> None:
    """Writes every part, in order, with as few `sendmsg` (writev) calls as the socket takes;
    a TLS socket, which has no `sendmsg`, part by part."""
    if isinstance(sock, ssl.SSLSocket):
        for part in parts:
            sock.sendall(part)
        return
    views = [memoryview(part) for part in parts if part]
    i = 0
    while i < len(views):
        sent = sock.sendmsg(views[i:i + _IOV_MAX])
        while sent:  # past the parts written whole, into the one written in part
            size = len(views[i])
            if sent < size:
                views[i] = views[i][sent:]
                break
            sent -= size
            i += 1
