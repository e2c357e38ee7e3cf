"""The broker's life with the controller (Kafka's `BrokerLifecycleManager`): register with an
incarnation id (broker epoch, endpoints: the HTTP API's first, then the Kafka listeners', rack), heartbeat every `broker.heartbeat.interval.ms`
(the first heartbeat once caught up with the registration unfences the broker; it goes out as soon
as the node's published metadata holds the registration, `on_metadata_offset`), register again
when the controller no longer knows our epoch, and on a controlled shutdown ask to be fenced
(`want_shutdown`) so leaderships move before the process stops. The states are Kafka's
(`broker_state.BrokerStateMachine`).

Like Kafka's, it runs on a thread of its own (with its own event loop and its own connection to
the controller), so a busy request path on the node's event loop never delays a heartbeat past
the session timeout and gets a live broker fenced. Only a heartbeat to this node's own active
controller (a combined node) is handled on the node's loop, where that controller runs. What the
node's loop reads of it (`state`, `broker_epoch`, `fenced`) are plain attributes this thread
replaces; `wait_unfenced` lets a caller on the node's loop block.

A heartbeat that took long is logged with where the time went (sent late: this process was held
up; answered late: the controller or the network was), so a fenced broker can tell why.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from typing import Any, Awaitable, Callable, Protocol, Sequence

from kraft.broker.broker_state import BrokerState, BrokerStateMachine
from kraft.controller.errors import NotControllerError

log = logging.getLogger("kraft.broker")

STARTUP_HEARTBEAT_MS = 100  # while registering or fenced: get unfenced quickly
SHUTDOWN_TIMEOUT_S = 5.0
SLOW_HEARTBEAT_LOG_INTERVAL_S = 10.0

# (offline log directory ids, (topic, partition) of the replicas on them)
OfflineReport = tuple[Sequence[str], Sequence[tuple[str, int]]]


class LifecycleController(Protocol):
    """The controller calls the lifecycle makes (ControllerService's names and answers)."""

    async def register_broker(self, broker_id: int, incarnation_id: str, endpoints: list[dict[str, Any]],
                              rack: str | None = None, *, cluster_id: str | None = None,
                              timeout_s: float | None = None) -> dict[str, Any]: ...

    async def broker_heartbeat(self, broker_id: int, broker_epoch: int, current_metadata_offset: int, *,
                               want_fence: bool = False, want_shutdown: bool = False,
                               offline_log_dirs: Sequence[str] = (),
                               offline_replicas: Sequence[tuple[str, int]] = (),
                               timeout_s: float | None = None) -> dict[str, Any]: ...


class LocalController(Protocol):
    """This node's own `ControllerService`, reached on the node's loop."""

    @property
    def is_active(self) -> bool: ...

    async def register_broker(self, broker_id: int, incarnation_id: str, endpoints: list[dict[str, Any]],
                              rack: str | None = None, *, request_id: str | None = None) -> dict[str, Any]: ...

    async def broker_heartbeat(self, broker_id: int, broker_epoch: int, current_metadata_offset: int, *,
                               want_fence: bool = False, want_shutdown: bool = False,
                               offline_log_dirs: Sequence[str] = (),
                               offline_replicas: Sequence[tuple[str, int]] = ()) -> dict[str, Any]: ...


class LifecycleChannel:
    """How the lifecycle thread reaches the active controller: this node's own controller (on the
    node's loop) while `local_hint()` says it is the active one, else `remote` (the controller's
    HTTP API through a client of the thread's own)."""

    def __init__(self, remote: LifecycleController, local: LocalController | None = None,
                 local_hint: Callable[[], bool] = lambda: False) -> None:
        self.remote = remote
        self.local = local
        self.local_hint = local_hint  # cheap and safe to call from the thread
        self.node_loop: asyncio.AbstractEventLoop | None = None  # set by BrokerLifecycle.start

    async def _local(self, call: Callable[[LocalController], Awaitable[dict[str, Any]]]) -> dict[str, Any] | None:
        """`call` on the node's loop when this node is the active controller; None otherwise."""
        local, loop = self.local, self.node_loop
        if local is None or loop is None or not self.local_hint():
            return None

        async def on_node_loop() -> dict[str, Any] | None:
            if not local.is_active:
                return None
            try:
                return await call(local)
            except NotControllerError:  # deposed meanwhile: the new controller is elsewhere
                return None

        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(on_node_loop(), loop))

    async def register_broker(self, broker_id: int, incarnation_id: str, endpoints: list[dict[str, Any]],
                              rack: str | None, *, cluster_id: str | None, timeout_s: float) -> dict[str, Any]:
        request_id = uuid.uuid4().hex
        answer = await self._local(lambda c: c.register_broker(broker_id, incarnation_id, endpoints, rack,
                                                               request_id=request_id))
        if answer is not None:
            return answer
        return await self.remote.register_broker(broker_id, incarnation_id, endpoints, rack,
                                                 cluster_id=cluster_id, timeout_s=timeout_s)

    async def broker_heartbeat(self, broker_id: int, broker_epoch: int, current_metadata_offset: int, *,
                               want_shutdown: bool = False, offline_log_dirs: Sequence[str] = (),
                               offline_replicas: Sequence[tuple[str, int]] = (),
                               timeout_s: float) -> dict[str, Any]:
        answer = await self._local(lambda c: c.broker_heartbeat(
            broker_id, broker_epoch, current_metadata_offset, want_shutdown=want_shutdown,
            offline_log_dirs=offline_log_dirs, offline_replicas=offline_replicas))
        if answer is not None:
            return answer
        return await self.remote.broker_heartbeat(
            broker_id, broker_epoch, current_metadata_offset, want_shutdown=want_shutdown,
            offline_log_dirs=offline_log_dirs, offline_replicas=offline_replicas, timeout_s=timeout_s)


