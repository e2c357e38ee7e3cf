"""The controller quorum's TCP transport: pysyncobj's, made safe against whoever can reach the Raft
port, with its traffic counted and the journal synced before every send.

pysyncobj reads all a socket holds into one buffer (growing it by copying) and only then looks at
a frame's 4-byte length; the shared secret (Fernet) is checked when a whole frame has arrived. A
length of 2**31-1 followed by 120 MiB took a voter from 70 to 300 MB and stalled its Raft thread
until it lost leadership (issue 21). Here (`RaftConnection`, `RaftTransport`):

- A frame is refused from its length alone, before it is buffered, when it is longer than
  `MAX_FRAME_BYTES`, or, until the connection has authenticated, `MAX_HANDSHAKE_FRAME_BYTES`: the
  connection is dropped and the refusal logged (once a minute per address). Authenticated means a
  frame decrypted with the secret *and* carrying the random key this side sent in pysyncobj's key
  exchange (so a recorded handshake frame, replayed, does not count).
- Reading stops once a whole frame is buffered, so a frame is parsed (or refused) before the next
  one is read: a connection holds at most one frame and one socket read.
- At most `MAX_PENDING_PER_ADDRESS` incoming connections from one address (and
  `MAX_PENDING_CONNECTIONS` in all) may be unauthenticated at once; more are closed as accepted.
  One that has not authenticated within `HANDSHAKE_TIMEOUT_S` is closed (the quorum's
  connectionTimeout is effectively infinite, for failover speed).

This module and `raft_quorum._KraftSyncObj` are the places that reach into pysyncobj's internals.
"""

from __future__ import annotations

import logging
import struct
import time
from dataclasses import dataclass
from typing import Any

import pysyncobj.tcp_server
import pysyncobj.transport
from pysyncobj.tcp_connection import TcpConnection
from pysyncobj.transport import TCPTransport

logger = logging.getLogger(__name__)

# The largest frame a voter sends. pysyncobj sends a snapshot in pieces of logCompactionBatchSize
# (64 KiB) and a log entry of appendEntriesBatchSizeBytes (64 KiB) or more alone, in 64 KiB pieces;
# but an AppendEntries fills up to 64 KiB with entries and the last one may be of any size, and a
# command a follower forwards to the leader is whole. An entry is one metadata batch of at most
# 100,000 records (metadata/log_rules.py); the largest real one, a topic of 100,000 partitions, is
# 7.8 MB pickled and 1.5 MB as a frame (zlib, then Fernet). 64 MiB leaves a wide margin.
MAX_FRAME_BYTES = 64 * 1024 * 1024
# Before authentication a peer sends one frame of the key exchange: a 32-byte random key, or its
# address with our key, pickled, compressed and encrypted (about 200 bytes).
MAX_HANDSHAKE_FRAME_BYTES = 1024
MAX_PENDING_PER_ADDRESS = 8
MAX_PENDING_CONNECTIONS = 64
HANDSHAKE_TIMEOUT_S = 10.0
REFUSAL_LOG_INTERVAL_S = 60.0

_FRAME_LENGTH = struct.Struct("i")  # pysyncobj's: native byte order, signed


@dataclass
class RaftChannelCounts:
    """A voter's Raft traffic since it started (Kafka's raft-channel-metrics), counted in the Raft
    thread; the metrics read the ints as they are."""

    incoming_bytes: int = 0
    outgoing_bytes: int = 0
    sent: int = 0  # messages sent to the other voters
    received: int = 0  # messages received from them


class _RefusalLog:
    """Warns about a refused peer at most once per `REFUSAL_LOG_INTERVAL_S` per address, saying
    how many refusals were not logged since (a flood is one line a minute)."""

    MAX_ADDRESSES = 1024

    def __init__(self) -> None:
        self._last: dict[str, tuple[float, int]] = {}  # address -> (last logged, not logged since)

    def warn(self, address: str, what: str) -> None:
        now = time.monotonic()
        last, unlogged = self._last.get(address, (-REFUSAL_LOG_INTERVAL_S, 0))
        if now - last < REFUSAL_LOG_INTERVAL_S:
            self._last[address] = (last, unlogged + 1)
            return
        if len(self._last) >= self.MAX_ADDRESSES:
            self._last.clear()
        self._last[address] = (now, 0)
        logger.warning("Raft port: %s from %s%s", what, address,
                       f" ({unlogged} more refusals from it in the last minute)" if unlogged else "")


REFUSALS = _RefusalLog()


