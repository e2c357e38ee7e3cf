"""docs/kafka-protocol.md's table of served APIs is the handler registry's."""

from pathlib import Path

from kraft.kafka.apis import markdown_table

DOC = Path(__file__).parents[3] / "docs" / "kafka-protocol.md"


def test_the_doc_lists_the_registry_s_apis_and_versions() -> None:
    assert markdown_table() in DOC.read_text(), "paste `python -m kraft.kafka.apis` into docs/kafka-protocol.md"
