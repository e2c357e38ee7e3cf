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
from kraft.api.wire import Fields, read_body, render

routes = web.RouteTableDef()

MAX_TRANSACTIONAL_ID_CHARS = 1024


class ProducerIdService(Protocol):
    async def allocate_producer_id(self) -> int: ...


PRODUCER_IDS = web.AppKey("producer_id_service", ProducerIdService)


@routes.post("/v1/producers/init")
async def init_producer_id(request: web.Request) -> web.Response:
    body, _ = await read_body(request)
    f = Fields(body)
    transactional_id = f.get_str("transactional_id", None, nullable=True)
    if transactional_id is not None:
        if not 0 < len(transactional_id) <= MAX_TRANSACTIONAL_ID_CHARS:
            raise KraftError("INVALID_REQUEST", f"body.transactional_id must have 1 to "
                                                f"{MAX_TRANSACTIONAL_ID_CHARS} characters")
        authz.require(request, "WRITE", "TRANSACTIONAL_ID", transactional_id)
        return render(request, {"producer_id": derived_producer_id(transactional_id), "producer_epoch": 0})
    service = request.app.get(PRODUCER_IDS)
    if service is None:
        raise KraftError("BROKER_NOT_AVAILABLE", "this node allocates no producer ids (it is not a broker)")
    return render(request, {"producer_id": await service.allocate_producer_id(), "producer_epoch": 0})
