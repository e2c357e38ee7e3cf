"""The Kafka admin APIs of issue 23's admin part, registered together: ACLs, client quotas, SCRAM
credentials, the controller's admin APIs (quorum, elections, reassignments) and the replicas'
(log dirs, producers). `register_admin_apis(registry, services)` serves them on every listener."""

from __future__ import annotations

from kraft.kafka import acls, client_quotas, controller_apis, replica_admin, scram_credentials
from kraft.kafka.handling import KafkaApi, Registry, register
from kraft.server.services import BrokerServices

ADMIN_APIS: tuple[KafkaApi, ...] = (
    *acls.APIS, *client_quotas.APIS, *scram_credentials.APIS, *controller_apis.APIS, *replica_admin.APIS,
)


def register_admin_apis(registry: Registry, services: BrokerServices) -> None:
    register(registry, services, ADMIN_APIS)
