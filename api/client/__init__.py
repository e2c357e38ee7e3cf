"""The Python client of kraft: `Producer`, `Consumer` and `Admin` over the HTTP API (msgpack).

It imports no server code: only the shared batch codec (`kraft.log.batch`), the error model
(`api.errors`) and the partitioner (`api.partitioner`).
"""

from kraft.api.client.admin import Admin, CreatedTopic, TopicConfigs
from kraft.api.client.consumer import Consumer
from kraft.api.client.futures import RecordFuture, RecordFutures
from kraft.api.client.producer import Producer
from kraft.api.client.transactions import PreparedTransaction, TransactionAbortableError, TransactionFatalError
from kraft.api.client.transport import NoBrokersAvailable
from kraft.api.client.types import (
    BrokerInfo,
    ClusterDescription,
    ConsumerGroupMetadata,
    ConsumerRecord,
    DeletedRecords,
    NewPartitions,
    NewTopic,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    PartitionInfo,
    PartitionOffsets,
    RecordMetadata,
    TopicDescription,
    TopicListing,
    TopicPartition,
)
from kraft.api.errors import KraftError

__all__ = [
    "Admin",
    "BrokerInfo",
    "ClusterDescription",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "CreatedTopic",
    "DeletedRecords",
    "KraftError",
    "NewPartitions",
    "NewTopic",
    "NoBrokersAvailable",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "PartitionInfo",
    "PartitionOffsets",
    "PreparedTransaction",
    "Producer",
    "RecordFuture",
    "RecordFutures",
    "RecordMetadata",
    "TopicConfigs",
    "TopicDescription",
    "TopicListing",
    "TopicPartition",
    "TransactionAbortableError",
    "TransactionFatalError",
]
