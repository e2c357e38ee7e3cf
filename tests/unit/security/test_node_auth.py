"""The node credential (v2): a signature verifies once, at the node it is addressed to, for its own
request line and the headers the receiver trusts, within the window; the body is checked against
the digest it carries."""

from __future__ import annotations

import hashlib

import pytest

from kraft.api.security import (
    CLIENT_HOST_HEADER, CLIENT_ID_HEADER, FORWARDED_HEADER, FORWARDED_PRINCIPAL_HEADER, SIGNED_HEADERS,
)
from kraft.security.node_auth import HEADER, WINDOW_MS, NodeAuthError, NodeCredential
from kraft.security.peers import PeerSecurity

NOW = 1_700_000_000_000
PATH = "/v1/controller/alter-partition"
NONE = {name: None for name in SIGNED_HEADERS}
FORWARDED = {**NONE, FORWARDED_PRINCIPAL_HEADER: "User:alice", CLIENT_HOST_HEADER: "10.0.0.8",
             FORWARDED_HEADER: "2", CLIENT_ID_HEADER: "app-1"}


def signed(cred: NodeCredential, method: str = "POST", path: str = PATH, body: bytes | None = b"body",
           now: int = NOW, target: int = 1, headers: dict[str, str | None] = NONE) -> str:
    return cred.sign(method, path, body, now, target, headers)[HEADER]


def test_a_signature_verifies_for_its_node_and_carries_the_body_digest():
    sender, receiver = NodeCredential(2, "s3cret"), NodeCredential(1, "s3cret")
    verified = receiver.verify(signed(sender), "POST", PATH, NONE, NOW)
    assert verified.node_id == 2
    assert verified.body_digest == hashlib.sha256(b"body").hexdigest()  # the caller reads and compares


def test_a_signature_addressed_to_another_node_is_refused_there():
    header = signed(NodeCredential(2, "s3cret"), target=1)
    for other in (3, 4):  # the replay: one captured signature worked once on every other node
        with pytest.raises(NodeAuthError, match="addressed to node 1"):
            NodeCredential(other, "s3cret").verify(header, "POST", PATH, NONE, NOW)
    assert NodeCredential(1, "s3cret").verify(header, "POST", PATH, NONE, NOW).node_id == 2


@pytest.mark.parametrize("method, path", [
    ("GET", PATH), ("POST", "/v1/controller/brokers/register"), ("POST", PATH + "?x=1"),
])
def test_any_change_to_the_request_line_fails(method, path):
    header = signed(NodeCredential(2, "s3cret"))
    with pytest.raises(NodeAuthError, match="does not verify"):
        NodeCredential(1, "s3cret").verify(header, method, path, NONE, NOW)


@pytest.mark.parametrize("changed", [
    {FORWARDED_PRINCIPAL_HEADER: "User:admin"},  # the issue's: the principal changed to the super user
    {CLIENT_HOST_HEADER: "127.0.0.1"},
    {FORWARDED_HEADER: None},  # the issue's: the forwarding mark dropped to have the request forwarded again
    {CLIENT_ID_HEADER: "someone-else"},
])
def test_a_changed_or_dropped_trusted_header_fails(changed):
    header = signed(NodeCredential(2, "s3cret"), headers=FORWARDED)
    with pytest.raises(NodeAuthError, match="does not verify"):
        NodeCredential(1, "s3cret").verify(header, "POST", PATH, {**FORWARDED, **changed}, NOW)
    assert NodeCredential(1, "s3cret").verify(header, "POST", PATH, FORWARDED, NOW).node_id == 2


def test_a_trusted_header_added_to_a_signed_request_fails():
    header = signed(NodeCredential(2, "s3cret"))  # the node called as itself
    with pytest.raises(NodeAuthError, match="does not verify"):
        NodeCredential(1, "s3cret").verify(header, "POST", PATH, {**NONE, FORWARDED_PRINCIPAL_HEADER: "User:x"}, NOW)


def test_another_secret_fails():
    with pytest.raises(NodeAuthError, match="does not verify"):
        NodeCredential(1, "s3cret").verify(signed(NodeCredential(2, "guess")), "POST", PATH, NONE, NOW)


def test_a_replay_fails_and_so_does_an_old_or_future_timestamp():
    receiver = NodeCredential(1, "s3cret")
    header = signed(NodeCredential(2, "s3cret"))
    receiver.verify(header, "POST", PATH, NONE, NOW)
    with pytest.raises(NodeAuthError, match="already used"):
        receiver.verify(header, "POST", PATH, NONE, NOW + 1)
    for skew in (WINDOW_MS + 1, -WINDOW_MS - 1):
        with pytest.raises(NodeAuthError, match="window"):
            receiver.verify(signed(NodeCredential(2, "s3cret")), "POST", PATH, NONE, NOW + skew)


def test_a_forged_signature_does_not_use_up_the_nonce_it_names():
    sender, receiver = NodeCredential(2, "s3cret"), NodeCredential(1, "s3cret")
    header = signed(sender)
    forged = header.rsplit(" ", 1)[0] + " " + "0" * 64
    with pytest.raises(NodeAuthError, match="does not verify"):
        receiver.verify(forged, "POST", PATH, NONE, NOW)
    assert receiver.verify(header, "POST", PATH, NONE, NOW).node_id == 2


def test_two_identical_requests_in_the_same_millisecond_both_verify():
    sender, receiver = NodeCredential(2, "s3cret"), NodeCredential(1, "s3cret")
    for _ in range(2):
        receiver.verify(signed(sender), "POST", PATH, NONE, NOW)


def test_version_1_is_refused():
    with pytest.raises(NodeAuthError, match="v1 is no longer accepted"):
        NodeCredential(1, "s3cret").verify(f"v1 2 {NOW} 00 {'0' * 64}", "POST", PATH, NONE, NOW)


@pytest.mark.parametrize("header", [
    "", "v2 2", "v1 1 1 a b", f"v3 2 1 {NOW} n d s", f"v2 x 1 {NOW} n d s", f"v2 2 1 -5 n d s",
    f"v2 2 ¹ {NOW} n d s", f"v2 2 1 {'9' * 5000} n d s",
])
def test_malformed_headers_fail(header):
    with pytest.raises(NodeAuthError):
        NodeCredential(1, "s3cret").verify(header, "GET", "/", NONE, NOW)


def test_the_header_carries_neither_secret_nor_key():
    header = signed(NodeCredential(2, "s3cret"))
    assert "s3cret" not in header


def test_peer_security_sends_what_it_signs_and_refuses_to_sign_other_headers():
    peers = PeerSecurity(NodeCredential(2, "s3cret"))
    trusted = {FORWARDED_PRINCIPAL_HEADER: "User:alice", FORWARDED_HEADER: "2"}
    headers = peers.headers("POST", PATH, b"body", target=1, trusted=trusted)
    assert {k: v for k, v in headers.items() if k != HEADER} == trusted
    received = {name: headers.get(name) for name in SIGNED_HEADERS}
    assert NodeCredential(1, "s3cret").verify(headers[HEADER], "POST", PATH, received, int(
        headers[HEADER].split()[3])).node_id == 2
    with pytest.raises(AssertionError, match="not signed"):
        peers.headers("POST", PATH, b"body", target=1, trusted={"X-Other": "1"})
