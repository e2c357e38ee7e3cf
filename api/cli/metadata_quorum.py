"""`kraft metadata-quorum describe`: kafka-metadata-quorum (--status, --replication)."""

from __future__ import annotations

from typing import Any

import click

from kraft.api.cli.common import (
    KraftCommand,
    KraftGroup,
    admin_client,
    format_table,
    group_bootstrap_option,
    subcommand_bootstrap_option,
    version_option,
)


def zookeeper_mode(q: dict[str, Any]) -> bool:
    return q.get("metadata_mode") == "zookeeper"


def quorum_status_lines(q: dict[str, Any]) -> list[str]:
    """kafka-metadata-quorum describe --status. A cluster in ZooKeeper mode has no quorum: the
    first line says so, LeaderId is the controller (the holder of /controller) and LeaderEpoch
    the controller epoch."""
    fields: list[tuple[str, Any]] = []
    if zookeeper_mode(q):
        fields.append(("MetadataMode", "ZooKeeper (no Raft metadata quorum: the controller is elected in "
                                       f"ZooKeeper {q.get('zookeeper_connect') or ''})".replace(" )", ")")))
    fields += [
        ("ClusterId", q["cluster_id"]), ("LeaderId", q["leader_id"]), ("LeaderEpoch", q["leader_epoch"]),
        ("HighWatermark", q["high_watermark"]), ("MaxFollowerLag", q["max_follower_lag"]),
        ("MaxFollowerLagTimeMs", q["max_follower_lag_time_ms"]),
        ("CurrentVoters", "[" + ",".join(map(str, q["current_voters"])) + "]"),
        ("CurrentObservers", "[" + ",".join(map(str, q["current_observers"])) + "]"),
    ]
    return [f"{name + ':':<24}{value}" for name, value in fields]


def quorum_replication_lines(q: dict[str, Any]) -> list[str]:
    """kafka-metadata-quorum describe --replication."""
    if zookeeper_mode(q):
        return ["MetadataMode: ZooKeeper: there is no Raft metadata quorum to replicate (the metadata is in "
                f"ZooKeeper {q.get('zookeeper_connect') or ''})".replace(" )", ")")]
    rows = [[r["node_id"], r["log_end_offset"], r["lag"], r["last_fetch_timestamp"],
             r["last_caught_up_timestamp"], r["status"]] for r in q["replication"]]
    return format_table(["NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp",
                         "Status"], rows)


@click.group("metadata-quorum", cls=KraftGroup)
@group_bootstrap_option
@version_option
def metadata_quorum(bootstrap_server: str | None) -> None:
    """The controller quorum (kafka-metadata-quorum)."""


@metadata_quorum.command("describe", cls=KraftCommand)
@subcommand_bootstrap_option
@version_option
@click.option("--status", is_flag=True, help="Leader, epoch, high watermark, lag, voters and observers.")
@click.option("--replication", is_flag=True, help="Per node: log end offset, lag, fetch times, status.")
def metadata_quorum_describe(bootstrap_server: str, status: bool, replication: bool) -> None:
    """Describe the metadata quorum: --status or --replication."""
    if status == replication:
        raise click.UsageError("give exactly one of --status and --replication")
    with admin_client(bootstrap_server) as admin:
        q = admin.describe_quorum()
    click.echo("\n".join(quorum_status_lines(q) if status else quorum_replication_lines(q)))

