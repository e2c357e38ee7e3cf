"""The ZooKeeper controller's side of a controlled shutdown (ZooKeeper writes stubbed): only the
active controller answers, the broker epoch must be the registered one, the leaving broker's
leaderships and ISR places move and stay moved in later elections, and the answer lists what it
still leads (it is the only in-sync replica)."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
from typing import Any

import msgpack
import pytest
from aiohttp import web

from kraft.api.errors import KraftError
from kraft.controller.metadata_loader import MetadataLoader
from kraft.zk import znodes
from kraft.zk.broker import UPDATE_METADATA_PATH, ZkMetadataReceiver
from kraft.zk.controller import MetadataPusher, ZkController
from kraft.zk.image import broker_registration, with_brokers, with_partitions, with_topics
from kraft.metadata.image import MetadataImage, PartitionRegistration, TopicImage

EPOCHS = {1: 101, 2: 102, 3: 103}


class StubbedController(ZkController):
    """Writes go to `written` and the image, not to ZooKeeper."""

    def __init__(self) -> None:
        super().__init__(1, None, ZkMetadataReceiver(1, MetadataLoader(), lambda: "c"), lambda: "c")  # type: ignore[arg-type]
        self.written: list[tuple[str, int, PartitionRegistration]] = []
        image = with_brokers(MetadataImage(controller_epoch=1, controller_id=1), {
            b: broker_registration(znodes.BrokerInfo(b, "127.0.0.1", 9000 + b), e) for b, e in EPOCHS.items()})
        topic = with_partitions(TopicImage("t", "tid", {}), {
            0: PartitionRegistration((2, 1, 3), (2, 1, 3), 2),
            1: PartitionRegistration((1, 2, 3), (1, 2, 3), 1),
            2: PartitionRegistration((2, 3), (2,), 2),  # 2 is its only in-sync replica
            3: PartitionRegistration((2,), (2,), 2),  # one replica: not moved, not counted
        })
        self.image = with_topics(image, [topic])
        self.active = True

    async def _write(self, changes: list[tuple[str, int, Any, PartitionRegistration]]) -> None:
        by_topic: dict[str, dict[int, PartitionRegistration]] = {}
        for t, p, _, after in changes:
            self.written.append((t, p, after))
            by_topic.setdefault(t, {})[p] = after
        self._set_partitions(by_topic)


async def shutdown(controller: ZkController, broker_id: int, epoch: int) -> list[tuple[str, int]]:
    answer: asyncio.Future[list[tuple[str, int]]] = asyncio.get_running_loop().create_future()
    await controller._on_controlled_shutdown(broker_id, epoch, answer)
    return answer.result()


async def test_only_the_active_controller_answers() -> None:
    controller = StubbedController()
    controller.active = False
    with pytest.raises(KraftError) as e:
        await controller.controlled_shutdown(2, EPOCHS[2])
    assert e.value.error_code == "NOT_CONTROLLER" and e.value.retriable


async def test_unknown_broker_or_stale_epoch_is_refused() -> None:
    controller = StubbedController()
    with pytest.raises(KraftError) as e:
        await shutdown(controller, 9, 1)
    assert e.value.error_code == "BROKER_NOT_AVAILABLE"
    with pytest.raises(KraftError) as e:
        await shutdown(controller, 2, EPOCHS[2] - 1)  # an earlier incarnation of broker 2
    assert e.value.error_code == "STALE_BROKER_EPOCH"
    assert controller.written == [] and controller._shutting_down == {}


async def test_leaderships_and_isr_places_move_and_stay_moved() -> None:
    controller = StubbedController()
    remaining = await shutdown(controller, 2, EPOCHS[2])
    assert remaining == [("t", 2)]  # its only in-sync replica; one-replica partition 3 is not counted
    parts = controller.image.topic_by_name("t").partitions  # type: ignore[union-attr]
    assert (parts[0].leader, parts[0].isr) == (1, (1, 3))  # first staying ISR member in replica order
    assert (parts[1].leader, parts[1].isr) == (1, (1, 3))  # a follower leaves the ISR
    assert (parts[2].leader, parts[2].isr) == (2, (2,))
    assert (parts[3].leader, parts[3].isr) == (2, (2,))
    # a later election (another broker's change) does not hand anything back to broker 2
    controller.written.clear()
    await controller._elect_leaders()
    assert controller.written == []
    # the broker asking again (its retry) moves nothing more and gets the same answer
    assert await shutdown(controller, 2, EPOCHS[2]) == [("t", 2)]
    assert controller.written == []


async def test_the_leaving_broker_is_still_pushed_the_leaderships_it_lost() -> None:
    """A broker in a controlled shutdown is fenced in the pushed image, yet still gets the pushes:
    it must learn that it no longer leads, so its waiting acks=all produces fail over at once
    (Kafka's controller sends to live and shutting-down brokers alike)."""
    received: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def update_metadata(request: web.Request) -> web.Response:
        await received.put(msgpack.unpackb(await request.read(), raw=False))
        return web.json_response({})

    app = web.Application()
    app.router.add_post(UPDATE_METADATA_PATH, update_metadata)
    runner = web.AppRunner(app)
    await runner.setup()
    sock = socket.create_server(("127.0.0.1", 0))
    await web.SockSite(runner, sock).start()
    leaving = dataclasses.replace(
        broker_registration(znodes.BrokerInfo(2, "127.0.0.1", sock.getsockname()[1]), EPOCHS[2]), fenced=True)
    image = with_brokers(MetadataImage(controller_epoch=1, controller_id=1), {
        1: broker_registration(znodes.BrokerInfo(1, "127.0.0.1", 9001), EPOCHS[1]), 2: leaving})
    pusher = MetadataPusher(1, ZkMetadataReceiver(1, MetadataLoader(), lambda: "c"), lambda epoch: None)
    try:
        pusher.push("c", image)
        body = await asyncio.wait_for(received.get(), 10)
        assert (body["controller_id"], body["controller_epoch"]) == (1, 1)
        assert MetadataImage.from_snapshot(body["image"]).cluster.broker(2).fenced
    finally:
        await pusher.close()
        await runner.cleanup()
