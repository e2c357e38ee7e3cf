"""The table of Kafka APIs and versions docs/kafka-protocol.md shows, printed from the handler
registry (`python -m kraft.kafka.api_table`; tests/unit/kafka/test_kafka_api_table.py keeps the
page in step)."""

from __future__ import annotations

from typing import cast

from kraft.kafka.dispatch import HandlerRegistry, api_name
from kraft.kafka.handlers import register_handlers
from kraft.server.services import BrokerServices


def served_registry() -> HandlerRegistry:
    """A registry with every handler the node registers (over no services: only the table is read)."""
    registry = HandlerRegistry()
    register_handlers(registry, cast(BrokerServices, None))
    return registry


def api_table(registry: HandlerRegistry) -> str:
    rows = [f"| {api_name(key, high)} | {key} | {low}-{high} |" if low != high else
            f"| {api_name(key, high)} | {key} | {low} |"
            for key, (low, high) in sorted(registry.api_versions.ranges.items(), key=lambda r: api_name(r[0], r[1][1]))]
    return "\n".join(["| API | key | versions |", "|---|---|---|", *rows])


if __name__ == "__main__":
    print(api_table(served_registry()))
