"""`POST /v1/producers/init`: a producer id and epoch for an idempotent producer (Kafka's
InitProducerId).

Without a body field, the id comes from the blocks the active controller allocates to this broker
(`ProducerIdService`, implemented by `kraft/broker/producer_ids.py`), epoch 0. With
`{"transactional_id": "..."}` the id is derived from the name (`kraft/producer_ids.py`), with no
state anywhere, so every broker answers the same.
"""

from __future__ import annotations

from aiohttp import web

from kraft.api.messages.node import InitProducerIdRequest, InitProducerIdResponse
from kraft.api.routes.services import context_of, services_of
from kraft.api.wire import read_message, render

routes = web.RouteTableDef()


@routes.post("/v1/producers/init")
async def init_producer_id(request: web.Request) -> web.Response:
    transactional_id = (await read_message(request, InitProducerIdRequest)).transactional_id
    answer = await services_of(request).records.init_producer_id(context_of(request), transactional_id)
    return render(request, InitProducerIdResponse(producer_id=answer.producer_id, producer_epoch=answer.producer_epoch))
