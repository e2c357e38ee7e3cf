"""The broker's log directories (Kafka's `log.dirs` with several entries, JBOD, KIP-858).

Each directory holds partition directories (`<topic>-<partition>`) and a meta.properties naming
this node and the directory's id (Kafka's `directory.id`, written once: a directory keeps its id
for life). The first directory also holds the node's own files (the metadata log, the cluster
id), as Kafka's `metadata.log.dir` defaults to it.

At start every directory is checked (created if missing, its meta.properties read or written, its
partitions listed); one that fails is offline from the start. A partition found in two
directories refuses the start, as in Kafka. A new replica goes to the live directory holding the
fewest partitions (Kafka's LogManager places by partition count, not by size). A directory that
fails while the broker runs (`fail`: an I/O error, or a full disk that did not heal within
`log.dir.full.timeout.ms`, see `full_too_long`) stays offline until the broker restarts with it healed:
its replicas answer KAFKA_STORAGE_ERROR, and the broker's heartbeat names them so the controller
moves their leaderships and ISR memberships to other brokers.

The listing and the meta.properties I/O run once at start (the node's constructor); afterwards
everything here is bookkeeping on the event loop.
"""

from __future__ import annotations

import errno
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from kraft.cluster_identity import META_PROPERTIES, new_cluster_id, read_meta_properties, write_properties
from kraft.config import ConfigError

log = logging.getLogger("kraft.broker")

# errors that mean the directory's disk or mount failed, not a transient condition of one file:
# ENOSPC is not among them (a full disk may heal when space is freed: `full_too_long` decides)
DIR_FAILURE_ERRNOS = frozenset({errno.EIO, errno.EROFS, errno.ENODEV, errno.ENXIO, errno.ESTALE})


