"""Everything a listener serves requests with: the node's services (Kafka's KafkaApis, split by
concern) and what every listener shares (the node's settings, authorization, quotas, request
metrics, status). The node builds one `BrokerServices` and hands it to each of its listeners
(`listener.py`); a listener decodes a request, builds its RequestContext, calls a service and
encodes the typed answer.

The last fields are the node's own parts a listener may need beyond the services: its
authentication and inter-node credential, its TLS server context, its controller API for the
inter-node routes, ZooKeeper mode's inter-node endpoints, and its stage trace (when on).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from kraft.server.admin import ControllerApi
from kraft.server.authorization import Authorization
from kraft.server.broker_configs import BrokerConfigs
from kraft.server.controller_apis import ControllerApis
from kraft.server.group_apis import GroupApis
from kraft.server.metadata import MetadataView, NodeInfo
from kraft.server.quotas import Quotas
from kraft.server.record_apis import RecordApis
from kraft.server.replica_admin import ReplicaAdminApis
from kraft.server.request_metrics import MetricsService
from kraft.server.security_apis import SecurityApis
from kraft.server.topic_apis import TopicApis
from kraft.server.transaction_apis import TransactionApis

if TYPE_CHECKING:
    from kraft.broker.stage_trace import StageTrace
    from kraft.security.service import NodeSecurity
    from kraft.zk.mode import ZkServices


@dataclass(frozen=True)
class BrokerServices:
    node: NodeInfo
    metadata: MetadataView
    authorization: Authorization
    quotas: Quotas
    records: RecordApis
    topics: TopicApis
    groups: GroupApis
    security: SecurityApis
    controller: ControllerApis
    replicas: ReplicaAdminApis  # log dirs and producer state (DescribeLogDirs, DescribeProducers)
    transactions: TransactionApis
    broker_configs: BrokerConfigs | None = None  # the BROKER and BROKER_LOGGER config resources
    metrics: MetricsService | None = None
    status: Callable[[], dict[str, Any]] | None = None  # the controller and broker state health reports
    # -- the node's own parts a listener may need
    node_security: NodeSecurity | None = None  # authentication, the node credential, calls to other nodes
    tls: ssl.SSLContext | None = None  # the listener's server side of TLS, when on
    controller_api: ControllerApi | None = None  # the controller's API, inter-node RPCs included
    zookeeper: ZkServices | None = None  # ZooKeeper mode's inter-node endpoints
    trace: StageTrace | None = None  # records' stage events (stage.trace.events), for kraft-bench --trace
