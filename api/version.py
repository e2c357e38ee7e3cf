"""The installed kraft's version (the node's `GET /` and every tool's `--version`)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def kraft_version() -> str:
    try:
        return version("kraft")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"
