"""An exclusive lock on each directory a node writes, Kafka's `.lock` (its `LogManager` locks every
log directory and the metadata log directory at start).

Two processes on one data directory would be two copies of one node: two active controllers
appending to one metadata log, two leaders of every partition. The lock is `flock` on `<dir>/.lock`,
held for the life of the process: the kernel drops it when the process dies, however it dies, so a
kill -9 leaves no stale lock behind (the file stays; its content, the holder's pid, is only for the
message a second process prints).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Iterable

LOCK_FILE = ".lock"


class DirectoryInUseError(Exception):
    """Another process holds the lock of `directory`."""

    def __init__(self, directory: Path, holder_pid: int | None) -> None:
        holder = "another process" if holder_pid is None else f"another process (pid {holder_pid})"
        super().__init__(f"{directory} is in use by {holder}: it holds {directory / LOCK_FILE}; stop it, or give "
                         f"this node another data directory")
        self.directory = directory
        self.holder_pid = holder_pid


class DirectoryLock:
    """The held lock of one directory; `release` (or the process's end) lets it go."""

    def __init__(self, directory: Path, fd: int) -> None:
        self.directory = directory
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, directory: Path) -> "DirectoryLock":
        """Creates the directory if needed and locks it; DirectoryInUseError when another process
        holds it (never waits)."""
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            raise DirectoryInUseError(directory, holder) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return cls(directory, fd)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the only descriptor of the open file drops its flock
            self._fd = None


def lock_directories(directories: Iterable[Path]) -> list[DirectoryLock]:
    """Locks each directory in order; on a refusal, lets go of those already locked and raises."""
    held: list[DirectoryLock] = []
    try:
        for directory in directories:
            held.append(DirectoryLock.acquire(directory))
    except BaseException:
        release_all(held)
        raise
    return held


def release_all(locks: Iterable[DirectoryLock]) -> None:
    for lock in locks:
        lock.release()


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None
