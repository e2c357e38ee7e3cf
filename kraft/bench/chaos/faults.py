"""Injecting and healing the faults of a chaos schedule on a `LocalCluster`.

- kill: kill -9, wait, restart;
- stop: SIGSTOP, wait, SIGCONT (a zombie leader that wakes believing it leads);
- partition: cut links through the proxies (isolate the node from all others, or from one), heal;
- disk-full: fill the node's size-limited data filesystem (a tmpfs mounted per node) until ENOSPC,
  wait, delete the filler; where no tmpfs can be mounted, ENOSPC at the file layer instead: the
  node runs with `KRAFT_FAULT_DISK_FULL_FILE` (`log.fault_injection`) and the fault writes 1 to
  that file, then 0 (`prepare_disk_full` chooses, once per run);
- torn-write: kill -9, then cut the tail of the active segment partway (torn-active) or flip one
  bit in the active or a closed segment (flip-active, flip-closed) of a produced partition, then
  restart: the CRC must catch it;
- slow-disk: every fsync of the node sleeps the variant's milliseconds (`log.fault_injection`);
- controller-disk-full: disk-full on whichever node is the active controller when it starts: its
  Raft journal cannot be written, so it must resign and the other voters elect a leader (the
  details say which node it was and which node was the controller when the disk was freed).
- log-dir: with this fault every node has two log directories (`log.dirs`); the node's second one
  fails (EIO on every read, write and fsync of its partition files, through
  `KRAFT_FAULT_LOG_DIR_FAILED_FILE`): its replicas go offline and the controller moves their
  leaderships and ISR memberships; at the end the disk is "replaced" (the failure cleared) and the
  node restarted, and its replicas there catch up and rejoin.

A fault that could not be done (a torn write with no segment to tear) says so in its details
(`"done": False`), and the checker does not count it as injected.
"""

from __future__ import annotations

import errno
import os
import random
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from kraft.api.client import Admin, KraftError
from kraft.bench.chaos.proxy import LinkProxies
from kraft.bench.chaos.schedule import CONTROLLER, FaultEvent
from kraft.bench.cluster import LocalCluster, LocalNode, poll
from kraft.log.fault_injection import DISK_FULL_ENV, LOG_DIR_FAILED_ENV

TMPFS, FILE_LAYER = "tmpfs", "file-layer"


def mount_tmpfs(directory: Path, size_mb: int) -> str | None:
    """Mounts a tmpfs of `size_mb` at `directory`; None when done, else why it cannot be."""
    directory.mkdir(parents=True, exist_ok=True)
    if shutil.which("mount") is None:
        return "no mount command"
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(directory)],
                          capture_output=True, text=True)
    return None if done.returncode == 0 else (done.stderr.strip() or f"mount exited {done.returncode}")


def unmount(directory: Path) -> None:
    subprocess.run(["umount", "-l", str(directory)], capture_output=True)


def fill(directory: Path) -> Path:
    """Writes `directory/chaos-filler` until ENOSPC; delete it to free the space."""
    filler = directory / "chaos-filler"
    with open(filler, "ab", buffering=0) as f:
        for chunk in (1 << 20, 1 << 12, 1):
            try:
                while True:
                    f.write(b"\0" * chunk)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
    return filler


@dataclass
class DiskFull:
    """How a run injects disk-full: `method` TMPFS (`paths`: each node's data directory, a
    mounted tmpfs) or FILE_LAYER (`paths`: each node's KRAFT_FAULT_DISK_FULL_FILE); `why` says
    why no tmpfs could be mounted."""

    method: str
    paths: dict[int, Path]
    why: str = ""

    def env(self, node_id: int) -> dict[str, str]:
        """What node `node_id` must be started with."""
        return {DISK_FULL_ENV: str(self.paths[node_id])} if self.method == FILE_LAYER else {}

    def describe(self) -> str:
        if self.method == TMPFS:
            return "disk-full: each node's data directory is a size-limited tmpfs"
        return (f"disk-full: cannot mount a size-limited filesystem here ({self.why}): ENOSPC is "
                f"injected at the file layer instead ({DISK_FULL_ENV})")

    def heal(self) -> None:
        if self.method == FILE_LAYER:
            for flag in self.paths.values():
                flag.write_text("0")

    def close(self) -> None:
        if self.method == TMPFS:
            for directory in self.paths.values():
                unmount(directory)


def prepare_disk_full(root: Path, node_ids: list[int], size_mb: int,
                      mount: Callable[[Path, int], str | None] = mount_tmpfs,
                      unmount_dir: Callable[[Path], None] = unmount) -> DiskFull:
    """A tmpfs of `size_mb` as every node's data directory (`root/data-N`) where that can be
    mounted; else (one failed: those mounted are unmounted) a disk-full flag file per node,
    `root/disk-full-N`, holding 0."""
    mounted: dict[int, Path] = {}
    for i in node_ids:
        directory = root / f"data-{i}"
        why = mount(directory, size_mb)
        if why is not None:
            for done in mounted.values():
                unmount_dir(done)
            flags = {n: root / f"disk-full-{n}" for n in node_ids}
            for flag in flags.values():
                flag.write_text("0")
            return DiskFull(FILE_LAYER, flags, why)
        mounted[i] = directory
    return DiskFull(TMPFS, mounted)


