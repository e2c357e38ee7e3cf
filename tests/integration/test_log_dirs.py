"""JBOD and log-directory failure (KIP-858, issue 26), with real processes: a broker with two log
directories places new replicas on both; when one fails (EIO through the file layer's
test-only hook, `kraft/log/fault_injection.py`, or ENOSPC through the disk-full hook that does not
heal within `log.dir.full.timeout.ms`) its replicas go offline alone: the broker reports
the directory in its heartbeat and the controller moves their leaderships and ISR memberships to
the other brokers within the session timeout, while the replicas on the other directory stay in
their ISRs. Nothing acknowledged is lost, and once the disk is healed and the broker restarted
the directory's replicas catch up and rejoin."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests

from kraft.api.client import KraftError, Producer
from kraft.log.fault_injection import DISK_FULL_ENV, LOG_DIR_FAILED_ENV
from harness import REPLICATION_OVERRIDES, Cluster, read_values, wait_for

pytestmark = pytest.mark.cluster

TOPIC = "jbod"
PARTITIONS = 8
SESSION_TIMEOUT_S = REPLICATION_OVERRIDES["broker.session.timeout.ms"] / 1000
FULL_TIMEOUT_MS = 1000  # log.dir.full.timeout.ms of the broker whose directory fills up


def produce_until(stop: threading.Event, bootstrap: str, acked: dict[tuple[int, int], str]) -> None:
    with Producer(bootstrap, acks="all", linger_ms=5, delivery_timeout_ms=60_000) as producer:
        n = 0
        while not stop.is_set():
            sent = [(f"v{n + i}", producer.send(TOPIC, b"v%d" % (n + i), partition=(n + i) % PARTITIONS))
                    for i in range(PARTITIONS * 2)]
            for value, future in sent:
                try:
                    meta = future.get(60)
                    acked[(meta.partition, meta.offset)] = value
                except KraftError:
                    pass
            n += len(sent)
            stop.wait(0.05)


def partitions(cluster: Cluster, via: int) -> dict[int, dict]:
    [topic] = [t for t in cluster.metadata(via, TOPIC)["topics"] if t["name"] == TOPIC]
    return {p["partition"]: p for p in topic["partitions"]}


def describe_log_dirs(bootstrap: str) -> list[dict]:
    """Broker 3's log directories as `kraft log-dirs --describe` prints them (Kafka's JSON)."""
    out = subprocess.run([sys.executable, "-m", "kraft.api.cli", "log-dirs", "--describe", "--bootstrap-server",
                          bootstrap, "--broker-list", "3", "--topic-list", TOPIC],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    lines = out.splitlines()
    assert lines[:2] == ["Querying brokers for log directories information",
                         "Received log directory information from brokers 3"], out
    [broker] = json.loads(lines[2])["brokers"]
    return broker["logDirs"]


def placed(directory: Path) -> set[int]:
    return {int(p.name.rpartition("-")[2]) for p in directory.glob(f"{TOPIC}-*") if p.is_dir()}


@pytest.mark.parametrize("failure", ["EIO", "ENOSPC"])
def test_a_failed_log_directory_moves_its_replicas_off_and_rejoins_after_a_restart(tmp_path: Path, failure: str):
    """EIO takes the directory offline at once; ENOSPC once no write there succeeded for
    `log.dir.full.timeout.ms` (a disk that stays full: the replicas used to stay offline in place,
    their leaderships never moving, retried every 2 s for as long as the disk stayed full)."""
    fail_file = tmp_path / "failed-log-dirs"
    with Cluster(tmp_path, 3, combined=True, overrides=REPLICATION_OVERRIDES) as cluster:
        broker = cluster.node(3)
        first, second = broker.data_dir, tmp_path / "data-3-disk2"
        broker.overrides["log.dirs"] = f"{first},{second}"
        broker.overrides["log.dir.full.timeout.ms"] = FULL_TIMEOUT_MS
        broker.env[LOG_DIR_FAILED_ENV if failure == "EIO" else DISK_FULL_ENV] = str(fail_file)
        cluster.start()
        cluster.create_topic(TOPIC, PARTITIONS, 3)
        cluster.wait_full_isr([TOPIC])
        ids = {(d / "meta.properties").read_text().split("directory.id=")[1].split()[0] for d in (first, second)}
        assert len(ids) == 2

        stop, acked = threading.Event(), {}
        producer = threading.Thread(target=produce_until, args=(stop, cluster.node(1).bootstrap, acked))
        producer.start()
        try:
            wait_for(lambda: len(acked) > 200, 60, what="acknowledged writes")
            # (a log's directory is made by its first append) the least-loaded directory by
            # partition count: an even split, every partition once
            on_first, on_second = placed(first), placed(second)
            assert len(on_first) == len(on_second) == PARTITIONS // 2, (on_first, on_second)
            assert on_first | on_second == set(range(PARTITIONS))
            fail_file.write_text(f"{second}\n")
            failed_at = time.monotonic()

            def moved_off() -> bool:
                state = partitions(cluster, 1)
                return all(3 not in state[p]["isr"] and state[p]["leader"] not in (3, -1) for p in on_second)

            wait_for(moved_off, 60, what="leaderships and ISR memberships off the failed directory")
            took = time.monotonic() - failed_at
            state = partitions(cluster, 1)
            assert all(3 in state[p]["isr"] for p in on_first), state  # the other directory serves on
            health = requests.get(f"{broker.url}/v1/health", timeout=5).json()
            assert health["broker_state"] == "RUNNING", health  # the broker itself stays unfenced
            described = describe_log_dirs(cluster.node(1).bootstrap)
            assert [(d["logDir"], d["error"]) for d in described] == [
                (str(first), None), (str(second), "KAFKA_STORAGE_ERROR")], described
            assert {int(p["partition"].rpartition("-")[2]) for p in described[0]["partitions"]} == on_first
            metrics = requests.get(f"{broker.url}/metrics", timeout=5).text
            assert "kafka_log_logmanager_offlinelogdirectorycount 1.0" in metrics
            before = len(acked)
            wait_for(lambda: len(acked) > before + 200, 60, what="writes acknowledged after the failure")
            print(f"\nleaderships and ISR memberships moved off the failed directory in {took:.1f} s "
                  f"(session timeout {SESSION_TIMEOUT_S:g} s)")
            assert took < SESSION_TIMEOUT_S + (FULL_TIMEOUT_MS / 1000 if failure == "ENOSPC" else 0)
            assert f"log directory {second} is offline: OSError: [Errno {5 if failure == 'EIO' else 28}]" \
                in broker.log_path.read_text()

            fail_file.write_text("")  # the disk is replaced (or space freed)
            broker.stop()
            broker.start(wait=False)
            cluster.wait_full_isr([TOPIC], timeout=120)
        finally:
            stop.set()
            producer.join(120)
        assert placed(second) == on_second  # the healed directory's replicas came back there

        end = {p: max([o for (q, o) in acked if q == p], default=-1) + 1 for p in range(PARTITIONS)}
        leaders = partitions(cluster, 1)
        for p in range(PARTITIONS):
            leader = cluster.node(leaders[p]["leader"])
            stored = dict(read_values(leader.url, TOPIC, 0, end[p], partition=p))
            lost = {o: v for (q, o), v in acked.items() if q == p and stored.get(o) != v}
            assert not lost, f"partition {p}: acknowledged records lost: {sorted(lost.items())[:5]}"
