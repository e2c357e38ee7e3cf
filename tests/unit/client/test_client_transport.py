"""Transport helpers: server addresses, error answers, metadata snapshots; failover away from
servers that cannot be reached or never answer (local sockets)."""

from __future__ import annotations

import json
import select
import socket
import threading
import time

import msgpack
import pytest
import requests

from kraft.api.client.cluster import ClusterSnapshot, MetadataCache
from kraft.api.client.transport import NoBrokersAvailable, Transport, error_from_response, parse_address, parse_bootstrap
from kraft.api.client.types import TopicPartition
from kraft.api.errors import KraftError
from client_fake_broker import FakeBroker


def test_addresses() -> None:
    assert parse_address("127.0.0.1:9092") == ("127.0.0.1", 9092)
    assert parse_address(" [::1]:9093 ") == ("::1", 9093)
    assert parse_bootstrap("a:1, b:2,") == [("a", 1), ("b", 2)]
    assert parse_bootstrap(["a:1"]) == [("a", 1)]
    for bad in ("nohost", "h:", ":1", "h:0", "h:70000", "h:x"):
        with pytest.raises(ValueError):
            parse_address(bad)
    with pytest.raises(KraftError) as err:
        Transport("")
    assert err.value.error_code == "INVALID_CONFIG"


def response(status: int, body: bytes, ctype: str) -> requests.Response:
    r = requests.Response()
    r.status_code = status
    r._content = body
    r.headers["Content-Type"] = ctype
    return r


def test_error_answers_become_kraft_errors() -> None:
    body = {"error_code": "NOT_LEADER_OR_FOLLOWER", "message": "moved", "retriable": True,
            "leader": {"node_id": 2, "host": "h", "port": 1}}
    e = error_from_response(response(421, msgpack.packb(body), "application/msgpack"))
    assert e.error_code == "NOT_LEADER_OR_FOLLOWER" and e.retriable and e.extra["leader"]["node_id"] == 2
    e = error_from_response(response(409, json.dumps({"error_code": "TOPIC_ALREADY_EXISTS", "message": "TOPIC_ALREADY_EXISTS: t exists"}).encode(), "application/json"))
    assert str(e) == "TOPIC_ALREADY_EXISTS: t exists"
    e = error_from_response(response(404, b"<html>", "text/html"))
    assert e.error_code == "NOT_FOUND" and "404" in e.message
    assert error_from_response(response(502, b"bad gateway", "text/plain")).error_code == "UNKNOWN_SERVER_ERROR"


def test_snapshot_from_metadata_answer() -> None:
    snap = ClusterSnapshot.from_wire({
        "cluster_id": "c", "controller_id": -1,
        "brokers": [{"node_id": 1, "host": "h1", "port": 1}, {"node_id": 2, "host": "h2", "port": 2, "rack": "r"}],
        "topics": [
            {"name": "t", "topic_id": "x", "internal": False, "partitions": [
                {"partition": 1, "leader": 3, "leader_epoch": 0, "replicas": [3], "isr": [3]},
                {"partition": 0, "leader": 2, "leader_epoch": 5, "replicas": [2, 1], "isr": [2]},
            ]},
            {"name": "other", "partitions": []},
        ],
    }, only=["t"])
    assert snap.controller_id is None and set(snap.topics) == {"t"}
    assert snap.partition_count("t") == 2 and snap.partition_count("other") is None
    assert snap.leader_id(TopicPartition("t", 0)) == 2
    assert snap.leader_id(TopicPartition("t", 1)) is None  # leader 3 is not a known broker
    assert snap.leader_id(TopicPartition("t", 7)) is None
    assert snap.broker_address(2) == ("h2", 2) and snap.brokers[2].rack == "r"
    assert snap.partitions_for("t") == [TopicPartition("t", 0), TopicPartition("t", 1)]


def test_keep_alive_connection_closed_by_the_server_is_replaced() -> None:
    """The server drops idle keep-alive connections; the next request must not fail on one."""
    with FakeBroker() as broker:
        transport = Transport(broker.bootstrap)
        assert transport.request("GET", "/v1/metadata")["brokers"][0]["node_id"] == 1
        [conn] = transport._local.pool.values()
        conn.sock.shutdown(socket.SHUT_WR)  # as a server closing: the socket turns readable
        deadline = time.monotonic() + 5
        while not select.select([conn.sock], [], [], 0.05)[0]:
            assert time.monotonic() < deadline
        assert transport.request("GET", "/v1/metadata")["brokers"][0]["node_id"] == 1
        transport.close()


