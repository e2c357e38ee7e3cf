"""The peers' server processes: started by the bench, stopped by it."""

from __future__ import annotations

import subprocess
from typing import Iterable


def stop(procs: Iterable[subprocess.Popen], timeout_s: float = 30.0) -> None:
    """SIGTERM every process first (they shut down together), then wait for each, killing one
    still running after `timeout_s`."""
    procs = list(procs)
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
