"""The broker's replica manager: the local partition logs and produce / fetch / offsets on them.

It is a metadata publisher: every image update is reconciled against the local replicas (create
the log of a partition this broker now leads or follows, update leader epoch and ISR, delete the
log of a removed topic). Blocking file work (open with recovery, flush, retention, compaction,
delete, close) runs in a thread under the partition's lock; appends and reads are small and run
inline. It implements `api.routes.services.ReplicaService`.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
import uuid
from pathlib import Path
from typing import Awaitable, Callable, Sequence

from api.errors import KraftError, from_exception
from api.routes.services import (
    FetchEntry, FetchResult, PartitionOffsets, ProduceEntry, ProduceResult,
)
from kraft.broker.replica import Replica, ReplicaState
from log.config import LogConfig
from log.partition_log import PartitionLog
from metadata.image import MetadataImage

log = logging.getLogger("kraft.broker")

TopicPartition = tuple[str, int]
DELETED_SUFFIX = "-delete"
MAX_FILE_NAME = 255


def deleted_dir_name(name: str) -> str:
    """`<dir>.<uuid>-delete`, the directory name cut so the whole stays a legal file name."""
    tail = f".{uuid.uuid4().hex}{DELETED_SUFFIX}"
    return name[: MAX_FILE_NAME - len(tail)] + tail


def now_ms() -> int:
    return int(time.time() * 1000)


class ReplicaManager:
    def __init__(
        self,
        node_id: int,
        data_dir: Path,
        base_config: LogConfig,
        retention_check_interval_ms: int,
        fetch_max_bytes: int,
    ) -> None:
        self.node_id = node_id
        self.data_dir = data_dir
        self.base_config = base_config
        self.retention_check_interval_ms = retention_check_interval_ms
        self.fetch_max_bytes = fetch_max_bytes
        self.image = MetadataImage.EMPTY
        self._replicas: dict[TopicPartition, Replica] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._retention_task: asyncio.Task[None] | None = None
        self._closed = False

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        self._retention_task = asyncio.get_running_loop().create_task(self._retention_loop())
        leftovers = [p for p in self.data_dir.glob(f"*{DELETED_SUFFIX}") if p.is_dir()]
        for path in leftovers:  # deletions a crash interrupted
            self._spawn(lambda p=path: asyncio.to_thread(shutil.rmtree, p, True))

    async def close(self) -> None:
        """Stops background work, then flushes and closes every log (checkpoints written)."""
        self._closed = True
        if self._retention_task is not None:
            self._retention_task.cancel()
            await asyncio.gather(self._retention_task, return_exceptions=True)
        await asyncio.gather(*self._tasks, return_exceptions=True)
        replicas, self._replicas = list(self._replicas.values()), {}
        await asyncio.gather(*(self._close_replica(r) for r in replicas))

    async def _close_replica(self, replica: Replica) -> None:
        await replica.ready.wait()
        if replica.log is None:
            return
        async with replica.lock:
            try:
                await asyncio.to_thread(replica.log.close)
            except Exception:
                log.exception("closing %s-%d failed", replica.topic, replica.partition)

    def _spawn(self, work: Callable[[], Awaitable[None]]) -> None:
        async def logged() -> None:
            try:
                await work()
            except Exception:
                log.exception("background replica work failed")

        task = asyncio.get_running_loop().create_task(logged())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- metadata publisher -------------------------------------------------------------------

    def on_metadata_update(self, delta: object, image: MetadataImage) -> None:
        """Reconciles local replicas with the image: create, update role, delete."""
        self.image = image
        if self._closed:
            return
        wanted: dict[TopicPartition, ReplicaState] = {}
        for topic in image.topics.by_name.values():
            for index, p in topic.partitions.items():
                if self.node_id in p.replicas:
                    wanted[(topic.name, index)] = ReplicaState(
                        topic.topic_id, p.leader, p.leader_epoch, p.partition_epoch, p.replicas, p.isr
                    )
        for key, replica in list(self._replicas.items()):
            state = wanted.get(key)
            if state is None or state.topic_id != replica.state.topic_id:
                del self._replicas[key]
                self._spawn(lambda r=replica: self._delete_replica(r))
        for key, state in wanted.items():
            config = self._log_config(image, key[0])
            replica = self._replicas.get(key)
            if replica is None:
                replica = Replica(
                    key[0], key[1], self.data_dir / f"{key[0]}-{key[1]}", self.node_id, state, config
                )
                self._replicas[key] = replica
                self._spawn(lambda r=replica: self._open_replica(r))
            else:
                replica.state = state
                replica.config = config
                if replica.log is not None:
                    replica.log.config = config
            if replica.log is not None and replica.is_leader:
                replica.maybe_advance_high_watermark()  # the ISR may have shrunk

    def _log_config(self, image: MetadataImage, topic: str) -> LogConfig:
        overrides = image.topic_configs(topic)
        if not overrides:
            return self.base_config
        try:
            return LogConfig.from_topic_configs(overrides, self.base_config)
        except ValueError:
            log.exception("topic %s has invalid configs %s; using defaults", topic, dict(overrides))
            return self.base_config

    async def _open_replica(self, replica: Replica) -> None:
        try:
            replica.log = await asyncio.to_thread(
                PartitionLog.open, replica.directory, replica.config, now_ms()
            )
            if replica.is_leader:
                replica.maybe_advance_high_watermark()
        except Exception as e:
            replica.open_error = e
            log.exception("cannot open log %s", replica.directory)
        finally:
            replica.ready.set()

    async def _delete_replica(self, replica: Replica) -> None:
        """Renames the directory out of the way at once (a re-created topic gets a fresh one),
        then deletes it in a thread, as Kafka's `-delete` suffix does."""
        await replica.ready.wait()
        async with replica.lock:
            if replica.log is not None:
                await asyncio.to_thread(replica.log.close)
            replica.log = None
            if replica.directory.exists():
                doomed = replica.directory.with_name(deleted_dir_name(replica.directory.name))
                replica.directory.rename(doomed)
                await asyncio.to_thread(shutil.rmtree, doomed, True)
        log.info("deleted replica %s-%d", replica.topic, replica.partition)

    # -- lookups ------------------------------------------------------------------------------

    def _not_here(self, topic: str, partition: int) -> KraftError:
        registration = self.image.partition(topic, partition)
        if registration is None:
            return KraftError(
                "UNKNOWN_TOPIC_OR_PARTITION", f"{topic}-{partition} does not exist"
            )
        return self._not_leader(topic, partition)

    def _not_leader(self, topic: str, partition: int) -> KraftError:
        extra = {}
        registration = self.image.partition(topic, partition)
        endpoint = self.image.leader_endpoint(topic, partition)
        if registration is not None and endpoint is not None:
            extra["leader"] = {
                "node_id": registration.leader, "host": endpoint.host, "port": endpoint.port
            }
        return KraftError(
            "NOT_LEADER_OR_FOLLOWER", f"node {self.node_id} is not the leader of {topic}-{partition}",
            **extra,
        )

    async def _leader_replica(self, topic: str, partition: int) -> Replica:
        replica = self._replicas.get((topic, partition))
        if replica is None:
            raise self._not_here(topic, partition)
        await replica.ready.wait()
        if replica.open_error is not None or replica.log is None:
            raise KraftError("KAFKA_STORAGE_ERROR", f"log of {topic}-{partition} is unavailable")
        if not replica.is_leader:
            raise self._not_leader(topic, partition)
        return replica

    # -- produce ------------------------------------------------------------------------------

    async def produce(
        self, entries: Sequence[ProduceEntry], acks: int, timeout_ms: int
    ) -> list[ProduceResult]:
        appended: list[tuple[ProduceEntry, Replica | None, int, int, KraftError | None]] = []
        for entry in entries:
            try:
                replica, first_offset, next_offset = await self._append(entry, acks)
                appended.append((entry, replica, first_offset, next_offset, None))
            except Exception as e:
                appended.append((entry, None, -1, -1, _as_kraft_error(e)))
        deadline = asyncio.get_running_loop().time() + timeout_ms / 1000
        return list(await asyncio.gather(*(
            self._produce_result(entry, replica, first_offset, next_offset, error, acks, deadline)
            for entry, replica, first_offset, next_offset, error in appended
        )))

    async def _append(self, entry: ProduceEntry, acks: int) -> tuple[Replica, int, int]:
        """Appends as leader; returns the replica, the first and the next offset."""
        replica = await self._leader_replica(entry.topic, entry.partition)
        min_isr = replica.config.min_insync_replicas
        if acks == -1 and len(replica.state.isr) < min_isr:
            raise KraftError(
                "NOT_ENOUGH_REPLICAS",
                f"{entry.topic}-{entry.partition} has {len(replica.state.isr)} in-sync replicas, "
                f"min.insync.replicas is {min_isr}",
            )
        async with replica.lock:
            if replica.log is None:  # deleted while we waited
                raise self._not_here(entry.topic, entry.partition)
            info = replica.log.append_as_leader(entry.records, replica.state.leader_epoch, now_ms())
            replica.maybe_advance_high_watermark()
        return replica, info.first_offset, info.last_offset + 1

    async def _produce_result(
        self, entry: ProduceEntry, replica: Replica | None, first_offset: int, next_offset: int,
        error: KraftError | None, acks: int, deadline: float,
    ) -> ProduceResult:
        if error is None and replica is not None and acks == -1:
            error = await self._await_high_watermark(replica, next_offset, deadline)
        if error is not None or replica is None:
            assert error is not None
            return ProduceResult(entry.topic, entry.partition, -1, -1, error.error_code, error.message)
        base_offset = -1 if acks == 0 else first_offset
        log_start_offset = replica.log.log_start_offset if replica.log is not None else -1
        return ProduceResult(entry.topic, entry.partition, base_offset, log_start_offset)

    async def _await_high_watermark(
        self, replica: Replica, target: int, deadline: float
    ) -> KraftError | None:
        loop = asyncio.get_running_loop()
        while replica.log is not None and replica.log.high_watermark < target:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return KraftError(
                    "REQUEST_TIMED_OUT",
                    f"{replica.topic}-{replica.partition}: not replicated to the ISR in time",
                )
            future = loop.create_future()
            replica.wait_for_data(future)
            try:
                await asyncio.wait_for(future, remaining)
            except asyncio.TimeoutError:
                pass
            finally:
                replica.forget_waiter(future)
        if replica.log is None:
            return self._not_here(replica.topic, replica.partition)
        return None

    # -- fetch --------------------------------------------------------------------------------

    async def fetch(
        self, entries: Sequence[FetchEntry], max_wait_ms: int, min_bytes: int, max_bytes: int
    ) -> list[FetchResult]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait_ms / 1000
        max_bytes = min(max_bytes, self.fetch_max_bytes)
        while True:
            results, replicas = await self._read_all(entries, max_bytes)
            total = sum(len(r.records) for r in results)
            remaining = deadline - loop.time()
            if total >= min_bytes or remaining <= 0 or any(r.error_code for r in results):
                return results
            future = loop.create_future()
            for replica in replicas:
                replica.wait_for_data(future)
            try:
                await asyncio.wait_for(future, remaining)
            except asyncio.TimeoutError:
                pass
            finally:
                for replica in replicas:
                    replica.forget_waiter(future)

    async def _read_all(
        self, entries: Sequence[FetchEntry], max_bytes: int
    ) -> tuple[list[FetchResult], list[Replica]]:
        results: list[FetchResult] = []
        replicas: list[Replica] = []
        budget = max_bytes
        for entry in entries:
            try:
                replica = await self._leader_replica(entry.topic, entry.partition)
            except Exception as e:
                error = _as_kraft_error(e)
                results.append(FetchResult(
                    entry.topic, entry.partition, -1, -1, b"", error.error_code, error.message
                ))
                continue
            replicas.append(replica)
            async with replica.lock:
                results.append(self._read_one(replica, entry, max_bytes, budget))
            budget -= len(results[-1].records)
        return results, replicas

    def _read_one(
        self, replica: Replica, entry: FetchEntry, max_bytes: int, budget: int
    ) -> FetchResult:
        plog = replica.log
        if plog is None:
            error = self._not_here(entry.topic, entry.partition)
            return FetchResult(entry.topic, entry.partition, -1, -1, b"", error.error_code,
                               error.message)
        data = b""
        error = None
        try:
            if not plog.log_start_offset <= entry.fetch_offset <= plog.log_end_offset:
                raise KraftError(
                    "OFFSET_OUT_OF_RANGE",
                    f"offset {entry.fetch_offset} is outside [{plog.log_start_offset}, "
                    f"{plog.log_end_offset}] of {entry.topic}-{entry.partition}",
                )
            if entry.fetch_offset < plog.high_watermark and budget > 0:
                # The first partition of a request always gets a batch (Kafka's rule, so a batch
                # larger than max_bytes cannot stall a consumer); later ones only within budget.
                info = plog.read(
                    entry.fetch_offset, min(entry.partition_max_bytes, budget),
                    max_offset=plog.high_watermark, min_one_batch=budget == max_bytes,
                )
                data = info.records
        except Exception as e:
            error = _as_kraft_error(e)
        return FetchResult(
            entry.topic, entry.partition, plog.high_watermark, plog.log_start_offset, data,
            error.error_code if error else None, error.message if error else None,
        )

    # -- offsets ------------------------------------------------------------------------------

    async def offsets(self, topic: str, partition: int) -> PartitionOffsets:
        plog = (await self._leader_replica(topic, partition)).log
        return PartitionOffsets(plog.log_start_offset, plog.high_watermark, plog.log_end_offset)

    async def offset_for_timestamp(
        self, topic: str, partition: int, timestamp: int
    ) -> tuple[int, int] | None:
        replica = await self._leader_replica(topic, partition)
        async with replica.lock:
            if replica.log is None:
                raise self._not_here(topic, partition)
            # consumers see nothing at or beyond the high watermark
            return await asyncio.to_thread(
                replica.log.offset_for_timestamp, timestamp, replica.log.high_watermark
            )

    # -- retention ----------------------------------------------------------------------------

    async def _retention_loop(self) -> None:
        while True:
            await asyncio.sleep(self.retention_check_interval_ms / 1000)
            await self.run_retention()

    async def run_retention(self) -> None:
        """One pass of retention and compaction over the local replicas, one at a time."""
        for replica in list(self._replicas.values()):
            if replica.log is None:
                continue
            async with replica.lock:
                if replica.log is None:
                    continue
                try:
                    deleted = await asyncio.to_thread(replica.log.delete_old_segments, now_ms())
                    if replica.config.compact:
                        await asyncio.to_thread(replica.log.compact, now_ms())
                except Exception:
                    log.exception("retention of %s-%d failed", replica.topic, replica.partition)
                    continue
            if deleted:
                log.info("retention deleted %d segment(s) of %s-%d", deleted, replica.topic,
                         replica.partition)

    def replica_count(self) -> int:
        return len(self._replicas)

    def replica(self, topic: str, partition: int) -> Replica | None:
        return self._replicas.get((topic, partition))


def _as_kraft_error(exc: BaseException) -> KraftError:
    error = from_exception(exc)
    if error.error_code == "UNKNOWN_SERVER_ERROR":
        log.error("unexpected error: %r", exc, exc_info=exc)
    return error
