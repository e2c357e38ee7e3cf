"""The installed kraft's version (the node's `GET /` and every tool's `--version`)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

import click


def kraft_version() -> str:
    try:
        return version("kraft")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


# Kafka's tools print the bare version (`kafka-topics.sh --version` -> `3.7.0`). Here, not in
# kraft.api.cli.common, so that kraft-node's `--version` does not import the CLI and its client.
version_option = click.version_option(kraft_version(), "--version", message="%(version)s",
                                      help="Print the version and exit.")
