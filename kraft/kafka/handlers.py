"""Every Kafka API handler the node serves, registered in one place: the registry that answers
ApiVersions, and the table of docs/kafka-protocol.md (`python -m kraft.kafka.api_table`), are
filled from here, and each handler is counted in the request metrics here (`counted`), once."""

from __future__ import annotations

from kraft.kafka import classic_groups, consumer_groups, group_admin, group_offsets, transactions
from kraft.kafka.admin_apis import register_admin_apis
from kraft.kafka.apis import register_all
from kraft.kafka.dispatch import HandlerRegistry
from kraft.kafka.handling import counted, register
from kraft.server.services import BrokerServices


def register_handlers(registry: HandlerRegistry, services: BrokerServices) -> None:
    registry.count_requests(lambda handler: counted(services, handler))
    register_all(registry, services)  # the data path: kraft/kafka/apis
    register_admin_apis(registry, services)
    register(registry, services, (*classic_groups.APIS, *group_offsets.APIS, *group_admin.APIS,
                                  *consumer_groups.APIS, *transactions.APIS))
