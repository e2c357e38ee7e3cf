"""FileCache: the open files of segments, a bounded LRU of descriptors.

Kafka keeps every segment's files open; with tiny segments (`segment.bytes=14`), or with tens of
thousands of partitions, that runs the process out of descriptors, and a node that cannot open its
log dir at start never comes back. Here a `CachedFile` names one segment file and
`with cached_file as fd:` lends a descriptor, reopening the file when the cache closed it. When
more than `capacity` files are open, the least recently used idle one is closed: the active
segment's files too, so an idle partition holds no descriptor and a broker's descriptors are
bounded by the cache, not by its partition count (a busy partition's files stay at the recent
end of the LRU). A file lent out is never closed under its borrower, so a descriptor number is
never reused mid-read; when every file is lent out the cache goes over capacity until they come
back.

Descriptors belong to the process, so there is one cache per process, `OPEN_FILES`; the node
sizes it from `log.open.files.max`. Closing a descriptor loses nothing written (the data is in
the page cache), and fsync through a reopened descriptor flushes the same file. Index entries stay
in memory, so reading a closed segment reopens only its `.log`: one open(2), no cheaper off the
event loop than the pread that follows it, which the broker also does inline. A `CachedFile` is
created on its first use (`O_CREAT`): a segment that was never written has no file at all.
"""

from __future__ import annotations

import errno
import os
import resource
import threading
from collections import OrderedDict
from pathlib import Path

from kraft.log.errors import KafkaStorageError

_OUT_OF_FILES = (errno.EMFILE, errno.ENFILE)
NO_LIMIT_FILES = 1_048_576  # what "unlimited" RLIMIT_NOFILE means in practice (Linux nr_open)


def soft_open_files_limit() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return NO_LIMIT_FILES if soft == resource.RLIM_INFINITY else soft


def default_open_files_max(soft_limit: int) -> int:
    """log.open.files.max when not configured: an eighth of the descriptor limit, at least 16
    and at most 10,000 (beyond that, reopening a cold segment costs less than the memory)."""
    return max(16, min(soft_limit // 8, 10_000))


class CachedFile:
    """One file of a segment; `with f as fd:` lends an open descriptor (see the module)."""

    __slots__ = ("path", "_cache", "_fd", "_flags", "_users", "_closed")

    def __init__(self, cache: FileCache, path: Path) -> None:
        """Names the file; nothing is opened (nor created) until the first `with`."""
        self.path = path
        self._cache = cache
        self._fd = -1
        self._flags = os.O_RDWR | os.O_CREAT  # created on first open only: a reopen finds it
        self._users = 0
        self._closed = False

    @property
    def is_open(self) -> bool:
        return self._fd >= 0

    @property
    def created(self) -> bool:
        """Whether the file was opened once, so exists (a new segment's is made by its first write)."""
        return not self._flags & os.O_CREAT

    def __enter__(self) -> int:
        return self._cache._acquire(self)

    def __exit__(self, *exc: object) -> None:
        self._cache._release(self)

    def close(self) -> None:
        """Closes the descriptor for good; lending it again raises KafkaStorageError."""
        self._cache._close(self)

    def __repr__(self) -> str:
        return f"CachedFile({self.path.name}, fd={self._fd})"


class FileCache:
    def __init__(self, capacity: int) -> None:
        assert capacity >= 1, capacity
        self._capacity = capacity
        self._lock = threading.Lock()
        self._lru: OrderedDict[CachedFile, None] = OrderedDict()  # open files, LRU first

    @property
    def capacity(self) -> int:
        return self._capacity

    @capacity.setter
    def capacity(self, capacity: int) -> None:
        assert capacity >= 1, capacity
        with self._lock:
            self._capacity = capacity
            self._evict(capacity)

    @property
    def open_count(self) -> int:
        """Files open now (at most `capacity` unless all of them are lent out)."""
        return len(self._lru)

    def open(self, path: Path) -> CachedFile:
        """The file at `path`, created if missing and left open (until evicted)."""
        cached = CachedFile(self, path)
        with cached:
            pass
        return cached

    def file(self, path: Path) -> CachedFile:
        """The file at `path`, opened (and created) at its first use only."""
        return CachedFile(self, path)

    def _acquire(self, cached: CachedFile) -> int:
        with self._lock:
            if cached._fd < 0:
                if cached._closed:
                    raise KafkaStorageError(f"{cached.path} is closed")
                cached._fd = self._open_fd(cached)
                cached._flags = os.O_RDWR
                self._lru[cached] = None
            else:
                self._lru.move_to_end(cached)
            cached._users += 1
            return cached._fd

    def _release(self, cached: CachedFile) -> None:
        with self._lock:
            assert cached._users > 0, cached
            cached._users -= 1
            if len(self._lru) > self._capacity:  # went over while every file was lent out
                self._evict(self._capacity)

    def _close(self, cached: CachedFile) -> None:
        with self._lock:
            assert cached._users == 0, f"{cached} closed while lent out"
            self._lru.pop(cached, None)
            cached._closed = True
            if cached._fd >= 0:
                fd, cached._fd = cached._fd, -1
                os.close(fd)

    def _evict(self, keep: int) -> None:
        """Closes idle files, least recently used first, until at most `keep` are open."""
        excess = len(self._lru) - keep
        if excess <= 0:
            return
        victims = []
        for cached in self._lru:
            if cached._users == 0:
                victims.append(cached)
                if len(victims) == excess:
                    break
        for cached in victims:
            del self._lru[cached]
            fd, cached._fd = cached._fd, -1
            os.close(fd)

    def _open_fd(self, cached: CachedFile) -> int:
        """Opens after making room; out of descriptors, closes every idle file and tries once
        more, then answers KAFKA_STORAGE_ERROR naming the limit rather than an OSError."""
        self._evict(self._capacity - 1)
        try:
            return os.open(cached.path, cached._flags, 0o644)
        except OSError as e:
            if e.errno not in _OUT_OF_FILES:
                raise
        self._evict(0)
        try:
            return os.open(cached.path, cached._flags, 0o644)
        except OSError as e:
            if e.errno not in _OUT_OF_FILES:
                raise
            raise KafkaStorageError(
                f"cannot open {cached.path.name} in {cached.path.parent.name}: the process is out "
                f"of file descriptors (open-files limit {soft_open_files_limit()}, "
                f"log.open.files.max {self._capacity}); raise the limit (ulimit -n, systemd "
                f"LimitNOFILE) or lower log.open.files.max, or use fewer partitions or larger "
                f"segment.bytes"
            ) from e


OPEN_FILES = FileCache(default_open_files_max(soft_open_files_limit()))
