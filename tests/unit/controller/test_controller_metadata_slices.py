"""The event loop never waits on a whole batch or snapshot: the loader replays in bounded slices
and publishes only whole batches, snapshots are parsed in a thread, the broker's follower decodes
and parses what it fetches off the loop, the tail serves records encoded once, and the garbage
collector's full passes walk only what the heap grew by."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import msgpack
import pytest

from kraft.broker import metadata_follower
from kraft.broker.metadata_follower import (
    BrokerSnapshotStore, MetadataFollower, pack_in_pieces, parse_snapshot, unpack_in_pieces,
)
from kraft.controller.heap import HeapFreezer, gc_paused
from kraft.controller.metadata_loader import MetadataLoader, SnapshotNeededError
from kraft.metadata.image import MetadataImage
from kraft.metadata.records import ClaimController, Partition, Topic


def topic_batch(start: int, name: str, partitions: int) -> list[tuple[int, dict[str, Any]]]:
    """One request's records: a topic and its partitions, from offset `start`."""
    tid = f"id-{name}"
    records = [Topic(name=name, topic_id=tid, controller_epoch=1).to_dict()] + [
        Partition(topic_id=tid, partition=p, replicas=(1,), isr=(1,), leader=1, controller_epoch=1).to_dict()
        for p in range(partitions)]
    return list(enumerate(records, start))


CLAIM = [(0, ClaimController(node_id=1, controller_epoch=1).to_dict())]


class Recorder:
    def __init__(self) -> None:
        self.offsets: list[int] = []

    def on_metadata_update(self, delta, image) -> None:
        self.offsets.append(image.offset)


async def test_a_20k_record_batch_is_replayed_in_slices_and_published_whole() -> None:
    loader = MetadataLoader(slice_records=500)
    loader.apply_batch(CLAIM)
    seen = Recorder()
    loader.install_publisher(seen)
    batch = topic_batch(1, "big", 19_999)  # offsets 1..20000
    wakeups = 0
    replaying = True

    async def other_work() -> None:  # what else the loop has to do meanwhile
        nonlocal wakeups
        while replaying:
            wakeups += 1
            await asyncio.sleep(0)

    ticker = asyncio.ensure_future(other_work())
    await asyncio.sleep(0)
    loader.handle_batch(batch)
    image = await loader.caught_up()
    replaying = False
    await ticker
    assert loader.slices >= 20_000 // 500 - 1  # it let go of the loop between slices...
    assert wakeups >= loader.slices  # ...and the other coroutine ran each time
    assert seen.offsets == [0, 20_000]  # one image for the whole batch, none for a part of it
    assert image.offset == 20_000 and len(image.topic_by_name("big").partitions) == 19_999


async def test_publishers_and_waiters_see_batch_boundaries_only() -> None:
    loader = MetadataLoader(slice_records=300, publish_records=1_000)
    loader.apply_batch(CLAIM)
    seen = Recorder()
    loader.install_publisher(seen)
    first, second = topic_batch(1, "a", 2_499), topic_batch(2_501, "b", 2_499)
    loader.handle_batch(first)
    loader.handle_batch(second)
    assert loader.offset == 5_000 and loader.image.offset == 0  # handed in, not applied yet
    assert not await loader.wait_for_offset(2_000, 0)  # never true in the middle of a batch
    await loader.caught_up()
    assert seen.offsets == [0, 2_500, 5_000] and loader.slices >= 2 * 2_500 // 300 - 2
    # the tail serves whole batches: as many as fit, or the first one alone when larger
    assert [o for o, _ in loader.read(2_499, 3)] == [2_499, 2_500]
    assert [o for o, _ in loader.read(2_501, 3)] == list(range(2_501, 5_001))
    assert len(loader.read(1, 5_000)) == 5_000 and len(loader.read(1, 4_999)) == 2_500
    assert loader.read(2_499, 3) is loader.read(2_499, 3)  # every broker asking gets the same decode
    assert msgpack.unpackb(loader.read_encoded(4_999, 10).packed()) == [[4_999, second[-2][1]],
                                                                         [5_000, second[-1][1]]]


