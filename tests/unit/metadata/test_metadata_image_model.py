"""The persistent-map image against a reference built with plain dicts (hypothesis, stateful).

A model keeps the cluster as dicts and emits the records a controller would write for random
operations (some of them invalid, which replay must ignore); the records are replayed in deltas of
random sizes, and after each delta the image, read back as plain dicts, must equal the model:
the HAMT maps, their sharing between images and the running partition count change nothing a
reader can see. The image also survives its snapshot form and pickle."""

from __future__ import annotations

import pickle
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kraft.metadata.delta import apply_records
from kraft.metadata.image import MetadataImage
from kraft.metadata.records import (
    NO_LEADER, ClaimController, Config, Endpoint, FenceBroker, MetadataRecord, NoOp, Partition, PartitionChange,
    RegisterBroker, RemoveTopic, RemoveUserScramCredential, Topic, UnfenceBroker, UnregisterBroker,
    UserScramCredential,
)

BROKERS = st.integers(1, 4)
NAMES = st.sampled_from(["a", "b", "c", "d"])
KEYS = st.sampled_from(["retention.ms", "cleanup.policy"])
USERS = st.sampled_from(["alice", "bob"])
MECHANISMS = st.sampled_from(["SCRAM-SHA-256", "SCRAM-SHA-512"])


def plain(image: MetadataImage) -> dict[str, Any]:
    """What a reader sees of the image, as builtins."""
    assert image.topics.partition_count == sum(len(t.partitions) for t in image.topics.by_id.values())
    for topic_id, t in image.topics.by_id.items():
        assert image.topics.by_name[t.name] is t and t.topic_id == topic_id
    return {
        "offset": image.offset,
        "controller": (image.controller_id, image.controller_epoch),
        "brokers": {b: (r.broker_epoch, r.fenced) for b, r in image.cluster.brokers.items()},
        "topics": {t.name: (t.topic_id, {p: (r.replicas, r.isr, r.leader, r.leader_epoch, r.partition_epoch)
                                         for p, r in t.partitions.items()})
                   for t in image.topics.by_name.values()},
        "configs": {k: dict(v) for k, v in image.configs.resources.items()},
        "scram": {k: c.iterations for k, c in image.scram.credentials.items()},
        "request_ids": list(image.request_ids.items()),
    }


class ImageModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.image = MetadataImage.EMPTY
        self.pending: list[tuple[int, MetadataRecord]] = []
        self.model: dict[str, Any] = {"offset": -1, "controller": (None, 0), "brokers": {}, "topics": {},
                                      "configs": {}, "scram": {}, "request_ids": []}
        self.requests = 0
        self.ids = 0

    # -- emitting records -------------------------------------------------------------------------

    def emit(self, records: list[MetadataRecord], with_request_id: bool = True) -> list[int]:
        """Queue one request's records (as the controller stamps them); their offsets."""
        epoch = self.model["controller"][1]
        request_id = None
        if with_request_id:
            self.requests += 1
            request_id = f"req-{self.requests}"
        offsets = []
        for record in records:
            offset = self.model["offset"] + 1
            self.model["offset"] = offset
            self.pending.append((offset, record.stamped(epoch, request_id)))
            offsets.append(offset)
        if request_id is not None:
            self.model["request_ids"].append((request_id, offsets[-1]))
        return offsets

    # -- operations -------------------------------------------------------------------------------

    @rule(node=st.integers(0, 3))
    def claim(self, node: int) -> None:
        epoch = self.model["controller"][1] + 1
        self.model["offset"] += 1
        self.pending.append((self.model["offset"], ClaimController(node_id=node, controller_epoch=epoch)))
        self.model["controller"] = (node, epoch)

    @rule(broker=BROKERS, fenced=st.booleans())
    def register(self, broker: int, fenced: bool) -> None:
        (offset,) = self.emit([RegisterBroker(broker_id=broker, incarnation_id=f"i{broker}", fenced=fenced,
                                              endpoints=(Endpoint("HTTP", "h", 9000 + broker),))])
        self.model["brokers"][broker] = (offset, fenced)

    @rule(broker=BROKERS, fence=st.booleans(), unregister=st.booleans())
    def change_broker(self, broker: int, fence: bool, unregister: bool) -> None:
        known = self.model["brokers"].get(broker)
        epoch = known[0] if known is not None else 99
        kind = UnregisterBroker if unregister else FenceBroker if fence else UnfenceBroker
        self.emit([kind(broker_id=broker, broker_epoch=epoch)])  # invalid (ignored) when unknown
        if known is not None:
            if unregister:
                del self.model["brokers"][broker]
            else:
                self.model["brokers"][broker] = (epoch, fence)

    @rule(name=NAMES, assignments=st.lists(st.lists(BROKERS, min_size=1, max_size=3, unique=True),
                                           min_size=1, max_size=4))
    def create_topic(self, name: str, assignments: list[list[int]]) -> None:
        self.ids += 1
        topic_id = f"id-{self.ids}"
        records: list[MetadataRecord] = [Topic(name=name, topic_id=topic_id)]
        records += [Partition(topic_id=topic_id, partition=p, replicas=tuple(r), isr=tuple(r), leader=r[0])
                    for p, r in enumerate(assignments)]
        self.emit(records)
        if name not in self.model["topics"]:  # else every record is ignored: the name exists
            self.model["topics"][name] = (topic_id, {p: (tuple(r), tuple(r), r[0], 0, 0)
                                                     for p, r in enumerate(assignments)})

    @precondition(lambda self: self.model["topics"])
    @rule(data=st.data(), count=st.integers(1, 3))
    def add_partitions(self, data: st.DataObject, count: int) -> None:
        name = data.draw(st.sampled_from(sorted(self.model["topics"])))
        topic_id, partitions = self.model["topics"][name]
        start = len(partitions) + data.draw(st.sampled_from([0, 0, 0, 1]))  # sometimes a gap: ignored
        self.emit([Partition(topic_id=topic_id, partition=start + i, replicas=(1,), isr=(1,), leader=1)
                   for i in range(count)])
        if start == len(partitions):
            partitions.update({start + i: ((1,), (1,), 1, 0, 0) for i in range(count)})

    @precondition(lambda self: self.model["topics"])
    @rule(data=st.data())
    def change_partition(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.model["topics"])))
        topic_id, partitions = self.model["topics"][name]
        p = data.draw(st.sampled_from(sorted(partitions)))
        replicas, isr, leader, le, pe = partitions[p]
        new_isr = tuple(data.draw(st.lists(st.sampled_from(replicas), min_size=1, unique=True)))
        new_leader = data.draw(st.sampled_from([*new_isr, NO_LEADER]))
        self.emit([PartitionChange(topic_id=topic_id, partition=p, isr=new_isr, leader=new_leader)])
        partitions[p] = (replicas, new_isr, new_leader, le + (new_leader != leader), pe + 1)

    @precondition(lambda self: self.model["topics"])
    @rule(data=st.data())
    def remove_topic(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.model["topics"])))
        self.emit([RemoveTopic(topic_id=self.model["topics"].pop(name)[0])])
        self.model["configs"].pop(("topic", name), None)

    @rule(name=NAMES, key=KEYS, value=st.one_of(st.none(), st.sampled_from(["1", "2"])), broker=st.booleans())
    def config(self, name: str, key: str, value: str | None, broker: bool) -> None:
        resource = ("broker", "1") if broker else ("topic", name)
        self.emit([Config(resource_type=resource[0], resource_name=resource[1], name=key, value=value)])
        if broker or name in self.model["topics"]:
            configs = self.model["configs"].setdefault(resource, {})
            if value is None:
                configs.pop(key, None)
            else:
                configs[key] = value
            if not configs:
                del self.model["configs"][resource]

    @rule(user=USERS, mechanism=MECHANISMS, iterations=st.integers(4096, 4100), remove=st.booleans())
    def scram(self, user: str, mechanism: str, iterations: int, remove: bool) -> None:
        if remove:
            self.emit([RemoveUserScramCredential(name=user, mechanism=mechanism)])
            self.model["scram"].pop((user, mechanism), None)
        else:
            self.emit([UserScramCredential(name=user, mechanism=mechanism, salt="s", stored_key="k",
                                           server_key="v", iterations=iterations)])
            self.model["scram"][(user, mechanism)] = iterations

    @rule()
    def no_op(self) -> None:
        self.emit([NoOp()], with_request_id=False)

    # -- replay -----------------------------------------------------------------------------------

    @rule(cut=st.integers(0, 8))
    def replay(self, cut: int) -> None:
        """One delta of the first `cut` pending records (or all)."""
        head, self.pending = self.pending[:cut or len(self.pending)], self.pending[cut or len(self.pending):]
        self.image = apply_records(self.image, head)[1]

    @invariant()
    def image_equals_the_model(self) -> None:
        if self.pending:
            return
        assert plain(self.image) == self.model

    @invariant()
    def snapshot_and_pickle_keep_the_image(self) -> None:
        assert MetadataImage.from_snapshot(self.image.to_snapshot()) == self.image
        assert pickle.loads(pickle.dumps(self.image)) == self.image


ImageModel.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None,
                                        suppress_health_check=[HealthCheck.too_slow])
TestImageModel = ImageModel.TestCase
