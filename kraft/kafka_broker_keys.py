"""Apache Kafka's broker and controller configuration keys, read from the data file beside this
module (kafka_broker_keys.txt says where its names come from: Kafka's generated documentation).

`kraft.config.build_config` accepts a Kafka key that kraft has no use for with one warning naming
it, and refuses a key that is neither Kafka's nor kraft's (a typo), suggesting the nearest one.
"""

from __future__ import annotations

from importlib import resources


def _load() -> tuple[frozenset[str], tuple[str, ...]]:
    keys: set[str] = set()
    prefixes: list[str] = []
    text = resources.files(__package__).joinpath("kafka_broker_keys.txt").read_text(encoding="utf-8")
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("*"):
            prefixes.append(line[:-1])
        else:
            keys.add(line)
    return frozenset(keys), tuple(prefixes)


KAFKA_BROKER_KEYS, _PREFIXES = _load()


def is_kafka_key(key: str) -> bool:
    return key in KAFKA_BROKER_KEYS or key.startswith(_PREFIXES)
