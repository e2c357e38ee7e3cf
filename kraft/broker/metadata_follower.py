"""A broker-only node's copy of the metadata log: it follows the active controller as a KRaft
observer and feeds the node's `MetadataLoader`, so its publishers (replica manager, groups,
metadata view) see the same (delta, image) stream as on a controller.

The loop long-polls `/v1/controller/metadata` from the loader's next offset and replays what comes
back (each answer is one batch, replayed in the loader's bounded slices); when the controller no
longer retains those records it loads the controller's image snapshot instead. The image is also
kept on disk (`<data>/__cluster_metadata-0/broker.snapshot`, msgpack, written atomically every
`snapshot_interval_records` offsets and at shutdown), so a restart loads it and fetches only the
tail. A snapshot, fetched or read from disk, is decoded and parsed in a thread, in pieces (see
`unpack_in_pieces`), so the loop keeps running while a large one loads.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any, Callable

import msgpack

from kraft.errors import KraftError
from kraft.controller.client import ControllerClient
from kraft.controller.heap import gc_paused
from kraft.controller.metadata_loader import MetadataLoader
from kraft.log import fault_injection
from kraft.metadata.image import MetadataImage

log = logging.getLogger("kraft.broker.metadata")

SNAPSHOT_FILE = "broker.snapshot"
PIECE_ELEMENTS = 256
ERROR_BACKOFF_S = 0.2


def parse_snapshot(data: bytes) -> MetadataImage:
    """A msgpack image snapshot → the image (pure; ValueError or msgpack's error when malformed)."""
    return MetadataImage.from_snapshot(unpack_in_pieces(data))


def unpack_in_pieces(data: bytes, piece: int = PIECE_ELEMENTS) -> Any:
    """`msgpack.unpackb(data)`, but an array or map of more than `piece` elements is decoded
    element by element: each C call is short, so a thread decoding a 10 MB snapshot lets go of
    the GIL (every switch interval) instead of holding it for the whole decode."""
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=max(len(data), 1))
    unpacker.feed(data)
    with gc_paused():
        value = _unpack_value(unpacker, data, piece)
    if unpacker.tell() != len(data):
        raise ValueError(f"{len(data) - unpacker.tell()} bytes after the snapshot")
    return value


def _container_size(data: bytes, at: int) -> tuple[str, int] | None:
    """("array" | "map", element count) when a msgpack array or map starts at `at`."""
    if at >= len(data):
        raise ValueError("truncated msgpack")
    head = data[at]
    if 0x90 <= head <= 0x9F:
        return "array", head & 0x0F
    if 0x80 <= head <= 0x8F:
        return "map", head & 0x0F
    width = {0xDC: 2, 0xDD: 4, 0xDE: 2, 0xDF: 4}.get(head)
    if width is None:
        return None
    return ("array" if head in (0xDC, 0xDD) else "map"), int.from_bytes(data[at + 1:at + 1 + width], "big")


def _unpack_value(unpacker: msgpack.Unpacker, data: bytes, piece: int) -> Any:
    container = _container_size(data, unpacker.tell())
    if container is None or container[1] <= piece:
        return unpacker.unpack()
    kind, count = container
    if kind == "array":
        unpacker.read_array_header()
        return [_unpack_value(unpacker, data, piece) for _ in range(count)]
    unpacker.read_map_header()
    result = {}
    for _ in range(count):
        key = unpacker.unpack()
        result[key] = _unpack_value(unpacker, data, piece)
    return result


def pack_in_pieces(value: Any, piece: int = PIECE_ELEMENTS) -> bytes:
    """`msgpack.packb(value)`, an array or map of more than `piece` elements packed element by
    element (short C calls, as `unpack_in_pieces`)."""
    packer = msgpack.Packer(use_bin_type=True, autoreset=False)
    _pack_value(packer, value, piece)
    return packer.bytes()


def _pack_value(packer: msgpack.Packer, value: Any, piece: int) -> None:
    if isinstance(value, (list, tuple)) and len(value) > piece:
        packer.pack_array_header(len(value))
        for element in value:
            _pack_value(packer, element, piece)
    elif isinstance(value, dict) and len(value) > piece:
        packer.pack_map_header(len(value))
        for key, element in value.items():
            packer.pack(key)
            _pack_value(packer, element, piece)
    else:
        packer.pack(value)


class BrokerSnapshotStore:
    """One msgpack file holding the latest image this broker applied."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / SNAPSHOT_FILE

    def load(self) -> MetadataImage | None:
        """The stored image (pure: runs in a thread), None when there is none or it is torn."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            return parse_snapshot(data)
        except (ValueError, msgpack.UnpackException) as e:  # a torn file: fetch everything again
            log.warning("ignoring the unreadable metadata snapshot %s: %s", self.path, e)
            return None

    def save(self, image: MetadataImage) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        fault_injection.before_write()
        with open(tmp, "wb") as f:
            f.write(pack_in_pieces(image.to_snapshot()))
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(self.path)


class MetadataFollower:
    def __init__(self, broker_id: int, loader: MetadataLoader, client: ControllerClient, store: BrokerSnapshotStore,
                 *, max_wait_ms: int = 1000, max_records: int = 1000,
                 snapshot_interval_records: int = 20_000,
                 check_cluster_id: Callable[[str, str], None] = lambda cluster_id, source: None) -> None:
        """`check_cluster_id(id, source)` raises when the controller's cluster is not this
        node's: its records are then not applied."""
        self.broker_id = broker_id
        self.loader = loader
        self.client = client
        self.store = store
        self.max_wait_ms = max_wait_ms
        self.max_records = max_records
        self.snapshot_interval_records = snapshot_interval_records
        self.check_cluster_id = check_cluster_id
        # The controller's metadata high watermark with the last fetch, once that fetch's records
        # are applied: caught up when loader.offset + 1 reaches it (-1: no answer yet).
        self.high_watermark = -1
        self._saved_offset = -1
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        image = await asyncio.to_thread(self.store.load)
        if image is not None:
            await self.loader.install_snapshot(lambda: image)
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
            data = await self.client.call("GET", "/v1/controller/snapshot", timeout_s=30,
                                          request_timeout_s=30, raw_answer=True)
            image = await self.loader.install_snapshot(lambda: parse_snapshot(data))
            log.info("loaded the controller's metadata snapshot at offset %d (%d bytes)", image.offset, len(data))
        else:
            records = answer.get("records") or []
            await self.loader.replay([(int(offset), record) for offset, record in records])
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
        cluster_id = answer.get("cluster_id")
        if cluster_id:  # before anything of the answer is applied
            self.check_cluster_id(str(cluster_id), "the active controller")

    async def _save(self) -> None:
        image = self.loader.image
        if image.offset <= self._saved_offset:
            return
        try:
            await asyncio.to_thread(self.store.save, image)
            self._saved_offset = image.offset
        except OSError as e:  # only a longer catch-up after a restart
            log.error("could not write the metadata snapshot %s: %s", self.store.path, e)
