"""Test-only disk faults for a running node, switched by files the harness writes.

- Slow disk: when the environment variable KRAFT_FAULT_FSYNC_DELAY_FILE names a file, every fsync
  of a log segment or of the controller's Raft journal first sleeps the number of milliseconds
  that file holds (missing, empty or 0: no delay).
- Full disk: when KRAFT_FAULT_DISK_FULL_FILE names a file holding a non-zero number, every write
  of the node's data files (partition segments, indexes and checkpoints, the controller's Raft
  journal, log and snapshots, the broker's metadata snapshot) fails with ENOSPC before writing
  anything, as on a disk with no space left; missing, empty or 0: writes go through. This is
  `kraft-bench chaos`'s disk-full fault where no size-limited filesystem can be mounted. When it
  holds directories instead (one path a line), only the writes of partition files under them
  fail: one full log directory of several (the JBOD tests').

- Failed log directory: when KRAFT_FAULT_LOG_DIR_FAILED_FILE names a file, every write, fsync and
  read of a partition's files (segments, indexes, checkpoints) under a directory that file lists
  (one path a line) fails with EIO, as on a disk that died; the other directories work. This is
  `kraft-bench chaos`'s log-dir fault and the JBOD tests' (`docs/reliability.md`).

`kraft-bench chaos` writes these files to start a fault on a running node and clears them to heal
it, without restarting the process. Environment variables rather than config keys: a node started
by an operator never has them, no config file or dynamic config change can turn them on, and the
fault can change while the process runs. Unset, `fsync` is `os.fsync` and `before_write` a no-op,
plus one global lookup each (the variables are read once, at import).
"""

from __future__ import annotations

import errno
import os
import time

ENV = "KRAFT_FAULT_FSYNC_DELAY_FILE"
DISK_FULL_ENV = "KRAFT_FAULT_DISK_FULL_FILE"
LOG_DIR_FAILED_ENV = "KRAFT_FAULT_LOG_DIR_FAILED_FILE"
_DELAY_FILE = os.environ.get(ENV)
_DISK_FULL_FILE = os.environ.get(DISK_FULL_ENV)
_LOG_DIR_FAILED_FILE = os.environ.get(LOG_DIR_FAILED_ENV)


def _read_number(path: str) -> int:
    try:
        with open(path) as f:
            return max(0, int(f.read().strip() or 0))
    except (OSError, ValueError):
        return 0


def delay_ms() -> int:
    return _read_number(_DELAY_FILE) if _DELAY_FILE else 0


def before_fsync() -> None:
    """Sleeps the injected delay (the calling thread blocks as on a slow disk)."""
    if _DELAY_FILE:
        delay = delay_ms()
        if delay:
            time.sleep(delay / 1000)


def fsync(fd: int, path: str | os.PathLike[str] | None = None) -> None:
    before_fsync()
    check_log_dir(path)
    os.fsync(fd)


def _read_lines(path: str) -> list[str]:
    try:
        with open(path) as f:
            return [line.strip() for line in f if line.strip()]
    except OSError:
        return []


def _under(path: str | os.PathLike[str] | None, directories: list[str]) -> bool:
    if path is None:
        return False
    where = os.path.abspath(path)
    return any(where == d or where.startswith(d + os.sep) for d in map(os.path.abspath, directories))


def disk_full(path: str | os.PathLike[str] | None = None) -> bool:
    """Whether the injected full disk is on (for a write of `path`, when it names directories)."""
    if not _DISK_FULL_FILE:
        return False
    lines = _read_lines(_DISK_FULL_FILE)
    if len(lines) == 1 and lines[0].isdigit():
        return int(lines[0]) != 0
    return _under(path, lines)


def before_write(path: str | os.PathLike[str] | None = None) -> None:
    """Raises ENOSPC, writing nothing, while the injected full disk is on; EIO when `path` is
    under an injected failed log directory."""
    if _DISK_FULL_FILE and disk_full(path):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC) + " (injected: " + DISK_FULL_ENV + ")")
    check_log_dir(path)


def failed_log_dirs() -> list[str]:
    """The directories the injected log-directory failure lists (absolute paths)."""
    return [os.path.abspath(d) for d in _read_lines(_LOG_DIR_FAILED_FILE)] if _LOG_DIR_FAILED_FILE else []


def check_log_dir(path: str | os.PathLike[str] | None) -> None:
    """Raises EIO when `path` is under an injected failed log directory (a read, write or fsync
    of it fails as on a dead disk)."""
    if _LOG_DIR_FAILED_FILE and _under(path, failed_log_dirs()):
        where = os.path.abspath(path)  # type: ignore[arg-type]
        raise OSError(errno.EIO, f"{os.strerror(errno.EIO)} (injected: {LOG_DIR_FAILED_ENV}): {where}")