class RaftConnection(TcpConnection):
    """pysyncobj's TCP connection with the frame bounds of the module docstring, adding the bytes
    it moves to `channel` (set by the transport that owns it)."""

    channel: RaftChannelCounts | None = None
    authenticated = False
    accepted_at = 0.0  # monotonic time an incoming connection was accepted

    @property
    def peer(self) -> str:
        sock = self._TcpConnection__socket
        try:
            return str(sock.getpeername()[0]) if sock is not None else "?"
        except OSError:
            return "?"

    def disconnect(self) -> None:
        self.authenticated = False  # an outgoing connection object is connected again later
        super().disconnect()

    def _TcpConnection__processSend(self) -> bool:  # only ever takes bytes off the write buffer
        pending = len(self._TcpConnection__writeBuffer)
        progressed = super()._TcpConnection__processSend()
        if progressed and self.channel is not None:
            self.channel.outgoing_bytes += pending - len(self._TcpConnection__writeBuffer)
        return progressed

    def _TcpConnection__processRead(self) -> bool:
        """One socket read appended to the buffer; False (stop reading for now) once the buffer
        holds a whole frame, or when its frame is refused."""
        buffered = len(self._TcpConnection__readBuffer)
        if not super()._TcpConnection__processRead():
            return False
        buffer = self._TcpConnection__readBuffer
        if self.channel is not None:
            self.channel.incoming_bytes += len(buffer) - buffered
        if len(buffer) < _FRAME_LENGTH.size:
            return True
        (length,) = _FRAME_LENGTH.unpack_from(buffer)
        limit = MAX_FRAME_BYTES if self.authenticated or self.encryptor is None else MAX_HANDSHAKE_FRAME_BYTES
        if not 0 <= length <= limit:
            REFUSALS.warn(self.peer, f"refused a frame of {length} bytes (at most {limit}"
                                     f"{'' if self.authenticated else ' before authenticating'}); connection closed")
            self.disconnect()
            return False
        return len(buffer) < _FRAME_LENGTH.size + length

    def _TcpConnection__processParseMessage(self) -> Any:
        # pysyncobj checks a frame for the key this side sent once it has sent one: such a frame
        # could not have been recorded earlier, so the peer holds the secret.
        fresh = self.recvRandKey is not None
        message = super()._TcpConnection__processParseMessage()
        if message is not None and fresh and self.encryptor is not None:
            self.authenticated = True
        return message


class RaftTransport(TCPTransport):
    """Raft: an entry is on stable storage before this voter acknowledges it, and the leader's
    entries before it sends them on, so every message goes out after the journal's fsync. Caps
    unauthenticated incoming connections (module docstring) and counts the traffic in `channel`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.channel = RaftChannelCounts()  # before TCPTransport's constructor adds the voters
        super().__init__(*args, **kwargs)

    def addNode(self, node: Any) -> None:
        super().addNode(node)
        connection = self._connections.get(node)
        if connection is not None:
            connection.channel = self.channel

    def _onNewIncomingConnection(self, conn: Any) -> None:
        address = conn.peer
        pending = [c for c in self._unknownConnections if not c.authenticated]
        if (len(pending) >= MAX_PENDING_CONNECTIONS
                or sum(1 for c in pending if c.peer == address) >= MAX_PENDING_PER_ADDRESS):
            REFUSALS.warn(address, f"closed a connection: {len(pending)} not yet authenticated "
                                   f"(at most {MAX_PENDING_PER_ADDRESS} per address, {MAX_PENDING_CONNECTIONS} in all)")
            conn.disconnect()
            return
        conn.accepted_at = time.monotonic()
        conn.channel = self.channel
        super()._onNewIncomingConnection(conn)

    def _onTick(self) -> None:
        super()._onTick()
        deadline = time.monotonic() - HANDSHAKE_TIMEOUT_S
        for conn in [c for c in self._unknownConnections if not c.authenticated and c.accepted_at < deadline]:
            REFUSALS.warn(conn.peer, f"closed a connection that did not authenticate within {HANDSHAKE_TIMEOUT_S:.0f} s")
            conn.disconnect()

    def send(self, node: Any, message: Any) -> bool:
        self._syncObj.conf.journalFile.flush()
        sent = super().send(node, message)
        if sent:
            self.channel.sent += 1
        return sent

    def _onMessageReceived(self, node: Any, message: Any) -> None:
        self.channel.received += 1
        super()._onMessageReceived(node, message)


# pysyncobj builds its connections by module-level name (a transport subclass cannot choose them).
pysyncobj.transport.TcpConnection = RaftConnection
pysyncobj.tcp_server.TcpConnection = RaftConnection
