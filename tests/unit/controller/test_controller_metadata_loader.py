"""MetadataLoader: bursts become one delta, publishers are isolated, the tail serves brokers."""

from __future__ import annotations

import asyncio
import pickle

import pytest

from kraft.controller.heartbeats import BrokerHeartbeatManager
from kraft.controller.metadata_loader import MetadataLoader, SnapshotNeededError
from kraft.controller.raft_state import MetadataImageMachine
from kraft.metadata.image import MetadataImage
from kraft.metadata.records import ClaimController, NoOp, Partition, Topic


def records(n_topics: int, start: int = 0) -> list[tuple[int, dict]]:
    out = [] if start else [(0, ClaimController(node_id=1, controller_epoch=1).to_dict())]
    for i in range(n_topics):
        tid = f"id{start + i}"
        out.append((len(out) + start, Topic(name=f"t{start + i}", topic_id=tid, controller_epoch=1).to_dict()))
        out.append((len(out) + start, Partition(topic_id=tid, partition=0, replicas=(1,), isr=(1,), leader=1,
                                                controller_epoch=1).to_dict()))
    return out


class Recorder:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.images: list[MetadataImage] = []

    def on_metadata_update(self, delta, image) -> None:
        self.images.append(image)
        if self.fail:
            raise RuntimeError("publisher bug")


async def test_a_burst_of_commits_is_published_once() -> None:
    loader = MetadataLoader()
    bad, good = Recorder(fail=True), Recorder()
    loader.install_publisher(bad)
    loader.install_publisher(good)
    for offset, record in records(50):
        loader.handle_commit(offset, record)
    assert good.images == [] and loader.offset == 100  # handed in, applied by the loader's task...
    await loader.caught_up()
    assert len(good.images) == 1 and len(bad.images) == 1  # ...once, for all 101 records
    assert good.images[0].offset == 100 and len(good.images[0].topics.by_id) == 50
    loader.handle_commit(100, records(1)[1][1])  # redelivered offset: ignored
    loader.handle_commit(101, NoOp(controller_epoch=1).to_dict())
    assert loader.image.offset == 100  # the image is the last one published: it never waits
    assert (await loader.caught_up()).offset == 101 == loader.image.offset


def test_without_a_loop_commits_apply_at_once_and_new_publishers_get_the_image() -> None:
    loader = MetadataLoader()
    loader.handle_commit(0, ClaimController(node_id=1, controller_epoch=1).to_dict())
    late = Recorder()
    loader.install_publisher(late)
    assert late.images == [loader.image] and loader.image.controller_id == 1


def test_read_tail_and_snapshot_needed() -> None:
    loader = MetadataLoader(max_retained_records=8)
    loader.apply_batch(records(10))  # offsets 0..20
    assert loader.read(25) == [] and loader.read(21) == []
    assert [o for o, _ in loader.read(18)] == [18, 19, 20]
    assert [o for o, _ in loader.read(18, max_records=2)] == [18, 19, 20]  # the rest of the batch
    with pytest.raises(SnapshotNeededError) as e:
        loader.read(0)
    assert e.value.error_code == "OFFSET_OUT_OF_RANGE"
    # a broker that loads the image as a snapshot continues from there
    follower = MetadataLoader()
    follower.load_snapshot(MetadataImage.from_snapshot(loader.image.to_snapshot()))
    follower.apply_batch(loader.read(follower.image.offset + 1))
    assert follower.image == loader.image


async def test_wait_for_offset() -> None:
    loader = MetadataLoader()
    assert not await loader.wait_for_offset(0, 0.01)
    waiter = asyncio.ensure_future(loader.wait_for_offset(2, 5))
    await asyncio.sleep(0)
    loader.apply_batch(records(1))
    assert await asyncio.wait_for(waiter, 5)


def test_snapshot_from_the_state_machine_replaces_state() -> None:
    machine = MetadataImageMachine()
    pending = machine.initial_state()
    for offset, record in records(3):
        pending = machine.replay(pending, [(offset, record)])
    pending = machine.replay(pending, [(7, {"type": "garbage"})])  # never raises
    # what a Raft snapshot does with it; the image is built from the pending entries
    state = pickle.loads(pickle.dumps(pending)).fold()
    assert state.offset == 7 and len(state.topics.by_id) == 3
    loader = MetadataLoader()
    loader.apply_batch(records(1))
    seen = Recorder()
    loader.install_publisher(seen)
    loader.handle_snapshot(state.offset, state)
    assert loader.image == state and seen.images[-1] == state
    loader.handle_snapshot(3, None)  # not an image: ignored
    assert loader.image == state


def test_heartbeat_sessions() -> None:
    hb = BrokerHeartbeatManager(100)
    hb.touch(1, 0)
    assert hb.expired([1, 2], 100) == []  # 2 is new: gets a session now
    assert hb.expired([1, 2], 101) == [1]
    hb.touch(1, 150)
    hb.touch(1, 120)  # out of order contact does not move the session back
    assert hb.expired([1, 2], 201) == [2] and hb.is_alive(1, 250) and not hb.is_alive(1, 251)
    hb.reset([1], 1000)
    assert hb.expired([1], 1100) == [] and hb.expired([1], 1101) == [1]
    hb.remove(1)
    assert not hb.is_alive(1, 1000)