def test_network_failures_are_retriable_kraft_errors() -> None:
    """A broker that refuses connections (e.g. restarting) is a retriable NETWORK_EXCEPTION; only
    when no server ever answered is it NoBrokersAvailable (not retried: nothing to wait for)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        port = listener.getsockname()[1]
    transport = Transport(f"127.0.0.1:{port}", request_timeout_ms=2000)
    with pytest.raises(KraftError) as err:
        transport.request("GET", "/v1/metadata", address=("127.0.0.1", port))
    assert err.value.error_code == "NETWORK_EXCEPTION" and err.value.retriable
    with pytest.raises(NoBrokersAvailable) as refused:
        transport.request("GET", "/v1/metadata")
    assert refused.value.error_code == "NETWORK_EXCEPTION" and not refused.value.retriable
    assert "connection refused" in str(refused.value)


def test_refusals_after_an_answer_stay_retriable(broker) -> None:
    transport = Transport(broker.bootstrap, request_timeout_ms=2000)
    assert transport.request("GET", "/v1/metadata")["brokers"]
    broker.__exit__()  # the broker goes away (a restart): the client must keep retrying
    transport.close()  # and its keep-alive connection with it
    with pytest.raises(KraftError) as err:
        transport.request("GET", "/v1/metadata")
    assert err.value.error_code == "NETWORK_EXCEPTION" and err.value.retriable
    assert not isinstance(err.value, NoBrokersAvailable)


class SilentServer:
    """Accepts connections and never answers: a SIGSTOPped node as a client sees it."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._held: list[socket.socket] = []
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        while True:
            try:
                self._held.append(self._listener.accept()[0])
            except OSError:
                return

    def __enter__(self) -> SilentServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._listener.close()
        for conn in self._held:
            conn.close()


def test_metadata_fails_over_from_a_server_that_never_answers() -> None:
    with SilentServer() as silent, FakeBroker() as broker:
        transport = Transport(f"{silent.address},{broker.bootstrap}", request_timeout_ms=30_000)
        cache = MetadataCache(transport, metadata_request_timeout_ms=300)
        started = time.monotonic()
        assert list(cache.refresh().brokers) == [1]
        assert time.monotonic() - started < 5  # one metadata timeout, not the request timeout
        assert transport.candidates()[0] == parse_address(broker.bootstrap)
        started = time.monotonic()
        cache.refresh()  # straight to the server that answered
        assert time.monotonic() - started < 0.3
        transport.close()


def test_failover_reaches_brokers_known_from_metadata_only() -> None:
    with SilentServer() as silent, FakeBroker() as broker:
        transport = Transport(silent.address)
        transport.set_known_brokers([parse_address(broker.bootstrap)])
        assert transport.request("GET", "/v1/metadata", timeout_s=0.3)["brokers"][0]["node_id"] == 1
        transport.close()


def test_a_node_that_timed_out_is_asked_last() -> None:
    """A produce to a paused leader times out; the refresh that follows must not wait on it."""
    with SilentServer() as silent, FakeBroker() as broker:
        transport = Transport(f"{silent.address},{broker.bootstrap}")
        with pytest.raises(KraftError) as err:
            transport.request("POST", "/v1/produce", {}, address=parse_address(silent.address), timeout_s=0.3)
        assert err.value.error_code == "REQUEST_TIMED_OUT"
        assert transport.candidates() == [parse_address(broker.bootstrap), parse_address(silent.address)]
        started = time.monotonic()
        assert transport.request("GET", "/v1/metadata", timeout_s=5)["brokers"][0]["node_id"] == 1
        assert time.monotonic() - started < 1
        transport.close()


def test_a_post_that_timed_out_is_not_sent_elsewhere() -> None:
    """It may have been applied by the silent server: repeating it is the caller's decision."""
    with SilentServer() as silent, FakeBroker() as broker:
        transport = Transport(f"{silent.address},{broker.bootstrap}")
        with pytest.raises(KraftError) as err:
            transport.request("POST", "/v1/topics", {"name": "t"}, timeout_s=0.3)
        assert err.value.error_code == "REQUEST_TIMED_OUT"
        assert broker.requests == []
        transport.close()
