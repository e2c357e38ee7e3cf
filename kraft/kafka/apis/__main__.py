"""`python -m kraft.kafka.apis` prints docs/kafka-protocol.md's table of the served APIs and
versions (tests/unit/kafka/test_kafka_apis_doc.py keeps the page in step)."""

from kraft.kafka.apis import markdown_table

print(markdown_table())
