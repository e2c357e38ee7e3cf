"""The `kraft` CLI against a real node: what Kafka's tools print."""

from __future__ import annotations

import subprocess
import sys
import uuid

KRAFT = [sys.executable, "-c", "from kraft.api.cli import main; main()"]


def kraft(node, *args, input=None, check=True):
    proc = subprocess.run(KRAFT + list(args[:1]) + ["--bootstrap-server", node.bootstrap] + list(args[1:]),
                          input=input, capture_output=True, text=True, timeout=60)
    if check:
        assert proc.returncode == 0, proc.stderr + proc.stdout
    return proc


def test_topics_create_list_describe_alter_delete(node):
    t = f"cli-{uuid.uuid4().hex[:8]}"
    out = kraft(node, "topics", "--create", "--topic", t, "--partitions", "3", "--replication-factor", "1",
                "--config", "retention.ms=60000").stdout
    assert f"Created topic {t}." in out
    again = kraft(node, "topics", "--create", "--topic", t, check=False)
    assert again.returncode == 1 and "TOPIC_ALREADY_EXISTS" in again.stderr
    assert kraft(node, "topics", "--create", "--topic", t, "--if-not-exists").returncode == 0
    assert t in kraft(node, "topics", "--list").stdout.split()
    desc = kraft(node, "topics", "--describe", "--topic", t).stdout
    lines = desc.strip().splitlines()
    assert lines[0].startswith(f"Topic: {t}\t") and "PartitionCount: 3" in lines[0] and "retention.ms=60000" in lines[0]
    assert lines[1].strip().split("\t") == [f"Topic: {t}", "Partition: 0", "Leader: 1", "Replicas: 1", "Isr: 1"]
    kraft(node, "topics", "--alter", "--topic", t, "--partitions", "5")
    assert "PartitionCount: 5" in kraft(node, "topics", "--describe", "--topic", t).stdout
    kraft(node, "topics", "--delete", "--topic", t)
    assert t not in kraft(node, "topics", "--list").stdout.split()
    missing = kraft(node, "topics", "--describe", "--topic", t, check=False)
    assert missing.returncode != 0 and "UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr


def test_console_producer_and_consumer(node):
    t = f"console-{uuid.uuid4().hex[:8]}"
    kraft(node, "topics", "--create", "--topic", t)
    kraft(node, "console-producer", "--topic", t, "--property", "parse.key=true", "--property", "key.separator=:",
          input="k1:hello\nk2:world\n")
    out = kraft(node, "console-consumer", "--topic", t, "--from-beginning", "--max-messages", "2",
                "--property", "print.key=true", "--property", "key.separator=|").stdout
    assert out.splitlines() == ["k1|hello", "k2|world"]
    out = kraft(node, "console-consumer", "--topic", t, "--partition", "0", "--offset", "1",
                "--max-messages", "1").stdout
    assert out.splitlines() == ["world"]


def test_cli_usage_errors_exit_2(node):
    proc = kraft(node, "topics", "--create", "--topic", "x", "--partitions", "notanumber", check=False)
    assert proc.returncode == 2
