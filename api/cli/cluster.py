"""`kraft cluster describe`: the cluster id, active controller and brokers."""

from __future__ import annotations

import click

from kraft.api.cli.common import (
    KraftCommand,
    KraftGroup,
    admin_client,
    group_bootstrap_option,
    subcommand_bootstrap_option,
    version_option,
)


@click.group(cls=KraftGroup)
@group_bootstrap_option
@version_option
def cluster(bootstrap_server: str | None) -> None:
    """Cluster-wide information."""


@cluster.command("describe", cls=KraftCommand)
@subcommand_bootstrap_option
@version_option
def cluster_describe(bootstrap_server: str) -> None:
    """Cluster id, active controller and brokers."""
    from rich.console import Console
    from rich.table import Table

    with admin_client(bootstrap_server) as admin:
        d = admin.describe_cluster()
    click.echo(f"Cluster ID: {d.cluster_id}")
    click.echo(f"Controller: {'none' if d.controller_id is None else d.controller_id}")
    table = Table("ID", "HOST", "PORT", "RACK", title="Brokers", box=None, title_justify="left")
    for b in d.brokers:
        table.add_row(str(b.node_id), b.host, str(b.port), b.rack or "")
    Console(file=click.get_text_stream("stdout"), soft_wrap=True).print(table)