async def test_a_snapshot_is_parsed_off_the_loop_thread_and_published_whole() -> None:
    source = MetadataLoader()
    source.apply_batch(CLAIM + topic_batch(1, "t", 3))
    snapshot = msgpack.packb(source.image.to_snapshot(), use_bin_type=True)
    loop_thread = threading.get_ident()
    parsed_in: list[int] = []

    def parse() -> MetadataImage:
        parsed_in.append(threading.get_ident())
        return MetadataImage.from_snapshot(msgpack.unpackb(snapshot, raw=False, strict_map_key=False))

    loader = MetadataLoader()
    seen = Recorder()
    loader.install_publisher(seen)
    image = await loader.install_snapshot(parse)
    assert parsed_in and parsed_in[0] != loop_thread
    assert image == source.image == loader.image and seen.offsets == [4]
    # a quorum's snapshot comes as a function too (RaftQuorum's PendingImage.fold): same path
    loader.handle_snapshot(4, parse)
    await loader.caught_up()
    assert len(parsed_in) == 2 and parsed_in[1] != loop_thread
    with pytest.raises(SnapshotNeededError):
        loader.read(0)  # the records before a snapshot are gone with it
    loader.handle_snapshot(9, parse)  # builds the image at 4, not 9: refused, nothing changes
    await loader.caught_up()
    assert loader.image.offset == 4


class FakeDirectory:
    def learn(self, *args: Any) -> None:
        pass

    def learn_leader(self, leader: Any) -> None:
        pass


class FakeController:
    """The active controller as the follower's client sees it: a fetch, then a snapshot."""

    def __init__(self, answers: list[Any]) -> None:
        self.directory = FakeDirectory()
        self.answers = answers
        self.calls: list[tuple[str, bool]] = []

    async def call(self, method: str, path: str, body: Any = None, params: Any = None, *,
                   raw_answer: bool = False, **kwargs: Any) -> Any:
        self.calls.append((path, raw_answer))
        return self.answers.pop(0)


async def test_the_follower_decodes_and_parses_a_snapshot_off_the_loop(tmp_path, monkeypatch) -> None:
    source = MetadataLoader()
    source.apply_batch(CLAIM + topic_batch(1, "t", 300))
    data = pack_in_pieces(source.image.to_snapshot())
    loop_thread = threading.get_ident()
    parsed_in: list[int] = []

    def recording_parse(raw: bytes) -> MetadataImage:
        parsed_in.append(threading.get_ident())
        return parse_snapshot(raw)

    monkeypatch.setattr(metadata_follower, "parse_snapshot", recording_parse)
    controller = FakeController([
        {"snapshot_needed": True, "records": [], "high_watermark": 302},
        data,
        {"snapshot_needed": False, "high_watermark": 303,
         "records": [[302, Topic(name="u", topic_id="id-u", controller_epoch=1).to_dict()]]},
    ])
    loader = MetadataLoader(max_retained_records=0)
    follower = MetadataFollower(2, loader, controller, BrokerSnapshotStore(tmp_path))  # type: ignore[arg-type]
    await follower.fetch_once()
    assert controller.calls[1] == ("/v1/controller/snapshot", True)  # bytes, decoded by the follower
    assert parsed_in and parsed_in[0] != loop_thread
    assert loader.image == source.image
    await follower.fetch_once()
    assert loader.image.offset == 302 and loader.image.topic_by_name("u") is not None
    assert follower.high_watermark == 303
    # the snapshot it keeps on disk loads back the same way, in a thread
    await follower._save()
    assert await asyncio.to_thread(follower.store.load) == loader.image


def test_piecewise_msgpack_is_msgpack() -> None:
    loader = MetadataLoader()
    loader.apply_batch(CLAIM + topic_batch(1, "t", 700) + topic_batch(702, "u", 3))
    snapshot = loader.image.to_snapshot()
    packed = msgpack.packb(snapshot, use_bin_type=True)
    assert pack_in_pieces(snapshot, piece=16) == packed
    assert unpack_in_pieces(packed, piece=16) == msgpack.unpackb(packed, raw=False, strict_map_key=False)
    assert parse_snapshot(packed) == loader.image
    with pytest.raises(ValueError):
        unpack_in_pieces(packed + b"\x00")
    with pytest.raises((ValueError, msgpack.UnpackException)):
        unpack_in_pieces(packed[:-10], piece=16)


def test_heap_freezer_freezes_after_expensive_full_collections_only() -> None:
    cpu = [0.0]
    frozen: list[float] = []
    freezer = HeapFreezer(min_cpu_s=0.005, freeze=lambda: frozen.append(cpu[0]), cpu_clock=lambda: cpu[0])

    def collection(generation: int, cost: float) -> None:
        freezer("start", {"generation": generation})
        cpu[0] += cost
        freezer("stop", {"generation": generation, "collected": 0, "uncollectable": 0})

    collection(0, 0.050)  # young generations: never
    collection(2, 0.001)  # a cheap full collection: nothing to gain
    assert frozen == []
    collection(2, 0.020)
    assert frozen == [pytest.approx(0.071)] and freezer.freezes == 1


def test_gc_paused_nests_and_always_ends_enabled() -> None:
    import gc
    assert gc.isenabled()
    with gc_paused():
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
