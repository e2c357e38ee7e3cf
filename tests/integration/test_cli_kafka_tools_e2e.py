"""Kafka's tools' flags and output from `kraft` against a real node: kafka-configs,
kafka-get-offsets, kafka-consumer-groups (states, every reset strategy, --export, --all-groups,
--delete-offsets, the dry-run warning), kafka-topics --alter/--describe regex, the console
producer's --sync/--producer.config/parse.headers and the console consumer's --include/
--consumer-property, --version everywhere, one argument order for subcommand groups."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from kraft.api.cli import main
from kraft.api.cli.consumer_groups import DRY_RUN_WARNING
from kraft.api.client import Producer

KRAFT = [sys.executable, "-c", "from kraft.api.cli import main; main()"]


def kraft(node, *args, input=None, check=True, env=None):
    proc = subprocess.run(KRAFT + list(args), input=input, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "KRAFT_BOOTSTRAP_SERVER": node.bootstrap, **(env or {})})
    if check:
        assert proc.returncode == 0, proc.stderr + proc.stdout
    return proc


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def produce(node, topic: str, counts: dict[int, int]) -> None:
    with Producer(node.bootstrap) as p:
        for partition, n in counts.items():
            for i in range(n):
                p.send(topic, value=f"v{i}".encode(), partition=partition).result()


def test_configs_describe_alter_delete(node) -> None:
    t = name("cfg")
    kraft(node, "topics", "--create", "--topic", t, "--config", "retention.ms=60000")
    out = kraft(node, "configs", "--describe", "--entity-type", "topics", "--entity-name", t).stdout
    assert out == (f"Dynamic configs for topic {t} are:\n"
                   "  retention.ms=60000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=60000, "
                   "DEFAULT_CONFIG:log.retention.ms=604800000}\n")
    out = kraft(node, "configs", "--alter", "--topic", t, "--add-config",
                "segment.bytes=1048576,cleanup.policy=[compact,delete]", "--delete-config", "retention.ms").stdout
    assert out == f"Completed updating config for topic {t}.\n"
    out = kraft(node, "configs", "--describe", "--topic", t).stdout.splitlines()
    assert out == [
        f"Dynamic configs for topic {t} are:",
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete, "
        "DEFAULT_CONFIG:log.cleanup.policy=delete}",
        "  segment.bytes=1048576 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:segment.bytes=1048576, "
        "DEFAULT_CONFIG:log.segment.bytes=1073741824}",
    ]
    everything = kraft(node, "configs", "--describe", "--topic", t, "--all").stdout.splitlines()
    assert everything[0] == f"All configs for topic {t} are:"
    assert ("  min.insync.replicas=1 sensitive=false synonyms={DEFAULT_CONFIG:min.insync.replicas=1}"
            in everything)

    from_file = Path(node.data_dir).parent / f"{t}.properties"
    from_file.write_text("# configs to set\nmin.insync.replicas = 1\n")
    kraft(node, "configs", "--alter", "--topic", t, "--add-config-file", str(from_file))
    assert "  min.insync.replicas=1 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:min.insync.replicas=1, " \
           "DEFAULT_CONFIG:min.insync.replicas=1}" in kraft(node, "configs", "--describe", "--topic", t).stdout
    bad = kraft(node, "configs", "--alter", "--topic", t, "--delete-config", "retention.ms", check=False)
    assert bad.returncode == 1 and bad.stderr == "Error: INVALID_CONFIG: Invalid config(s): retention.ms\n"
    missing = kraft(node, "configs", "--describe", "--topic", "no-such-topic").stdout
    assert missing == "The topic 'no-such-topic' doesn't exist and doesn't have dynamic config.\n"


def test_configs_brokers_users_clients(node) -> None:
    assert kraft(node, "configs", "--describe", "--entity-type", "brokers").stdout == (
        "Dynamic configs for broker 1 are:\nDefault configs for brokers in the cluster are:\n")
    assert kraft(node, "configs", "--describe", "--broker", "1").stdout == "Dynamic configs for broker 1 are:\n"
    assert kraft(node, "configs", "--describe", "--entity-type", "brokers", "--entity-default").stdout == (
        "Default configs for brokers in the cluster are:\n")
    refused = kraft(node, "configs", "--alter", "--broker", "1", "--add-config", "log.retention.ms=1", check=False)
    assert refused.returncode == 1 and refused.stderr.startswith("Error: INVALID_REQUEST: dynamic broker configs")
    for flags in (["--user", "alice"], ["--entity-type", "clients", "--entity-name", "app"]):
        assert kraft(node, "configs", "--describe", *flags).stdout == ""  # nothing set yet
    assert kraft(node, "configs", "--alter", "--entity-type", "clients", "--entity-name", "app",
                 "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048").stdout == (
        "Completed updating config for client app.\n")
    assert kraft(node, "configs", "--alter", "--user", "alice", "--add-config", "request_percentage=50").stdout == (
        "Completed updating config for user alice.\n")
    assert kraft(node, "configs", "--alter", "--entity-type", "users", "--entity-default",
                 "--add-config", "producer_byte_rate=4096").returncode == 0
    assert kraft(node, "configs", "--describe", "--entity-type", "clients").stdout == (
        "Quota configs for client-id 'app' are consumer_byte_rate=2048.0, producer_byte_rate=1024.0\n")
    assert kraft(node, "configs", "--describe", "--entity-type", "users").stdout == (
        "Quota configs for the default user-principal are producer_byte_rate=4096.0\n"
        "Quota configs for user-principal 'alice' are request_percentage=50.0\n")
    kraft(node, "configs", "--alter", "--entity-type", "clients", "--entity-name", "app",
          "--delete-config", "consumer_byte_rate")
    assert kraft(node, "configs", "--describe", "--client", "app").stdout == (
        "Quota configs for client-id 'app' are producer_byte_rate=1024.0\n")
    bad = kraft(node, "configs", "--alter", "--client", "app", "--add-config", "producer_byte_rate=-1", check=False)
    assert bad.returncode == 1 and bad.stderr.startswith("Error: INVALID_REQUEST: producer_byte_rate must be a positive number")
    usage = kraft(node, "configs", "--describe", check=False)
    assert usage.returncode == 2 and "--entity-type is required" in usage.stderr


def test_get_offsets(node) -> None:
    t = name("offs")
    kraft(node, "topics", "--create", "--topic", t, "--partitions", "3")
    produce(node, t, {0: 3, 1: 1})
    assert kraft(node, "get-offsets", "--topic", t).stdout == f"{t}:0:3\n{t}:1:1\n{t}:2:0\n"
    assert kraft(node, "get-offsets", "--topic", t, "--time", "-2").stdout == f"{t}:0:0\n{t}:1:0\n{t}:2:0\n"
    assert kraft(node, "get-offsets", "--topic-partitions", f"{t}:1-").stdout == f"{t}:1:1\n{t}:2:0\n"
    assert kraft(node, "get-offsets", "--topic", t, "--partitions", "0,2", "--time", "earliest").stdout == (
        f"{t}:0:0\n{t}:2:0\n")
    # a timestamp past every record: no offset, so no line (Kafka leaves the partition out)
    assert kraft(node, "get-offsets", "--topic", t, "--time", str(2**62)).stdout == ""
    nothing = kraft(node, "get-offsets", "--topic", "no-such-.*", check=False)
    assert nothing.returncode == 1 and "Could not match any topic-partitions" in nothing.stderr
    malformed = kraft(node, "get-offsets", "--topic", t, "--time", "soon", check=False)
    assert malformed.returncode == 2 and "Malformed time argument soon" in malformed.stderr
    # Progress goes to stderr when asked for; stdout stays Kafka's output.
    shown = kraft(node, "get-offsets", "--topic", t, env={"KRAFT_PROGRESS": "1"})
    assert shown.stdout == f"{t}:0:3\n{t}:1:1\n{t}:2:0\n" and "Described topics: 1/1" in shown.stderr


def test_topics_alter_confirms_and_describe_takes_a_regex(node) -> None:
    prefix = name("rx")
    for suffix in ("a", "b"):
        kraft(node, "topics", "--create", "--topic", f"{prefix}-{suffix}")
    out = kraft(node, "topics", "--alter", "--topic", f"{prefix}-a", "--partitions", "2").stdout
    assert out == ("WARNING: If partitions are increased for a topic that has a key, the partition logic or "
                   "ordering of the messages will be affected\nAdding partitions succeeded!\n")
    described = kraft(node, "topics", "--describe", "--topic", f"{prefix}-.*").stdout
    heads = [line.split("\t")[0] for line in described.splitlines() if not line.startswith("\t")]
    assert heads == [f"Topic: {prefix}-a", f"Topic: {prefix}-b"]
    assert "PartitionCount: 2" in described.splitlines()[0]
    none = kraft(node, "topics", "--describe", "--topic", f"{prefix}-z.*", check=False)
    assert none.returncode == 1 and f"Topic '{prefix}-z.*' does not exist as expected" in none.stderr
    assert kraft(node, "topics", "--describe", "--topic", f"{prefix}-z.*", "--if-exists").stdout == ""


def _consume_as_group(node, topic: str, group: str, count: int) -> None:
    kraft(node, "console-consumer", "--topic", topic, "--group", group, "--from-beginning",
          "--max-messages", str(count))


def test_consumer_groups_states_resets_export_delete_offsets(node) -> None:
    t, g = name("grp-t"), name("grp")
    kraft(node, "topics", "--create", "--topic", t, "--partitions", "2")
    produce(node, t, {0: 2, 1: 2})
    _consume_as_group(node, t, g, 4)

    listed = kraft(node, "consumer-groups", "--list", "--state").stdout.splitlines()
    width = max(15, *(len(line.split()[0]) for line in listed[1:])) + 10
    assert listed[0] == f"{'GROUP':<{width}} {'STATE':<20}"
    assert f"{g:<{width}} {'Empty':<20}" in listed
    assert g not in kraft(node, "consumer-groups", "--list", "--state", "Stable").stdout
    assert f"{g:<{width}} {'Empty':<20}" in kraft(node, "consumer-groups", "--list", "--state", "empty").stdout
    bad_state = kraft(node, "consumer-groups", "--list", "--state", "Sleepy", check=False)
    assert bad_state.returncode == 2 and "Invalid state list 'Sleepy'" in bad_state.stderr

    # Neither --dry-run nor --execute: Kafka's warning, and nothing changes.
    dry = kraft(node, "consumer-groups", "--reset-offsets", "--group", g, "--topic", t, "--to-earliest")
    assert dry.stderr == DRY_RUN_WARNING + "\n"
    assert dry.stdout == (f"\n{'GROUP':<30} {'TOPIC':<30} {'PARTITION':<10} {'NEW-OFFSET':<15}\n"
                          f"{g:<30} {t:<30} {'0':<10} {'0':<15}\n{g:<30} {t:<30} {'1':<10} {'0':<15}\n")
    assert kraft(node, "get-offsets", "--topic", t).stdout == f"{t}:0:2\n{t}:1:2\n"
    current = kraft(node, "consumer-groups", "--reset-offsets", "--group", g, "--all-topics", "--to-current",
                    "--dry-run", "--export")
    assert current.stdout == f"{t},0,2\n{t},1,2\n\n" and current.stderr == ""
    shifted = kraft(node, "consumer-groups", "--reset-offsets", "--group", g, "--topic", f"{t}:1",
                    "--shift-by", "-1", "--execute", "--export").stdout
    assert shifted == f"{t},1,1\n\n"
    described = kraft(node, "consumer-groups", "--describe", "--group", g).stdout
    gw, tw = max(15, len(g)), max(15, len(t))  # Kafka's columns: at least 15, else the longest value
    assert described.splitlines()[1:] == [
        f"{'GROUP':<{gw}} {'TOPIC':<{tw}} PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             "
        "CONSUMER-ID     HOST            CLIENT-ID",
        f"{g:<{gw}} {t:<{tw}} 0          2               2               0               -               -               -",
        f"{g:<{gw}} {t:<{tw}} 1          1               2               1               -               -               -"]
    # --by-duration: an hour back reaches before every record, so the log start offset
    by_duration = kraft(node, "consumer-groups", "--reset-offsets", "--all-groups", "--topic", t,
                        "--by-duration", "PT1H", "--dry-run", "--export").stdout
    assert f"{g},{t},0,0\n{g},{t},1,0\n" in by_duration

    deleted = kraft(node, "consumer-groups", "--delete-offsets", "--group", g, "--topic", f"{t}:0").stdout
    assert deleted == (f"Request succeed for deleting offsets with topic {t}:0 group {g}\n\n"
                       f"{'TOPIC':<30} {'PARTITION':<15} {'STATUS':<15}\n"
                       f"{t:<30} {'0':<15} {'Successful':<15}\n")
    described = kraft(node, "consumer-groups", "--describe", "--group", g).stdout
    assert [line.split()[:4] for line in described.splitlines()[2:]] == [[g, t, "1", "1"]]
    unknown = kraft(node, "consumer-groups", "--delete-offsets", "--group", g, "--topic", "no-such-topic:0",
                    check=False)
    assert unknown.returncode == 1
    assert unknown.stdout.splitlines()[-1].split(None, 2) == ["no-such-topic", "0",
                                                              "Error: This server does not host this topic-partition."]

    assert f"\nConsumer group '{g}' has no active members.\n" in kraft(
        node, "consumer-groups", "--describe", "--all-groups").stderr
    assert kraft(node, "consumer-groups", "--delete", "--all-groups").stdout.startswith(
        "Deletion of requested consumer groups (")
    assert g not in kraft(node, "consumer-groups", "--list").stdout.split()


def test_console_producer_sync_config_file_headers_and_consumer_include(node, tmp_path: Path) -> None:
    prefix = name("io")
    for suffix in ("a", "b"):
        kraft(node, "topics", "--create", "--topic", f"{prefix}-{suffix}")
    config = tmp_path / "producer.properties"
    config.write_text(f"bootstrap.servers={node.bootstrap}\nacks=all\nlinger.ms=5\n")
    kraft(node, "console-producer", "--topic", f"{prefix}-a", "--producer.config", str(config), "--sync",
          "--property", "parse.headers=true", "--property", "parse.key=true", "--property", "null.marker=NULL",
          input="h1:v1,h2:v2\tk1\tone\nNULL\tk2\ttwo\n")
    out = kraft(node, "console-consumer", "--topic", f"{prefix}-a", "--from-beginning", "--max-messages", "2",
                "--property", "print.headers=true", "--property", "print.key=true").stdout
    assert out == "h1:v1,h2:v2\tk1\tone\nNO_HEADERS\tk2\ttwo\n"
    bad = kraft(node, "console-producer", "--topic", f"{prefix}-a", "--property", "parse.headers=true",
                input="no-delimiter\n", check=False)
    assert bad.returncode == 1 and "No headers delimiter found on line number 1: 'no-delimiter'" in bad.stderr

    kraft(node, "console-producer", "--topic", f"{prefix}-b", input="three\n")
    got = kraft(node, "console-consumer", "--include", f"{prefix}-.*", "--consumer-property",
                "auto.offset.reset=earliest", "--max-messages", "3")
    assert sorted(got.stdout.splitlines()) == ["one", "three", "two"]
    unknown = kraft(node, "console-consumer", "--include", "x", "--consumer-property", "colour=red", check=False)
    assert unknown.returncode == 2 and "unknown consumer property 'colour'" in unknown.stderr


def _command_paths(group=main, prefix=()):
    for cmd_name, cmd in group.commands.items():
        yield (*prefix, cmd_name)
        if hasattr(cmd, "commands"):
            yield from _command_paths(cmd, (*prefix, cmd_name))


def _bench_paths():
    from kraft.bench import main as bench_main

    return [("kraft-bench",), *(("kraft-bench", name) for name in bench_main.commands)]


NODE = [sys.executable, "-c", "from kraft.main import main; main()"]
BENCH = [sys.executable, "-c", "from kraft.bench import main; main()"]


@pytest.mark.parametrize("path", [(), *_command_paths(), ("kraft-node",), *_bench_paths()],
                         ids=lambda p: " ".join(p) or "kraft")
def test_version_on_every_command(node, path) -> None:
    """`kraft`, each of its subcommands, `kraft-node` and `kraft-bench` (and each of its subcommands)
    print the bare version, as Kafka's tools do, and exit 0."""
    from kraft.api.version import kraft_version

    if path and path[0] == "kraft-node":
        proc = subprocess.run(NODE + ["--version"], capture_output=True, text=True, timeout=60)
    elif path and path[0] == "kraft-bench":
        proc = subprocess.run(BENCH + [*path[1:], "--version"], capture_output=True, text=True, timeout=60)
    else:
        proc = kraft(node, *path, "--version", check=False)
    assert (proc.returncode, proc.stdout) == (0, f"{kraft_version()}\n"), proc.stderr


