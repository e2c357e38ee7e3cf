"""InitProducerId (key 22, v0-4) for idempotent producers: an id from this broker's blocks, epoch
0; and FindCoordinator (key 10, v0-4) for groups: the broker that leads the group's
`__consumer_offsets` partition, at its endpoint of the request's listener. Transactions (a
transactional id, the transaction coordinator's key type) are not served yet: they answer
COORDINATOR_NOT_AVAILABLE saying so."""

from __future__ import annotations

from typing import Any

from kraft.kafka.apis.common import Api, code, entity, error_of, ms, nested, response_of
from kraft.server.request_context import RequestContext
from kraft.server.services import BrokerServices

INIT_PRODUCER_ID, FIND_COORDINATOR = 22, 10
GROUP_KEY, TRANSACTION_KEY = 0, 1
NO_TRANSACTIONS = "transactions are not served yet"


def init_producer_id(services: BrokerServices) -> Any:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        response = response_of(request)
        if request.transactional_id is not None:
            return entity(response, throttle_time=ms(0), error_code=code("COORDINATOR_NOT_AVAILABLE"),
                          producer_id=-1, producer_epoch=-1)
        try:
            ids = await services.records.init_producer_id(ctx, None)
        except Exception as e:  # noqa: BLE001 - answered with its error
            return entity(response, throttle_time=ms(0), error_code=code(error_of(e).error_code), producer_id=-1,
                          producer_epoch=-1)
        return entity(response, throttle_time=ms(0), error_code=code(None), producer_id=ids.producer_id,
                      producer_epoch=ids.producer_epoch)
    return handle


def find_coordinator(services: BrokerServices) -> Any:
    async def find(ctx: RequestContext, key_type: int, key: str) -> tuple[int, str, int, str | None, str | None]:
        if key_type != GROUP_KEY:
            return -1, "", -1, "COORDINATOR_NOT_AVAILABLE", NO_TRANSACTIONS
        try:
            found = await services.groups.find_coordinator(ctx, key)
        except Exception as e:  # noqa: BLE001 - answered with its error
            error = error_of(e)
            return -1, "", -1, error.error_code, error.message
        node_id = found.coordinator.node_id
        broker = next((b for b in services.metadata.cluster(ctx.listener_name).brokers if b.node_id == node_id), None)
        if broker is None:
            return -1, "", -1, "COORDINATOR_NOT_AVAILABLE", f"node {node_id} has no {ctx.listener_name} listener"
        return node_id, broker.host, broker.port, None, None

    async def handle(ctx: RequestContext, request: Any) -> Any:
        response = response_of(request)
        if ctx.api_version >= 4:
            coordinator_cls = nested(response, "Coordinator")
            coordinators = []
            for key in request.coordinator_keys:
                node_id, host, port, error, message = await find(ctx, int(request.key_type), key)
                coordinators.append(entity(coordinator_cls, key=key, node_id=node_id, host=host, port=port,
                                           error_code=code(error), error_message=message))
            return entity(response, throttle_time=ms(0), coordinators=tuple(coordinators))
        node_id, host, port, error, message = await find(ctx, int(getattr(request, "key_type", GROUP_KEY)), request.key)
        return entity(response, throttle_time=ms(0), error_code=code(error), error_message=message, node_id=node_id,
                      host=host, port=port)
    return handle


APIS = (
    Api(INIT_PRODUCER_ID, 0, 4, init_producer_id, "InitProducerId"),
    Api(FIND_COORDINATOR, 0, 4, find_coordinator, "FindCoordinator"),
)
