"""A Kafka producer's v2 batches through the replica manager's append: stored as sent, validated
record by record (Kafka's LogValidator for magic 2), so a produce past INLINE_APPEND_BYTES is
appended in a thread while the event loop serves others; a small one stays inline."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[2]))

from kraft.broker.replica_manager import INLINE_APPEND_BYTES, ReplicaManager  # noqa: E402
from kraft.log import kafka_batch  # noqa: E402
from kraft.log.batch import iter_batches  # noqa: E402
from kraft.log.config import LogConfig  # noqa: E402
from kraft.metadata.delta import apply_records  # noqa: E402
from kraft.metadata.image import MetadataImage  # noqa: E402
from kraft.metadata.records import ClaimController, Endpoint, Partition, RegisterBroker, Topic, UnfenceBroker  # noqa: E402
from kraft.server.records import ProduceEntry  # noqa: E402
from loop_turns import loop_turns  # noqa: E402

NOW = 1_700_000_000_000


def _image() -> MetadataImage:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    records = [ClaimController(node_id=1, controller_epoch=1),
               RegisterBroker(broker_id=1, incarnation_id="inc-1", endpoints=(Endpoint("HTTP", "127.0.0.1", port),),
                              broker_epoch=11),
               UnfenceBroker(broker_id=1, broker_epoch=11),
               Topic(name="t", topic_id="tid"),
               Partition(topic_id="tid", partition=0, replicas=(1,), isr=(1,), leader=1)]
    stamped = [r.stamped(1, "rid") for r in records]
    return apply_records(MetadataImage.EMPTY, ((1 + i, r) for i, r in enumerate(stamped)))[1]


def _v2_batches(total_bytes: int) -> bytes:
    """Producer v2 batches of 100-byte records, each below max.message.bytes, `total_bytes` in all."""
    out = b""
    while len(out) < total_bytes:
        out += kafka_batch.build_batch([(None, os.urandom(100), (), NOW) for _ in range(4000)])
    return out


async def test_a_large_v2_produce_is_validated_and_appended_off_the_event_loop(tmp_path: Path) -> None:
    manager = ReplicaManager(1, tmp_path / "data", LogConfig(), 3_600_000, 1 << 20)
    (tmp_path / "data").mkdir()
    manager.on_metadata_update(None, _image())
    replica = manager.replica("t", 0)
    await replica.wait_ready()
    try:
        small = kafka_batch.build_batch([(None, b"v", (), NOW)])
        async with loop_turns() as turns:
            [result] = await manager.produce([ProduceEntry("t", 0, small)], 1, 1000)
        inline_turns = turns()  # the produce's own awaits; an inline append adds none
        assert result.error_code is None
        large = _v2_batches(INLINE_APPEND_BYTES + 1)
        async with loop_turns() as turns:
            [result] = await manager.produce([ProduceEntry("t", 0, large)], 1, 1000)
        assert result.error_code is None and result.base_offset == 1
        assert turns() > inline_turns  # others ran while it was validated and written
        stored = _split(replica.log.read(1, 1 << 24).records)
        assert {b[16] for b in stored} == {2}
        assert [b[16:] for b in stored] == [b[16:] for b in _split(large)]  # as sent, offsets stamped
    finally:
        await manager.close()


def _split(data: bytes) -> list[bytes]:
    return [data[p:p + h.size_in_bytes] for p, h in iter_batches(data)]

