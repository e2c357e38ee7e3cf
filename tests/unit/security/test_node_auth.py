"""The node credential: a signature verifies once, for its own request, within the window."""

from __future__ import annotations

import pytest

from kraft.security.node_auth import HEADER, WINDOW_MS, NodeAuthError, NodeCredential

NOW = 1_700_000_000_000


def signed(cred: NodeCredential, method: str = "POST", path: str = "/v1/controller/alter-partition",
           body: bytes | None = b"body", now: int = NOW) -> str:
    return cred.sign(method, path, body, now)[HEADER]


def test_a_signature_verifies_for_its_node():
    sender, receiver = NodeCredential(2, "s3cret"), NodeCredential(1, "s3cret")
    assert receiver.verify(signed(sender), "POST", "/v1/controller/alter-partition", b"body", NOW).node_id == 2


@pytest.mark.parametrize("method, path, body", [
    ("GET", "/v1/controller/alter-partition", b"body"),
    ("POST", "/v1/controller/brokers/register", b"body"),
    ("POST", "/v1/controller/alter-partition", b"other body"),
    ("POST", "/v1/controller/alter-partition?x=1", b"body"),
])
def test_any_change_to_the_request_fails(method, path, body):
    header = signed(NodeCredential(2, "s3cret"))
    with pytest.raises(NodeAuthError, match="does not verify"):
        NodeCredential(1, "s3cret").verify(header, method, path, body, NOW)


def test_another_secret_fails():
    with pytest.raises(NodeAuthError, match="does not verify"):
        NodeCredential(1, "s3cret").verify(signed(NodeCredential(2, "guess")), "POST",
                                           "/v1/controller/alter-partition", b"body", NOW)


def test_a_replay_fails_and_so_does_an_old_or_future_timestamp():
    receiver = NodeCredential(1, "s3cret")
    header = signed(NodeCredential(2, "s3cret"))
    receiver.verify(header, "POST", "/v1/controller/alter-partition", b"body", NOW)
    with pytest.raises(NodeAuthError, match="already used"):
        receiver.verify(header, "POST", "/v1/controller/alter-partition", b"body", NOW + 1)
    for skew in (WINDOW_MS + 1, -WINDOW_MS - 1):
        with pytest.raises(NodeAuthError, match="window"):
            receiver.verify(signed(NodeCredential(2, "s3cret")), "POST", "/v1/controller/alter-partition",
                            b"body", NOW + skew)


def test_two_identical_requests_in_the_same_millisecond_both_verify():
    sender, receiver = NodeCredential(2, "s3cret"), NodeCredential(1, "s3cret")
    for _ in range(2):
        receiver.verify(signed(sender), "POST", "/v1/controller/alter-partition", b"body", NOW)


@pytest.mark.parametrize("header", ["", "v1 2", "v2 2 1 n sig", "v1 x 1 n sig", "v1 2 -5 n sig"])
def test_malformed_headers_fail(header):
    with pytest.raises(NodeAuthError):
        NodeCredential(1, "s3cret").verify(header, "GET", "/", None, NOW)


def test_the_header_carries_neither_secret_nor_key():
    header = signed(NodeCredential(2, "s3cret"))
    assert "s3cret" not in header
