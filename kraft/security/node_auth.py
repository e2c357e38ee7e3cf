"""The node credential: how the cluster's own nodes prove to each other that a request is theirs.

Every inter-node HTTP request (controller calls, replica fetches, forwarded client requests,
ZooKeeper-mode metadata pushes) carries

    X-Kraft-Node-Auth: v2 <node_id> <target_id> <ts_ms> <nonce> <body_sha256> <sig>

where `sig` is HMAC-SHA256, keyed by a key derived from `controller.quorum.secret` (never the
secret itself), over the version, the method, the raw path with its query, the signing node, the
node the request is addressed to, the timestamp, the nonce, the SHA-256 of the body and the
headers the receiver believes on the signature's word (`SIGNED_HEADERS`: the
forwarded principal, client host, client id and forwarding mark; an absent one is signed as
absent, so adding one breaks the signature as changing one does).

A receiver accepts a signature addressed to itself only, within `WINDOW_MS` of its clock, once
(its nonce is remembered for the window): a captured request can be sent neither again nor to
another node, and nothing it carries can be changed. The body's digest is in the header, so the
signature is checked before a byte of the body is read; the body read afterwards must match it.
Version 1 (no target, no headers) is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

HEADER = "X-Kraft-Node-Auth"
FORWARDED_PRINCIPAL_HEADER = "X-Kraft-Principal"  # the client a node forwards a request for
CLIENT_HOST_HEADER = "X-Kraft-Client-Host"  # that client's address (host-scoped ACLs)
FORWARDED_HEADER = "X-Kraft-Forwarded"  # the forwarding node: the receiver never forwards it again
CLIENT_ID_HEADER = "X-Kraft-Client-Id"  # Kafka's client_id, which quotas charge
# what a receiver believes of a node-signed request on the signature's word: every one is covered
# by the signature (absent ones as absent), so none can be added, dropped or changed
SIGNED_HEADERS = (FORWARDED_PRINCIPAL_HEADER, CLIENT_HOST_HEADER, FORWARDED_HEADER, CLIENT_ID_HEADER)
VERSION = "v2"
WINDOW_MS = 60_000  # clock skew between nodes plus request latency; nodes need synchronized clocks
MAX_REMEMBERED = 200_000  # nonces kept for replay detection (a window's worth at a high rate)
_KEY_LABEL = b"kraft node credential v1"  # the key's derivation, unchanged by the header's version
_FIELDS = 7


def derive_key(secret: str) -> bytes:
    """The signing key: a separate key from the Raft transport's password, same secret."""
    return hmac.new(secret.encode("utf-8"), _KEY_LABEL, hashlib.sha256).digest()


def body_digest(body: bytes | None) -> str:
    return hashlib.sha256(body or b"").hexdigest()


def _message(method: str, path_qs: str, node_id: int, target: int, ts_ms: int, nonce: str, digest: str,
             headers: Mapping[str, str | None]) -> bytes:
    # header names case-folded and sorted, values as HTTP delivers them (surrounding blanks
    # stripped); JSON keeps "absent" apart from any value
    signed = json.dumps(sorted((name.lower(), None if value is None else value.strip())
                               for name, value in headers.items()), separators=(",", ":"))
    return "\n".join((VERSION, method.upper(), path_qs, str(node_id), str(target), str(ts_ms), nonce, digest,
                      signed)).encode("utf-8")


def _is_number(text: str) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= 19


@dataclass(frozen=True)
class Verified:
    node_id: int
    body_digest: str  # what the body must hash to (SHA-256, hex): the caller reads it and checks


class NodeAuthError(Exception):
    """Why a node signature was refused (for the log; never contains the signature or key)."""


class NodeCredential:
    """Signs this node's outgoing requests and verifies other nodes' incoming ones."""

    def __init__(self, node_id: int, secret: str) -> None:
        self.node_id = node_id
        self._key = derive_key(secret)
        self._seen: OrderedDict[tuple[int, str], int] = OrderedDict()  # (node, nonce) -> its timestamp

    def _sign(self, method: str, path_qs: str, node_id: int, target: int, ts_ms: int, nonce: str, digest: str,
              headers: Mapping[str, str | None]) -> str:
        return hmac.new(self._key, _message(method, path_qs, node_id, target, ts_ms, nonce, digest, headers),
                        hashlib.sha256).hexdigest()

    def sign(self, method: str, path_qs: str, body: bytes | None, now_ms: int, target: int,
             headers: Mapping[str, str | None]) -> dict[str, str]:
        """The header for a request of `method` to `path_qs` (raw path + query) addressed to node
        `target`, covering `headers` (every name the receiver trusts; None: not sent)."""
        nonce, digest = secrets.token_hex(8), body_digest(body)
        sig = self._sign(method, path_qs, self.node_id, target, now_ms, nonce, digest, headers)
        return {HEADER: f"{VERSION} {self.node_id} {target} {now_ms} {nonce} {digest} {sig}"}

    def verify(self, header: str, method: str, path_qs: str, headers: Mapping[str, str | None],
               now_ms: int) -> Verified:
        """The signing node and the body digest it signed, or NodeAuthError; from the header and
        the request line alone (no body). Constant-time comparison; each nonce once."""
        parts = header.split(" ")
        if parts[0] == "v1":
            raise NodeAuthError("node credential v1 is no longer accepted (every node must run this version)")
        if len(parts) != _FIELDS or parts[0] != VERSION or not all(_is_number(p) for p in parts[1:4]):
            raise NodeAuthError("malformed node credential")
        node_id, target, ts_ms = int(parts[1]), int(parts[2]), int(parts[3])
        nonce, digest, sig = parts[4:]
        if target != self.node_id:
            raise NodeAuthError(f"node credential addressed to node {target}, not this node {self.node_id}")
        if abs(now_ms - ts_ms) > WINDOW_MS:
            raise NodeAuthError(f"node credential timestamp outside the {WINDOW_MS // 1000} s window "
                                f"(clocks out of sync, or a replay)")
        self._forget_before(now_ms - WINDOW_MS)
        if (node_id, nonce) in self._seen:
            raise NodeAuthError("node credential already used (a replayed request)")
        expected = self._sign(method, path_qs, node_id, target, ts_ms, nonce, digest, headers)
        if not hmac.compare_digest(expected, sig):
            raise NodeAuthError("node credential does not verify (wrong secret, or the request was altered)")
        # remembered only once verified: strangers cannot fill the cache and push real nonces out
        self._seen[(node_id, nonce)] = ts_ms
        if len(self._seen) > MAX_REMEMBERED:
            self._seen.popitem(last=False)
        return Verified(node_id, digest)

    def _forget_before(self, oldest_ms: int) -> None:
        # insertion order is nearly timestamp order; stop at the first one still in the window
        while self._seen:
            key, ts = next(iter(self._seen.items()))
            if ts >= oldest_ms:
                break
            del self._seen[key]
