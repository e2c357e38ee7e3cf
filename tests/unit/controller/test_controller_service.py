"""ControllerService over a FakeQuorum: validation, records, responses, liveness, fencing, retries."""

from __future__ import annotations

import random
from typing import Any

import pytest
from controller_fake_quorum import FakeQuorum

from kraft.controller.errors import NotControllerError
from kraft.controller.handlers import ControllerSettings
from kraft.controller.metadata_loader import MetadataLoader
from kraft.controller.service import ControllerService
from kraft.metadata.errors import MetadataError
from kraft.metadata.partition_change import BrokerState
from kraft.metadata.records import NO_LEADER

KEYS = frozenset({"retention.ms", "cleanup.policy", "min.insync.replicas", "unclean.leader.election.enable"})
SESSION_MS = 9000


def validator(configs: dict[str, str]) -> None:
    if "retention.ms" in configs and not configs["retention.ms"].lstrip("-").isdigit():
        raise ValueError("retention.ms must be a number")


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


class Recorder:
    def __init__(self) -> None:
        self.updates: list[Any] = []

    def on_metadata_update(self, delta, image) -> None:
        self.updates.append((delta, image))


async def started_controller(quorum: FakeQuorum, settings: ControllerSettings, **kwargs: Any) -> ControllerService:
    """An active ControllerService on `quorum` with a test clock and no session task of its own;
    `quorum`, `loader` and `clock` set on it as handles for the tests."""
    loader, clock = MetadataLoader(), Clock()
    service = ControllerService(1, quorum, loader, settings, clock_ms=clock, session_check_interval_ms=3_600_000,
                                **kwargs)
    await service.start()
    service.quorum, service.loader, service.clock = quorum, loader, clock
    return service


@pytest.fixture
async def ctl():
    service = await started_controller(
        FakeQuorum(node_id=1),
        ControllerSettings(num_partitions=3, default_replication_factor=2, topic_config_keys=KEYS,
                           broker_session_timeout_ms=SESSION_MS),
        config_validator=validator, rng=random.Random(7))
    yield service
    await service.close()


async def add_brokers(ctl: ControllerService, ids, racks=None) -> dict[int, int]:
    epochs = {}
    for b in ids:
        r = await ctl.register_broker(b, f"inc-{b}", [{"name": "HTTP", "host": "127.0.0.1", "port": 9000 + b}],
                                      (racks or {}).get(b))
        epochs[b] = r["broker_epoch"]
        assert ctl.image.cluster.broker(b).fenced
        hb = await ctl.broker_heartbeat(b, r["broker_epoch"], ctl.image.offset)
        assert hb == {"broker_id": b, "broker_epoch": r["broker_epoch"], "is_caught_up": True, "is_fenced": False,
                      "should_shutdown": False}
    return epochs


async def error_of(coro) -> str:
    with pytest.raises((MetadataError, NotControllerError)) as e:
        await coro
    return e.value.error_code


async def test_claims_and_is_active(ctl) -> None:
    assert ctl.is_active and ctl.image.controller_id == 1 and ctl.leader_id() == 1
    assert ctl.quorum_state()["controller_epoch"] == 1


async def test_register_gives_epoch_at_record_offset_and_heartbeat_unfences(ctl) -> None:
    r = await ctl.register_broker(5, "inc", [{"name": "HTTP", "host": "h", "port": 1}], "rack-a")
    assert r == {"broker_id": 5, "broker_epoch": ctl.image.offset}
    b = ctl.image.cluster.broker(5)
    assert b.fenced and b.rack == "rack-a" and b.broker_epoch == r["broker_epoch"]
    behind = await ctl.broker_heartbeat(5, r["broker_epoch"], r["broker_epoch"] - 1)
    assert behind["is_fenced"] and not behind["is_caught_up"]
    caught_up = await ctl.broker_heartbeat(5, r["broker_epoch"], r["broker_epoch"])
    assert not caught_up["is_fenced"] and not ctl.image.cluster.broker(5).fenced
    assert await error_of(ctl.broker_heartbeat(5, r["broker_epoch"] - 1, 100)) == "STALE_BROKER_EPOCH"
    assert await error_of(ctl.broker_heartbeat(6, 1, 100)) == "STALE_BROKER_EPOCH"
    assert await error_of(ctl.register_broker(5, "inc", [], None)) == "INVALID_REQUEST"
    assert await error_of(ctl.register_broker(5, "inc", [{"name": "a", "host": "h", "port": 0}])) == "INVALID_REQUEST"


