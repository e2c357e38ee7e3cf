"""Config loading: defaults, layering (flags < file < overrides), file formats, validation."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kraft.broker.replica_manager import ReplicationSettings
from kraft.config import (
    CONFIG_KEYS, ConfigError, load_config, parse_host_port, parse_properties, parse_voters,
    validate_topic_configs,
)


def test_defaults_are_the_embedded_single_node() -> None:
    config = load_config()
    assert config.node_id == 1
    assert config.roles == ("broker", "controller")
    assert config.listener == ("127.0.0.1", 9092)
    assert config.data_dir == Path("./kraft-data")
    assert config.voters == {}
    assert config["num.partitions"] == 1
    assert config["broker.session.timeout.ms"] == 9000
    assert config["offsets.topic.num.partitions"] == 50
    assert config.retention_ms == 168 * 3_600_000


def test_every_default_passes_its_own_validator() -> None:
    for key in CONFIG_KEYS.values():
        assert key.parse(key.default) == key.default, key.name


def test_layers_flags_then_file_then_overrides(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("# a comment\nnum.partitions=3\nlisteners = PLAINTEXT://0.0.0.0:9500\n"
                     "log.retention.hours: 1\n")
    config = load_config(
        {"num.partitions": "2", "node.id": 4}, props, ["num.partitions=7"]
    )
    assert config["num.partitions"] == 7
    assert config.node_id == 4
    assert config.listener == ("0.0.0.0", 9500)
    assert config.retention_ms == 3_600_000


def test_toml_file_with_nested_tables(tmp_path: Path) -> None:
    path = tmp_path / "node.toml"
    path.write_text('"node.id" = 3\n[log]\ndirs = ["/tmp/x"]\n"retention.ms" = 5000\n'
                    '[auto.create.topics]\nenable = false\n')
    config = load_config(config_file=path)
    assert config.node_id == 3
    assert config.data_dir == Path("/tmp/x")
    assert config.retention_ms == 5000
    assert config["auto.create.topics.enable"] is False


def test_retention_precedence_ms_over_minutes_over_hours() -> None:
    assert load_config(overrides=["log.retention.minutes=2"]).retention_ms == 120_000
    config = load_config(overrides=["log.retention.minutes=2", "log.retention.ms=5"])
    assert config.retention_ms == 5
    assert load_config(overrides=["log.retention.hours=-1"]).retention_ms == -1


@pytest.mark.parametrize("override, key", [
    ("no.such.key=1", "no.such.key"),
    ("num.partitions=0", "num.partitions"),
    ("num.partitions=many", "num.partitions"),
    ("process.roles=broker,janitor", "process.roles"),
    ("process.roles=", "process.roles"),
    ("listeners=localhost", "listeners"),
    ("listeners=host:70000", "listeners"),
    ("auto.create.topics.enable=yes", "auto.create.topics.enable"),
    ("log.cleanup.policy=shred", "log.cleanup.policy"),
    ("controller.quorum.voters=1@h:1,1@h:2", "controller.quorum.voters"),
    ("controller.quorum.voters=x@h:1", "controller.quorum.voters"),
    ("log.dirs=/a,/b,/a", "log.dirs"),
    ("metadata.mode=etcd", "metadata.mode"),
    ("log.flush.offset.checkpoint.interval.ms=0", "log.flush.offset.checkpoint.interval.ms"),
    ("log.flush.offset.checkpoint.interval.ms=soon", "log.flush.offset.checkpoint.interval.ms"),
    ("transaction.partition.verification.grace.ms=-1", "transaction.partition.verification.grace.ms"),
    ("transaction.partition.verification.grace.ms=30s", "transaction.partition.verification.grace.ms"),
    ("transaction.partition.verification.grace.ms=2147483648", "transaction.partition.verification.grace.ms"),
])
def test_bad_keys_and_values_name_the_key(override: str, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(overrides=[override])
    assert info.value.key == key
    assert key in str(info.value)


def test_cross_key_rules() -> None:
    with pytest.raises(ConfigError, match="controller.quorum.voters"):
        load_config({"process.roles": "broker"})  # a broker alone must know the quorum
    with pytest.raises(ConfigError, match="controller.quorum.secret"):
        load_config({"controller.quorum.voters": "1@h:1,2@h:2"})
    with pytest.raises(ConfigError, match="not among the voters"):
        load_config({"controller.quorum.voters": "2@h:1", "node.id": 1})
    ok = load_config({"controller.quorum.voters": "1@h:1,2@h:2",
                      "controller.quorum.secret": "s"})
    assert ok.voters == {1: ("h", 1), 2: ("h", 2)}
    assert load_config({"zookeeper.connect": "127.0.0.1:2181/kraft", "controller.quorum.secret": "s"}).zookeeper_mode
    with pytest.raises(ConfigError, match="controller.quorum.secret: required in ZooKeeper mode"):
        load_config({"zookeeper.connect": "127.0.0.1:2181"})
    with pytest.raises(ConfigError, match="needs zookeeper.connect"):
        load_config({"metadata.mode": "zookeeper"})
    for key, value in (("process.roles", "broker"), ("controller.quorum.voters", "1@h:1")):
        with pytest.raises(ConfigError, match=f"{key}: not used in ZooKeeper mode"):
            load_config({"zookeeper.connect": "127.0.0.1:2181", key: value})
    with pytest.raises(ConfigError, match="zookeeper.connect: invalid value"):
        load_config({"zookeeper.connect": "no-port"})
    with pytest.raises(ConfigError, match="authorizer.class.name: ACLs live in the KRaft metadata log"):
        load_config({"zookeeper.connect": "127.0.0.1:2181", "controller.quorum.secret": "s",
                     "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"})
    with pytest.raises(ConfigError, match="authorizer.class.name: invalid value"):
        load_config({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})


def test_unreadable_or_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(config_file=tmp_path / "missing.properties")
    bad = tmp_path / "bad.toml"
    bad.write_text("this is = = not toml")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(config_file=bad)
    words = tmp_path / "words.properties"
    words.write_text("just words\n")  # Java reads `just` = `words` (space separator): an unknown key
    with pytest.raises(ConfigError, match="just: unknown configuration key"):
        load_config(config_file=words)
    with pytest.raises(ConfigError, match="--override"):
        load_config(overrides=["novalue"])


def test_topic_configs() -> None:
    assert validate_topic_configs({"retention.ms": 5, "cleanup.policy": "compact",
                                   "min.insync.replicas": "2",
                                   "unclean.leader.election.enable": True}) == {
        "retention.ms": "5", "cleanup.policy": "compact", "min.insync.replicas": "2",
        "unclean.leader.election.enable": "true"}
    for bad in ({"retention.ms": "soon"}, {"min.insync.replicas": "0"}, {"colour": "red"},
                {"cleanup.policy": "shred"}, {"compression.type": "snappier"}):
        with pytest.raises(ConfigError) as info:
            validate_topic_configs(bad)
        assert info.value.error_code == "INVALID_CONFIG"
        assert list(bad)[0] in str(info.value)


def test_broker_log_config_follows_the_keys() -> None:
    config = load_config(overrides=["log.segment.bytes=1024", "log.cleanup.policy=compact,delete",
                                    "min.insync.replicas=2", "log.roll.ms=60000"])
    log_config = config.log_config()
    assert log_config.segment_bytes == 1024
    assert log_config.compact and log_config.delete
    assert log_config.min_insync_replicas == 2
    assert log_config.segment_ms == 60000


def test_producer_id_expiration_is_a_broker_key() -> None:
    # Kafka's producer.id.expiration.ms (default a day) reaches every partition's producer state
    assert load_config().log_config().producer_id_expiration_ms == 86_400_000
    assert load_config(overrides=["producer.id.expiration.ms=5000"]).log_config().producer_id_expiration_ms == 5000
    for key in ("producer.id.expiration.ms", "transactional.id.expiration.ms"):
        with pytest.raises(ConfigError, match=key):
            load_config(overrides=[f"{key}=0"])


def test_txn_verification_grace_is_a_broker_key() -> None:
    # KIP-890's window in which a new partition leader answers the retriable NOT_ENOUGH_REPLICAS
    assert ReplicationSettings.from_config(load_config()).txn_verification_grace_ms == 30_000
    config = load_config(overrides=["transaction.partition.verification.grace.ms=0"])
    assert ReplicationSettings.from_config(config).txn_verification_grace_ms == 0


def test_broker_compression_type_is_the_topics_default() -> None:
    # Kafka's broker key compression.type (was ignored with a warning as a key kraft had no use for)
    assert load_config().log_config().compression_type == "producer"
    assert load_config(overrides=["compression.type=snappy"]).log_config().target_compression == "snappy"
    with pytest.raises(ConfigError, match="compression.type"):
        load_config(overrides=["compression.type=none"])


@given(st.integers(0, 2**31 - 1), st.integers(0, 65535))
def test_voters_round_trip(node_id: int, port: int) -> None:
    assert parse_voters(f"{node_id}@10.0.0.1:{port}") == {node_id: ("10.0.0.1", port)}
    assert parse_host_port(f"[::1]:{port}") == ("::1", port)


STOCK_4 = Path(__file__).resolve().parents[2] / "fixtures" / "kafka4-kraft-server.properties"
STOCK = Path(__file__).resolve().parents[2] / "fixtures" / "kafka-kraft-server.properties"


def test_properties_syntax_is_java_properties() -> None:
    """Continuations, escapes, `:` and whitespace separators, `!` comments, as java.util.Properties."""
    text = ("! a comment\n"
            "num.partitions : 3\n"
            "broker.rack\tus-east\\\n"
            "    -1a\n"
            "log.dirs=/data/a\\u00e9\n"
            "cluster.id = a\\=b\\:c\n")
    assert parse_properties(text) == {"num.partitions": "3", "broker.rack": "us-east-1a",
                                      "log.dirs": "/data/a\u00e9", "cluster.id": "a=b:c"}


def test_kafka_stock_server_properties_load() -> None:
    """Kafka's shipped KRaft server.properties: every key is accepted; the ones that mean
    nothing here are listed once; listeners, log.dirs and the voters take their meaning."""
    config = load_config(config_file=STOCK)
    assert config.ignored == ("num.io.threads",
                              "num.network.threads", "num.recovery.threads.per.data.dir",
                              "socket.receive.buffer.bytes", "socket.send.buffer.bytes")
    # the stock file's transaction.state.log.* keys (1 and 1 for one broker) are used now
    assert (config["transaction.state.log.replication.factor"], config["transaction.state.log.min.isr"]) == (1, 1)
    assert config.roles == ("broker", "controller") and config.node_id == 1
    assert config.listener == ("0.0.0.0", 9092)
    assert config.advertised_listener == ("localhost", 9092)
    assert parse_host_port(config["controller.listeners"]) == ("0.0.0.0", 9093)
    assert config.voters == {1: ("localhost", 9093)}
    assert config.data_dir == Path("/tmp/kraft-combined-logs")
    assert config["offsets.topic.replication.factor"] == 1 and config["log.retention.hours"] == 168


def test_unknown_key_still_stops_the_node_and_names_it(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text(STOCK.read_text() + "\nnum.netwrok.threads=3\n")
    with pytest.raises(ConfigError, match="num.netwrok.threads: unknown configuration key.*did you mean "
                                          "'num.network.threads'"):
        load_config(config_file=props)
    # the nearest key may be one of kraft's own
    with pytest.raises(ConfigError, match="did you mean 'log.retention.hours'"):
        load_config(overrides=["log.retension.hours=5"])
    with pytest.raises(ConfigError) as nothing_near:
        load_config(overrides=["zzz=1"])
    assert "did you mean" not in str(nothing_near.value)


def test_kafka_4_stock_server_properties_load() -> None:
    """Kafka 4's stock file: its share-group and other Kafka 4 keys are Kafka's, so ignored by name."""
    config = load_config(config_file=STOCK_4)
    assert {"share.coordinator.state.topic.replication.factor", "share.coordinator.state.topic.min.isr",
            "num.network.threads"} <= set(config.ignored)
    assert config.roles == ("broker", "controller") and config.node_id == 1 and config.voters == {}
    assert config.listener == ("0.0.0.0", 9092) and config.advertised_listener == ("localhost", 9092)


@pytest.mark.parametrize("key", ["group.share.enable", "zookeeper.set.acl", "log.message.format.version",
                                 "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config", "compression.zstd.level"])
def test_any_kafka_broker_key_is_accepted_and_named(key: str) -> None:
    """Kafka 4.1's documented keys, 3.9's removed ones, internal ones and per-listener overrides."""
    assert load_config(overrides=[f"{key}=x"]).ignored == (key,)


def test_broker_id_is_node_ids_synonym(tmp_path: Path) -> None:
    assert load_config(overrides=["broker.id=2"]).node_id == 2
    assert load_config(overrides=["broker.id=2", "node.id=2"]).node_id == 2
    with pytest.raises(ConfigError, match=r"broker.id \(2\) and node.id \(1\) disagree"):
        load_config(overrides=["broker.id=2", "node.id=1"])
    with pytest.raises(ConfigError, match="broker.id"):  # Kafka's -1 asks ZooKeeper to generate one
        load_config(overrides=["broker.id=-1"])
    # a ZooKeeper-era server.properties names its broker by broker.id only
    props = tmp_path / "server.properties"
    props.write_text("broker.id=3\nzookeeper.connect=127.0.0.1:2181\nlog.dirs=/tmp/kafka-logs\n"
                     "num.network.threads=3\nzookeeper.connection.timeout.ms=18000\n")
    config = load_config(config_file=props, overrides=["controller.quorum.secret=s"])
    assert config.node_id == 3 and config.zookeeper_mode


def test_controller_listener_must_be_the_nodes_voter_entry() -> None:
    voters = {"controller.quorum.voters": "1@127.0.0.1:19093,2@127.0.0.1:19193", "controller.quorum.secret": "s"}
    with pytest.raises(ConfigError, match=r"controller.listeners: .*127.0.0.1:19094 .*1@127.0.0.1:19093"):
        load_config({**voters, "controller.listeners": "127.0.0.1:19094"})  # a port typo
    with pytest.raises(ConfigError, match=r"controller listener 127.0.0.1:19193 .*1@127.0.0.1:19093"):
        load_config({**voters, "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:19193",
                     "controller.listener.names": "CONTROLLER"})
    with pytest.raises(ConfigError, match="controller listener 127.0.0.2:19093"):
        load_config({**voters, "controller.listeners": "127.0.0.2:19093"})
    # its own entry, a wildcard on its port, or a name of the same address
    for listener in ("127.0.0.1:19093", "0.0.0.0:19093", ":19093", "localhost:19093"):
        assert load_config({**voters, "controller.listeners": listener}).node_id == 1
    # behind a NAT or a proxy: the address it advertises is the voter entry, not the one it binds
    behind = {**voters, "controller.listeners": "127.0.0.1:29093", "controller.advertised.listener": "127.0.0.1:19093"}
    assert load_config(behind).node_id == 1
    assert load_config({**voters, "controller.listener.names": "CONTROLLER",
                        "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:29093",
                        "advertised.listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:19093"}).node_id == 1
    with pytest.raises(ConfigError, match=r"controller.advertised.listener: this node's advertised controller "
                                          r"listener 127.0.0.1:29094 .*1@127.0.0.1:19093"):
        load_config({**behind, "controller.advertised.listener": "127.0.0.1:29094"})


def test_kafka_listener_lists(tmp_path: Path) -> None:
    config = load_config({"listeners": "SSL://127.0.0.1:9443,CONTROLLER://127.0.0.1:9444",
                          "controller.listener.names": "CONTROLLER", "ssl.keystore.location": "node.pem"})
    assert config.listener == ("127.0.0.1", 9443)
    assert config.security_protocol == "SSL"
    assert parse_host_port(config["controller.listeners"]) == ("127.0.0.1", 9444)
    # a second client entry is a Kafka-only listener (tests/unit/kafka/test_kafka_listener_config.py)
    with pytest.raises(ConfigError, match="ssl.keystore.location: required by SSL"):
        load_config({"listeners": "PLAINTEXT://:1,SSL://:2"})
    with pytest.raises(ConfigError, match="listeners: a client listener must be one of"):
        load_config({"listeners": "WEIRD://:1,CONTROLLER://:2", "controller.listener.names": "CONTROLLER"})


def test_security_protocol_of_the_client_listener() -> None:
    assert load_config().security_protocol == "PLAINTEXT"
    assert load_config({"listeners": "CLIENT://127.0.0.1:9093", "listener.security.protocol.map": "CLIENT:SASL_SSL",
                        "ssl.keystore.location": "node.pem"}).security_protocol == "SASL_SSL"
    assert load_config(overrides=["security.protocol=SASL_PLAINTEXT"]).uses_sasl
    with pytest.raises(ConfigError, match="ssl.keystore.location: required by security.protocol=SSL"):
        load_config(overrides=["security.protocol=SSL"])
    with pytest.raises(ConfigError, match="ssl.truststore.location: required by ssl.client.auth=required"):
        load_config(overrides=["security.protocol=SSL", "ssl.keystore.location=n.pem", "ssl.client.auth=required"])
    with pytest.raises(ConfigError, match="ssl.client.auth: needs a TLS listener"):
        load_config(overrides=["ssl.client.auth=required"])
    with pytest.raises(ConfigError, match="inter.broker.listener.name: nodes talk over the client listener"):
        load_config(overrides=["inter.broker.listener.name=INTERNAL"])
    with pytest.raises(ConfigError, match="security.protocol: invalid value"):
        load_config(overrides=["security.protocol=SASL_TLS"])