def _node_log(node: LocalNode) -> Path:
    return node.data_dir.parent / f"node-{node.node_id}.log"


def _enospc_logged(node: LocalNode, since: int) -> int:
    """Lines of the node's log after byte `since` that report ENOSPC (evidence the node met the
    full disk; a node that wrote nothing meanwhile reports none)."""
    try:
        with open(_node_log(node), "rb") as f:
            f.seek(since)
            return sum(b"No space left" in line for line in f)
    except OSError:
        return 0


def second_log_dir(node: LocalNode) -> Path:
    """The log directory the log-dir fault fails (with that fault, each node has two)."""
    return node.data_dir.with_name(node.data_dir.name + "-disk2")


def log_dir_failure(root: Path, node: LocalNode) -> tuple[list[str], dict[str, str], Path]:
    """For a run with the log-dir fault: the node's arguments (two log directories), environment
    (the failure's flag file, empty) and flag file."""
    flag = root / f"log-dir-failed-{node.node_id}"
    flag.write_text("")
    return ["--override", f"log.dirs={node.data_dir},{second_log_dir(node)}"], {LOG_DIR_FAILED_ENV: str(flag)}, flag


def corrupt_segment(data_dirs: list[Path], topics: list[str], variant: str, rng: random.Random) -> dict[str, Any]:
    """Tears or flips a segment of a stopped node (its log directories); what was done (for the history)."""
    partitions = sorted(p for d in data_dirs if d.is_dir() for p in d.iterdir()
                        if p.is_dir() and p.name.rpartition("-")[0] in topics)
    if not partitions:
        return {"done": False, "why": "no partition directory"}
    directory = rng.choice(partitions)
    segments = sorted(directory.glob("*.log"))
    segments = [s for s in segments if s.stat().st_size > 0]
    if not segments:
        return {"done": False, "why": f"{directory.name}: no data"}
    if variant == "flip-closed" and len(segments) > 1:
        target = rng.choice(segments[:-1])
    else:
        target = segments[-1]
    size = target.stat().st_size
    what: dict[str, Any] = {"done": True, "file": f"{directory.name}/{target.name}", "size": size}
    if variant == "torn-active":
        cut = rng.randint(1, min(size, 300))
        os.truncate(target, size - cut)
        what["cut_bytes"] = cut
    else:
        position, bit = rng.randrange(size), rng.randrange(8)
        with open(target, "r+b") as f:
            f.seek(position)
            byte = f.read(1)[0]
            f.seek(position)
            f.write(bytes([byte ^ (1 << bit)]))
        what.update(position=position, bit=bit, closed=target != segments[-1])
    return what


