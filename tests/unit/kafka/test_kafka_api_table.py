"""docs/kafka-protocol.md's table of served APIs and versions is the handler registry's: the node
registers its handlers through `register_handlers`, and the page shows what that registers."""

from __future__ import annotations

import re
from pathlib import Path

from kraft.kafka.api_table import api_table, served_registry

DOC = Path(__file__).resolve().parents[3] / "docs" / "kafka-protocol.md"


def test_kafka_protocol_md_shows_the_registrys_table() -> None:
    shown = re.search(r"<!-- api-table:begin -->\n(.*?)\n<!-- api-table:end -->", DOC.read_text(), re.S)
    assert shown is not None, "docs/kafka-protocol.md lost its api-table markers"
    assert shown.group(1) == api_table(served_registry()), "run python -m kraft.kafka.api_table and paste it"


def test_the_table_lists_each_served_key_once_with_its_range() -> None:
    lines = api_table(served_registry()).splitlines()[2:]
    assert "| DescribeAcls | 29 | 1-3 |" in lines and "| DescribeProducers | 61 | 0 |" in lines
    assert "| ApiVersions | 18 | 0-4 |" in lines
    assert len({line.split("|")[2] for line in lines}) == len(lines)


def test_no_feature_is_advertised_whose_semantics_are_not_served() -> None:
    """KIP-890 part 2: a client uses Produce v12 (the partition added by the produce) and the
    EndTxn v5 epoch bump only when ApiVersions finalizes `transaction.version` 2. Produce v12 is
    not served, so no feature level is advertised (docs/kafka-protocol.md, "What the clients
    negotiate")."""
    registry = served_registry()
    for version in (3, 4):
        answer = registry.api_versions.response(version)
        assert answer.supported_features == () and answer.finalized_features == ()
    assert registry.api_versions.ranges[0][1] < 12  # Produce
