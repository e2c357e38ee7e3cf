"""Where a restarted node's way back into every ISR goes (issue 26): a 3-node combined cluster,
one topic of 30 partitions (RF 3, min.insync.replicas 2) under acks=all produces; node 3 is
killed with SIGKILL, left out of every ISR, restarted, and the stages of its return are timed
from the exec, from the harness's clock and from the node's own log lines:

    exec -> first log line -> serving (HTTP listener up) -> registered -> RUNNING -> back in every ISR

    python scripts/restart_timeline.py --rounds 3

Prints one line per round and the median of each stage. With `--history FILE` it starts nothing
and reads a `kraft-bench chaos` run instead: for every fault that restarts a node (kill,
torn-write, log-dir) the same stages from the harness's restart (its `heal` event) in the node
log copied next to the history, and the run's time back to full ISR. Wall clock (the node's log has
millisecond UTC timestamps), so the harness and the node line up on one host.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import requests

from kraft.api.client import KraftError, Producer
from kraft.bench.cluster import LocalCluster, poll

TOPIC, PARTITIONS = "timeline", 30
OVERRIDES = {"min.insync.replicas": 2, "replica.lag.time.max.ms": 3000, "replica.fetch.wait.max.ms": 200,
             "broker.session.timeout.ms": 3000, "broker.heartbeat.interval.ms": 300}
STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z ")
# the node's own lines that mark a stage, first match after the exec
MARKS = {"first_log": "", "serving": "serving on", "registered": "registered broker",
         "running": " is RUNNING"}


def _isrs(url: str) -> list[tuple[int, list[int]]]:
    meta = requests.get(f"{url}/v1/metadata", params={"topics": TOPIC}, timeout=3).json()
    return [(p["leader"], p["isr"]) for t in meta["topics"] for p in t["partitions"]]


def _produce(stop: threading.Event, bootstrap: str) -> None:
    with Producer(bootstrap, acks="all", linger_ms=5, delivery_timeout_ms=60_000) as producer:
        n = 0
        while not stop.is_set():
            futures = [producer.send(TOPIC, b"v%d" % (n + i), partition=(n + i) % PARTITIONS) for i in range(30)]
            for future in futures:
                try:
                    future.get(60)
                except KraftError:
                    pass
            n += 30
            stop.wait(0.05)


def _log_marks(log: Path, since: float) -> tuple[dict[str, float], list[str]]:
    """Wall-clock times of the stage lines the node logged at or after `since`, and its
    `held up` lines (the controller or a heartbeat waiting behind the loop)."""
    marks: dict[str, float] = {}
    held: list[str] = []
    for line in log.read_text(errors="replace").splitlines():
        at = _stamp(line)
        if at < since - 0.001:
            continue
        for name, text in MARKS.items():
            if name not in marks and text in line:
                marks[name] = at
        if "held up" in line:
            held.append(line)
    return marks, held


def one_round(cluster: LocalCluster, victim: int) -> dict[str, Any]:
    node, others = cluster.nodes[victim], [n for n in cluster.nodes.values() if n.node_id != victim]
    node.kill()
    poll(lambda: all(victim not in isr for _, isr in _isrs(others[0].url)), 60, 0.05, "the victim out of every ISR")
    exec_at = time.time()
    node.start()
    poll(lambda: node.health().get("broker_state") == "RUNNING", 120, 0.02, "RUNNING")
    running_seen = time.time()
    poll(lambda: all(leader >= 0 and len(isr) == 3 for n in cluster.nodes.values() for leader, isr in _isrs(n.url)),
         120, 0.02, "full ISRs")
    full_at = time.time()
    marks, held = _log_marks(node.data_dir.parent / f"node-{victim}.log", exec_at)
    stages = {name: marks[name] - exec_at for name in MARKS if name in marks}
    stages["running_seen"] = running_seen - exec_at
    stages["full_isr"] = full_at - exec_at
    return {"stages": stages, "held_up": held}


RESTARTS = ("kill", "torn-write", "log-dir")


def chaos_timelines(history: Path) -> None:
    events = [json.loads(line) for line in history.read_text().splitlines() if line.strip()]
    wall_start = next(e["wall_start"] for e in events if e["k"] == "run")
    recovered = {(e["fault"], e["target"], i): e for i, e in enumerate(events) if e["k"] == "recovered"}
    for i, e in enumerate(events):
        if e["k"] != "heal" or e["fault"] not in RESTARTS:
            continue
        restart = wall_start + e["t"]
        back = next((r for (f, t, j), r in recovered.items() if j > i and f == e["fault"] and t == e["target"]), None)
        marks, held = _log_marks(Path(f"{history}.node-{e['target']}.log"), restart)
        stages = {name: marks[name] - restart for name in MARKS if name in marks}
        if back is not None:
            stages["full_isr"] = back["seconds"]
        print(f"{e['fault']} node {e['target']} at t={e['t']:.1f}: " + ", ".join(f"{k} {v:.2f}" for k, v in stages.items()))
        for line in held:
            if _stamp(line) < restart + stages.get("full_isr", 60):
                print("    " + line)


def _stamp(line: str) -> float:
    m = STAMP.match(line)
    return datetime.fromisoformat(m.group(1)).replace(tzinfo=timezone.utc).timestamp() if m else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--history", type=Path, help="a kraft-bench chaos history: read it, start nothing")
    args = parser.parse_args()
    if args.history is not None:
        chaos_timelines(args.history)
        return
    with LocalCluster(3, overrides=OVERRIDES) as cluster:
        requests.post(f"{cluster.nodes[1].url}/v1/topics",
                      json={"name": TOPIC, "partitions": PARTITIONS, "replication_factor": 3}, timeout=30)
        poll(lambda: all(len(isr) == 3 for n in cluster.nodes.values() for _, isr in _isrs(n.url)), 60, 0.05,
             "full ISRs")
        stop = threading.Event()
        producer = threading.Thread(target=_produce, args=(stop, cluster.bootstrap), daemon=True)
        producer.start()
        rows = []
        try:
            for i in range(args.rounds):
                row = one_round(cluster, 3)
                rows.append(row["stages"])
                print(f"round {i + 1}: " + ", ".join(f"{k} {v:.2f}" for k, v in row["stages"].items()), flush=True)
                for line in row["held_up"]:
                    print("    " + line, flush=True)
        finally:
            stop.set()
            producer.join(60)
        names = list(rows[0])
        print("median: " + ", ".join(f"{k} {statistics.median(r[k] for r in rows if k in r):.2f}" for k in names))


if __name__ == "__main__":
    main()