class BrokerLifecycle:
    def __init__(
        self,
        controller: LifecycleChannel,
        broker_id: int,
        endpoint: tuple[str, int],
        rack: str | None,
        heartbeat_interval_ms: int,
        metadata_offset: Callable[[], int],
        cluster_id: Callable[[], str | None] = lambda: None,
        close_controller: Callable[[], Awaitable[None]] | None = None,
        refused: Callable[[str], None] = lambda reason: None,
    ) -> None:
        """`metadata_offset` and `cluster_id` (this node's cluster id, if it knows one: the
        controller refuses another cluster's broker) are called from the lifecycle's thread;
        `close_controller` (on that thread's loop) closes what `controller` opened there;
        `refused(reason)`, called on the node's loop: the controller refused this broker."""
        self.controller = controller
        self.broker_id = broker_id
        self.endpoint = endpoint
        self.security_protocol = "PLAINTEXT"  # the HTTP endpoint's
        self.kafka_endpoints: list[dict[str, Any]] = []  # the Kafka listeners' (kraft/kafka/node_listeners.py)
        self.rack = rack
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.metadata_offset = metadata_offset
        self.cluster_id = cluster_id
        self.close_controller = close_controller
        self.refused = refused
        # (offline log directory ids, the replicas on them), read on this thread for each
        # heartbeat (KIP-858's OfflineLogDirs; see `kraft/broker/log_dirs.py`)
        self.offline_report: Callable[[], OfflineReport] = lambda: ((), ())
        self._wake: asyncio.Event | None = None  # on the lifecycle thread's loop: heartbeat now
        self._ready_epoch = -1  # the broker epoch whose registration the published metadata holds
        self.incarnation_id = uuid.uuid4().hex
        self.broker_epoch = -1
        self.fenced = True
        self._machine = BrokerStateMachine()
        self._node_loop: asyncio.AbstractEventLoop | None = None
        self._unfenced: asyncio.Event | None = None  # on the node's loop
        self._loop: asyncio.AbstractEventLoop | None = None  # the lifecycle thread's
        self._stopping: asyncio.Event | None = None  # on the lifecycle thread's loop
        self._controlled = False
        self._thread: threading.Thread | None = None
        self._last_slow_log = 0.0

    @property
    def state(self) -> str:
        """Kafka's broker state (`BrokerState`'s name)."""
        return self._machine.state.value

    async def start(self) -> None:
        """Registers and heartbeats on the lifecycle thread (see `wait_unfenced`)."""
        self._node_loop = asyncio.get_running_loop()
        self._unfenced = asyncio.Event()
        self.controller.node_loop = self._node_loop
        self._machine.start()
        started = threading.Event()
        self._thread = threading.Thread(target=self._run_thread, args=(started,),
                                        name=f"broker-{self.broker_id}-lifecycle", daemon=True)
        self._thread.start()
        await asyncio.to_thread(started.wait)

    async def wait_unfenced(self, timeout_s: float) -> bool:
        assert self._unfenced is not None, "not started"
        try:
            await asyncio.wait_for(self._unfenced.wait(), timeout_s)
            return True
        except asyncio.TimeoutError:
            return False

    async def stop(self, controlled: bool) -> None:
        """Stops heartbeating; `controlled`: first ask the controller to fence us (leaderships
        move away at once instead of after the session timeout)."""
        loop, stopping, thread = self._loop, self._stopping, self._thread
        if loop is None or stopping is None or thread is None or not thread.is_alive():
            self._machine.shut_down()
            return
        self._controlled = controlled
        loop.call_soon_threadsafe(stopping.set)
        await asyncio.to_thread(thread.join)

    # -- the lifecycle thread ---------------------------------------------------------------------

    def _run_thread(self, started: threading.Event) -> None:
        loop = self._loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self._main(started))
        finally:
            loop.close()

    async def _main(self, started: threading.Event) -> None:
        """Heartbeats until `stop`, then the shutdown heartbeat (controlled) and closing."""
        self._stopping, self._wake = asyncio.Event(), asyncio.Event()
        task = asyncio.get_running_loop().create_task(self._heartbeat_loop())
        started.set()
        try:
            await self._stopping.wait()
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await self._shut_down(self._controlled)
        finally:
            if self.close_controller is not None:
                await self.close_controller()

    async def _shut_down(self, controlled: bool) -> None:
        if controlled and self.broker_epoch >= 0 and self._machine.state is not BrokerState.SHUTTING_DOWN:
            self._machine.begin_controlled_shutdown()
            try:
                await self.controller.broker_heartbeat(
                    self.broker_id, self.broker_epoch, self.metadata_offset(), want_shutdown=True,
                    timeout_s=SHUTDOWN_TIMEOUT_S)
                log.info("broker %d fenced for a controlled shutdown", self.broker_id)
            except Exception as e:  # no controller reachable: the session timeout fences us
                log.warning("controlled shutdown of broker %d failed: %s", self.broker_id, e)
        self._machine.shut_down()

    def _set_unfenced(self, unfenced: bool) -> None:  # on the node's loop
        assert self._unfenced is not None
        if unfenced:
            self._unfenced.set()
        else:
            self._unfenced.clear()

    async def _register(self) -> None:
        host, port = self.endpoint
        http = {"name": "HTTP", "host": host, "port": port, "security_protocol": self.security_protocol}
        answer = await self.controller.register_broker(
            self.broker_id, self.incarnation_id, [http, *self.kafka_endpoints], self.rack,
            cluster_id=self.cluster_id(), timeout_s=self.heartbeat_interval_ms / 1000 + 5)
        self.fenced = True
        self.broker_epoch = answer["broker_epoch"]
        log.info("registered broker %d, epoch %d", self.broker_id, self.broker_epoch)

    def on_metadata_offset(self, offset: int) -> None:
        """The node published metadata up to `offset` (on the node's loop). Once that holds this
        broker's registration (the controller's test of caught up) while it is fenced, heartbeat
        at once, so the controller unfences it now rather than at the next startup heartbeat
        (Kafka's setReadyToUnfence schedules the next communication immediately)."""
        epoch = self.broker_epoch
        starting = self._machine.state in (BrokerState.STARTING, BrokerState.RECOVERY)  # not shutting down
        if starting and self.fenced and 0 <= epoch <= offset and self._ready_epoch != epoch:
            self._ready_epoch = epoch
            self.heartbeat_now()

    def heartbeat_now(self) -> None:
        """A log directory failed: tell the controller at once rather than at the next interval
        (Kafka's propagateDirectoryFailure). Callable from any thread."""
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            loop.call_soon_threadsafe(wake.set)

    async def _heartbeat(self, planned: float) -> None:
        sent = time.monotonic()
        offline_dirs, offline_replicas = self.offline_report()
        answer: dict[str, Any] = await self.controller.broker_heartbeat(
            self.broker_id, self.broker_epoch, self.metadata_offset(),
            offline_log_dirs=offline_dirs, offline_replicas=offline_replicas,
            timeout_s=self.heartbeat_interval_ms / 1000 + 1)
        answered = time.monotonic()
        self._maybe_log_slow(planned, sent, answered)
        fenced = bool(answer["is_fenced"])
        if self.fenced != fenced:
            log.info("broker %d is %s", self.broker_id, "fenced" if fenced else "unfenced")
        self.fenced = fenced
        if self._machine.on_heartbeat_answer(bool(answer.get("is_caught_up", True)), fenced):
            log.info("broker %d is %s", self.broker_id, self.state)
        if self._node_loop is not None:
            self._node_loop.call_soon_threadsafe(self._set_unfenced, not fenced)

    async def _heartbeat_loop(self) -> None:
        failures = 0
        planned = time.monotonic()
        while True:
            try:
                if self.broker_epoch < 0:
                    await self._register()
                await self._heartbeat(planned)
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception as e:
                failures += 1
                if getattr(e, "error_code", None) == "STALE_BROKER_EPOCH":
                    self.broker_epoch = -1  # the controller forgot us (unregistered): register anew
                    self._machine.on_unknown_epoch()
                elif getattr(e, "error_code", None) == "INCONSISTENT_CLUSTER_ID":
                    reason = f"the active controller refused broker {self.broker_id}: {e}"
                    if self._node_loop is not None:
                        self._node_loop.call_soon_threadsafe(self.refused, reason)
                    return  # another cluster's controller: there is nothing to register with
                elif failures == 1 or failures % 20 == 0:
                    log.warning("heartbeat of broker %d failed (%d in a row): %s", self.broker_id, failures, e)
            running = self.broker_epoch >= 0 and not self.fenced
            interval = (self.heartbeat_interval_ms if running
                        else min(STARTUP_HEARTBEAT_MS, self.heartbeat_interval_ms)) / 1000
            planned = time.monotonic() + interval
            assert self._wake is not None
            try:
                # not asyncio.wait_for: on 3.11 it drops a cancellation that comes in the turn the
                # event is set (a wake-up as `stop` cancels us), and `stop` would wait forever
                async with asyncio.timeout(interval):
                    await self._wake.wait()
                planned = time.monotonic()
            except TimeoutError:
                pass
            self._wake.clear()

    def _maybe_log_slow(self, planned: float, sent: float, answered: float) -> None:
        late, took = sent - planned, answered - sent
        interval = self.heartbeat_interval_ms / 1000
        if max(late, took) < interval or answered - self._last_slow_log < SLOW_HEARTBEAT_LOG_INTERVAL_S:
            return
        self._last_slow_log = answered
        log.warning("heartbeat of broker %d: sent %.2f s late (this process was held up), answered "
                    "after %.2f s (the controller or the network was slow); the interval is %.2f s",
                    self.broker_id, max(0.0, late), took, interval)