def test_one_argument_order_for_subcommand_groups(node) -> None:
    for args in (["cluster", "--bootstrap-server", node.bootstrap, "describe"],
                 ["cluster", "describe", "--bootstrap-server", node.bootstrap],
                 ["metadata-quorum", "--bootstrap-server", node.bootstrap, "describe", "--status"],
                 ["metadata-quorum", "describe", "--status", "--bootstrap-server", node.bootstrap]):
        proc = subprocess.run(KRAFT + args, capture_output=True, text=True, timeout=60,
                              env={k: v for k, v in os.environ.items() if k != "KRAFT_BOOTSTRAP_SERVER"})
        assert proc.returncode == 0, (args, proc.stderr)


def test_bench_prints_kafkas_perf_test_summaries(node) -> None:
    import re

    bench = [sys.executable, "-c", "from kraft.bench import main; main()"]
    t = name("perf")
    common = ["--bootstrap-server", node.bootstrap, "--topic", t, "--num-records", "500", "--print-format", "kafka"]
    # The topic exists before the bench starts: its own create-then-produce can race the metadata.
    kraft(node, "topics", "--create", "--topic", t)
    assert kraft(node, "get-offsets", "--topic", t).stdout == f"{t}:0:0\n"
    produced = subprocess.run(bench + ["produce", *common], capture_output=True, text=True, timeout=120)
    assert produced.returncode == 0, produced.stderr
    assert re.fullmatch(r"500 records sent, \d+\.\d{6} records/sec \(\d+\.\d\d MB/sec\), \d+\.\d\d ms avg latency, "
                        r"\d+\.00 ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99\.9th\.\n",
                        produced.stdout), produced.stdout
    consumed = subprocess.run(bench + ["consume", *common], capture_output=True, text=True, timeout=120)
    assert consumed.returncode == 0, consumed.stderr
    header, line = consumed.stdout.splitlines()
    assert header == ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
                      "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}"
    assert re.fullmatch(rf"{stamp}, {stamp}, \d+\.\d{{4}}, \d+\.\d{{4}}, 500, \d+\.\d{{4}}, 0, \d+, \d+\.\d{{4}}, "
                        r"\d+\.\d{4}", line), line


