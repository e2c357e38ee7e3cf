"""Kafka's ZooKeeper layout (`kafka.zk.ZkData`): the znode paths and their JSON, field for field.

Pure: encoders return the bytes Kafka writes (compact JSON, Kafka's key order), decoders parse
them back into plain values and raise `ValueError` naming the znode when the data is malformed.
A Kafka operator's `zkCli.sh get /brokers/topics/t/partitions/0/state` reads the same here.

A broker registers its one client listener as Kafka does: named as in `listeners`
(`CLIENT://host:port`) or, unnamed, after its security protocol (`PLAINTEXT`, `SSL`,
`SASL_PLAINTEXT`, `SASL_SSL`), mapped to that protocol in `listener_security_protocol_map`. One
difference from Kafka, on purpose: topic ids keep kraft's own form (the one clients see in KRaft
mode too).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
CONFIG_TOPICS = "/config/topics"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
DELETE_TOPICS = "/admin/delete_topics"
ISR_CHANGE = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
LOG_DIR_EVENT = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
LOG_DIR_FAILURE = 1  # Kafka's LogDirEventNotificationHandler.LogDirFailureEventType

# Kafka's ZkData.PersistentZkPaths: created at startup so watches can be set on them
PERSISTENT_PATHS = (BROKER_IDS, TOPICS, CONFIG_CHANGES, CONFIG_TOPICS, DELETE_TOPICS, ISR_CHANGE, LOG_DIR_EVENT)

LISTENER = "HTTP"  # the name of a broker's endpoint in the metadata image (as KRaft mode registers it)
SECURITY_PROTOCOL = "PLAINTEXT"
PRODUCER_ID_BLOCK_SIZE = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def now_ms() -> int:
    return int(time.time() * 1000)


def _encode(value: Mapping[str, Any]) -> bytes:
    # Kafka's Json.encodeAsBytes (Jackson): compact, no spaces
    return json.dumps(value, separators=(",", ":")).encode("utf-8")


def _decode(data: bytes | None, what: str) -> dict[str, Any]:
    try:
        value = json.loads((data or b"").decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{what}: not JSON ({e})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{what}: expected a JSON object, got {type(value).__name__}")
    return value


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"{what}: expected an integer, got {value!r}")
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{what}: expected an integer, got {value!r}") from None


def _int_list(value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise ValueError(f"{what}: expected a list, got {value!r}")
    return tuple(_int(v, what) for v in value)


# -- /cluster/id ----------------------------------------------------------------------------------


def encode_cluster_id(cluster_id: str) -> bytes:
    return _encode({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes | None) -> str:
    value = _decode(data, CLUSTER_ID)
    cluster_id = value.get("id")
    if not isinstance(cluster_id, str) or not cluster_id:
        raise ValueError(f"{CLUSTER_ID}: no id in {value!r}")
    return cluster_id


# -- /controller, /controller_epoch ---------------------------------------------------------------


def encode_controller(broker_id: int, timestamp_ms: int | None = None) -> bytes:
    return _encode({"version": 1, "brokerid": broker_id,
                    "timestamp": str(now_ms() if timestamp_ms is None else timestamp_ms)})


def decode_controller(data: bytes | None) -> int:
    return _int(_decode(data, CONTROLLER).get("brokerid"), f"{CONTROLLER}.brokerid")


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes | None) -> int:
    return _int((data or b"").decode("ascii", "replace").strip(), CONTROLLER_EPOCH)


# -- /brokers/ids/<id> ----------------------------------------------------------------------------


@dataclass(frozen=True)
class BrokerInfo:
    broker_id: int
    host: str
    port: int
    rack: str | None = None


def encode_broker(host: str, port: int, rack: str | None, timestamp_ms: int | None = None, *,
                  protocol: str = SECURITY_PROTOCOL, listener: str | None = None) -> bytes:
    """Kafka's BrokerIdZNode.encode at version 5: the endpoint `LISTENER://host:port` (the
    listener named after its security protocol unless `listener` names it), the listener's
    protocol in `listener_security_protocol_map`, and the legacy `host`/`port` those of the
    PLAINTEXT endpoint (null and -1 without one, as Kafka writes them); rack only when set."""
    name = (listener or protocol).upper()
    plaintext = protocol == "PLAINTEXT"
    value: dict[str, Any] = {
        "version": 5, "host": host if plaintext else None, "port": port if plaintext else -1,
        "endpoints": [f"{name}://{host}:{port}"],
        "jmx_port": -1, "timestamp": str(now_ms() if timestamp_ms is None else timestamp_ms),
    }
    if rack is not None:
        value["rack"] = rack
    value["listener_security_protocol_map"] = {name: protocol}
    value["features"] = {}
    return _encode(value)


def decode_broker(broker_id: int, data: bytes | None) -> BrokerInfo:
    """The broker's address: its first endpoint (a kraft broker registers one, whatever its
    protocol), else the legacy host and port."""
    what = broker_path(broker_id)
    value = _decode(data, what)
    for endpoint in value.get("endpoints") or ():
        # NAME://host:port, host possibly [v6]
        name, sep, address = str(endpoint).partition("://")
        host, colon, port = address.rpartition(":")
        if sep and colon and host:
            return BrokerInfo(broker_id, host.strip("[]"), _int(port, f"{what}.endpoints"), value.get("rack"))
    host, port = value.get("host"), value.get("port")
    if not isinstance(host, str) or not host:
        raise ValueError(f"{what}: no endpoint in {value!r}")
    return BrokerInfo(broker_id, host, _int(port, f"{what}.port"), value.get("rack"))


# -- /brokers/topics/<t> --------------------------------------------------------------------------


@dataclass(frozen=True)
class TopicAssignment:
    topic_id: str
    partitions: Mapping[int, tuple[int, ...]]  # partition -> replicas
    adding_replicas: Mapping[int, tuple[int, ...]]
    removing_replicas: Mapping[int, tuple[int, ...]]


def _assignment_json(assignment: Mapping[int, Iterable[int]]) -> dict[str, list[int]]:
    return {str(p): list(replicas) for p, replicas in sorted(assignment.items())}


def encode_topic(topic_id: str, partitions: Mapping[int, Iterable[int]],
                 adding_replicas: Mapping[int, Iterable[int]] | None = None,
                 removing_replicas: Mapping[int, Iterable[int]] | None = None) -> bytes:
    """Kafka's TopicZNode.encode at version 3."""
    return _encode({
        "version": 3, "topic_id": topic_id, "partitions": _assignment_json(partitions),
        "adding_replicas": _assignment_json(adding_replicas or {}),
        "removing_replicas": _assignment_json(removing_replicas or {}),
    })


