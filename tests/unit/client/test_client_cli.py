"""The `kraft` command: usage errors (exit 2), Kafka-style output, errors as `Error: CODE: ...`."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from kraft.api.cli import LineReader, MessageFormatter, format_topic_description, main
from kraft.api.client import ConsumerRecord, KraftError
from kraft.api.client.types import PartitionInfo, TopicDescription
from client_fake_broker import FakeBroker


def run(*args: str, input: str | None = None):
    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)


@pytest.mark.parametrize("args,fragment", [
    (["topics"], "exactly one of"),
    (["topics", "--create", "--list"], "exactly one of"),
    (["topics", "--create"], "--create needs --topic"),
    (["topics", "--delete"], "--delete needs --topic"),
    (["topics", "--list", "--partitions", "3"], "--partitions applies"),
    (["topics", "--alter", "--topic", "t", "--replication-factor", "2"], "--replication-factor applies"),
    (["topics", "--alter", "--topic", "t"], "--alter needs"),
    (["topics", "--create", "--topic", "t", "--partitions", "0"], "0"),
    (["topics", "--create", "--topic", "t", "--config", "novalue"], "KEY=VALUE"),
    (["topics", "--list", "--if-not-exists"], "--if-not-exists applies"),
    (["topics", "--create", "--topic", "t", "--if-exists"], "--if-exists applies"),
    (["topics", "--list", "--topic", "("], "regular expression"),
    (["topics", "--list", "--bootstrap-server", "nohost"], "host:port"),
    (["console-producer"], "--topic"),
    (["console-producer", "--topic", "t", "--property", "parse.key=maybe"], "true or false"),
    (["console-producer", "--topic", "t", "--producer-property", "nope=1"], "unknown producer property"),
    (["console-producer", "--topic", "t", "--producer-property", "linger.ms=soon"], "integer"),
    (["console-producer", "--topic", "t", "--compression-codec", "brotli"], "brotli"),
    (["console-consumer", "--topic", "t", "--offset", "5"], "--offset needs --partition"),
    (["console-consumer", "--topic", "t", "--partition", "0", "--offset", "5", "--from-beginning"], "cannot be used together"),
    (["console-consumer", "--topic", "t", "--partition", "0", "--offset", "-3"], "non-negative"),
    (["console-consumer", "--topic", "t", "--property", "print.colour=true"], "unknown formatter"),
    (["console-consumer", "--topic", "t", "--group", "g", "--partition", "0"], "--group cannot be used with"),
    (["cluster", "explode"], "No such command"),
])
def test_usage_errors_exit_2(args: list[str], fragment: str) -> None:
    result = run(*args)
    assert result.exit_code == 2, result.output
    assert fragment in result.output


def test_describe_format_is_kafkas() -> None:
    d = TopicDescription("t", "abc", False, (
        PartitionInfo(0, 1, 0, (1, 2, 3), (1, 2)),
        PartitionInfo(1, None, 3, (2, 3, 1), ()),
    ), {"retention.ms": "1000", "cleanup.policy": "compact"})
    assert format_topic_description(d) == [
        "Topic: t\tTopicId: abc\tPartitionCount: 2\tReplicationFactor: 3\tConfigs: cleanup.policy=compact,retention.ms=1000",
        "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2",
        "\tTopic: t\tPartition: 1\tLeader: none\tReplicas: 2,3,1\tIsr: ",
    ]


def test_formatter_and_reader() -> None:
    r = ConsumerRecord("t", 2, 7, 123, b"k", None, (("h", b"v"),))
    assert MessageFormatter().format(r) == "null\n"
    full = MessageFormatter.from_properties({p: "true" for p in MessageFormatter._BOOLS} | {"key.separator": "|"})
    assert full.format(r) == "CreateTime:123|Partition:2|Offset:7|h:v|k|null\n"
    reader = LineReader.from_properties({"parse.key": "true", "key.separator": ":"})
    assert reader.parse("a:b:c", 1) == ("a", "b:c")
    with pytest.raises(KraftError) as err:
        reader.parse("nokey", 4)
    assert err.value.error_code == "INVALID_RECORD" and "line number 4" in err.value.message


def test_topics_commands(broker: FakeBroker) -> None:
    bs = ["--bootstrap-server", broker.bootstrap]
    created = run("topics", "--create", "--topic", "orders", "--partitions", "2", "--config", "retention.ms=5", *bs)
    assert created.exit_code == 0 and created.output == "Created topic orders.\n"
    again = run("topics", "--create", "--topic", "orders", *bs)
    assert again.exit_code == 1
    assert again.output.startswith("Error: TOPIC_ALREADY_EXISTS: ")
    assert run("topics", "--create", "--topic", "orders", "--if-not-exists", *bs).exit_code == 0
    run("topics", "--create", "--topic", "other", *bs)
    assert run("topics", "--list", *bs).output == "orders\nother\n"
    assert run("topics", "--list", "--topic", "ord.*", *bs).output == "orders\n"
    described = run("topics", "--describe", "--topic", "orders", *bs).output.splitlines()
    assert described[0].startswith("Topic: orders\tTopicId: ") and described[0].endswith("PartitionCount: 2\tReplicationFactor: 1\tConfigs: retention.ms=5")
    assert described[1:] == [
        "\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1",
        "\tTopic: orders\tPartition: 1\tLeader: 1\tReplicas: 1\tIsr: 1",
    ]
    assert len(run("topics", "--describe", *bs).output.splitlines()) == 5
    assert run("topics", "--alter", "--topic", "orders", "--partitions", "4", "--delete-config", "retention.ms", *bs).exit_code == 0
    assert broker.topics["orders"]["partitions"] == 4 and broker.topics["orders"]["configs"] == {}
    assert run("topics", "--delete", "--topic", "orders", *bs).exit_code == 0
    missing = run("topics", "--describe", "--topic", "orders", *bs)
    assert missing.exit_code == 1 and missing.output.startswith("Error: UNKNOWN_TOPIC_OR_PARTITION: ")
    assert run("topics", "--delete", "--topic", "orders", "--if-exists", *bs).exit_code == 0


def test_console_round_trip(broker: FakeBroker) -> None:
    bs = ["--bootstrap-server", broker.bootstrap]
    broker.create_topic("lines", 1)
    produced = run("console-producer", "--topic", "lines", "--property", "parse.key=true", "--property", "key.separator=:",
                   "--request-required-acks", "1", *bs, input="a:one\nb:two\nc:three\n")
    assert produced.exit_code == 0, produced.output
    consumed = run("console-consumer", "--topic", "lines", "--from-beginning", "--max-messages", "2",
                   "--property", "print.key=true", "--property", "print.offset=true", *bs)
    assert consumed.exit_code == 0
    assert consumed.stdout == "Offset:0\ta\tone\nOffset:1\tb\ttwo\n"
    assert "Processed a total of 2 messages" in consumed.stderr
    tail = run("console-consumer", "--topic", "lines", "--partition", "0", "--offset", "2", "--timeout-ms", "300", *bs)
    assert tail.exit_code == 0 and tail.stdout == "three\n"
    bad = run("console-producer", "--topic", "lines", "--property", "parse.key=true", *bs, input="no separator\n")
    assert bad.exit_code == 1 and "Error: INVALID_RECORD: " in bad.output


def test_cluster_describe(broker: FakeBroker) -> None:
    result = run("cluster", "describe", "--bootstrap-server", broker.bootstrap)
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[:2] == ["Cluster ID: fake-cluster", "Controller: 1"]
    assert any(line.split() == ["1", "127.0.0.1", str(broker.port)] for line in lines)


def test_unreachable_cluster_reports_network_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    from kraft.api.cli import common

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setattr(common, "CLI_API_TIMEOUT_MS", 200)
    result = run("topics", "--list", "--bootstrap-server", f"127.0.0.1:{port}")
    assert result.exit_code == 1 and result.output.startswith("Error: NETWORK_EXCEPTION: ")


def test_broker_list_is_bootstrap_servers_deprecated_synonym(broker: FakeBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kafka's console producer and get-offsets took --broker-list; it still names the brokers
    (above KRAFT_BOOTSTRAP_SERVER), with the deprecation warning, and --bootstrap-server wins."""
    broker.create_topic("legacy", 1)
    monkeypatch.setenv("KRAFT_BOOTSTRAP_SERVER", "127.0.0.1:1")  # nothing listens there
    produced = run("console-producer", "--topic", "legacy", "--broker-list", broker.bootstrap, input="a\nb\n")
    assert produced.exit_code == 0, produced.output
    assert produced.stderr == "Option --broker-list is deprecated, use --bootstrap-server instead.\n"
    offsets = run("get-offsets", "--topic", "legacy", "--broker-list", broker.bootstrap)
    assert offsets.exit_code == 0, offsets.output
    assert offsets.stdout == "legacy:0:2\n" and "--broker-list is deprecated" in offsets.stderr
    ignored = run("get-offsets", "--topic", "legacy", "--bootstrap-server", broker.bootstrap,
                  "--broker-list", "127.0.0.1:1")
    assert ignored.exit_code == 0 and ignored.stdout == "legacy:0:2\n", ignored.output
    assert run("get-offsets", "--broker-list", "nohost").exit_code == 2  # checked as --bootstrap-server is