def test_delete_offsets_of_a_subscribed_topic_is_refused(node) -> None:
    from kraft.api.client import Admin, Consumer
    from harness import wait_for

    t, g = name("sub-t"), name("sub")
    kraft(node, "topics", "--create", "--topic", t)
    produce(node, t, {0: 1})
    with Consumer(node.bootstrap, group_id=g, auto_offset_reset="earliest") as consumer:
        consumer.subscribe([t])
        wait_for(lambda: consumer.poll(timeout_ms=200), timeout=30, what="the member's first records")
        consumer.commit()
        refused = kraft(node, "consumer-groups", "--delete-offsets", "--group", g, "--topic", t, check=False)
        members = kraft(node, "consumer-groups", "--describe", "--group", g, "--members").stdout
        state = kraft(node, "consumer-groups", "--describe", "--group", g, "--state").stdout
        with Admin(node.bootstrap) as admin:
            d = admin.describe_group(g)
    (m,) = d["members"]
    widths = [max(15, len(g)), max(15, len(m["member_id"])), max(15, len(m["host"])), max(15, len(m["client_id"]))]
    row = lambda *cells: " ".join(f"{c:<{w}}" for c, w in zip(cells, [*widths, 15])) + " "  # noqa: E731
    assert members == "\n" + row("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS") + "\n" + row(
        g, m["member_id"], m["host"], m["client_id"], "1") + "\n"
    coordinator = f"{d['coordinator']['host']}:{d['coordinator']['port']}  ({d['coordinator']['node_id']})"
    cw = max(25, len(coordinator))
    assert state == (f"\n{'GROUP':<{cw}} {'COORDINATOR (ID)':<25} {'ASSIGNMENT-STRATEGY':<20} {'STATE':<15} #MEMBERS\n"
                     f"{g:<{cw}} {coordinator:<25} {d['assignor']:<20} {'Stable':<15} 1\n")
    assert refused.returncode == 1
    assert refused.stdout == ("\nError: Encounter some partition level error, see the follow-up details:\n\n"
                              f"{'TOPIC':<30} {'PARTITION':<15} {'STATUS':<15}\n"
                              f"{t:<30} {'0':<15} Error: The consumer group is actively subscribed to the topic\n")
