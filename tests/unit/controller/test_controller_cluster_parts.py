"""The pure parts of the multi-node wiring: voter endpoint announcements in the replicated state,
the controller directory's choice of whom to ask, observer replica state, the broker's metadata
snapshot file, the ControllerChannel's local/remote choice, and the metadata-quorum and
leader-election CLI reports."""

from __future__ import annotations

import asyncio
import pickle
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kraft.api.cli import election_lines, quorum_replication_lines, quorum_status_lines
from kraft.api.errors import KraftError
from kraft.broker.metadata_follower import BrokerSnapshotStore
from kraft.controller.channel import ControllerChannel
from kraft.controller.client import ControllerClient, ControllerDirectory
from kraft.controller.endpoint import ReplicaState
from kraft.controller.handlers import ControllerSettings
from kraft.controller.metadata_loader import MetadataLoader
from kraft.controller.raft_state import MetadataLogState, apply_endpoint
from kraft.metadata.delta import apply_records
from kraft.metadata.image import MetadataImage
from kraft.metadata.records import ClaimController, RegisterBroker, Topic


@given(st.lists(st.tuples(st.one_of(st.integers(-5, 5), st.text(max_size=3), st.none()),
                          st.one_of(st.text(max_size=300), st.integers(), st.none()),
                          st.one_of(st.integers(-10, 70000), st.text(max_size=2), st.booleans()))))
def test_endpoint_announcements_are_deterministic_and_never_raise(announcements: list[tuple[Any, Any, Any]]) -> None:
    a, b = MetadataLogState(), MetadataLogState()
    for node_id, host, port in announcements:
        assert apply_endpoint(a, node_id, host, port) == apply_endpoint(b, node_id, host, port)
    assert a.controller_endpoints == b.controller_endpoints
    for node_id, (host, port) in a.controller_endpoints.items():
        assert isinstance(node_id, int) and node_id >= 0 and host and 0 < port < 65536
    assert pickle.loads(pickle.dumps(a)).controller_endpoints == a.controller_endpoints


def test_a_state_pickled_before_endpoints_existed_accepts_them() -> None:
    state = MetadataLogState()
    del state.controller_endpoints
    assert apply_endpoint(state, 1, "h", 1) and state.controller_endpoints == {1: ("h", 1)}


def test_directory_asks_the_leader_first_then_the_others_then_the_bootstrap() -> None:
    d = ControllerDirectory(bootstrap=[("b", 1), ("h2", 2)])
    assert d.candidates() == [("b", 1), ("h2", 2)]
    d.learn(2, "h2", 2)
    d.learn(1, "h1", 1)
    d.learn_leader({"node_id": 2, "host": "h2", "port": 2})
    assert d.candidates() == [("h2", 2), ("h1", 1), ("b", 1)]
    assert d.leader_json(2) == {"node_id": 2, "host": "h2", "port": 2} and d.leader_json(7) is None
    d.learn_leader({"node_id": 3, "host": "h3", "port": 3})  # a redirect teaches a new address
    assert d.candidates()[0] == ("h3", 3)
    d.learn_leader("garbage")
    assert d.leader_id == 3


def test_replica_state_tracks_fetch_and_caught_up_times() -> None:
    s = ReplicaState()
    s.update(5, 10, now_ms=100)
    assert (s.log_end_offset, s.last_fetch_ms, s.last_caught_up_ms) == (5, 100, -1)
    s.update(10, 10, now_ms=200)
    s.update(10, 12, now_ms=300)
    assert (s.last_fetch_ms, s.last_caught_up_ms) == (300, 200)


def image_with_topics(n: int) -> MetadataImage:
    records = [ClaimController(node_id=1, controller_epoch=1).to_dict(),
               RegisterBroker(broker_id=1, incarnation_id="i", endpoints=(), rack=None,
                              controller_epoch=1).to_dict()]
    records += [Topic(name=f"t{i}", topic_id=f"00000000-0000-4000-8000-{i:012d}", controller_epoch=1).to_dict()
                for i in range(n)]
    return apply_records(MetadataImage.EMPTY, enumerate(records))[1]


def test_broker_snapshot_round_trips_and_a_torn_file_is_ignored(tmp_path) -> None:
    store = BrokerSnapshotStore(tmp_path / "meta")
    assert store.load() is None
    image = image_with_topics(3)
    store.save(image)
    assert store.load() == image
    store.path.write_bytes(store.path.read_bytes()[:-5])
    assert store.load() is None


