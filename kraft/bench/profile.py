"""`kraft-bench ... --profile`: py-spy sampling profiles of the bench and of the nodes while the
measurement runs, written next to the JSON summary as py-spy's raw collapsed stacks
(`<json stem>.profile-<who>.txt`, one line per stack: `frame;frame;... count`), and the top
frames by own samples, which the summary keeps.

py-spy (`pip install py-spy`) attaches to running processes; it needs ptrace rights over them
(the same user and a permissive kernel.yama.ptrace_scope, or root).
"""

from __future__ import annotations

import collections
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import click

SAMPLE_RATE = 250  # per second


def top_frames(collapsed: str, n: int = 12) -> list[tuple[str, float]]:
    """The frames with the most own samples (the stack's last frame) and their share of all."""
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for line in collapsed.splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit():
            continue
        total += int(count)
        own[stack.rsplit(";", 1)[-1]] += int(count)
    return [(frame, round(samples / total, 4)) for frame, samples in own.most_common(n)] if total else []


class Profiler:
    """py-spy on each of `targets` (name -> pid) from `start` until `stop`."""

    def __init__(self, targets: dict[str, int], out_stem: Path) -> None:
        self._py_spy = shutil.which("py-spy")
        if self._py_spy is None:
            raise click.ClickException("--profile needs py-spy: pip install py-spy")
        self._targets = targets
        self._stem = out_stem
        self._procs: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}

    def start(self) -> None:
        for name, pid in self._targets.items():
            path = self._stem.with_name(f"{self._stem.name}.profile-{name}.txt")
            proc = subprocess.Popen(
                [self._py_spy, "record", "--pid", str(pid), "--rate", str(SAMPLE_RATE), "--format", "raw",
                 "--output", str(path), "--nonblocking"],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            self._procs[name] = (proc, path)

    def stop(self) -> dict[str, Any]:
        """Stops sampling; {name: {"file": path, "top": [[frame, share], ...]}}."""
        out: dict[str, Any] = {}
        for name, (proc, path) in self._procs.items():
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
            try:
                _, err = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
            if not path.exists():
                out[name] = {"file": None, "error": err.decode(errors="replace").strip()[-300:]}
                continue
            out[name] = {"file": os.fspath(path), "top": top_frames(path.read_text())}
        return out
