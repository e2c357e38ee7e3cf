"""The cluster id (issue 22 item 10, kraft/cluster_identity.py): chosen at random by a new log's
first controller and recorded in its claim, adopted by every node from the log, kept by an
upgraded cluster, written to meta.properties once known; another cluster's id is refused."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kraft.cluster_identity import (
    META_PROPERTIES, ClusterIdentity, ClusterIdGate, InconsistentClusterIdError, read_meta_properties,
    write_meta_properties,
)
from kraft.config import ConfigError
from kraft.controller import log_store
from kraft.controller.metadata_loader import MetadataLoader
from kraft.controller.quorum import LocalQuorum
from kraft.metadata.image import MetadataImage
from kraft.metadata.records import ClaimController

KAFKA_CLUSTER_ID = re.compile(r"[A-Za-z0-9_-]{22}")  # a 16-byte UUID in URL-safe base64


async def start_lone_controller(data_dir: Path, identity: ClusterIdentity) -> tuple[LocalQuorum, MetadataLoader]:
    quorum = LocalQuorum(data_dir, 1, cluster_id=identity.proposal)
    loader = MetadataLoader()
    loader.attach(quorum)
    loader.install_publisher(ClusterIdGate(identity, Recorder()))
    await quorum.start()
    await loader.caught_up()
    return quorum, loader


class Recorder:
    def __init__(self) -> None:
        self.images: list[MetadataImage] = []

    def on_metadata_update(self, delta: object, image: MetadataImage) -> None:
        self.images.append(image)


async def test_a_new_log_gets_a_random_id_and_every_new_log_another(tmp_path: Path) -> None:
    ids = []
    for name in ("a", "b"):
        identity = ClusterIdentity(tmp_path / name, 1, None)
        assert identity.cluster_id is None
        quorum, loader = await start_lone_controller(tmp_path / name, identity)
        assert KAFKA_CLUSTER_ID.fullmatch(loader.image.cluster_id)
        assert identity.cluster_id == loader.image.cluster_id
        await identity.close()
        assert read_meta_properties(tmp_path / name / META_PROPERTIES)["cluster.id"] == identity.cluster_id
        await quorum.close()
        ids.append(identity.cluster_id)
    assert ids[0] != ids[1]


async def test_a_restart_and_an_upgraded_log_keep_the_id_they_had(tmp_path: Path) -> None:
    # a log written before cluster ids were recorded: claims without one; the node's meta.properties
    # has the id it derived then
    store = log_store.MetadataLogStore(tmp_path)
    store.open_for_append(0)
    store.append(log_store.encode_batch(0, [ClaimController(node_id=1, controller_epoch=1).to_dict()]))
    store.close()
    write_meta_properties(tmp_path / META_PROPERTIES, "derivedIdOfOldCluster1", 1)
    identity = ClusterIdentity(tmp_path, 1, None)
    quorum, loader = await start_lone_controller(tmp_path, identity)
    assert loader.image.cluster_id == "derivedIdOfOldCluster1"  # recorded by the claim of epoch 2
    await quorum.close()
    again = ClusterIdentity(tmp_path, 1, None)
    quorum, loader = await start_lone_controller(tmp_path, again)
    assert loader.image.cluster_id == "derivedIdOfOldCluster1" and loader.image.controller_epoch == 3
    await quorum.close()


async def test_a_data_dir_of_another_cluster_is_refused_before_its_images_are_published(tmp_path: Path) -> None:
    write_meta_properties(tmp_path / META_PROPERTIES, "theOldClusterIdXXXXXXX", 1)
    told: list[str] = []
    identity = ClusterIdentity(tmp_path, 1, None, on_inconsistent=told.append)
    publisher = Recorder()
    gate = ClusterIdGate(identity, publisher)
    image = MetadataImage(offset=0, controller_id=2, controller_epoch=1, cluster_id="theNewClusterIdYYYYYYY")
    gate.on_metadata_update(None, image)
    gate.on_metadata_update(None, MetadataImage(offset=1, cluster_id="theNewClusterIdYYYYYYY"))
    assert publisher.images == [] and len(told) == 1
    assert "theOldClusterIdXXXXXXX" in told[0] and "theNewClusterIdYYYYYYY" in told[0]
    with pytest.raises(InconsistentClusterIdError, match="theOldClusterIdXXXXXXX.*theNewClusterIdYYYYYYY"):
        identity.check("theNewClusterIdYYYYYYY", "the active controller")
    identity.check("theOldClusterIdXXXXXXX", "the active controller")  # its own cluster: fine


def test_meta_properties_of_another_node_or_configured_cluster_is_a_config_error(tmp_path: Path) -> None:
    write_meta_properties(tmp_path / META_PROPERTIES, "c1", 1)
    with pytest.raises(ConfigError, match="node.id: .* belongs to node 1, not 2"):
        ClusterIdentity(tmp_path, 2, None)
    with pytest.raises(ConfigError, match="cluster.id: .* belongs to cluster c1, not c2"):
        ClusterIdentity(tmp_path, 1, "c2")
    assert ClusterIdentity(tmp_path, 1, "c1").cluster_id == "c1"
    assert ClusterIdentity(tmp_path / "new", 1, "c9").proposal() == "c9"  # the configured id is proposed
