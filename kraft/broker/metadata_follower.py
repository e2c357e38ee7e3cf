"""A broker-only node's copy of the metadata log: it follows the active controller as a KRaft
observer and feeds the node's `MetadataLoader`, so its publishers (replica manager, groups,
metadata view) see the same (delta, image) stream as on a controller.

The loop long-polls `/v1/controller/metadata` from the loader's next offset and replays what comes
back; when the controller no longer retains those records it loads the controller's image
snapshot instead. The image is also kept on disk (`<data>/__cluster_metadata-0/broker.snapshot`,
msgpack, written atomically every `snapshot_interval_records` offsets and at shutdown), so a
restart loads it and fetches only the tail.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any

import msgpack

from kraft.api.errors import KraftError
from kraft.controller.client import ControllerClient
from kraft.controller.metadata_loader import MetadataLoader
from kraft.log import fault_injection
from kraft.metadata.image import MetadataImage

log = logging.getLogger("kraft.broker.metadata")

SNAPSHOT_FILE = "broker.snapshot"
ERROR_BACKOFF_S = 0.2


class BrokerSnapshotStore:
    """One msgpack file holding the latest image this broker applied."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / SNAPSHOT_FILE

    def load(self) -> MetadataImage | None:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            return MetadataImage.from_snapshot(msgpack.unpackb(data, raw=False, strict_map_key=False))
        except (ValueError, msgpack.UnpackException) as e:  # a torn file: fetch everything again
            log.warning("ignoring the unreadable metadata snapshot %s: %s", self.path, e)
            return None

    def save(self, image: MetadataImage) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        fault_injection.before_write()
        with open(tmp, "wb") as f:
            f.write(msgpack.packb(image.to_snapshot(), use_bin_type=True))
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(self.path)


class MetadataFollower:
    def __init__(self, broker_id: int, loader: MetadataLoader, client: ControllerClient, store: BrokerSnapshotStore,
                 *, max_wait_ms: int = 1000, max_records: int = 5000,
                 snapshot_interval_records: int = 20_000) -> None:
        self.broker_id = broker_id
        self.loader = loader
        self.client = client
        self.store = store
        self.max_wait_ms = max_wait_ms
        self.max_records = max_records
        self.snapshot_interval_records = snapshot_interval_records
        self.cluster_id: str | None = None  # as the controller reports it
        # The controller's metadata high watermark with the last fetch, once that fetch's records
        # are applied: caught up when loader.offset + 1 reaches it (-1: no answer yet).
        self.high_watermark = -1
        self._saved_offset = -1
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        image = await asyncio.to_thread(self.store.load)
        if image is not None:
            self.loader.load_snapshot(image)
            self._saved_offset = image.offset
            log.info("metadata snapshot at offset %d loaded from %s", image.offset, self.store.path)
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self._save()

    async def _run(self) -> None:
        failures = 0
        while True:
            try:
                await self.fetch_once()
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception as e:
                failures += 1
                if failures == 1 or failures % 50 == 0:
                    log.warning("metadata fetch failed (%d in a row): %s", failures, e)
                await asyncio.sleep(ERROR_BACKOFF_S)

    async def fetch_once(self) -> None:
        """One long poll: replay the records, or load the snapshot when told to."""
        answer = await self.client.call(
            "GET", "/v1/controller/metadata",
            params={"broker_id": self.broker_id, "from_offset": self.loader.offset + 1,
                    "max_records": self.max_records, "max_wait_ms": self.max_wait_ms},
            timeout_s=self.max_wait_ms / 1000 + 10, request_timeout_s=self.max_wait_ms / 1000 + 5)
        self._learn(answer)
        if answer.get("snapshot_needed"):
            snapshot = await self.client.call("GET", "/v1/controller/snapshot", timeout_s=30,
                                              request_timeout_s=30)
            image = MetadataImage.from_snapshot(snapshot)
            log.info("loading the controller's metadata snapshot at offset %d", image.offset)
            self.loader.load_snapshot(image)
        else:
            records = answer.get("records") or []
            self.loader.apply_batch([(int(offset), record) for offset, record in records])
        self.high_watermark = int(answer.get("high_watermark", -1))
        if self.loader.offset - self._saved_offset >= self.snapshot_interval_records:
            await self._save()

    def _learn(self, answer: Any) -> None:
        if not isinstance(answer, dict):
            raise KraftError("UNKNOWN_SERVER_ERROR", f"unexpected metadata answer {type(answer).__name__}")
        for controller in answer.get("controllers") or ():
            if isinstance(controller, dict):
                self.client.directory.learn(int(controller["node_id"]), str(controller["host"]),
                                            int(controller["port"]))
        self.client.directory.learn_leader(answer.get("leader"))
        self.cluster_id = answer.get("cluster_id") or self.cluster_id

    async def _save(self) -> None:
        image = self.loader.image
        if image.offset <= self._saved_offset:
            return
        try:
            await asyncio.to_thread(self.store.save, image)
            self._saved_offset = image.offset
        except OSError as e:  # only a longer catch-up after a restart
            log.error("could not write the metadata snapshot %s: %s", self.store.path, e)
