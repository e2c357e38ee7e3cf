"""InitProducerId (key 22, v0-5) and FindCoordinator (key 10, v0-4).

InitProducerId without a transactional id is an idempotent producer's: an id from this broker's
blocks, epoch 0. With one it goes to the transaction coordinator (the client found it with
FindCoordinator's transaction key): a new id gets a producer id, a known one its epoch bumped,
which fences the previous producer and aborts its open transaction (CONCURRENT_TRANSACTIONS
meanwhile: the client retries); v3+'s producer id and epoch (KIP-360) must be the current ones.
FindCoordinator answers a group's coordinator (the leader of its `__consumer_offsets` partition)
or a transactional id's (of its `__transaction_state` partition), at its endpoint of the
request's listener; v4+ batches coordinator keys."""

from __future__ import annotations

from typing import Any

from kraft.kafka.apis.common import Api, as_ms, code, entity, error_of, ms, nested, response_of
from kraft.kafka.transactions import INIT_PRODUCER_ID, fenced_for_version
from kraft.server.request_context import RequestContext
from kraft.server.services import BrokerServices

FIND_COORDINATOR = 10
GROUP_KEY, TRANSACTION_KEY = 0, 1


def init_producer_id(services: BrokerServices) -> Any:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        response = response_of(request)
        tid = request.transactional_id
        expected_pid = int(getattr(request, "producer_id", -1))
        try:
            if tid is None:
                ids: Any = await services.records.init_producer_id(ctx, None)
            else:
                expected = (expected_pid, int(request.producer_epoch)) if expected_pid >= 0 else None
                ids = await services.transactions.init_producer_id(ctx, tid, as_ms(request.transaction_timeout),
                                                                    expected)
        except Exception as e:  # noqa: BLE001 - answered with its error
            error = fenced_for_version(error_of(e), ctx, INIT_PRODUCER_ID)
            return entity(response, throttle_time=ms(0), error_code=code(error.error_code), producer_id=-1,
                          producer_epoch=-1)
        return entity(response, throttle_time=ms(0), error_code=code(None), producer_id=ids.producer_id,
                      producer_epoch=ids.producer_epoch)
    return handle


def find_coordinator(services: BrokerServices) -> Any:
    async def find(ctx: RequestContext, key_type: int, key: str) -> tuple[int, str, int, str | None, str | None]:
        if key_type not in (GROUP_KEY, TRANSACTION_KEY):
            return -1, "", -1, "INVALID_REQUEST", f"unknown coordinator key type {key_type}"
        try:
            found: Any = await (services.groups.find_coordinator(ctx, key) if key_type == GROUP_KEY
                                else services.transactions.find_coordinator(ctx, key))
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
    Api(INIT_PRODUCER_ID, 0, 5, init_producer_id, "InitProducerId"),
    Api(FIND_COORDINATOR, 0, 4, find_coordinator, "FindCoordinator"),
)
