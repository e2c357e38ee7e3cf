"""kraft/zk/znodes.py and kraft/zk/image.py: Kafka's znode JSON byte for byte, and the ZooKeeper
controller's pure election rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kraft.zk import znodes
from kraft.zk.image import image_offset, initial_registration, online_change, shutdown_change
from kraft.controller.handlers import ControllerSettings
from kraft.controller.metadata_loader import MetadataLoader
from kraft.metadata.image import PartitionRegistration, TopicImage


def test_cluster_id_and_controller_are_kafkas_json() -> None:
    assert znodes.encode_cluster_id("Ssz8oSmwSsy2DmjTKEDvnA") == b'{"version":"1","id":"Ssz8oSmwSsy2DmjTKEDvnA"}'
    assert znodes.decode_cluster_id(b'{"version":"1","id":"abc"}') == "abc"
    assert znodes.encode_controller(2, 1795460418913) == b'{"version":1,"brokerid":2,"timestamp":"1795460418913"}'
    assert znodes.decode_controller(b'{"version":1,"brokerid":2,"timestamp":"1"}') == 2
    assert znodes.encode_controller_epoch(7) == b"7"
    assert znodes.decode_controller_epoch(b"7") == 7


def test_broker_registration_is_kafkas_version_5() -> None:
    data = znodes.encode_broker("h1", 9092, None, 1795460418895)
    assert data == (b'{"version":5,"host":"h1","port":9092,"endpoints":["PLAINTEXT://h1:9092"],"jmx_port":-1,'
                    b'"timestamp":"1795460418895","listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
                    b'"features":{}}')
    assert b'"rack":"r1"' in znodes.encode_broker("h1", 9092, "r1", 1)
    assert znodes.decode_broker(4, znodes.encode_broker("h1", 9092, "r1")) == znodes.BrokerInfo(4, "h1", 9092, "r1")
    # a Kafka broker's own registration (PLAINTEXT listener) still gives host and port
    kafka = (b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
             b'"endpoints":["PLAINTEXT://k1:9092"],"jmx_port":-1,"port":9092,"host":"k1","version":5,'
             b'"timestamp":"1"}')
    assert znodes.decode_broker(1, kafka) == znodes.BrokerInfo(1, "k1", 9092, None)


@pytest.mark.parametrize("protocol", ["SSL", "SASL_PLAINTEXT", "SASL_SSL"])
def test_broker_registration_names_the_listeners_security_protocol(protocol: str) -> None:
    """As Kafka's BrokerIdZNode: the endpoint is named after the listener (its protocol when
    unnamed), the map gives its protocol, and host/port are the PLAINTEXT endpoint's: null and -1
    without one."""
    data = znodes.encode_broker("h1", 9093, None, 1795460418895, protocol=protocol)
    assert data == (b'{"version":5,"host":null,"port":-1,"endpoints":["' + protocol.encode() + b'://h1:9093"],'
                    b'"jmx_port":-1,"timestamp":"1795460418895","listener_security_protocol_map":{"'
                    + protocol.encode() + b'":"' + protocol.encode() + b'"},"features":{}}')
    assert znodes.decode_broker(2, data) == znodes.BrokerInfo(2, "h1", 9093, None)
    named = json.loads(znodes.encode_broker("h1", 9093, "r1", 1, protocol=protocol, listener="client"))
    assert named["endpoints"] == ["CLIENT://h1:9093"]
    assert named["listener_security_protocol_map"] == {"CLIENT": protocol}
    assert znodes.decode_broker(2, json.dumps(named).encode()) == znodes.BrokerInfo(2, "h1", 9093, "r1")
    # a Kafka broker with several listeners: the first endpoint is the address
    kafka = (b'{"features":{},"listener_security_protocol_map":{"INTERNAL":"SASL_SSL","EXTERNAL":"SSL"},'
             b'"endpoints":["INTERNAL://[::1]:9094","EXTERNAL://k1:9093"],"jmx_port":-1,"port":-1,"host":null,'
             b'"version":5,"timestamp":"1"}')
    assert znodes.decode_broker(1, kafka) == znodes.BrokerInfo(1, "::1", 9094, None)


def test_registration_takes_the_nodes_listener_and_protocol(tmp_path: Path) -> None:
    """ZooKeeper mode registers the node's configured listener, not a fixed PLAINTEXT one."""
    pytest.importorskip("kazoo")
    from kraft.config import load_config
    from kraft.zk.mode import ZkServices

    def registration(*overrides: str) -> tuple[str, str | None]:
        config = load_config(overrides=[f"log.dirs={tmp_path}",
            "zookeeper.connect=127.0.0.1:2181", "controller.quorum.secret=" + "s" * 32, *overrides])
        services = ZkServices(config, MetadataLoader(), ControllerSettings(), None, lambda: "c")
        return services.registration.protocol, services.registration.listener

    assert registration() == ("PLAINTEXT", None)
    assert registration("listeners=CLIENT://127.0.0.1:9092", "listener.security.protocol.map=CLIENT:SASL_PLAINTEXT",
                        "sasl.enabled.mechanisms=PLAIN") == ("SASL_PLAINTEXT", "CLIENT")


