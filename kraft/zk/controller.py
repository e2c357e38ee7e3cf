"""Kafka's ZooKeeper controller (`KafkaController` before KIP-500), one per node, one active.

Election: every node watches `/controller`; when it is absent a node creates it (ephemeral) and
bumps `/controller_epoch` in the same ZooKeeper transaction, conditional on the epoch znode's
version, so two controllers never hold one epoch. The winner then reads the whole cluster from
ZooKeeper (brokers, topics, every partition state, configs: the full load KIP-500 removes, timed
as `last_load_s`), elects leaders for partitions whose leader is gone, and pushes the resulting
image to every live broker (UpdateMetadata/LeaderAndIsr in one, `MetadataPusher`).

Events come from one-shot ZooKeeper watches and are handled one at a time on the event loop
(Kafka's ControllerEventManager): broker znodes appearing/vanishing (a vanished broker leaves
every ISR and its leaderships move, `kraft.zk.image.online_change`), topics created (their
partition state znodes are written here), partitions added, topics marked for deletion, ISR
change notifications written by partition leaders, config change notifications.

Controlled shutdown (`controlled_shutdown`, Kafka's ControlledShutdown request): a broker about to
stop asks the controller to take it out of the ISRs and move its leaderships to the other live
ISR members; it stays out of elections until its znode goes. The answer lists the partitions
(of more than one replica) it still leads: those where it is the only in-sync replica.

Every write of the controller is a ZooKeeper transaction that first checks `/controller_epoch`'s
version: a deposed controller (paused past its session, say) cannot overwrite a newer one's
decisions, and brokers refuse its pushes by epoch (STALE_CONTROLLER_EPOCH). Either resigns it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from typing import Any, Callable, Iterable, Mapping

import aiohttp
import msgpack
from kazoo.exceptions import NodeExistsError, NoNodeError, RolledBackError
from kazoo.protocol.states import WatchedEvent

from kraft.errors import KraftError
from kraft.security.peers import PLAIN_PEERS
from kraft.zk import znodes
from kraft.zk.broker import UPDATE_METADATA_PATH, ZkMetadataReceiver
from kraft.zk.image import (
    broker_registration, image_offset, initial_registration, online_change, partition_registration,
    partition_state, shutdown_change, with_brokers, with_partitions, with_topic_config, with_topics,
)
from kraft.zk.session import ZkSession
from kraft.metadata.image import BrokerRegistration, MetadataImage, PartitionRegistration, TopicImage

log = logging.getLogger("kraft.zk.controller")

PUSH_TIMEOUT_S = 30.0  # a broker answers once it applied the image (opening new partitions' logs)
PUSH_RETRY_S = 0.2
CONTROLLED_SHUTDOWN_TIMEOUT_S = 30.0
UNCLEAN_KEY = "unclean.leader.election.enable"


class ControllerMovedError(Exception):
    """The `/controller_epoch` check of a write failed: another controller was elected."""


class MetadataPusher:
    """Sends the latest image to every registered broker; one sender per broker, latest wins, retried
    until delivered or superseded. Its own node gets it directly."""

    def __init__(self, node_id: int, local: ZkMetadataReceiver, on_stale: Callable[[int], None]) -> None:
        self.node_id = node_id
        self.local = local
        self.on_stale = on_stale
        self._http: aiohttp.ClientSession | None = None
        self.security = PLAIN_PEERS  # the node installs TLS and its credential: brokers accept nodes only
        self._latest: dict[int, bytes] = {}
        self._wakeups: dict[int, asyncio.Event] = {}
        self._senders: dict[int, asyncio.Task[None]] = {}
        self._endpoints: dict[int, tuple[str, int]] = {}

    def push(self, cluster_id: str, image: MetadataImage) -> None:
        snapshot = image.to_snapshot()
        body = {"cluster_id": cluster_id, "controller_id": image.controller_id,
                "controller_epoch": image.controller_epoch, "image": snapshot}
        payload = msgpack.packb(body, use_bin_type=True)
        # every registered broker, a fenced one too: a broker in a controlled shutdown must learn
        # that it no longer leads (its waiting acks=all produces then fail over at once)
        registered = image.cluster.brokers
        for broker_id in [b for b in self._senders if b not in registered]:
            self._senders.pop(broker_id).cancel()
            self._latest.pop(broker_id, None)
        for broker_id, broker in sorted(registered.items()):
            if broker_id == self.node_id:
                continue
            endpoint = broker.endpoint()
            if endpoint is None:
                continue
            self._endpoints[broker_id] = (endpoint.host, endpoint.port)
            self._latest[broker_id] = payload
            if broker_id not in self._senders:
                self._wakeups[broker_id] = asyncio.Event()
                self._senders[broker_id] = asyncio.get_running_loop().create_task(self._send_loop(broker_id))
            self._wakeups[broker_id].set()
        if self.node_id in registered or self.node_id == image.controller_id:
            try:
                self.local.update_metadata(cluster_id, image.controller_id, image.controller_epoch, snapshot)
            except KraftError as e:
                if e.error_code == "STALE_CONTROLLER_EPOCH":
                    self.on_stale(e.extra.get("controller_epoch", -1))
                else:
                    log.error("own broker refused the metadata: %s", e)

    async def _send_loop(self, broker_id: int) -> None:
        wakeup = self._wakeups[broker_id]
        failures = 0
        while True:
            await wakeup.wait()
            wakeup.clear()
            payload = self._latest.get(broker_id)
            if payload is None:
                continue
            host, port = self._endpoints[broker_id]
            try:
                await self._send(broker_id, host, port, payload)
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception as e:  # unreachable for now: retry unless superseded
                failures += 1
                if failures == 1 or failures % 50 == 0:
                    log.warning("metadata push to broker %d failed (%d in a row): %s: %s", broker_id, failures,
                                type(e).__name__, e)
                if not wakeup.is_set():
                    await asyncio.sleep(PUSH_RETRY_S)
                    wakeup.set()

    async def _send(self, broker_id: int, host: str, port: int, payload: bytes) -> None:
        if self._http is None:
            self._http = aiohttp.ClientSession(connector=self.security.connector(),
                                               timeout=aiohttp.ClientTimeout(total=PUSH_TIMEOUT_S))
        headers = {"Content-Type": "application/x-msgpack",
                   **self.security.headers("POST", UPDATE_METADATA_PATH, payload, target=broker_id)}
        async with self._http.post(self.security.url(host, port, UPDATE_METADATA_PATH), data=payload,
                                   headers=headers) as response:
            body = await response.json(content_type=None)
            if response.status == 200:
                return
            error = KraftError.from_dict(body if isinstance(body, dict) else {})
            if error.error_code == "STALE_CONTROLLER_EPOCH":
                log.warning("broker %d refused our metadata: %s", broker_id, error.message)
                self.on_stale(int(error.extra.get("controller_epoch", -1)))
                return
            raise error

    async def stop(self) -> None:
        senders = list(self._senders.values())
        for task in senders:
            task.cancel()
        await asyncio.gather(*senders, return_exceptions=True)
        self._senders.clear()
        self._latest.clear()

    async def close(self) -> None:
        await self.stop()
        if self._http is not None:
            await self._http.close()
            self._http = None


class ZkController:
    def __init__(self, node_id: int, session: ZkSession, receiver: ZkMetadataReceiver,
                 cluster_id: Callable[[], str], *, unclean_leader_election_enable: bool = False) -> None:
        self.node_id = node_id
        self.session = session
        self.cluster_id = cluster_id
        self.unclean_default = unclean_leader_election_enable
        self.active = False
        self.epoch = 0
        self.controller_id: int | None = None  # as /controller names it
        self.last_load_s: float | None = None
        self.image = MetadataImage.EMPTY
        self.pusher = MetadataPusher(node_id, receiver, self._on_stale_push)
        self._epoch_version = -1
        self._generation = 0  # watches of an earlier term are ignored
        self._sequence = 0
        self._assignments: dict[str, znodes.TopicAssignment] = {}
        self._shutting_down: dict[int, int] = {}  # broker id -> the broker epoch that asked
        # broker id -> (its broker epoch, its replicas in failed log directories), from its
        # /log_dir_event_notification: they leave ISRs and leaderships as in a controlled shutdown
        self._offline_replicas: dict[int, tuple[int, set[tuple[str, int]]]] = {}
        self._queue: asyncio.Queue[tuple[str, int | None, Any]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    @property
    def is_active(self) -> bool:
        return self.active

    @property
    def _zk(self) -> Any:
        return self.session.client

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())
        self._enqueue("elect")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self.active = False
        await self.pusher.close()

    def on_session_state(self, state: str) -> None:
        if state == "LOST":
            self._enqueue("resign", None, "ZooKeeper session lost")
        elif state == "CONNECTED":
            self._enqueue("elect")

    # -- events -----------------------------------------------------------------------------------

    def _enqueue(self, kind: str, generation: int | None = None, arg: Any = None) -> None:
        self._queue.put_nowait((kind, generation, arg))

    def _watch(self, kind: str, arg: Any = None, *, any_term: bool = False) -> Callable[[WatchedEvent], None]:
        generation = None if any_term else self._generation
        return lambda event: self.session.call_soon(self._enqueue, kind, generation, arg)

    def _on_stale_push(self, newer_epoch: int) -> None:
        self._enqueue("resign", None, f"a broker has seen controller epoch {newer_epoch}")

    async def _run(self) -> None:
        while True:
            events = [await self._queue.get()]
            while not self._queue.empty():
                events.append(self._queue.get_nowait())
            before = self.image
            for kind, generation, arg in events:
                if generation is not None and generation != self._generation:
                    continue  # a watch set by an earlier term
                try:
                    await self._handle(kind, arg)
                except ControllerMovedError:
                    await self._resign("another controller took over (controller epoch check failed)")
                except asyncio.CancelledError:
                    raise
                except Exception as e:
                    if not self.session.client.connected:
                        await self._resign(f"ZooKeeper unavailable ({type(e).__name__})")
                    else:
                        log.exception("controller event %s failed", kind)
            if self.active and self.image is not before:
                self._publish()

    async def _handle(self, kind: str, arg: Any) -> None:
        if kind == "elect":
            await self._elect()
        elif kind == "resign":
            await self._resign(arg)
        elif kind == "shutdown":
            await self._on_controlled_shutdown(*arg)
        elif not self.active:
            return
        elif kind == "brokers":
            await self._on_brokers()
        elif kind == "topics":
            await self._on_topics()
        elif kind == "topic":
            await self._on_topic_changed(arg)
        elif kind == "delete":
            await self._on_delete_topics()
        elif kind == "isr":
            await self._on_isr_changes()
        elif kind == "config":
            await self._on_config_changes()
        elif kind == "logdir":
            await self._on_log_dir_events()
        elif kind == "partitions":
            await self._reload_partitions(arg)

    # -- election ---------------------------------------------------------------------------------

    async def _elect(self) -> None:
        if self.active or not self.session.client.connected:
            return
        won, controller_id, epoch, epoch_version = await asyncio.to_thread(self._try_elect)
        self.controller_id = controller_id
        if not won:
            return
        self._generation += 1
        self.active, self.epoch, self._epoch_version = True, epoch, epoch_version
        self._sequence = 0
        self._shutting_down = {}  # a broker shutting down asks the new controller again
        self._offline_replicas = {}  # the ISRs and leaders it changed are in ZooKeeper already
        log.info("node %d is the controller, controller epoch %d", self.node_id, epoch)
        started = time.monotonic()
        await self._load()
        self.last_load_s = time.monotonic() - started
        partitions = sum(len(t.partitions) for t in self.image.topics.by_name.values())
        log.info("controller %d loaded %d brokers, %d topics, %d partitions from ZooKeeper in %.3f s",
                 self.node_id, len(self.image.cluster.brokers), len(self.image.topics.by_name), partitions,
                 self.last_load_s)

    def _try_elect(self) -> tuple[bool, int | None, int, int]:
        """(won, controller id, epoch, epoch znode version) — blocking."""
        while True:
            if self._zk.exists(znodes.CONTROLLER, watch=self._watch("elect", any_term=True)) is not None:
                try:
                    data, _ = self._zk.get(znodes.CONTROLLER)
                except NoNodeError:
                    continue
                return False, znodes.decode_controller(data), 0, -1
            try:
                data, stat = self._zk.get(znodes.CONTROLLER_EPOCH)
            except NoNodeError:
                try:
                    self._zk.create(znodes.CONTROLLER_EPOCH, znodes.encode_controller_epoch(0))
                except NodeExistsError:
                    pass
                continue
            epoch = znodes.decode_controller_epoch(data) + 1
            transaction = self._zk.transaction()
            transaction.create(znodes.CONTROLLER, znodes.encode_controller(self.node_id), ephemeral=True)
            transaction.set_data(znodes.CONTROLLER_EPOCH, znodes.encode_controller_epoch(epoch), version=stat.version)
            results = transaction.commit()
            if not any(isinstance(r, Exception) for r in results):
                return True, self.node_id, epoch, stat.version + 1
            # someone else created /controller or bumped the epoch first: look again

    async def _resign(self, reason: str) -> None:
        if not self.active:
            return
        log.warning("controller %d (epoch %d) resigns: %s", self.node_id, self.epoch, reason)
        self.active = False
        self._generation += 1
        self.controller_id = None
        await self.pusher.stop()
        self._enqueue("elect")  # re-arms the /controller watch, and takes over if it is free

    # -- the full load ----------------------------------------------------------------------------

    async def _load(self) -> None:
        brokers, assignments, states, configs = await asyncio.to_thread(self._read_everything)
        self._assignments = assignments
        image = MetadataImage(controller_epoch=self.epoch, controller_id=self.node_id)
        image = with_brokers(image, brokers)
        topics = []
        for name, assignment in assignments.items():
            regs = {p: partition_registration(assignment, p, *states[(name, p)])
                    for p in assignment.partitions if (name, p) in states}
            topics.append(TopicImage(name, assignment.topic_id, {}))
            topics[-1] = with_partitions(topics[-1], regs)
        image = with_topics(image, topics)
        for name, config in configs.items():
            image = with_topic_config(image, name, config)
        self.image = image
        await self._create_missing_states()
        await self._elect_leaders()
        await self._on_delete_topics()
        await self._on_log_dir_events()

    def _read_everything(self) -> tuple[dict[int, BrokerRegistration], dict[str, znodes.TopicAssignment],
                                        dict[tuple[str, int], tuple[znodes.PartitionState, int]],
                                        dict[str, dict[str, str]]]:
        zk = self._zk
        # notifications: the full read below covers whatever they announce
        for path in (znodes.ISR_CHANGE, znodes.CONFIG_CHANGES):
            kind = "isr" if path == znodes.ISR_CHANGE else "config"
            self._delete_children(path, zk.get_children(path, watch=self._watch(kind)))
        brokers = self._read_brokers()
        names = zk.get_children(znodes.TOPICS, watch=self._watch("topics"))
        assignments = self._read_assignments(names)
        states = self._read_states([(n, p) for n, a in assignments.items() for p in a.partitions])
        configs = {}
        pending = [(n, zk.get_async(znodes.topic_config_path(n))) for n in assignments]
        for name, result in pending:
            try:
                data, _ = result.get()
                configs[name] = znodes.decode_config(znodes.topic_config_path(name), data)
            except NoNodeError:
                pass
        return brokers, assignments, states, configs

    def _read_brokers(self) -> dict[int, BrokerRegistration]:
        ids = self._zk.get_children(znodes.BROKER_IDS, watch=self._watch("brokers"))
        pending = [(int(i), self._zk.get_async(znodes.broker_path(int(i)))) for i in ids if i.isdigit()]
        brokers = {}
        for broker_id, result in pending:
            try:
                data, stat = result.get()
            except NoNodeError:
                continue  # gone meanwhile: its watch event follows
            try:
                brokers[broker_id] = broker_registration(znodes.decode_broker(broker_id, data), stat.czxid)
            except ValueError as e:
                log.error("ignoring broker %d: %s", broker_id, e)
        return brokers

    def _read_assignments(self, names: Iterable[str]) -> dict[str, znodes.TopicAssignment]:
        pending = [(n, self._zk.get_async(znodes.topic_path(n), watch=self._watch("topic", n))) for n in names]
        out = {}
        for name, result in pending:
            try:
                data, _ = result.get()
                out[name] = znodes.decode_topic(name, data)
            except NoNodeError:
                continue
            except ValueError as e:
                log.error("ignoring topic %s: %s", name, e)
        return out

    def _read_states(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[znodes.PartitionState, int]]:
        pending = [(t, p, self._zk.get_async(znodes.partition_state_path(t, p))) for t, p in partitions]
        out = {}
        for topic, partition, result in pending:
            try:
                data, stat = result.get()
                out[(topic, partition)] = (znodes.decode_partition_state(topic, partition, data), stat.version)
            except NoNodeError:
                continue  # not created yet: _create_missing_states
            except ValueError as e:
                log.error("ignoring a malformed partition state: %s", e)
        return out

    def _delete_children(self, parent: str, children: Iterable[str]) -> None:
        for result in [self._zk.delete_async(f"{parent}/{c}") for c in children]:
            try:
                result.get()
            except NoNodeError:
                pass

    # -- writes (all fenced by the controller epoch) ----------------------------------------------

    def _commit_states(self, writes: list[tuple[str, int, int | None, bytes]]) -> list[bool]:
        """Creates (version None) or conditionally sets partition state znodes, each in a
        transaction with the controller epoch check; False where the znode moved meanwhile."""
        pending = []
        for topic, partition, version, data in writes:
            path = znodes.partition_state_path(topic, partition)
            if version is None:
                self._zk.ensure_path(path.rsplit("/", 1)[0])
            transaction = self._zk.transaction()
            transaction.check(znodes.CONTROLLER_EPOCH, self._epoch_version)
            if version is None:
                transaction.create(path, data)
            else:
                transaction.set_data(path, data, version=version)
            pending.append(transaction.commit_async())
        done = []
        for result in pending:
            outcome = result.get()
            if isinstance(outcome[0], Exception) and not isinstance(outcome[0], RolledBackError):
                raise ControllerMovedError()
            done.append(not isinstance(outcome[1], Exception))
        return done

    async def _write(self, changes: list[tuple[str, int, PartitionRegistration | None, PartitionRegistration]]) -> None:
        """Writes (topic, partition, before or None, after) and applies what was written; a
        partition whose znode moved is read again."""
        if not changes:
            return
        writes = [(t, p, None if before is None else before.partition_epoch,
                   znodes.encode_partition_state(partition_state(after, self.epoch)))
                  for t, p, before, after in changes]
        written = await asyncio.to_thread(self._commit_states, writes)
        by_topic: dict[str, dict[int, PartitionRegistration]] = {}
        moved = []
        for (topic, partition, before, after), ok in zip(changes, written):
            if ok:
                version = 0 if before is None else before.partition_epoch + 1
                by_topic.setdefault(topic, {})[partition] = _with_version(after, version)
            else:
                moved.append((topic, partition))
        self._set_partitions(by_topic)
        if moved:
            self._enqueue("partitions", self._generation, moved)

    def _set_partitions(self, by_topic: dict[str, dict[int, PartitionRegistration]]) -> None:
        topics = []
        for name, regs in by_topic.items():
            topic = self.image.topic_by_name(name)
            if topic is not None:
                topics.append(with_partitions(topic, regs))
        if topics:
            self.image = with_topics(self.image, topics)

    async def _create_missing_states(self, names: Iterable[str] | None = None) -> None:
        live = set(self.image.cluster.brokers)
        changes = []
        for name in self._assignments if names is None else names:
            assignment = self._assignments.get(name)
            topic = self.image.topic_by_name(name)
            if assignment is None or topic is None:
                continue
            for p, replicas in sorted(assignment.partitions.items()):
                if p not in topic.partitions:
                    changes.append((name, p, None, initial_registration(replicas, live)))
        await self._write(changes)

    async def _elect_leaders(self) -> None:
        """Online election for every partition: dead brokers out of ISRs, live leaders; brokers
        in a controlled shutdown out of ISRs and leaderships where another can take over."""
        brokers = self.image.cluster.brokers
        live = set(brokers)
        leaving = {b for b, epoch in self._shutting_down.items() if b in brokers and brokers[b].broker_epoch == epoch}
        offline = {b: held for b, (epoch, held) in self._offline_replicas.items()
                   if b in brokers and brokers[b].broker_epoch == epoch}
        changes = []
        for topic in self.image.topics.by_name.values():
            unclean = self.image.topic_configs(topic.name).get(UNCLEAN_KEY, str(self.unclean_default).lower())
            for p, reg in topic.partitions.items():
                out = leaving | {b for b, held in offline.items() if (topic.name, p) in held}
                if out:
                    after = shutdown_change(topic, p, reg, live, out, unclean == "true")
                else:
                    after = online_change(topic, p, reg, live, unclean == "true")
                if after is not None:
                    changes.append((topic.name, p, reg, after))
        await self._write(changes)

    # -- controlled shutdown ----------------------------------------------------------------------

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[tuple[str, int]]:
        """Kafka's ControlledShutdown: moves `broker_id`'s leaderships and takes it out of the
        ISRs (written to ZooKeeper and pushed); the partitions of more than one replica it still
        leads (it is their only in-sync replica). NOT_CONTROLLER on a node that is not it."""
        if not self.active:
            raise KraftError("NOT_CONTROLLER", f"node {self.node_id} is not the controller "
                                               f"(the controller is {self.controller_id})")
        answer: asyncio.Future[list[tuple[str, int]]] = asyncio.get_running_loop().create_future()
        self._enqueue("shutdown", None, (broker_id, broker_epoch, answer))
        try:
            return await asyncio.wait_for(asyncio.shield(answer), CONTROLLED_SHUTDOWN_TIMEOUT_S)
        except asyncio.TimeoutError:
            raise KraftError("REQUEST_TIMED_OUT", f"controlled shutdown of broker {broker_id} not done within "
                                                  f"{CONTROLLED_SHUTDOWN_TIMEOUT_S:g} s") from None

    async def _on_controlled_shutdown(self, broker_id: int, broker_epoch: int,
                                      answer: "asyncio.Future[list[tuple[str, int]]]") -> None:
        if answer.done():
            return
        try:
            if not self.active:
                raise KraftError("NOT_CONTROLLER", f"node {self.node_id} is no longer the controller")
            registration = self.image.cluster.brokers.get(broker_id)
            if registration is None:
                raise KraftError("BROKER_NOT_AVAILABLE", f"broker {broker_id} is not registered")
            if registration.broker_epoch != broker_epoch:
                raise KraftError("STALE_BROKER_EPOCH", f"broker {broker_id}'s epoch is {registration.broker_epoch}, "
                                                       f"not {broker_epoch}")
            self._shutting_down[broker_id] = broker_epoch
            self.image = with_brokers(self.image, self._fence_leaving(self.image.cluster.brokers))
            led = self._led_by(broker_id)
            await self._elect_leaders()
            remaining = self._led_by(broker_id)
            log.info("controller %d: controlled shutdown of broker %d moved %d of its %d leaderships%s",
                     self.node_id, broker_id, len(led) - len(remaining), len(led),
                     f" ({len(remaining)} stay: it is their only in-sync replica)" if remaining else "")
            answer.set_result(remaining)
        except BaseException as e:
            if not answer.done():
                answer.set_exception(e if isinstance(e, KraftError) else KraftError(
                    "NOT_CONTROLLER", f"controller {self.node_id} failed: {type(e).__name__}"))
            if not isinstance(e, KraftError):
                raise

    def _led_by(self, broker_id: int) -> list[tuple[str, int]]:
        return [(t.name, p) for t in self.image.topics.by_name.values() for p, reg in sorted(t.partitions.items())
                if reg.leader == broker_id and len(reg.replicas) > 1]

    # -- event handlers ---------------------------------------------------------------------------

    async def _on_brokers(self) -> None:
        brokers = await asyncio.to_thread(self._read_brokers)
        gone = sorted(set(self.image.cluster.brokers) - set(brokers))
        new = sorted(set(brokers) - set(self.image.cluster.brokers))
        for broker_id, epoch in list(self._shutting_down.items()):  # gone, or back with a new epoch
            if broker_id not in brokers or brokers[broker_id].broker_epoch != epoch:
                del self._shutting_down[broker_id]
        for broker_id, (epoch, _) in list(self._offline_replicas.items()):  # restarted: directories back
            if broker_id not in brokers or brokers[broker_id].broker_epoch != epoch:
                del self._offline_replicas[broker_id]
        if gone or new:
            log.info("controller %d: brokers %s registered, %s gone", self.node_id, new, gone)
        self.image = with_brokers(self.image, self._fence_leaving(brokers))
        await self._elect_leaders()

    def _fence_leaving(self, brokers: Mapping[int, BrokerRegistration]) -> dict[int, BrokerRegistration]:
        """Brokers in a controlled shutdown are pushed as fenced: no longer eligible for an ISR
        (KIP-841), so a leader cannot add one back between its removal and its departure."""
        return {b: dataclasses.replace(reg, fenced=True) if self._shutting_down.get(b) == reg.broker_epoch else reg
                for b, reg in brokers.items()}

    async def _on_topics(self) -> None:
        names = await asyncio.to_thread(self._zk.get_children, znodes.TOPICS, self._watch("topics"))
        added = [n for n in names if n not in self._assignments]
        removed = [n for n in self._assignments if n not in names]
        for name in removed:
            self._remove_topic(name)
        if added:
            await self._add_topics(added)

    async def _add_topics(self, names: list[str]) -> None:
        assignments = await asyncio.to_thread(self._read_assignments, names)
        states = await asyncio.to_thread(
            self._read_states, [(n, p) for n, a in assignments.items() for p in a.partitions])
        configs = await asyncio.to_thread(self._read_configs, list(assignments))
        topics = []
        for name, assignment in assignments.items():
            self._assignments[name] = assignment
            regs = {p: partition_registration(assignment, p, *states[(name, p)])
                    for p in assignment.partitions if (name, p) in states}
            topics.append(with_partitions(TopicImage(name, assignment.topic_id, {}), regs))
        self.image = with_topics(self.image, topics)
        for name, config in configs.items():
            self.image = with_topic_config(self.image, name, config)
        await self._create_missing_states(list(assignments))

    def _read_configs(self, names: list[str]) -> dict[str, dict[str, str]]:
        out = {}
        for name in names:
            try:
                data, _ = self._zk.get(znodes.topic_config_path(name))
            except NoNodeError:
                continue
            out[name] = znodes.decode_config(znodes.topic_config_path(name), data)
        return out

    async def _on_topic_changed(self, name: str) -> None:
        """The topic znode's data changed (partitions added) or it is gone."""
        if name not in self._assignments:
            return
        assignments = await asyncio.to_thread(self._read_assignments, [name])
        if name not in assignments:
            return  # deleted: the topics or delete watch handles it
        self._assignments[name] = assignments[name]
        await self._create_missing_states([name])

    def _remove_topic(self, name: str) -> None:
        self._assignments.pop(name, None)
        self.image = with_topic_config(with_topics(self.image, (), [name]), name, None)

    async def _on_delete_topics(self) -> None:
        names = await asyncio.to_thread(self._zk.get_children, znodes.DELETE_TOPICS, self._watch("delete"))
        for name in names:
            await asyncio.to_thread(self._delete_topic_znodes, name)
            self._remove_topic(name)
            log.info("controller %d deleted topic %s", self.node_id, name)

    def _delete_topic_znodes(self, name: str) -> None:
        for path in (znodes.topic_path(name), znodes.topic_config_path(name), znodes.delete_topic_path(name)):
            try:
                self._zk.delete(path, recursive=True)
            except NoNodeError:
                pass

    async def _on_isr_changes(self) -> None:
        children = await asyncio.to_thread(self._zk.get_children, znodes.ISR_CHANGE, self._watch("isr"))
        partitions = await asyncio.to_thread(self._take_notifications, znodes.ISR_CHANGE, children,
                                             znodes.decode_isr_change)
        await self._reload_partitions(sorted({tp for entry in partitions for tp in entry}))

    async def _on_log_dir_events(self) -> None:
        """Kafka's LogDirEventNotification: a broker's log directory failed. Its replicas there
        (named in the event) leave their ISRs and leaderships while its broker epoch lasts, as in
        a controlled shutdown; one that is a partition's only in-sync replica keeps it."""
        children = await asyncio.to_thread(self._zk.get_children, znodes.LOG_DIR_EVENT, self._watch("logdir"))
        events = await asyncio.to_thread(self._take_notifications, znodes.LOG_DIR_EVENT, children,
                                         znodes.decode_log_dir_event)
        brokers = self.image.cluster.brokers
        for broker_id, epoch, partitions in events:
            registration = brokers.get(broker_id)
            if registration is None or epoch not in (None, registration.broker_epoch):
                continue  # from a broker that is gone or has restarted since
            _, held = self._offline_replicas.get(broker_id, (registration.broker_epoch, set()))
            self._offline_replicas[broker_id] = (registration.broker_epoch, held | set(partitions))
            log.warning("controller %d: broker %d reports log directory failure: moving leaderships and ISR "
                        "memberships off its %d replicas there", self.node_id, broker_id, len(partitions))
        if events:
            await self._elect_leaders()

    async def _on_config_changes(self) -> None:
        children = await asyncio.to_thread(self._zk.get_children, znodes.CONFIG_CHANGES, self._watch("config"))
        topics = await asyncio.to_thread(self._take_notifications, znodes.CONFIG_CHANGES, children,
                                         znodes.decode_config_change)
        names = sorted({t for t in topics if t is not None and t in self._assignments})
        configs = await asyncio.to_thread(self._read_configs, names)
        for name in names:
            self.image = with_topic_config(self.image, name, configs.get(name))

    def _take_notifications(self, parent: str, children: list[str], decode: Callable[[str, bytes], Any]) -> list[Any]:
        """Reads and deletes notification znodes, oldest first."""
        out = []
        for child in sorted(children):
            path = f"{parent}/{child}"
            try:
                data, _ = self._zk.get(path)
                out.append(decode(path, data))
            except NoNodeError:
                continue
            except ValueError as e:
                log.error("ignoring notification %s: %s", path, e)
            self._delete_children(parent, [child])
        return out

    async def _reload_partitions(self, partitions: list[tuple[str, int]]) -> None:
        """Reads partition states a leader (or a race) changed, then elects where needed."""
        partitions = [(t, p) for t, p in partitions if t in self._assignments]
        states = await asyncio.to_thread(self._read_states, partitions)
        by_topic: dict[str, dict[int, PartitionRegistration]] = {}
        for (topic, partition), (state, version) in states.items():
            assignment = self._assignments[topic]
            if partition in assignment.partitions:
                try:
                    reg = partition_registration(assignment, partition, state, version)
                except ValueError as e:
                    log.error("ignoring the state of %s-%d: %s", topic, partition, e)
                    continue
                by_topic.setdefault(topic, {})[partition] = reg
        self._set_partitions(by_topic)
        await self._elect_leaders()

    # -- pushing ----------------------------------------------------------------------------------

    def _publish(self) -> None:
        self._sequence += 1
        self.image = _restamp(self.image, image_offset(self.epoch, self._sequence), self.epoch, self.node_id)
        self.pusher.push(self.cluster_id(), self.image)


def _with_version(reg: PartitionRegistration, version: int) -> PartitionRegistration:
    return reg if reg.partition_epoch == version else dataclasses.replace(reg, partition_epoch=version)


def _restamp(image: MetadataImage, offset: int, epoch: int, controller_id: int) -> MetadataImage:
    return dataclasses.replace(image, offset=offset, controller_epoch=epoch, controller_id=controller_id)
