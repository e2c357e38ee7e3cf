"""This node's cluster id, and `<data>/meta.properties` that keeps it (Kafka's file: version,
cluster.id, node.id, directory.id).

Kafka formats every node with the cluster id; kraft starts without a formatting step, so the first
active controller of a new metadata log chooses a random id (Kafka's form) and records it in its
`ClaimController`; every other node adopts it from the log (the image's `cluster_id`). In ZooKeeper
mode the id is the `/cluster/id` znode, as Kafka's. A node knows its cluster from meta.properties
(or the `cluster.id` key) before it hears from the cluster: when the two differ it refuses to join
with both ids in the message (Kafka's INCONSISTENT_CLUSTER_ID), so a data directory of an old
cluster rebuilt on the same addresses is never taken for the new one's.

`ClusterIdentity` is that knowledge: what this node proposes in its claims, the one check every
source goes through (the metadata log, the Raft leader, the controller, ZooKeeper), and the
meta.properties written once the id is confirmed. `ClusterIdGate` passes images on to the broker's
publisher only while they are of this node's cluster.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import uuid
from pathlib import Path
from typing import Any, Callable

from kraft.config import ConfigError

log = logging.getLogger("kraft.node")

META_PROPERTIES = "meta.properties"


def new_cluster_id() -> str:
    """Kafka's form (`kafka-storage random-uuid`): a random UUID as 22 characters of URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")


class InconsistentClusterIdError(Exception):
    """This node belongs to another cluster than the one it reached."""

    error_code = "INCONSISTENT_CLUSTER_ID"


def read_meta_properties(path: Path) -> dict[str, str]:
    """The keys of a meta.properties ({} when there is none)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))


def write_meta_properties(path: Path, cluster_id: str, node_id: int) -> None:
    """The directory keeps its directory.id (`kraft/broker/log_dirs.py` may have written it)."""
    directory_id = read_meta_properties(path).get("directory.id") or new_cluster_id()
    write_properties(path, {"version": "1", "cluster.id": cluster_id, "node.id": str(node_id),
                            "directory.id": directory_id})


def write_properties(path: Path, props: dict[str, str]) -> None:
    """Written to a temp file, fsynced and renamed over: a crash leaves the old file or the new."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("#\n" + "".join(f"{key}={value}\n" for key, value in props.items()))
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)


class ClusterIdentity:
    def __init__(self, data_dir: Path, node_id: int, configured: str | None,
                 on_inconsistent: Callable[[str], None] = lambda message: None) -> None:
        """Reads meta.properties: a data dir of another node, or of another cluster than
        `configured` (the cluster.id key), is a ConfigError."""
        self.path = data_dir / META_PROPERTIES
        self.node_id = node_id
        self.on_inconsistent = on_inconsistent
        props = read_meta_properties(self.path)
        if props and props.get("node.id") != str(node_id):
            raise ConfigError("node.id", f"{self.path} belongs to node {props.get('node.id')}, not {node_id}")
        stored = props.get("cluster.id") or None
        if stored and configured and stored != configured:
            raise ConfigError("cluster.id", f"{self.path} belongs to cluster {stored}, not {configured}")
        self.cluster_id: str | None = stored or configured  # read from the Raft thread too: one reference
        self.source = str(self.path) if stored else "cluster.id" if configured else ""
        self._saved = stored is not None
        self._proposal: str | None = None
        self._saving: asyncio.Future[None] | None = None

    def proposal(self) -> str:
        """The cluster id this node's controller claims carry: the one it knows, else a random one
        drawn once (the claim that reaches the log first names the cluster)."""
        if self.cluster_id is not None:
            return self.cluster_id
        if self._proposal is None:
            self._proposal = new_cluster_id()
        return self._proposal

    def check(self, cluster_id: str, source: str) -> None:
        """InconsistentClusterIdError (after telling `on_inconsistent`) when this node knows
        another cluster than `source`'s."""
        if self.cluster_id is not None and cluster_id != self.cluster_id:
            self.refuse(f"this node belongs to cluster {self.cluster_id} ({self.source}), {source} to cluster "
                        f"{cluster_id}: refusing to join it (a data directory of another cluster? move it away)")

    def refuse(self, message: str) -> None:
        """This node cannot be part of the cluster it reached: says why, and raises."""
        self.on_inconsistent(message)
        raise InconsistentClusterIdError(message)

    def learn(self, cluster_id: str, source: str) -> None:
        """The cluster's id as `source` records it: checked, adopted, and written to meta.properties
        (in a thread) if it is not there yet."""
        self.check(cluster_id, source)
        if self.cluster_id is None:
            log.info("cluster id %s (from %s)", cluster_id, source)
            self.cluster_id, self.source = cluster_id, source
        if not self._saved:
            self._saved = True
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # a plain caller: no loop to keep free
                self._save(cluster_id)
            else:
                self._saving = loop.run_in_executor(None, self._save, cluster_id)

    def _save(self, cluster_id: str) -> None:
        try:
            write_meta_properties(self.path, cluster_id, self.node_id)
        except OSError as e:  # the id stays known (in the log); the next start writes the file
            self._saved = False
            log.error("could not write %s: %s", self.path, e)

    async def close(self) -> None:
        """Waits for a meta.properties write in flight."""
        if self._saving is not None:
            await self._saving


class ClusterIdGate:
    """A metadata publisher in front of `publisher`: each image's cluster id goes through
    `identity.learn`, and images of another cluster are not published (nor any after them)."""

    def __init__(self, identity: ClusterIdentity, publisher: Any) -> None:
        self.identity = identity
        self.publisher = publisher
        self.refused = False

    def on_metadata_update(self, delta: Any, image: Any) -> None:
        if self.refused:
            return
        if image.cluster_id is not None:
            try:
                self.identity.learn(image.cluster_id, "the metadata log")
            except InconsistentClusterIdError:
                self.refused = True
                return
        self.publisher.on_metadata_update(delta, image)