async def test_create_topic_places_replicas_over_unfenced_brokers(ctl) -> None:
    await add_brokers(ctl, [1, 2, 3])
    await ctl.register_broker(4, "inc", [{"name": "HTTP", "host": "h", "port": 1}])  # fenced: never used
    r = await ctl.create_topics("orders", configs={"retention.ms": 1000, "cleanup.policy": "delete"})
    assert r["name"] == "orders" and r["partitions"] == 3 and r["replication_factor"] == 2
    assert r["configs"] == {"retention.ms": "1000", "cleanup.policy": "delete"}
    topic = ctl.image.topic_by_name("orders")
    assert topic.topic_id == r["topic_id"] and len(topic.partitions) == 3
    leaders = set()
    for p in topic.partitions.values():
        assert len(p.replicas) == 2 and set(p.replicas) <= {1, 2, 3} and p.isr == p.replicas
        assert p.leader == p.replicas[0]
        leaders.add(p.leader)
    assert leaders == {1, 2, 3}
    assert dict(ctl.image.topic_configs("orders")) == {"retention.ms": "1000", "cleanup.policy": "delete"}


@pytest.mark.parametrize("kwargs, code", [
    ({"name": "bad/name"}, "INVALID_TOPIC_EXCEPTION"),
    ({"name": "t", "replication_factor": 4}, "INVALID_REPLICATION_FACTOR"),
    ({"name": "t", "replication_factor": 0}, "INVALID_REPLICATION_FACTOR"),
    ({"name": "t", "partitions": 0}, "INVALID_PARTITIONS"),
    ({"name": "t", "partitions": "3"}, "INVALID_PARTITIONS"),
    ({"name": "t", "partitions": 10**9}, "INVALID_PARTITIONS"),
    ({"name": "t", "configs": {"no.such.key": "1"}}, "INVALID_CONFIG"),
    ({"name": "t", "configs": {"retention.ms": "soon"}}, "INVALID_CONFIG"),
    ({"name": "t", "configs": {"retention.ms": None}}, "INVALID_CONFIG"),
])
async def test_create_topic_errors_write_nothing(ctl, kwargs, code) -> None:
    await add_brokers(ctl, [1, 2, 3])
    before = len(ctl.quorum.log)
    assert await error_of(ctl.create_topics(**kwargs)) == code
    assert len(ctl.quorum.log) == before


async def test_topic_exists_and_collisions_and_validate_only(ctl) -> None:
    await add_brokers(ctl, [1, 2])
    r = await ctl.create_topics("a.b", partitions=1, validate_only=True)
    assert r["partitions"] == 1 and ctl.image.topic_by_name("a.b") is None
    await ctl.create_topics("a.b", partitions=1)
    assert await error_of(ctl.create_topics("a.b")) == "TOPIC_ALREADY_EXISTS"
    assert await error_of(ctl.create_topics("a_b")) == "INVALID_TOPIC_EXCEPTION"


async def test_delete_topic(ctl) -> None:
    await add_brokers(ctl, [1, 2])
    created = await ctl.create_topics("t")
    assert await ctl.delete_topic("t") == {"name": "t", "topic_id": created["topic_id"]}
    assert ctl.image.topic_by_name("t") is None
    assert await error_of(ctl.delete_topic("t")) == "UNKNOWN_TOPIC_OR_PARTITION"


async def test_create_partitions(ctl) -> None:
    await add_brokers(ctl, [1, 2, 3])
    await ctl.create_topics("t", partitions=2, replication_factor=3)
    assert await ctl.create_partitions("t", 5) == {"name": "t", "partitions": 5}
    topic = ctl.image.topic_by_name("t")
    assert sorted(topic.partitions) == [0, 1, 2, 3, 4]
    assert all(len(p.replicas) == 3 for p in topic.partitions.values())
    assert await error_of(ctl.create_partitions("t", 5)) == "INVALID_PARTITIONS"
    assert await error_of(ctl.create_partitions("t", 2)) == "INVALID_PARTITIONS"
    assert await error_of(ctl.create_partitions("nope", 9)) == "UNKNOWN_TOPIC_OR_PARTITION"


async def test_alter_configs_set_and_delete(ctl) -> None:
    await add_brokers(ctl, [1, 2])
    await ctl.create_topics("t", configs={"retention.ms": "5"})
    r = await ctl.alter_configs("topic", "t", {"retention.ms": None, "cleanup.policy": "compact"})
    assert r == {"configs": {"cleanup.policy": "compact"}} and dict(ctl.image.topic_configs("t")) == r["configs"]
    assert await error_of(ctl.alter_configs("topic", "t", {"bogus": "1"})) == "INVALID_CONFIG"
    assert await error_of(ctl.alter_configs("topic", "t", {"retention.ms": "x"})) == "INVALID_CONFIG"
    assert await error_of(ctl.alter_configs("topic", "nope", {"retention.ms": "1"})) == "UNKNOWN_TOPIC_OR_PARTITION"
    assert await error_of(ctl.alter_configs("group", "t", {})) == "INVALID_REQUEST"


