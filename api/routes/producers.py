"""`POST /v1/producers/init`: a producer id and epoch for an idempotent producer (Kafka's
InitProducerId).

Without a body field, the id comes from the blocks the active controller allocates to this broker
(`ProducerIdService`, implemented by `kraft/broker/producer_ids.py`), epoch 0. With
`{"transactional_id": "..."}` the id is derived from the name (`api/producer_ids.py`), with no
state anywhere, so every broker answers the same.
"""

from __future__ import annotations

from typing import Protocol

from aiohttp import web

from kraft.api import authz
from kraft.api.errors import KraftError
from kraft.api.producer_ids import derived_producer_id
from kraft.api.messages.node import InitProducerIdRequest, InitProducerIdResponse
from kraft.api.wire import read_message, render

routes = web.RouteTableDef()


class ProducerIdService(Protocol):
    async def allocate_producer_id(self) -> int: ...


PRODUCER_IDS = web.AppKey("producer_id_service", ProducerIdService)


@routes.post("/v1/producers/init")
async def init_producer_id(request: web.Request) -> web.Response:
    transactional_id = (await read_message(request, InitProducerIdRequest)).transactional_id
    if transactional_id is not None:
        authz.require_named(request, [transactional_id])
        return render(request, InitProducerIdResponse(producer_id=derived_producer_id(transactional_id),
                                                      producer_epoch=0))
    service = request.app.get(PRODUCER_IDS)
    if service is None:
        raise KraftError("BROKER_NOT_AVAILABLE", "this node allocates no producer ids (it is not a broker)")
    return render(request, InitProducerIdResponse(producer_id=await service.allocate_producer_id(), producer_epoch=0))
