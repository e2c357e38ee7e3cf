"""The node credential: how the cluster's own nodes prove to each other that a request is theirs.

Every inter-node HTTP request (controller calls, replica fetches, forwarded client requests,
ZooKeeper-mode metadata pushes) carries `X-Kraft-Node-Auth: v1 <node_id> <ts_ms> <nonce> <sig>`,
where `sig` is HMAC-SHA256 over the method, the raw path with its query, the node id, the
timestamp, the nonce and the SHA-256 of the body, keyed by a key derived from
`controller.quorum.secret` (never the secret itself). A signature is accepted within
`WINDOW_MS` of the receiver's clock and only once (a signature seen in the window is a replay),
so a plaintext eavesdropper can neither forge a request nor replay one. A bearer token would
let anyone who saw one request send any other.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections import OrderedDict
from dataclasses import dataclass

HEADER = "X-Kraft-Node-Auth"
VERSION = "v1"
WINDOW_MS = 60_000  # clock skew between nodes plus request latency; nodes need synchronized clocks
MAX_REMEMBERED = 200_000  # signatures kept for replay detection (a window's worth at a high rate)
_KEY_LABEL = b"kraft node credential v1"
_EMPTY_DIGEST = hashlib.sha256(b"").hexdigest()


def derive_key(secret: str) -> bytes:
    """The signing key: a separate key from the Raft transport's password, same secret."""
    return hmac.new(secret.encode("utf-8"), _KEY_LABEL, hashlib.sha256).digest()


def _message(method: str, path_qs: str, node_id: int, ts_ms: int, nonce: str, body_digest: str) -> bytes:
    return f"{VERSION}\n{method.upper()}\n{path_qs}\n{node_id}\n{ts_ms}\n{nonce}\n{body_digest}".encode("utf-8")


def body_digest(body: bytes | None) -> str:
    return hashlib.sha256(body).hexdigest() if body else _EMPTY_DIGEST


@dataclass(frozen=True)
class Verified:
    node_id: int


class NodeAuthError(Exception):
    """Why a node signature was refused (for the log; never contains the signature or key)."""


class NodeCredential:
    """Signs this node's outgoing requests and verifies other nodes' incoming ones."""

    def __init__(self, node_id: int, secret: str) -> None:
        self.node_id = node_id
        self._key = derive_key(secret)
        self._seen: OrderedDict[str, int] = OrderedDict()  # signature -> its timestamp

    def sign(self, method: str, path_qs: str, body: bytes | None, now_ms: int) -> dict[str, str]:
        """The header to send with a request of `method` to `path_qs` (raw path + query)."""
        nonce = secrets.token_hex(8)
        sig = hmac.new(self._key, _message(method, path_qs, self.node_id, now_ms, nonce, body_digest(body)),
                       hashlib.sha256).hexdigest()
        return {HEADER: f"{VERSION} {self.node_id} {now_ms} {nonce} {sig}"}

    def verify(self, header: str, method: str, path_qs: str, body: bytes | None, now_ms: int) -> Verified:
        """The signing node, or NodeAuthError. Constant-time comparison; each signature once."""
        parts = header.split(" ")
        if len(parts) != 5 or parts[0] != VERSION or not parts[1].isdigit() or not parts[2].isdigit():
            raise NodeAuthError("malformed node credential")
        node_id, ts_ms, nonce, sig = int(parts[1]), int(parts[2]), parts[3], parts[4]
        if abs(now_ms - ts_ms) > WINDOW_MS:
            raise NodeAuthError(f"node credential timestamp outside the {WINDOW_MS // 1000} s window "
                                f"(clocks out of sync, or a replay)")
        expected = hmac.new(self._key, _message(method, path_qs, node_id, ts_ms, nonce, body_digest(body)),
                            hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, sig):
            raise NodeAuthError("node credential does not verify (wrong secret, or the request was altered)")
        self._forget_before(now_ms - WINDOW_MS)
        if sig in self._seen:
            raise NodeAuthError("node credential already used (a replayed request)")
        self._seen[sig] = ts_ms
        if len(self._seen) > MAX_REMEMBERED:
            self._seen.popitem(last=False)
        return Verified(node_id)

    def _forget_before(self, oldest_ms: int) -> None:
        # insertion order is nearly timestamp order; stop at the first one still in the window
        while self._seen:
            sig, ts = next(iter(self._seen.items()))
            if ts >= oldest_ms:
                break
            del self._seen[sig]