async def test_session_expiry_fences_and_moves_leadership_then_rejoin(ctl) -> None:
    epochs = await add_brokers(ctl, [1, 2, 3])
    await ctl.create_topics("t", partitions=6, replication_factor=2)
    await ctl.create_topics("solo", partitions=3, replication_factor=1)
    led_by_2 = {(t.name, p) for t in ctl.image.topics.by_id.values() for p, r in t.partitions.items() if r.leader == 2}
    assert led_by_2
    ctl.clock.now += SESSION_MS // 2
    for b in (1, 3):
        await ctl.broker_heartbeat(b, epochs[b], ctl.image.offset)
    assert await ctl.check_sessions() == []
    ctl.clock.now += SESSION_MS // 2 + 1
    assert await ctl.check_sessions() == [2]
    image = ctl.image
    assert image.cluster.broker(2).fenced
    for t in image.topics.by_id.values():
        for p, r in t.partitions.items():
            assert r.leader != 2
            if r.replicas == (2,):
                assert (r.leader, r.isr) == (NO_LEADER, (2,))  # KIP-841: the last ISR member stays
            else:
                assert 2 not in r.isr
    # back: a heartbeat (caught up) unfences it and it leads its leaderless partitions again
    hb = await ctl.broker_heartbeat(2, epochs[2], ctl.image.offset)
    assert not hb["is_fenced"]
    solo = ctl.image.topic_by_name("solo")
    assert all(r.leader == r.replicas[0] for r in solo.partitions.values())


async def test_controlled_shutdown_and_want_fence(ctl) -> None:
    epochs = await add_brokers(ctl, [1, 2])
    await ctl.create_topics("t", partitions=2, replication_factor=2)
    hb = await ctl.broker_heartbeat(1, epochs[1], ctl.image.offset, want_shutdown=True)
    assert hb["is_fenced"] and hb["should_shutdown"]
    assert all(r.leader == 2 and r.isr == (2,) for r in ctl.image.topic_by_name("t").partitions.values())
    hb = await ctl.broker_heartbeat(2, epochs[2], ctl.image.offset, want_fence=True)
    assert hb["is_fenced"] and not hb["should_shutdown"]


async def test_reregistration_moves_leadership_away(ctl) -> None:
    await add_brokers(ctl, [1, 2])
    await ctl.create_topics("t", partitions=2, replication_factor=2)
    r = await ctl.register_broker(1, "new-incarnation", [{"name": "HTTP", "host": "h", "port": 2}])
    b = ctl.image.cluster.broker(1)
    assert b.fenced and b.incarnation_id == "new-incarnation" and b.broker_epoch == r["broker_epoch"]
    assert all(p.leader == 2 and p.isr == (2,) for p in ctl.image.topic_by_name("t").partitions.values())


def members(isr, epochs: dict[int, int]) -> list[BrokerState]:
    """The ISR as a leader names it (KIP-903): every member at its broker epoch."""
    return [BrokerState(b, epochs[b]) for b in isr]


async def test_alter_partition(ctl) -> None:
    epochs = await add_brokers(ctl, [1, 2, 3])
    await ctl.create_topics("t", partitions=1, replication_factor=3)
    p = ctl.image.partition("t", 0)
    leader = p.leader
    follower = next(b for b in p.replicas if b != leader)
    new_isr = [b for b in p.isr if b != follower]
    args = dict(broker_id=leader, broker_epoch=epochs[leader], topic="t", partition=0,
                leader_epoch=p.leader_epoch, partition_epoch=p.partition_epoch)
    r = await ctl.alter_partition(**args, new_isr=members(new_isr, epochs))
    assert r["isr"] == new_isr and r["partition_epoch"] == 1 and r["leader"] == leader and r["leader_epoch"] == 0
    assert ctl.image.partition("t", 0).isr == tuple(new_isr)
    # the same request again is stale now
    assert await error_of(ctl.alter_partition(**args, new_isr=members(new_isr, epochs))) == "INVALID_UPDATE_VERSION"
    args["partition_epoch"] = 1
    full = members(p.isr, epochs)
    assert await error_of(ctl.alter_partition(**{**args, "leader_epoch": 7}, new_isr=full)) == "FENCED_LEADER_EPOCH"
    assert await error_of(ctl.alter_partition(**{**args, "broker_id": follower, "broker_epoch": epochs[follower]},
                                              new_isr=full)) == "NOT_LEADER_OR_FOLLOWER"
    assert await error_of(ctl.alter_partition(**{**args, "broker_epoch": 0}, new_isr=full)) == "STALE_BROKER_EPOCH"
    assert await error_of(ctl.alter_partition(**{**args, "partition": 9}, new_isr=full)) \
        == "UNKNOWN_TOPIC_OR_PARTITION"
    assert await error_of(ctl.alter_partition(**args, new_isr=members([follower], epochs))) == "INVALID_REQUEST"
    assert await error_of(ctl.alter_partition(**args, new_isr=list(p.isr))) == "INVALID_REQUEST"  # no epochs
    r = await ctl.alter_partition(**args, new_isr=full)  # expand back
    assert r["isr"] == list(p.isr) and r["partition_epoch"] == 2


