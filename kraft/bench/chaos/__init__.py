"""`kraft-bench chaos`: replication and metadata under faults on a throwaway local cluster.

Two forms:

- `--rounds N` (the quick run, `kraft.bench.chaos.rounds`): kill -9, SIGSTOP and restart of the
  leader and a follower of one partition, N times;
- `--duration S --faults kill,stop,... --seed N`: the seeded schedule (`schedule`) of faults
  (`faults`, `proxy`) under acks=all producers, group consumers and metadata changes (`workload`),
  then the independent checker (`checker`) over the recorded history. Reports each fault's time
  back to full ISR and the fencings no fault caused (`fencings`). Exits non-zero when an
  acknowledged record, committed offset or topic was lost, a record was duplicated by the
  idempotent producer, reordered, or served then truncated, the cluster did not recover from a
  fault, or a requested fault type could not be injected. `--workload transactional` adds
  transactional producers and a read_committed consumer (`transactional`), and the checker then
  verifies atomicity and isolation (`txn_check`).

`--mode zookeeper` runs the `--duration` form on brokers in ZooKeeper mode (`kraft.zk`), on a
one-server ZooKeeper the run starts on free ports and never faults; the same schedule, workload and
checker, and every fault type applies (the `--rounds` form is KRaft only).
"""

from __future__ import annotations

import json
import os

import click

from kraft.bench.chaos.rounds import run_rounds
from kraft.bench.chaos.run import MODES, WORKLOADS, ChaosOptions, ChaosOutcome, run_chaos
from kraft.bench.chaos.schedule import FAULTS
from kraft.bench.common import main
from kraft.zk.ensemble import zookeeper_available

JSON_KEYS = ("acked", "lost", "lost_quarantined", "quarantined_ranges", "quarantined_records", "duplicated", "duplicated_idempotent", "reordered", "truncated_after_seen",
             "offsets_lost", "metadata_lost", "max_unavailable_s", "p99_unavailable_s", "not_recovered",
             "max_time_to_full_isr_s", "p99_time_to_full_isr_s", "fencings", "fencings_uncaused")
TXN_KEYS = ("txn_committed", "txn_aborted", "txn_unknown", "txn_aborted_visible", "txn_seen_early", "txn_partial",
            "txn_committed_lost", "txn_duplicated")


def outcome_summary(outcome: ChaosOutcome, options: ChaosOptions) -> dict[str, object]:
    findings = outcome.findings.as_dict()
    return {
        "bench": "chaos", "mode": options.mode, "workload": options.workload, "seed": options.seed, "duration_s": options.duration_s,
        "nodes": options.nodes,
        "faults_requested": options.faults, **{k: findings[k] for k in JSON_KEYS},
        **({k: findings[k] for k in TXN_KEYS} if options.workload == "transactional" else {}),
        "faults": findings["faults"], "faults_not_injected": findings["faults_not_injected"],
        "faults_missing": findings["faults_missing"], "recoveries": findings["recoveries"],
        "disk_full_method": outcome.disk_full_method, "skipped": outcome.skipped, "failed_sends": findings["failed"],
        "seen": findings["seen"], "commits": findings["commits"], "unavailable_windows": findings["unavailable_windows"],
        "repeats_left_out": outcome.late, "worker_errors": findings["worker_errors"],
        "examples": findings["examples"], "ok": findings["ok"], "history": os.path.abspath(outcome.history_path),
        "schedule": [e.as_dict() for e in outcome.schedule],
    }


