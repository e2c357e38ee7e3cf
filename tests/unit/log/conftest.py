"""Fixtures for the storage-engine tests: a partition-log factory on tmp_path."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

import pytest

from kraft.log.config import LogConfig
from kraft.log.partition_log import PartitionLog


@pytest.fixture
def open_log(tmp_path: Path) -> Iterator[Callable[..., PartitionLog]]:
    """Opens (or re-opens) the partition log tmp_path/t-0 with LogConfig overrides; closes all
    opened logs at the end."""
    opened: list[PartitionLog] = []

    def factory(now_ms: int = 0, **overrides: object) -> PartitionLog:
        log = PartitionLog.open(tmp_path / "t-0", LogConfig(**overrides), now_ms)
        opened.append(log)
        return log

    yield factory
    for log in opened:
        log.close()