async def test_isr_join_with_a_stale_or_fenced_broker_epoch_is_refused(ctl) -> None:
    """KIP-903: a leader that counted the position of a follower's previous process (it
    restarted after an unclean shutdown, re-registered, and may lack records it had fetched)
    cannot bring it back into the ISR; the same join under the new epoch, once unfenced, can."""
    epochs = await add_brokers(ctl, [1, 2, 3])
    await ctl.create_topics("t", partitions=1, replication_factor=3)
    p = ctl.image.partition("t", 0)
    leader, follower = p.leader, next(b for b in p.replicas if b != p.leader)
    args = dict(broker_id=leader, broker_epoch=epochs[leader], topic="t", partition=0, leader_epoch=p.leader_epoch)
    shrunk = [b for b in p.isr if b != follower]
    await ctl.alter_partition(**args, partition_epoch=0, new_isr=members(shrunk, epochs))
    # the follower restarts: a new process, a new broker epoch, fenced until it heartbeats
    r = await ctl.register_broker(follower, "restarted", [{"name": "HTTP", "host": "127.0.0.1", "port": 9000}])
    old_epoch, new_epoch = epochs[follower], r["broker_epoch"]
    assert new_epoch != old_epoch and ctl.image.partition("t", 0).partition_epoch == 1  # it was not in the ISR
    stale = members(p.isr, {**epochs, follower: old_epoch})
    assert await error_of(ctl.alter_partition(**args, partition_epoch=1, new_isr=stale)) == "INELIGIBLE_REPLICA"
    current = members(p.isr, {**epochs, follower: new_epoch})
    assert await error_of(ctl.alter_partition(**args, partition_epoch=1, new_isr=current)) \
        == "INELIGIBLE_REPLICA"  # the right epoch, but fenced
    await ctl.broker_heartbeat(follower, new_epoch, ctl.image.offset)  # caught up: unfenced
    assert await error_of(ctl.alter_partition(**args, partition_epoch=1, new_isr=stale)) == "INELIGIBLE_REPLICA"
    unknown = members(p.isr, {**epochs, follower: -1})
    assert await error_of(ctl.alter_partition(**args, partition_epoch=1, new_isr=unknown)) == "INELIGIBLE_REPLICA"
    assert ctl.image.partition("t", 0).isr == tuple(shrunk)  # nothing was committed
    r = await ctl.alter_partition(**args, partition_epoch=1, new_isr=current)
    assert sorted(r["isr"]) == sorted(p.isr)


async def test_elect_preferred_leaders(ctl) -> None:
    epochs = await add_brokers(ctl, [1, 2])
    await ctl.create_topics("t", partitions=2, replication_factor=2)
    await ctl.broker_heartbeat(1, epochs[1], ctl.image.offset, want_fence=True)
    await ctl.broker_heartbeat(1, epochs[1], ctl.image.offset)  # unfenced, but out of the ISRs
    image = ctl.image
    needs = sorted(p for p, r in image.topic_by_name("t").partitions.items() if r.preferred_leader == 1)
    res = await ctl.elect_leaders([("t", p) for p in needs] + [("nope", 0)])
    assert all(r["error_code"] == "PREFERRED_LEADER_NOT_AVAILABLE" for r in res["partitions"][:-1])
    assert res["partitions"][-1]["error_code"] == "UNKNOWN_TOPIC_OR_PARTITION"
    for p in needs:  # the leader adds 1 back to the ISR
        reg = ctl.image.partition("t", p)
        await ctl.alter_partition(2, epochs[2], "t", p, reg.leader_epoch, reg.partition_epoch,
                                  members([2, 1], epochs))
    res = await ctl.elect_leaders()
    assert [(r["partition"], r["leader"]) for r in res["partitions"]] == [(p, 1) for p in needs]
    assert all(r.leader == r.preferred_leader for r in ctl.image.topic_by_name("t").partitions.values())
    res = await ctl.elect_leaders([("t", 0)])
    assert res["partitions"][0]["error_code"] == "ELECTION_NOT_NEEDED"