def _print_table(summary: dict[str, object]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table("metric", "value", title="kraft-bench chaos", title_justify="left")
    txn_keys = TXN_KEYS if summary["workload"] == "transactional" else ()
    for key in ("mode", "workload", "seed", "duration_s", "nodes", *JSON_KEYS, *txn_keys, "failed_sends", "seen",
                "commits", "unavailable_windows", "repeats_left_out", "worker_errors", "history"):
        table.add_row(key, str(summary[key]))
    for fault, count in sorted(summary["faults"].items()):  # type: ignore[union-attr]
        table.add_row(f"faults.{fault}", str(count))
    times: dict[str, list[str]] = {}
    for r in summary["recoveries"]:  # type: ignore[union-attr]
        times.setdefault(r["fault"], []).append(f"{r['seconds']:.1f}")
    for fault, seconds in sorted(times.items()):
        table.add_row(f"time_to_full_isr_s.{fault}", ", ".join(seconds))
    if summary["faults_missing"]:
        table.add_row("faults_missing", ", ".join(summary["faults_missing"]))  # type: ignore[arg-type]
    for fault, count in sorted(summary["faults_not_injected"].items()):  # type: ignore[union-attr]
        table.add_row(f"faults_not_injected.{fault}", str(count))
    if summary["disk_full_method"]:
        table.add_row("disk_full_method", str(summary["disk_full_method"]))
    for fault, why in sorted(summary["skipped"].items()):  # type: ignore[union-attr]
        table.add_row(f"skipped.{fault}", why)
    Console(file=click.get_text_stream("stdout"), soft_wrap=True).print(table)


def _faults(_: click.Context, __: click.Parameter, value: str) -> list[str]:
    faults = [f.strip() for f in value.split(",") if f.strip()]
    unknown = sorted(set(faults) - set(FAULTS))
    if unknown:
        raise click.BadParameter(f"unknown {unknown}; choose from {','.join(FAULTS)}")
    return faults


@main.command()
@click.option("--rounds", type=click.IntRange(min=1), default=None,
              help="The quick run: this many kill/stop/restart rounds on one partition (default 3 without --duration).")
@click.option("--duration", type=click.FloatRange(min=10), default=None, help="Seconds of seeded faults under load.")
@click.option("--faults", default=",".join(FAULTS), show_default=True, callback=_faults,
              help="Comma-separated fault types for --duration.")
@click.option("--seed", type=int, default=1, show_default=True, help="Replays the same fault schedule.")
@click.option("--nodes", type=click.IntRange(min=3), default=3, show_default=True)
@click.option("--mode", type=click.Choice(MODES), default="kraft", show_default=True,
              help="The cluster's metadata mode: KRaft, or ZooKeeper mode on a local ZooKeeper the run starts.")
@click.option("--workload", type=click.Choice(WORKLOADS), default="standard", show_default=True,
              help="transactional: also transactional producers committing and aborting across partitions, and a "
                   "read_committed consumer, checked for atomicity and isolation (--duration runs).")
@click.option("--history", "history_path", default=None, help="Where to write the history (JSON lines); "
              "default chaos-history-SEED.jsonl.")
@click.option("--session-timeout-ms", type=click.IntRange(min=100), default=3000, show_default=True,
              help="broker.session.timeout.ms of the cluster (zookeeper.session.timeout.ms in ZooKeeper mode).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, writable=True), help="Write the summary as JSON here.")
def chaos(rounds: int | None, duration: float | None, faults: list[str], seed: int, nodes: int, mode: str,
          workload: str, history_path: str | None, session_timeout_ms: int, json_path: str | None) -> None:
    """Replication and metadata under faults on a local cluster (RF 3, min.insync.replicas 2),
    checked for lost, duplicated, reordered and truncated records, lost offsets and metadata."""
    if duration is None:
        if mode != "kraft":
            raise click.UsageError("--rounds runs in KRaft mode only: use --duration with --mode zookeeper")
        if workload != "standard":
            raise click.UsageError("--workload is for --duration runs: --rounds has its own producer and consumer")
        run_rounds(rounds or 3, session_timeout_ms, json_path)
        return
    if rounds is not None:
        raise click.UsageError("--rounds and --duration are two different runs: pick one")
    if mode == "zookeeper" and not zookeeper_available():
        raise click.ClickException("ZooKeeper mode needs the Debian zookeeper package and java")
    options = ChaosOptions(duration, faults, seed, history_path or f"chaos-history-{seed}.jsonl", nodes,
                           session_timeout_ms, mode=mode, workload=workload)
    outcome = run_chaos(options, lambda line: click.echo(line, err=True))
    summary = outcome_summary(outcome, options)
    _print_table(summary)
    if json_path:
        with open(json_path, "w") as f:
            json.dump(summary, f, indent=2, sort_keys=True)
            f.write("\n")
    if not outcome.findings.ok:
        found = outcome.findings
        if found.faults_missing:
            raise click.ClickException(f"fault types never injected: {', '.join(found.faults_missing)} "
                                       f"({json.dumps(summary['faults_not_injected'])})")
        if found.not_recovered:
            raise click.ClickException(f"the cluster did not recover from {found.not_recovered} faults: "
                                       f"{json.dumps(found.examples.get('not_recovered'))}")
        raise click.ClickException(f"guarantees broken: {json.dumps(summary['examples'])}")