def test_topic_partition_state_and_config_are_kafkas_json() -> None:
    topic = znodes.encode_topic("tid", {1: (3, 1, 2), 0: [2, 1, 3]})
    assert topic == (b'{"version":3,"topic_id":"tid","partitions":{"0":[2,1,3],"1":[3,1,2]},'
                     b'"adding_replicas":{},"removing_replicas":{}}')
    decoded = znodes.decode_topic("t", topic)
    assert decoded.topic_id == "tid" and decoded.partitions == {0: (2, 1, 3), 1: (3, 1, 2)}
    state = znodes.PartitionState(leader=2, leader_epoch=4, isr=(2, 1), controller_epoch=3)
    assert znodes.encode_partition_state(state) == (
        b'{"version":1,"leader":2,"leader_epoch":4,"controller_epoch":3,"isr":[2,1]}')
    assert znodes.decode_partition_state("t", 0, znodes.encode_partition_state(state)) == state
    assert znodes.encode_config({"retention.ms": "1000"}) == b'{"version":1,"config":{"retention.ms":"1000"}}'
    assert znodes.encode_config_change("t") == b'{"version":2,"entity_path":"topics/t"}'
    assert znodes.encode_isr_change([("t", 0)]) == b'{"version":1,"partitions":[{"topic":"t","partition":0}]}'
    assert znodes.decode_isr_change("p", b'{"version":1,"partitions":[{"topic":"t","partition":0}]}') == [("t", 0)]
    # Kafka's LogDirEventNotificationSequenceZNode, plus kraft's broker_epoch and partitions
    event = znodes.encode_log_dir_event(3, 77, [("t", 1)])
    assert event == (b'{"version":1,"broker":3,"event":1,"broker_epoch":77,'
                     b'"partitions":[{"topic":"t","partition":1}]}')
    assert znodes.decode_log_dir_event("p", event) == (3, 77, [("t", 1)])
    assert znodes.decode_log_dir_event("p", b'{"version":1,"broker":3,"event":1}') == (3, None, [])  # Kafka's
    assert znodes.encode_producer_id_block(1, 0, 999) == (
        b'{"version":1,"broker":1,"block_start":"0","block_end":"999"}')
    assert znodes.partition_state_path("t", 3) == "/brokers/topics/t/partitions/3/state"


@pytest.mark.parametrize("data", [b"", b"[]", b'{"version":1}', b'{"leader":"x","leader_epoch":0,'
                                  b'"controller_epoch":0,"isr":[]}', b"\xff"])
def test_malformed_znodes_raise_value_error_naming_the_path(data: bytes) -> None:
    with pytest.raises(ValueError, match="/brokers/topics/t/partitions/0/state"):
        znodes.decode_partition_state("t", 0, data)


def test_topic_partitions_must_be_dense() -> None:
    with pytest.raises(ValueError, match="numbered"):
        znodes.decode_topic("t", b'{"version":3,"topic_id":"x","partitions":{"1":[1]}}')


