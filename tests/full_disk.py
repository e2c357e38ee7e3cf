"""A full disk for tests, two ways.

- `tiny_tmpfs(dir)`: a real size-limited filesystem (a tmpfs mount; needs root and a kernel that
  lets us mount): writes past its size fail with ENOSPC exactly as on a full data disk. A test
  using it is skipped where mounting is impossible;
- `DiskBudget`: ENOSPC injected at the file layer, so the same behaviour is tested on every
  machine: a write past the budget writes what fits, then fails with ENOSPC, as a filesystem
  running out mid-write does.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest


@contextmanager
def tiny_tmpfs(directory: Path, size: str = "4m") -> Iterator[Path]:
    """`directory` as the mount point of a tmpfs of `size`; unmounted (lazily: a process may still
    hold files there) at the end."""
    directory.mkdir(parents=True, exist_ok=True)
    if shutil.which("mount") is None:
        pytest.skip("no mount command here")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], capture_output=True)


def fill(directory: Path) -> Path:
    """Writes `directory/filler` until its filesystem is full (ENOSPC); the filler's path. Delete
    it to free the space."""
    filler = directory / "filler"
    with open(filler, "ab", buffering=0) as f:
        for chunk in (1 << 16, 512, 1):  # big writes first, then whatever is left of the last page
            try:
                while True:
                    f.write(b"\0" * chunk)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
    return filler


def enospc() -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


class DiskBudget:
    """The space a fake disk has left: None is unlimited; `free = 0` fills it."""

    def __init__(self) -> None:
        self.free: int | None = None

    def take(self, wanted: int) -> int:
        """How many of `wanted` bytes may be written now; raises ENOSPC when none."""
        if self.free is None:
            return wanted
        if self.free == 0:
            raise enospc()
        granted = min(wanted, self.free)
        self.free -= granted
        return granted

    def patch_raft_journal(self, monkeypatch: Any) -> None:
        """Every write of the Raft journal and its meta file draws on this budget."""
        from kraft.controller import raft_journal

        write = raft_journal._write_all

        def budgeted(fd: int, data: bytes) -> None:
            granted = self.take(len(data))
            write(fd, data[:granted])
            if granted < len(data):
                raise enospc()

        monkeypatch.setattr(raft_journal, "_write_all", budgeted)


class BudgetedFile:
    """A raw binary file whose writes draw on a `DiskBudget` (a short write, then ENOSPC)."""

    def __init__(self, inner: Any, budget: DiskBudget) -> None:
        self._inner = inner
        self._budget = budget

    def write(self, data: bytes | memoryview) -> int:
        return self._inner.write(bytes(data[: self._budget.take(len(data))]))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