def decode_topic(topic: str, data: bytes | None) -> TopicAssignment:
    what = topic_path(topic)
    value = _decode(data, what)
    topic_id = value.get("topic_id")
    if not isinstance(topic_id, str) or not topic_id:
        raise ValueError(f"{what}: no topic_id in {value!r}")

    def assignment(key: str) -> dict[int, tuple[int, ...]]:
        raw = value.get(key) or {}
        if not isinstance(raw, dict):
            raise ValueError(f"{what}.{key}: expected an object, got {raw!r}")
        return {_int(p, f"{what}.{key}"): _int_list(r, f"{what}.{key}.{p}") for p, r in raw.items()}

    partitions = assignment("partitions")
    if sorted(partitions) != list(range(len(partitions))):
        raise ValueError(f"{what}: partitions must be numbered 0..n-1, got {sorted(partitions)}")
    return TopicAssignment(topic_id, partitions, assignment("adding_replicas"), assignment("removing_replicas"))


# -- /brokers/topics/<t>/partitions/<p>/state -----------------------------------------------------


@dataclass(frozen=True)
class PartitionState:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int


def encode_partition_state(state: PartitionState) -> bytes:
    """Kafka's TopicPartitionStateZNode.encode."""
    return _encode({"version": 1, "leader": state.leader, "leader_epoch": state.leader_epoch,
                    "controller_epoch": state.controller_epoch, "isr": list(state.isr)})


def decode_partition_state(topic: str, partition: int, data: bytes | None) -> PartitionState:
    what = partition_state_path(topic, partition)
    value = _decode(data, what)
    return PartitionState(
        leader=_int(value.get("leader"), f"{what}.leader"),
        leader_epoch=_int(value.get("leader_epoch"), f"{what}.leader_epoch"),
        isr=_int_list(value.get("isr"), f"{what}.isr"),
        controller_epoch=_int(value.get("controller_epoch"), f"{what}.controller_epoch"),
    )


