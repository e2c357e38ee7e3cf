"""Where the Kafka protocol is served, from Kafka's listener keys: the client port by default,
Kafka-only listeners from `listeners` entries beyond the client one or from `kafka.listen`, their
protocols from their names or listener.security.protocol.map, and the endpoints a broker registers."""

from __future__ import annotations

import pytest

from kraft.config import ConfigError, KafkaListenerSpec, load_config
from kraft.kafka.node_listeners import KafkaListeners


def test_by_default_the_client_port_serves_kafka_as_plaintext() -> None:
    config = load_config()
    assert config.kafka_listeners == [KafkaListenerSpec("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092, shared=True)]
    assert load_config(overrides=["kafka.enable=false"]).kafka_listeners == []


def test_kafka_listeners_from_the_listeners_list() -> None:
    config = load_config({
        "listeners": "CLIENT://127.0.0.1:9092,SASL_PLAINTEXT://0.0.0.0:9094,EXTERNAL://:9095,CONTROLLER://:9093",
        "advertised.listeners": "CLIENT://kraft-1:9092,EXTERNAL://kraft.example:19095",
        "listener.security.protocol.map": "CLIENT:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT",
        "controller.listener.names": "CONTROLLER"})
    assert config.listener == ("127.0.0.1", 9092) and config.advertised_listener == ("kraft-1", 9092)
    assert config.kafka_listeners == [
        KafkaListenerSpec("CLIENT", "PLAINTEXT", "127.0.0.1", 9092, shared=True),
        KafkaListenerSpec("SASL_PLAINTEXT", "SASL_PLAINTEXT", "0.0.0.0", 9094),
        KafkaListenerSpec("EXTERNAL", "SASL_PLAINTEXT", "0.0.0.0", 9095, advertised=("kraft.example", 19095)),
    ]


def test_inter_broker_listener_name_picks_the_http_client_listener() -> None:
    config = load_config({"listeners": "EXTERNAL://:9095,INTERNAL://127.0.0.1:9092",
                          "listener.security.protocol.map": "EXTERNAL:PLAINTEXT,INTERNAL:PLAINTEXT",
                          "inter.broker.listener.name": "INTERNAL"})
    assert config.listener == ("127.0.0.1", 9092)
    assert [(s.name, s.port, s.shared) for s in config.kafka_listeners] == [("INTERNAL", 9092, True),
                                                                           ("EXTERNAL", 9095, False)]


def test_kafka_listen_is_the_shortcut() -> None:
    config = load_config(overrides=["kafka.listen=127.0.0.1:19092,SSL://127.0.0.1:19093",
                                    "ssl.keystore.location=node.pem", "kafka.share.client.port=false"])
    assert config.kafka_listeners == [KafkaListenerSpec("KAFKA", "PLAINTEXT", "127.0.0.1", 19092),
                                      KafkaListenerSpec("SSL", "SSL", "127.0.0.1", 19093)]
    assert not config.uses_tls  # the HTTP client listener stays as it was


@pytest.mark.parametrize("overrides,error", [
    (["kafka.listen=WEIRD://:1"], "kafka.listen: listener WEIRD has no protocol"),
    (["kafka.listen=PLAINTEXT://:1"], "two Kafka listeners are named PLAINTEXT"),
    (["kafka.listen=SSL://:1"], "ssl.keystore.location: required by SSL"),
    (["kafka.share.client.port=false"], "leaves the Kafka protocol no listener"),
    (["kafka.advertised.listen=OTHER://h:1"], "names no Kafka-only listener"),
    (["listeners=127.0.0.1:1,SSL://:2"], "each needs a NAME://"),
])
def test_bad_kafka_listener_configs_are_refused(overrides: list[str], error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        load_config(overrides=overrides)


def test_the_endpoints_a_broker_registers() -> None:
    config = load_config(overrides=["listeners=CLIENT://127.0.0.1:0", "listener.security.protocol.map=CLIENT:PLAINTEXT",
                                    "kafka.listen=SASL_PLAINTEXT://127.0.0.1:0,PUBLIC://127.0.0.1:0",
                                    "listener.security.protocol.map=CLIENT:PLAINTEXT,PUBLIC:SASL_PLAINTEXT",
                                    "kafka.advertised.listen=PUBLIC://kraft.example:9999"])
    listeners = KafkaListeners(config)
    listeners.bind()
    try:
        bound = listeners._sockets["SASL_PLAINTEXT"].getsockname()[1]
        assert listeners.endpoints(("kraft-1", 9092)) == [
            {"name": "CLIENT", "host": "kraft-1", "port": 9092, "security_protocol": "PLAINTEXT"},
            {"name": "SASL_PLAINTEXT", "host": "127.0.0.1", "port": bound, "security_protocol": "SASL_PLAINTEXT"},
            {"name": "PUBLIC", "host": "kraft.example", "port": 9999, "security_protocol": "SASL_PLAINTEXT"},
        ]
    finally:
        listeners.close_sockets()
