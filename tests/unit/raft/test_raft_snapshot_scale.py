"""Snapshots at 100k partitions: the image survives both snapshot forms whole (the msgpack one
brokers fetch and keep, the pickled Raft dump of the controller's `PendingImage`), and the Raft
thread's part of applying the batches that built it is only appending them."""

from __future__ import annotations

import pickle

import msgpack

from kraft.controller.raft_state import MetadataImageMachine, MetadataLogState, apply_batch, claim_record
from kraft.metadata.delta import MetadataDelta
from kraft.metadata.image import MetadataImage
from kraft.metadata.records import Endpoint, Partition, RegisterBroker, Topic

PARTITIONS = 100_000
PER_TOPIC = 1000


def batches() -> list[list[dict]]:
    out = [[RegisterBroker(broker_id=b, incarnation_id=f"inc-{b}", broker_epoch=b, controller_epoch=1,
                           endpoints=(Endpoint("HTTP", "127.0.0.1", 9000 + b),)).to_dict()] for b in (1, 2, 3)]
    for t in range(PARTITIONS // PER_TOPIC):
        tid = f"id-{t}"
        out.append([Topic(name=f"t-{t}", topic_id=tid, controller_epoch=1).to_dict()] + [
            Partition(topic_id=tid, partition=p, replicas=(1 + p % 3, 1 + (p + 1) % 3),
                      isr=(1 + p % 3, 1 + (p + 1) % 3), leader=1 + p % 3, controller_epoch=1).to_dict()
            for p in range(PER_TOPIC)])
    return out


def test_snapshot_round_trip_at_100k_partitions() -> None:
    machine = MetadataImageMachine()
    state = MetadataLogState(app_state=machine.initial_state())
    assert apply_batch(state, [claim_record(1, 1)], machine).applied
    for batch in batches():
        assert apply_batch(state, batch, machine).applied
    pending = state.app_state
    assert len(pending.chunks) == 3 + PARTITIONS // PER_TOPIC + 1  # kept, not folded, by the Raft thread

    image = pending.fold()  # what the loop's loader builds (MetadataDelta, the one replay rule)
    assert sum(len(t.partitions) for t in image.topics.by_id.values()) == PARTITIONS
    assert image.offset == state.offset

    packed = msgpack.packb(image.to_snapshot(), use_bin_type=True)
    assert MetadataImage.from_snapshot(msgpack.unpackb(packed, raw=False, strict_map_key=False)) == image

    restored = pickle.loads(pickle.dumps(state))  # pysyncobj's dump of the replicated state
    assert restored.app_state.chunks == ()
    assert restored.app_state.fold() == image
    # a snapshot install publishes the difference from the image the node had
    delta = MetadataDelta.from_snapshot(MetadataImage.EMPTY, restored.app_state.fold())
    assert len(delta.local_changes(1).leaders) == PARTITIONS // PER_TOPIC * len(range(0, PER_TOPIC, 3))