def test_connect_string() -> None:
    assert znodes.split_connect("h1:2181,h2:2181/kraft/a/") == ("h1:2181,h2:2181", "/kraft/a")
    assert znodes.split_connect("h1:2181") == ("h1:2181", "")
    for bad in ("", "h1", "h1:x", "/chroot", "h1:2181,:1"):
        with pytest.raises(ValueError):
            znodes.split_connect(bad)


def test_online_change_moves_leadership_off_dead_brokers() -> None:
    topic = TopicImage("t", "tid")
    reg = PartitionRegistration(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1, leader_epoch=4, partition_epoch=9)
    after = online_change(topic, 0, reg, {2, 3}, unclean_allowed=False)
    assert after is not None and (after.leader, after.isr, after.leader_epoch, after.partition_epoch) == (
        2, (2, 3), 5, 10)
    assert online_change(topic, 0, reg, {1, 2, 3}, unclean_allowed=False) is None
    # the last ISR member stays in the ISR; the partition goes leaderless until it returns
    alone = PartitionRegistration(replicas=(1, 2), isr=(1,), leader=1)
    gone = online_change(topic, 0, alone, {2}, unclean_allowed=False)
    assert gone is not None and (gone.leader, gone.isr) == (-1, (1,))
    back = online_change(topic, 0, gone, {1, 2}, unclean_allowed=False)
    assert back is not None and back.leader == 1
    unclean = online_change(topic, 0, alone, {2}, unclean_allowed=True)
    assert unclean is not None and (unclean.leader, unclean.isr) == (2, (2,))


def test_controlled_shutdown_moves_leadership_and_isr_off_the_leaving_broker() -> None:
    """Kafka's ControlledShutdownPartitionLeaderElectionStrategy: the first live ISR member that
    stays leads, the leaving broker leaves the ISR; as the only in-sync replica (or the only
    replica) it keeps leading; other brokers' partitions follow online_change."""
    topic = TopicImage("t", "tid")
    live = {1, 2, 3}
    led = PartitionRegistration(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1, leader_epoch=4, partition_epoch=9)
    after = shutdown_change(topic, 0, led, live, {1}, unclean_allowed=False)
    assert after is not None and (after.leader, after.isr, after.leader_epoch) == (2, (2, 3), 5)
    # a follower leaves the ISR, the leader stays
    followed = PartitionRegistration(replicas=(2, 1, 3), isr=(2, 1, 3), leader=2, leader_epoch=4)
    after = shutdown_change(topic, 0, followed, live, {1}, unclean_allowed=False)
    assert after is not None and (after.leader, after.isr, after.leader_epoch) == (2, (2, 3), 4)
    # the next leader is a live ISR member that is not leaving too
    after = shutdown_change(topic, 0, led, {1, 3}, {1}, unclean_allowed=False)
    assert after is not None and (after.leader, after.isr) == (3, (3,))
    assert shutdown_change(topic, 0, led, live, {1, 2}, unclean_allowed=False).leader == 3  # type: ignore[union-attr]
    # the only in-sync replica, or the only replica: still led by the leaving broker
    alone = PartitionRegistration(replicas=(1, 2), isr=(1,), leader=1)
    assert shutdown_change(topic, 0, alone, live, {1}, unclean_allowed=False) is None
    single = PartitionRegistration(replicas=(1,), isr=(1,), leader=1)
    assert shutdown_change(topic, 0, single, live, {1}, unclean_allowed=False) is None
    # a partition without the leaving broker: the online rules
    other = PartitionRegistration(replicas=(2, 3), isr=(2, 3), leader=2)
    assert shutdown_change(topic, 0, other, live, {1}, unclean_allowed=False) is None
    moved = shutdown_change(topic, 0, other, {1, 3}, {1}, unclean_allowed=False)
    assert moved is not None and (moved.leader, moved.isr) == (3, (3,))


def test_initial_registration_and_offsets() -> None:
    assert initial_registration((3, 1, 2), {1, 2}) == PartitionRegistration((3, 1, 2), (1, 2), 1)
    assert initial_registration((3,), set()) == PartitionRegistration((3,), (3,), -1)
    assert image_offset(2, 5) > image_offset(1, 10**6)