# -- /config/topics/<t>, /config/changes ----------------------------------------------------------


def encode_config(config: Mapping[str, str]) -> bytes:
    return _encode({"version": 1, "config": dict(sorted(config.items()))})


def decode_config(path: str, data: bytes | None) -> dict[str, str]:
    config = _decode(data, path).get("config") or {}
    if not isinstance(config, dict):
        raise ValueError(f"{path}.config: expected an object, got {config!r}")
    return {str(k): str(v) for k, v in config.items()}


def encode_config_change(topic: str) -> bytes:
    """Kafka's ConfigEntityChangeNotificationSequenceZNode at version 2."""
    return _encode({"version": 2, "entity_path": f"topics/{topic}"})


def decode_config_change(path: str, data: bytes | None) -> str | None:
    """The topic a config change notification names (None: another entity type)."""
    entity = _decode(data, path).get("entity_path")
    if not isinstance(entity, str):
        raise ValueError(f"{path}: no entity_path")
    kind, _, name = entity.partition("/")
    return name if kind == "topics" and name else None


# -- /isr_change_notification ---------------------------------------------------------------------


def encode_isr_change(partitions: Iterable[tuple[str, int]]) -> bytes:
    return _encode({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})


def decode_isr_change(path: str, data: bytes | None) -> list[tuple[str, int]]:
    entries = _decode(data, path).get("partitions")
    if not isinstance(entries, list):
        raise ValueError(f"{path}: no partitions list")
    out = []
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("topic"), str):
            raise ValueError(f"{path}: bad entry {entry!r}")
        out.append((entry["topic"], _int(entry.get("partition"), f"{path}.partition")))
    return out


# -- /log_dir_event_notification ------------------------------------------------------------------


def encode_log_dir_event(broker_id: int, broker_epoch: int, partitions: Iterable[tuple[str, int]]) -> bytes:
    """Kafka's LogDirEventNotificationSequenceZNode, `{"version":1,"broker":N,"event":1}`, plus
    kraft's `broker_epoch` and `partitions`: the replicas in the broker's offline directories
    (Kafka's controller learns them from the broker's answers to a LeaderAndIsr it sends)."""
    return _encode({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE, "broker_epoch": broker_epoch,
                    "partitions": [{"topic": t, "partition": p} for t, p in partitions]})


def decode_log_dir_event(path: str, data: bytes | None) -> tuple[int, int | None, list[tuple[str, int]]]:
    """(broker, broker epoch or None, partitions: empty from a Kafka broker) of a failure event."""
    body = _decode(data, path)
    epoch = body.get("broker_epoch")
    return (_int(body.get("broker"), f"{path}.broker"), None if epoch is None else _int(epoch, f"{path}.broker_epoch"),
            decode_isr_change(path, data) if body.get("partitions") else [])


# -- /latest_producer_id_block --------------------------------------------------------------------


def encode_producer_id_block(broker_id: int, block_start: int, block_end: int) -> bytes:
    """Kafka's ProducerIdBlockZNode: start and end (inclusive) as strings."""
    return _encode({"version": 1, "broker": broker_id, "block_start": str(block_start),
                    "block_end": str(block_end)})


def decode_producer_id_block(data: bytes | None) -> tuple[int, int]:
    value = _decode(data, PRODUCER_ID_BLOCK)
    return (_int(value.get("block_start"), f"{PRODUCER_ID_BLOCK}.block_start"),
            _int(value.get("block_end"), f"{PRODUCER_ID_BLOCK}.block_end"))


# -- the connect string ---------------------------------------------------------------------------


def split_connect(connect: str) -> tuple[str, str]:
    """`HOST:PORT[,HOST:PORT...][/chroot]` -> (hosts, chroot or "")."""
    hosts, slash, chroot = connect.strip().partition("/")
    if not hosts:
        raise ValueError(f"expected HOST:PORT[,HOST:PORT...][/chroot], got {connect!r}")
    for entry in hosts.split(","):
        host, colon, port = entry.strip().rpartition(":")
        if not colon or not host or not port.isdigit() or not 0 < int(port) <= 65535:
            raise ValueError(f"expected HOST:PORT[,HOST:PORT...][/chroot], got {connect!r}")
    chroot = ("/" + chroot.strip("/")) if slash and chroot.strip("/") else ""
    return hosts, chroot
