"""`frozen_map`: the one constructor of the metadata image's read-only maps (`with_changes`: the next one).

They are persistent hash array mapped tries (`immutables.Map`, a C implementation): immutable
`Mapping`s whose `set`/`delete`/`update`/`mutate()` return a new map sharing all but O(log n)
nodes with the old one, so the next image costs what its delta changed, never a copy of a map.
Iteration order is the hash order (sort where order matters); a Map equals only another Map
(compare `dict(m)` with a dict).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, TypeVar

from immutables import Map

K = TypeVar("K")
V = TypeVar("V")

EMPTY_MAP: Map = Map()


def frozen_map(d: Mapping[Any, Any] | Iterable[tuple[Any, Any]] | None = None) -> Map:
    """A persistent map of `d` (a Map is returned as is; a dict is converted in bulk)."""
    if d is None:
        return EMPTY_MAP
    if isinstance(d, Map):
        return d
    if isinstance(d, dict):
        return Map(d) if d else EMPTY_MAP
    if isinstance(d, Mapping):
        return Map(d.items())
    return Map(d)



def with_changes(base: Mapping[K, V], changes: Mapping[K, V | None]) -> Map:
    """`base` with `changes` set (a value of None removes its key): a new persistent map that
    shares the rest of `base`, in O(changes · log n)."""
    out = frozen_map(base).mutate()
    for key, value in changes.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out.finish()