class Injector:
    """Applies `FaultEvent`s; `down` is the set of nodes a fault has made unusable right now."""

    def __init__(self, cluster: LocalCluster, proxies: LinkProxies, topics: list[str], delay_files: dict[int, Path],
                 disk_full: DiskFull | None, seed: int, sleep: Callable[[float], bool],
                 log_dir_flags: dict[int, Path] | None = None) -> None:
        self.cluster, self.proxies, self.topics = cluster, proxies, topics
        self.delay_files, self.disk_full = delay_files, disk_full
        self.log_dir_flags = log_dir_flags or {}  # each node's log-dir failure flag (with that fault)
        self.rng = random.Random(seed ^ 0x5EED)
        self.sleep = sleep  # waits, returns early (True) if the run is being stopped
        self.down: set[int] = set()

    def node(self, node_id: int) -> LocalNode:
        return self.cluster.nodes[node_id]

    def active_controller(self) -> int | None:
        """The node that says it is the active controller, among the running ones."""
        for node_id, node in self.cluster.nodes.items():
            if node.proc is not None and node.proc.poll() is None:
                try:
                    if node.health().get("active_controller"):
                        return node_id
                except (OSError, ValueError):
                    continue
        return None

    def apply(self, event: FaultEvent) -> dict[str, Any]:
        """Injects the fault, waits its duration, heals it; details for the history (`target`:
        the node it hit, for a fault aimed at the active controller)."""
        target = event.target
        if target == CONTROLLER:
            target = poll(self.active_controller, 30, 0.2, "an active controller")
        self.down.add(target)
        try:
            detail = getattr(self, "_" + event.fault.replace("-", "_"))(event, self.node(target))
        finally:
            self.down.discard(target)
        return {"target": target, **detail}

    def _kill(self, event: FaultEvent, node: LocalNode) -> dict[str, Any]:
        node.kill()
        self.sleep(event.duration_s)
        node.start()
        return {}

    def _stop(self, event: FaultEvent, node: LocalNode) -> dict[str, Any]:
        assert node.proc is not None
        node.proc.send_signal(signal.SIGSTOP)
        try:
            self.sleep(event.duration_s)
        finally:
            node.proc.send_signal(signal.SIGCONT)
        return {}

    def _partition(self, event: FaultEvent, node: LocalNode) -> dict[str, Any]:
        others = list(self.cluster.nodes)
        if event.variant.startswith("pair:"):
            others = [int(event.variant.split(":")[1])]
        links = self.proxies.isolate(event.target, others)
        try:
            self.sleep(event.duration_s)
        finally:
            self.proxies.heal_all()
        return {"links": links}

    def _disk_full(self, event: FaultEvent, node: LocalNode,
                   during: Callable[[], dict[str, Any]] | None = None,
                   at_end: Callable[[], dict[str, Any]] = dict) -> dict[str, Any]:
        """Fills `node`'s disk for the event's duration; `during()`, called once it is full (its
        time counts in the duration), and `at_end()`, just before the space is freed, add details."""
        disk = self.disk_full
        if disk is None:
            return {"done": False, "why": "disk-full was not prepared for this run"}
        log = _node_log(node)
        since = log.stat().st_size if log.exists() else 0
        path = disk.paths[node.node_id]  # tmpfs: the data directory; file layer: the flag
        if disk.method == TMPFS:
            path = fill(path)  # the filler
            detail: dict[str, Any] = {"method": TMPFS, "filler_bytes": path.stat().st_size}
        else:
            path.write_text("1")
            detail = {"method": FILE_LAYER}
        try:
            if during is None:
                self.sleep(event.duration_s)
            else:
                deadline = time.monotonic() + event.duration_s
                detail.update(during())
                self.sleep(max(0.0, deadline - time.monotonic()))
            detail.update(at_end())
        finally:
            if disk.method == TMPFS:
                path.unlink()
            else:
                path.write_text("0")
        detail["enospc_logged"] = _enospc_logged(node, since)
        return detail

    def _controller_disk_full(self, event: FaultEvent, node: LocalNode) -> dict[str, Any]:
        """A metadata write while the disk is full (a topic created through another node): the
        controller meets the full disk at once, resigns, and the write commits on the next one."""
        others = [n for i, n in self.cluster.nodes.items() if i != node.node_id]

        def write() -> dict[str, Any]:
            name = f"chaos-probe-{self.rng.randrange(1 << 30)}"
            started = time.monotonic()
            try:
                with Admin(",".join(f"127.0.0.1:{n.port}" for n in others), request_timeout_ms=5_000,
                           api_timeout_ms=int(max(1.0, event.duration_s) * 1000)) as admin:
                    admin.create_topic(name, 1, len(self.cluster.nodes))
                written: Any = round(time.monotonic() - started, 2)
            except KraftError as e:
                written = e.error_code
            return {"metadata_write": written}

        return self._disk_full(event, node, write, lambda: {"controller_at_heal": self.active_controller()})

    def _torn_write(self, event: FaultEvent, node: LocalNode) -> dict[str, Any]:
        node.kill()
        what = corrupt_segment([node.data_dir, second_log_dir(node)], self.topics, event.variant, self.rng)
        node.start()
        return what

    def _slow_disk(self, event: FaultEvent, node: LocalNode) -> dict[str, Any]:
        path = self.delay_files[event.target]
        path.write_text(event.variant)
        try:
            self.sleep(event.duration_s)
        finally:
            path.write_text("0")
        return {"fsync_delay_ms": int(event.variant)}

    def _log_dir(self, event: FaultEvent, node: LocalNode) -> dict[str, Any]:
        """Fails the node's second log directory for the event's duration, then replaces the disk
        (clears the failure) and restarts the node: the directory comes back with a restart."""
        flag = self.log_dir_flags.get(node.node_id)
        if flag is None:
            return {"done": False, "why": "the nodes were started with one log directory"}
        failed = second_log_dir(node)
        flag.write_text(f"{failed}\n")
        try:
            self.sleep(event.duration_s)
        finally:
            flag.write_text("")
        node.stop()
        node.start()
        return {"log_dir": str(failed)}

    def heal_everything(self) -> None:
        """At the end (or on an error): every node running, every link open, no delay, no failed
        disk."""
        self.proxies.heal_all()
        for path in self.delay_files.values():
            path.write_text("0")
        for path in self.log_dir_flags.values():
            path.write_text("")
        if self.disk_full is not None:
            self.disk_full.heal()
        for node in self.cluster.nodes.values():
            if node.proc is not None and node.proc.poll() is None:
                node.proc.send_signal(signal.SIGCONT)
            else:
                node.start()
