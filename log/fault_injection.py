"""A test-only slow disk: when the environment variable KRAFT_FAULT_FSYNC_DELAY_FILE names a file,
every fsync of a log segment or of the controller's Raft journal first sleeps the number of
milliseconds that file holds (missing, empty or 0: no delay). `kraft-bench chaos` writes it to
slow a running node's disk and clears it to heal, without restarting the process.

An environment variable rather than a config key: a node started by an operator never has it,
no config file or dynamic config change can turn it on, and the delay can change while the
process runs. Unset, `fsync` is `os.fsync` plus one dictionary lookup done at import.
"""

from __future__ import annotations

import os
import time

ENV = "KRAFT_FAULT_FSYNC_DELAY_FILE"
_DELAY_FILE = os.environ.get(ENV)


def delay_ms() -> int:
    if not _DELAY_FILE:
        return 0
    try:
        with open(_DELAY_FILE) as f:
            return max(0, int(f.read().strip() or 0))
    except (OSError, ValueError):
        return 0


def before_fsync() -> None:
    """Sleeps the injected delay (the calling thread blocks as on a slow disk)."""
    if _DELAY_FILE:
        delay = delay_ms()
        if delay:
            time.sleep(delay / 1000)


def fsync(fd: int) -> None:
    before_fsync()
    os.fsync(fd)
