"""What the services read of the broker's metadata: answer-shaped descriptions of the cluster and
its topics (`MetadataView`, implemented by `kraft/broker/metadata_view.py` over the broker's
image), and the node's own settings every listener answers with (`NodeInfo`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Protocol, Sequence

from kraft.errors import KraftError
from kraft.metadata import topic_name
from kraft.metadata.errors import MetadataError


@dataclass(frozen=True)
class NodeInfo:
    node_id: int
    roles: tuple[str, ...]
    max_request_bytes: int
    auto_create_topics: bool
    fetch_max_bytes: int  # the broker's fetch.max.bytes: what one fetch answer holds at most


@dataclass(frozen=True)
class BrokerDescription:
    node_id: int
    host: str
    port: int
    rack: str | None


@dataclass(frozen=True)
class PartitionDescription:
    partition: int
    leader: int  # -1 when offline
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True)
class TopicDescription:
    name: str
    topic_id: str
    internal: bool
    partitions: tuple[PartitionDescription, ...]
    configs: Mapping[str, str]  # the topic's overrides


@dataclass(frozen=True)
class ClusterDescription:
    cluster_id: str
    controller_id: int  # -1 when unknown
    brokers: tuple[BrokerDescription, ...]


class MetadataView(Protocol):
    def cluster(self, listener: str | None = None) -> ClusterDescription:
        """The cluster, its brokers with their endpoint of `listener` (a Kafka listener's name;
        None: the HTTP API's); a broker without one is left out, as Kafka does."""

    def topics(self) -> Sequence[TopicDescription]: ...

    def topic(self, name: str) -> TopicDescription | None: ...

    def topic_defaults(self) -> Mapping[str, str]: ...


def check_topic_name(name: Any, action: str | None = None) -> str:
    """Kafka's legal topic names (`metadata.topic_name`); with `action` ("create", "produce to",
    "delete", ...), also a name a client may do that to (not an internal topic)."""
    try:
        if action is None:
            return topic_name.validate_topic_name(name)
        return topic_name.check_client_topic(name, action)
    except MetadataError as e:
        raise KraftError(e.error_code, e.message) from None
