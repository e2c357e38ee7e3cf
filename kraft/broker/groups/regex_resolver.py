"""What the members' subscription regexes resolve to, for the group coordinator (KIP-848): the
topics of the image a regex matches whole, less the internal ones, and of those, the ones the
member's principal may Describe (Kafka's coordinator keeps only those).

A regex is matched against the topic names once per (regex, topics image), in a thread when the
image has many topics; the matches are filtered once per (regex, principal, host, topics image,
ACLs image), a slice of Describe checks per loop turn. Both are cached (least recently used
first out, bounded by the names they hold), and concurrent heartbeats share one computation, so a
heartbeat costs a lookup and none holds the event loop for a walk of every topic. The group
handlers, which cannot wait, `lookup` what was resolved before they ran.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections import OrderedDict
from typing import Awaitable, Callable, Hashable, Iterable, Protocol

from kraft.broker.groups.errors import GroupError
from kraft.broker.groups.topic_regex import matching
from kraft.metadata.acl import TOPIC
from kraft.metadata.image import MetadataImage

log = logging.getLogger("kraft.groups")

INLINE_TOPICS = 512  # fewer topic names than this are matched on the loop (about a millisecond)
DESCRIBE_SLICE = 1024  # Describe checks per loop turn
MAX_CACHED_NAMES = 1_000_000  # topic names the caches hold together (tens of MB)

RegexKey = tuple[str, str, str]  # (regex, principal, client host)


class TopicAuthorizer(Protocol):
    """The node's authorizer (kraft.server.authorization.Authorizer)."""

    def authorize(self, principal: str, host: str, operation: str, resource_type: str,
                  resource_name: str) -> bool: ...


class _ResolutionCache:
    """Resolutions by key, each valid while the objects it was computed from are the current ones;
    a miss starts one task that every caller waits on."""

    def __init__(self, max_names: int) -> None:
        self.max_names = max_names
        self.names = 0
        self._entries: OrderedDict[Hashable, tuple[tuple[weakref.ref, ...], asyncio.Task[frozenset[str]]]] = (
            OrderedDict())

    def get(self, key: Hashable, sources: tuple[object, ...],
            compute: Callable[[], Awaitable[frozenset[str]]]) -> asyncio.Task[frozenset[str]]:
        entry = self._entries.get(key)
        if entry is not None and all(ref() is source for ref, source in zip(entry[0], sources)):
            self._entries.move_to_end(key)
            return entry[1]
        self._drop(key)
        task: asyncio.Task[frozenset[str]] = asyncio.ensure_future(compute())
        self._entries[key] = (tuple(weakref.ref(s) for s in sources), task)
        task.add_done_callback(lambda done: self._done(key, done))
        return task

    def _done(self, key: Hashable, task: asyncio.Task[frozenset[str]]) -> None:
        entry = self._entries.get(key)
        if entry is None or entry[1] is not task:
            return
        if task.cancelled() or task.exception() is not None:
            del self._entries[key]
            return
        self.names += len(task.result())
        while self.names > self.max_names and len(self._entries) > 1:
            oldest = next(iter(self._entries))
            if oldest == key:
                break
            self._drop(oldest)

    def _drop(self, key: Hashable) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None and entry[1].done() and not entry[1].cancelled() and entry[1].exception() is None:
            self.names -= len(entry[1].result())

    def __len__(self) -> int:
        return len(self._entries)


class Unresolved(Exception):
    """A regex whose topics are being resolved (new, or the image changed): `resolve` it first."""


class RegexResolver:
    def __init__(self, authorizer: TopicAuthorizer | None = None, max_cached_names: int = MAX_CACHED_NAMES) -> None:
        """`authorizer` None: every match is kept (no ACLs, as Kafka without an authorizer)."""
        self.authorizer = authorizer
        self._matches = _ResolutionCache(max_cached_names // 2)
        self._describable = _ResolutionCache(max_cached_names // 2)

    async def resolve(self, image: MetadataImage, keys: Iterable[RegexKey]) -> dict[RegexKey, frozenset[str]]:
        """The topics each (regex, principal, host) subscribes to in `image`. A regex RE2 refuses
        (stored before regexes were checked with it) resolves to no topic."""
        tasks = {key: self._resolution(image, key) for key in set(keys)}
        # shielded: a heartbeat that goes away does not cancel what other heartbeats wait on
        return {key: await asyncio.shield(task) for key, task in tasks.items()}

    def lookup(self, image: MetadataImage, key: RegexKey) -> frozenset[str]:
        """What `resolve` found for `key` in `image`, without waiting: raises `Unresolved` (and
        starts the resolution) when it is not there yet."""
        task = self._resolution(image, key)
        if not task.done():
            raise Unresolved(key)
        return task.result()

    def _resolution(self, image: MetadataImage, key: RegexKey) -> asyncio.Task[frozenset[str]]:
        regex, principal, host = key
        matches = self._matches.get(regex, (image.topics,), lambda: self._match(image, regex))
        authorizer = self.authorizer
        if authorizer is None:
            return matches
        return self._describable.get(key, (image.topics, image.acls),
                                     lambda: self._describable_of(authorizer, matches, principal, host))

    @staticmethod
    async def _match(image: MetadataImage, regex: str) -> frozenset[str]:
        by_name = image.topics.by_name

        def match() -> frozenset[str]:
            try:
                return matching(regex, (name for name, topic in by_name.items() if not topic.internal))
            except GroupError as e:
                log.warning("subscription regex matches no topic: %s", e)
                return frozenset()

        return match() if len(by_name) < INLINE_TOPICS else await asyncio.to_thread(match)

    @staticmethod
    async def _describable_of(authorizer: TopicAuthorizer, matches: asyncio.Task[frozenset[str]],
                              principal: str, host: str) -> frozenset[str]:
        allowed: list[str] = []
        for i, name in enumerate(await asyncio.shield(matches), 1):
            if authorizer.authorize(principal, host, "DESCRIBE", TOPIC, name):
                allowed.append(name)
            if i % DESCRIBE_SLICE == 0:
                await asyncio.sleep(0)
        return frozenset(allowed)
