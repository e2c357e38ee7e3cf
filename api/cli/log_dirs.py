"""`kraft log-dirs --describe`: kafka-log-dirs, each broker's log directories and the partitions
they hold, in Kafka's JSON shape."""

from __future__ import annotations

import json

import click

from kraft.api.cli.common import KraftCommand, admin_client, bootstrap_option, parse_broker_list, version_option


@click.command("log-dirs", cls=KraftCommand)
@bootstrap_option
@version_option
@click.option("--describe", is_flag=True, help="Describe the brokers' log directories.")
@click.option("--broker-list", help="Only these brokers, e.g. 1,2,3 (default: all).")
@click.option("--topic-list", help="Only these topics' partitions, e.g. a,b (default: all).")
def log_dirs(bootstrap_server: str, describe: bool, broker_list: str | None, topic_list: str | None) -> None:
    """Describe the log directories of the brokers (kafka-log-dirs)."""
    if not describe:
        raise click.UsageError("give --describe")
    brokers = None if broker_list is None else parse_broker_list(broker_list)
    topics = None if topic_list is None else [t for t in topic_list.split(",") if t]
    click.echo("Querying brokers for log directories information")
    with admin_client(bootstrap_server) as admin:
        described = admin.describe_log_dirs(brokers, topics)
    click.echo(f"Received log directory information from brokers {','.join(map(str, described))}")
    click.echo(json.dumps({"version": 1, "brokers": [
        {"broker": broker, "logDirs": [
            {"logDir": d["log_dir"], "error": d.get("error"), "partitions": [
                {"partition": f"{p['topic']}-{p['partition']}", "size": p["size"], "offsetLag": p["offset_lag"],
                 "isFuture": p.get("is_future", False)} for p in d.get("partitions", [])]}
            for d in dirs]}
        for broker, dirs in described.items()]}, separators=(",", ":")))