def partition_of(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a partition directory's name; None for anything else (the metadata
    log's directory is `__cluster_metadata-0`, kept out by its reserved topic name)."""
    topic, _, index = name.rpartition("-")
    if not topic or not index.isdigit() or topic.startswith("__cluster_metadata"):
        return None
    return topic, int(index)


@dataclass
class LogDir:
    path: Path
    directory_id: str | None = None  # None: the directory failed before its id could be read
    error: str | None = None  # offline: why
    failed_at_start: bool = False  # its partitions are unknown (not listed)
    partitions: set[str] = field(default_factory=set)  # `<topic>-<partition>` names placed here

    @property
    def online(self) -> bool:
        return self.error is None


class LogDirs:
    def __init__(self, paths: Iterable[str | os.PathLike[str]], node_id: int) -> None:
        self.node_id = node_id
        self.dirs = [LogDir(Path(p)) for p in paths]
        if not self.dirs:
            raise ConfigError("log.dirs", "at least one directory is needed")
        self._where: dict[str, LogDir] = {}
        self.version = 0  # bumped at every failure (readers cache what they derive from it)
        # a directory whose writes fail with ENOSPC -> when the first did (no write succeeded since)
        self.full_since_ms: dict[Path, int] = {}

    @property
    def first(self) -> Path:
        return self.dirs[0].path

    def load(self) -> None:
        """Checks every directory and lists its partitions (blocking: called once, at start)."""
        for d in self.dirs:
            try:
                self._load(d)
            except ConfigError:
                raise
            except OSError as e:
                d.error, d.failed_at_start = f"{type(e).__name__}: {e}", True
                self.version += 1
                log.error("log directory %s is offline: %s. Its replicas answer KAFKA_STORAGE_ERROR and "
                          "the controller moves them to other brokers; repair or replace the disk and "
                          "restart the broker", d.path, d.error)

    def _load(self, d: LogDir) -> None:
        d.path.mkdir(parents=True, exist_ok=True)
        props_path = d.path / META_PROPERTIES
        props = read_meta_properties(props_path)
        if props.get("node.id") not in (None, str(self.node_id)):
            raise ConfigError("log.dirs", f"{props_path} belongs to node {props.get('node.id')}, not {self.node_id}")
        d.directory_id = props.get("directory.id")
        if d.directory_id is None:
            d.directory_id = new_cluster_id()
            write_properties(props_path, {"version": "1", **props, "node.id": str(self.node_id),
                                           "directory.id": d.directory_id})
        for entry in os.scandir(d.path):
            if entry.is_dir() and partition_of(entry.name) is not None:
                other = self._where.get(entry.name)
                if other is not None:
                    raise ConfigError("log.dirs", f"partition {entry.name} is in both {other.path} and {d.path}: "
                                                  f"move one away (the older copy) and start again")
                self._where[entry.name] = d
                d.partitions.add(entry.name)

    # -- placement ------------------------------------------------------------------------------

    def place(self, name: str) -> LogDir:
        """The directory of partition directory `name`: where it is, else the live directory with
        the fewest partitions (recorded there). An offline directory when the partition may be on
        a directory that failed before its partitions were listed (never a second copy of it
        elsewhere), or when no directory is live: the replica is then offline."""
        d = self._where.get(name)
        if d is None:
            unlisted = [x for x in self.dirs if x.failed_at_start]
            live = [x for x in self.dirs if x.online]
            if unlisted or not live:
                return (unlisted or self.dirs)[0]
            d = min(live, key=lambda x: len(x.partitions))
            self._where[name] = d
            d.partitions.add(name)
        return d

    def forget(self, name: str) -> None:
        """The partition was deleted from this broker."""
        d = self._where.pop(name, None)
        if d is not None:
            d.partitions.discard(name)

    def dir_of(self, path: Path) -> LogDir | None:
        for d in self.dirs:
            if d.path == path:
                return d
        return None

    # -- failures -------------------------------------------------------------------------------

    @staticmethod
    def is_dir_failure(error: BaseException, directory: Path) -> bool:
        """Whether `error` means `directory`'s disk failed (an I/O error, a read-only remount, a
        vanished mount) rather than a full disk or a problem of one file."""
        if not isinstance(error, OSError):
            return False
        if error.errno in DIR_FAILURE_ERRNOS:
            return True
        if error.errno in (errno.ENOENT, errno.ENOTDIR):
            return not directory.is_dir()
        return False

    def full_too_long(self, d: LogDir, error: BaseException, now_ms: int, timeout_ms: int) -> bool:
        """`error` came from a write in `d`: whether it is ENOSPC and the disk has been full for
        `timeout_ms`, counted from the first ENOSPC after the last write there that succeeded
        (`wrote`). Then the directory is to fail as on an I/O error (Kafka takes a directory
        offline at the first ENOSPC; kraft waits `log.dir.full.timeout.ms` for space to return)."""
        if not isinstance(error, OSError) or error.errno != errno.ENOSPC:
            return False
        since = self.full_since_ms.setdefault(d.path, now_ms)
        return now_ms - since >= timeout_ms

    def wrote(self, path: Path) -> None:
        """A write in log directory `path` succeeded: a full disk there has space again."""
        if self.full_since_ms.pop(path, None) is not None:
            log.info("log directory %s takes writes again", path)

    def fail(self, d: LogDir, error: BaseException) -> bool:
        """Takes `d` offline; True the first time."""
        if not d.online:
            return False
        self.full_since_ms.pop(d.path, None)
        d.error = f"{type(error).__name__}: {error}"
        self.version += 1
        log.error("log directory %s is offline: %s. Its %d replicas answer KAFKA_STORAGE_ERROR and the "
                  "controller moves their leaderships and ISR memberships to other brokers; the other "
                  "directories keep serving. Repair or replace the disk (or free space on it), then "
                  "restart the broker",
                  d.path, d.error, len(d.partitions))
        return True

    @property
    def offline(self) -> list[LogDir]:
        return [d for d in self.dirs if not d.online]

    def offline_ids(self) -> list[str]:
        return [d.directory_id for d in self.dirs if not d.online and d.directory_id is not None]