async def test_producer_id_blocks_do_not_overlap(ctl) -> None:
    epochs = await add_brokers(ctl, [1, 2])
    a = await ctl.allocate_producer_ids(1, epochs[1])
    b = await ctl.allocate_producer_ids(2, epochs[2])
    assert a == {"producer_id_start": 0, "producer_id_len": 1000}
    assert b["producer_id_start"] == 1000
    assert await error_of(ctl.allocate_producer_ids(1, 12345)) == "STALE_BROKER_EPOCH"


async def test_retry_after_an_unknown_outcome_is_harmless(ctl) -> None:
    await add_brokers(ctl, [1, 2])
    ctl.quorum.lose_answer_next = TimeoutError("outcome unknown")
    with pytest.raises(TimeoutError):
        await ctl.create_topics("t", request_id="req-1")
    await ctl.loader.caught_up()  # committed: the loader publishes it all the same
    committed = len(ctl.quorum.log)
    assert ctl.image.topic_by_name("t") is not None
    retry = await ctl.create_topics("t", request_id="req-1")
    assert len(ctl.quorum.log) == committed  # nothing written again
    assert retry.get("duplicate") or retry["topic_id"] == ctl.image.topic_by_name("t").topic_id
    # an answered request retried returns the same answer
    first = await ctl.create_partitions("t", 4, request_id="req-2")
    assert await ctl.create_partitions("t", 4, request_id="req-2") == first
    # and a duplicate batch (a quorum retrying by itself) gets no offsets: the log's admission rule
    reg = ctl.image.partition("t", 0)
    await ctl.alter_partition(reg.leader, ctl.image.cluster.broker(reg.leader).broker_epoch, "t", 0,
                              reg.leader_epoch, reg.partition_epoch, [BrokerState(reg.leader)])
    batch = ctl.quorum.proposals[-1]
    before = ctl.image.topic_by_name("t")
    ctl.quorum._append([{"type": "NoOp", "controller_epoch": 1}])
    ctl.quorum._append(batch)
    await ctl.loader.caught_up()
    assert ctl.image.topic_by_name("t") is before and before.partitions[0].partition_epoch == 1


async def test_failure_before_commit_changes_nothing(ctl) -> None:
    await add_brokers(ctl, [1, 2])
    ctl.quorum.fail_next = NotControllerError("lost leadership", 2)
    assert await error_of(ctl.create_topics("t")) == "NOT_CONTROLLER"
    assert ctl.image.topic_by_name("t") is None


async def test_deposed_controller_answers_not_controller(ctl) -> None:
    await add_brokers(ctl, [1, 2])
    ctl.quorum.claim(2)
    await ctl.loader.caught_up()
    assert not ctl.is_active and ctl.leader_id() == 2
    with pytest.raises(NotControllerError) as e:
        await ctl.create_topics("t")
    assert e.value.leader_id == 2
    assert await ctl.check_sessions() == []


async def test_new_controller_gives_brokers_a_fresh_session(ctl) -> None:
    await add_brokers(ctl, [1, 2])
    ctl.quorum.claim(2)
    await ctl.loader.caught_up()
    ctl.clock.now += 10 * SESSION_MS
    ctl.quorum.claim(1)  # back: epoch 3, sessions restart now
    await ctl.loader.caught_up()
    assert await ctl.check_sessions() == []
    ctl.clock.now += SESSION_MS + 1
    assert sorted(await ctl.check_sessions()) == [1, 2]


async def test_publishers_see_local_changes(ctl) -> None:
    recorder = Recorder()
    await add_brokers(ctl, [1, 2])
    ctl.loader.install_publisher(recorder)
    assert recorder.updates and recorder.updates[0][1] is ctl.image  # the current image at once
    await ctl.create_topics("t", partitions=2, replication_factor=2)
    delta, image = recorder.updates[-1]
    assert image is ctl.image
    changes = delta.local_changes(1)
    assert len(changes.leaders) + len(changes.followers) == 2 and changes.topic_ids == {"t": image.topic_by_name("t").topic_id}
