"""ZkMetadataReceiver: the broker applies a controller's pushed image through its metadata loader
and refuses a push from an older controller epoch (STALE_CONTROLLER_EPOCH, the fencing of a
controller that wakes up after it was replaced) or from another cluster."""

from __future__ import annotations

import dataclasses

import pytest

from kraft.api.errors import SPECS, KraftError, http_status
from kraft.controller.metadata_loader import MetadataLoader
from kraft.zk.broker import ZkMetadataReceiver
from kraft.zk.image import image_offset
from kraft.metadata.image import MetadataImage


def push(receiver: ZkMetadataReceiver, epoch: int, sequence: int, cluster_id: str = "c1") -> dict:
    image = dataclasses.replace(MetadataImage.EMPTY, offset=image_offset(epoch, sequence), controller_epoch=epoch,
                                controller_id=epoch)
    return receiver.update_metadata(cluster_id, epoch, epoch, image.to_snapshot())


def test_pushes_apply_and_a_stale_controller_is_refused() -> None:
    loader = MetadataLoader()
    receiver = ZkMetadataReceiver(1, loader, lambda: "c1")
    push(receiver, 2, 1)
    assert (loader.image.controller_id, loader.image.controller_epoch) == (2, 2)
    with pytest.raises(KraftError) as refused:
        push(receiver, 1, 99)  # the deposed controller of epoch 1 wakes up
    assert refused.value.error_code == "STALE_CONTROLLER_EPOCH" and http_status(refused.value) == 409
    assert SPECS["STALE_CONTROLLER_EPOCH"].kafka_code == 11
    assert refused.value.extra == {"controller_epoch": 2}
    assert (loader.image.controller_id, loader.image.offset) == (2, image_offset(2, 1))
    assert receiver.refused == 1
    push(receiver, 2, 3)
    push(receiver, 2, 2)  # a late copy of an older push of the same controller changes nothing
    assert loader.image.offset == image_offset(2, 3)
    push(receiver, 3, 1)  # a newer controller's first image is above every offset of the old one
    assert loader.image.controller_id == 3


def test_another_clusters_push_or_a_malformed_one_is_refused() -> None:
    loader = MetadataLoader()
    receiver = ZkMetadataReceiver(1, loader, lambda: "c1")
    with pytest.raises(KraftError) as other:
        push(receiver, 1, 1, cluster_id="c2")
    assert other.value.error_code == "INCONSISTENT_CLUSTER_ID"
    with pytest.raises(KraftError) as malformed:
        receiver.update_metadata("c1", 1, 1, {"format": 1})
    assert malformed.value.error_code == "INVALID_REQUEST"
    assert loader.image.offset == -1 and receiver.controller_epoch == 0