class FakeLocal:
    def __init__(self, active: bool) -> None:
        self.is_active = active
        self.calls: list[str] = []

    async def delete_topic(self, name: str, *, request_id: str | None = None) -> dict[str, Any]:
        self.calls.append(name)
        return {"name": name}


class FakeClient(ControllerClient):
    def __init__(self, answers: list[Any]) -> None:
        super().__init__(ControllerDirectory())
        self.answers = answers
        self.bodies: list[Any] = []

    async def call(self, method: str, path: str, body: Any = None, params: Any = None, **_: Any) -> Any:
        self.bodies.append(body)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


async def test_channel_uses_the_local_controller_only_while_it_is_active() -> None:
    loader = MetadataLoader()
    local = FakeLocal(active=True)
    client = FakeClient([KraftError("NOT_CONTROLLER", "election"), {"name": "b", "metadata_offset": -1}])
    channel = ControllerChannel(local, client, loader, ControllerSettings(), timeout_s=5)  # type: ignore[arg-type]
    assert await channel.delete_topic("a") == {"name": "a"} and client.bodies == []
    local.is_active = False
    assert (await channel.delete_topic("b"))["name"] == "b"
    # the retry after NOT_CONTROLLER carries the same request id: applied once at most
    assert client.bodies[0]["request_id"] == client.bodies[1]["request_id"] and local.calls == ["a"]


async def test_channel_answers_once_local_metadata_reached_the_commit() -> None:
    loader = MetadataLoader()
    client = FakeClient([{"name": "t", "metadata_offset": 1}])
    channel = ControllerChannel(None, client, loader, ControllerSettings(), timeout_s=5)
    call = asyncio.ensure_future(channel.delete_topic("t"))
    await asyncio.sleep(0.05)  # a window: no answer before the local metadata reaches the commit
    assert not call.done()
    loader.apply_batch(list(enumerate([ClaimController(node_id=1, controller_epoch=1).to_dict(),
                                       {"type": "NoOp", "controller_epoch": 1}])))
    assert (await asyncio.wait_for(call, 1))["name"] == "t"


QUORUM = {
    "cluster_id": "abc", "leader_id": 2, "leader_epoch": 4, "high_watermark": 10, "max_follower_lag": 3,
    "max_follower_lag_time_ms": 120, "current_voters": [1, 2, 3], "current_observers": [4],
    "replication": [
        {"node_id": 2, "log_end_offset": 10, "lag": 0, "last_fetch_timestamp": 5, "last_caught_up_timestamp": 5,
         "status": "Leader"},
        {"node_id": 4, "log_end_offset": 7, "lag": 3, "last_fetch_timestamp": 4, "last_caught_up_timestamp": 1,
         "status": "Observer"},
    ],
}


def test_metadata_quorum_reports_as_kafka_prints_them() -> None:
    assert quorum_status_lines(QUORUM) == [
        "ClusterId:              abc", "LeaderId:               2", "LeaderEpoch:            4",
        "HighWatermark:          10", "MaxFollowerLag:         3", "MaxFollowerLagTimeMs:   120",
        "CurrentVoters:          [1,2,3]", "CurrentObservers:       [4]"]
    assert [line.split() for line in quorum_replication_lines(QUORUM)] == [
        ["NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status"],
        ["2", "10", "0", "5", "5", "Leader"], ["4", "7", "3", "4", "1", "Observer"]]


def test_leader_election_report() -> None:
    lines, failed = election_lines([
        {"topic": "a", "partition": 0, "leader": 1},
        {"topic": "a", "partition": 1, "leader": 2, "error_code": "ELECTION_NOT_NEEDED", "message": "x"},
        {"topic": "b", "partition": 0, "leader": -1, "error_code": "PREFERRED_LEADER_NOT_AVAILABLE", "message": "y"},
    ])
    assert failed and lines == [
        "Successfully completed leader election (PREFERRED) for partitions a-0",
        "Valid replica already elected for partitions a-1",
        "Error completing leader election (PREFERRED) for partitions: b-0: PREFERRED_LEADER_NOT_AVAILABLE: y"]
    assert election_lines([]) == (["No partitions needed a leader election"], False)
