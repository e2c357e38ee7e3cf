"""One Kafka client connection on the event loop: the asyncio shell over the sans-I/O
`KafkaConnection` (Kafka's SocketServer processor and KafkaChannel, for one connection).

Frames in, one handler task per request (kraft/kafka/dispatch.py), answers written in request
order whatever order the handlers finish in (Kafka's rule: a client pipelines and matches answers
by order). Bounds, each pausing the socket's reading rather than buffering more:
- `queued.max.requests`: requests read and not yet answered on this connection;
- `queued.max.request.bytes`: the node's pool of request bytes (kraft/kafka/limits.py), reserved
  from a frame's size before its body is read;
- the transport's write buffer (pause_writing): a client that does not read its answers is not
  served more;
- a throttled answer (throttle_time_ms > 0) mutes the connection for that long after it is sent
  (KIP-219: the client also holds back): nothing is read, started or answered meanwhile.
A frame over socket.request.max.bytes, a malformed or truncated request or a request of a key or
version that is not served closes this connection only, with one WARNING line (rate-limited per
client by kraft/logging.py). `connections.max.idle.ms` without a byte read and with nothing in
flight closes it. On a SASL listener requests are handled one at a time until the exchange is
done, and only ApiVersions, SaslHandshake and SaslAuthenticate are served before.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import TYPE_CHECKING, Any, cast

from kio.schema.errors import ErrorCode

from kraft.kafka.codec import Request
from kraft.kafka.connection import AnswerReady, Event, KafkaConnection, RequestReceived, TokenReceived
from kraft.kafka.api_versions import API_VERSIONS
from kraft.kafka.dispatch import api_name
from kraft.kafka.errors import KafkaProtocolError
from kraft.kafka.frames import frame
from kraft.kafka.sasl import (
    FAILED_MESSAGE, SASL_HANDSHAKE, SaslAuthenticationFailed, SaslExchange, State,
    authenticate_response,
)
from kraft.server.request_context import ANONYMOUS, MAX_CLIENT_ID_CHARS, RequestContext

if TYPE_CHECKING:
    from kraft.kafka.listener import KafkaListener

log = logging.getLogger("kraft.kafka")

CLOSE_LINGER_S = 1.0


class _Answer:
    """What one request's handling gives: the buffers to send (written as they are, so a Fetch
    answer's stored batches are not joined into one copy), the throttle to mute for, and whether
    the connection closes once they are sent."""

    __slots__ = ("data", "throttle_ms", "close")

    def __init__(self, data: list[bytes | memoryview], throttle_ms: int = 0, close: bool = False) -> None:
        self.data, self.throttle_ms, self.close = data, throttle_ms, close


class KafkaChannel(asyncio.Protocol):
    def __init__(self, listener: KafkaListener, client_host: str) -> None:
        self.listener = listener
        self.client_host = client_host
        self.loop = asyncio.get_running_loop()
        self.sasl = SaslExchange(listener.sasl_mechanisms, listener.credentials) if listener.uses_sasl else None
        self._sasl_step = listener.registry.count(self._sasl_step_uncounted)
        self.core = KafkaConnection(listener.registry.api_versions, listener.max_frame_bytes, sasl=self.sasl is not None,
                                    max_frame_bytes_before_auth=listener.max_frame_bytes_before_auth)
        self.principal: str | None = None  # known once authenticated
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._backlog: deque[Event] = deque()  # read, not started
        self._answers: deque[asyncio.Future[_Answer]] = deque()  # started, in request order
        self._sizes: dict[int, int] = {}  # id(answer future) -> its frame's reserved bytes
        self._partial_reserved = 0  # bytes reserved for the frame being read
        self._waiting_memory = False
        self._writing_paused = False
        self._reading_paused = False
        self._muted_until = 0.0
        self._last_read = self.loop.time()
        self._idle_handle: asyncio.TimerHandle | None = None

    # -- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        self.listener.opened(self)
        if self.sasl is None:
            try:
                self.principal = self.listener.transport_principal(transport)
            except Exception as e:  # noqa: BLE001 - an unmapped certificate is the client's failure
                self._refuse("authentication failed", e)
                return
        self._schedule_idle_check()

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self._last_read = self.loop.time()
        try:
            events = self.core.receive_data(data)
        except KafkaProtocolError as e:
            self._refuse("protocol error", e)
            return
        for event in events:
            if self._partial_reserved:  # the frame reserved for while it was read is the first one
                self._partial_reserved = 0
            else:
                self.listener.memory.force(event.size)
            self._backlog.append(event)
        self._reserve_partial()
        self._pump()

    def eof_received(self) -> bool | None:
        return False  # the client closed its side: close ours (answers in flight are dropped)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.transport = None
        if self._idle_handle is not None:
            self._idle_handle.cancel()
        self.listener.memory.forget(self._memory_freed)
        self.listener.memory.release(self._partial_reserved + sum(e.size for e in self._backlog))
        self._partial_reserved = 0
        self._backlog.clear()
        self.listener.closed(self)  # answers still running release their bytes when they end

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._pump()

    # -- flow -----------------------------------------------------------------------------------

    def _reserve_partial(self) -> None:
        """Reserve the frame being read from the node's pool before its body is read."""
        expected = self.core.frame_expected
        if expected is None or self._partial_reserved or self.closed:
            return
        if self.listener.memory.try_reserve(expected):
            self._partial_reserved = expected
            self._waiting_memory = False
        elif not self._waiting_memory:
            self._waiting_memory = True
            self.listener.memory.wait(self._memory_freed)

    def _memory_freed(self) -> None:
        self._waiting_memory = False
        self._reserve_partial()
        self._update_reading()

    @property
    def _authenticated(self) -> bool:
        return self.principal is not None

    def _pump(self) -> None:
        """Starts what may start now, then pauses or resumes reading."""
        while (self._backlog and not self.closed and not self._writing_paused and not self._muted()
               and len(self._answers) < self.listener.max_queued_requests
               and (self._authenticated or not self._answers)):
            self._start(self._backlog.popleft())
        self._update_reading()

    def _muted(self) -> bool:
        return self._muted_until > self.loop.time()

    def _update_reading(self) -> None:
        if self.transport is None or self.closed:
            return
        pause = (self._writing_paused or self._waiting_memory or self._muted()
                 or len(self._backlog) + len(self._answers) >= self.listener.max_queued_requests)
        if pause and not self._reading_paused:
            self.transport.pause_reading()
        elif not pause and self._reading_paused:
            self.transport.resume_reading()
        self._reading_paused = pause

    def _start(self, event: Event) -> None:
        answer: asyncio.Future[_Answer]
        if isinstance(event, AnswerReady):
            answer = self.loop.create_future()
            answer.set_result(_Answer([event.data]))
        elif isinstance(event, TokenReceived):
            answer = self.loop.create_task(self._raw_token(event.token))
        else:
            if self.sasl is not None and not self.sasl.allows(event.request.api_key):
                self.listener.memory.release(event.size)
                self._refuse("illegal SASL state", KafkaProtocolError(
                    f"{api_name(event.request.api_key, event.request.api_version)} request while "
                    f"{self.sasl.state.value}"))
                return
            answer = self.loop.create_task(self._serve(event.request))
        self._sizes[id(answer)] = event.size
        self._answers.append(answer)
        answer.add_done_callback(self._answered)

    def _answered(self, answer: asyncio.Future[_Answer]) -> None:
        self.listener.memory.release(self._sizes.pop(id(answer)))
        self._flush()

    def _flush(self) -> None:
        """Writes the answers at the head that are ready, in request order, in one write (a
        client that pipelines is woken once, not once an answer); a mute holds the rest back too."""
        ready: list[bytes | memoryview] = []
        while self._answers and self._answers[0].done() and not self._muted():
            head = self._answers.popleft()
            if self.closed:
                continue
            if head.cancelled() or head.exception() is not None:
                error = head.exception() if not head.cancelled() else "cancelled"
                log.error("Kafka request from %s failed: %r; closing the connection", self.client_host, error,
                          exc_info=None if head.cancelled() else head.exception())
                self._write(ready)
                self._close()
                continue
            result = head.result()
            ready.extend(result.data)
            if result.close:
                self._write(ready)
                self._close(after_answer=True)
            elif result.throttle_ms > 0:
                self._mute(result.throttle_ms)
        self._write(ready)
        self._pump()

    def _write(self, ready: list[bytes | memoryview]) -> None:
        """The answers' buffers in `ready`, in order, as one write (not joined: a Fetch answer's
        stored batches are not copied); then `ready` is empty."""
        if ready:
            assert self.transport is not None
            self.transport.writelines(ready)
            ready.clear()

    def _mute(self, throttle_ms: int) -> None:
        """KIP-219: the throttled answer is sent at once, then nothing more is read, started or
        answered for the throttle time."""
        self._muted_until = max(self._muted_until, self.loop.time() + throttle_ms / 1000)
        self.loop.call_at(self._muted_until, self._flush)

    # -- requests -------------------------------------------------------------------------------

    async def _serve(self, request: Request) -> _Answer:
        if self.sasl is not None and self.sasl.state is not State.COMPLETE:
            return await self._sasl_request(request)
        response = await self.listener.registry.handler(request.api_key)(self._context(request), request.body)
        if response is None:  # Produce with acks=0: the client expects no answer
            return _Answer([])
        throttle = getattr(response, "throttle_time", None)
        throttle_ms = 0 if throttle is None else int(throttle.total_seconds() * 1000)
        return _Answer(self.core.send(request, response), throttle_ms)

    def _context(self, request: Request) -> RequestContext:
        """The request's context; before a SASL exchange is done, the principal is ANONYMOUS."""
        return RequestContext(
            principal=self.principal or ANONYMOUS, client_address=self.client_host, listener_name=self.listener.name,
            security_protocol=self.listener.security_protocol,
            client_id=(request.client_id or "")[:MAX_CLIENT_ID_CHARS],
            api=api_name(request.api_key, request.api_version), api_version=request.api_version,
            correlation_id=request.correlation_id)

    async def _sasl_request(self, request: Request) -> _Answer:
        """ApiVersions, SaslHandshake and SaslAuthenticate of an exchange in progress, each
        counted in the request metrics as the registry's handlers are."""
        handler = self.listener.registry.handler(request.api_key) if request.api_key == API_VERSIONS \
            else self._sasl_step
        response = await handler(self._context(request), request.body)
        if self.sasl is not None and self.sasl.state is State.FAILED:
            if request.api_key == SASL_HANDSHAKE:
                self._log_refusal("unsupported SASL mechanism", request.body.mechanism)
            return _Answer(self.core.send(request, response), close=True)
        return _Answer(self.core.send(request, response))

    async def _sasl_step_uncounted(self, context: RequestContext, body: Any) -> Any:
        """The answer to a SaslHandshake or SaslAuthenticate of the exchange (`sasl.state` is
        FAILED after one that ends it)."""
        assert self.sasl is not None
        if context.api == "SaslHandshake":
            return self.sasl.handshake(body)
        try:
            token = await self.sasl.authenticate(body.auth_bytes)
        except SaslAuthenticationFailed as e:
            self._authentication_failed(e)
            return authenticate_response(context.api_version, ErrorCode.sasl_authentication_failed, FAILED_MESSAGE)
        self._maybe_authenticated()
        return authenticate_response(context.api_version, auth_bytes=token)

    async def _raw_token(self, token: bytes) -> _Answer:
        """A bare token after SaslHandshake v0; a failure closes without an answer (Kafka)."""
        assert self.sasl is not None
        try:
            answer = await self.sasl.authenticate(token)
        except SaslAuthenticationFailed as e:
            self._authentication_failed(e)
            return _Answer([], close=True)
        self._maybe_authenticated()
        return _Answer([frame(answer)])

    def _maybe_authenticated(self) -> None:
        assert self.sasl is not None
        if self.sasl.state is State.COMPLETE:
            self.principal = self.sasl.principal
            self.core.sasl_done()

    def _authentication_failed(self, error: SaslAuthenticationFailed) -> None:
        self.listener.authentication_failed()
        self._log_refusal("SASL authentication failed", error)

    # -- closing --------------------------------------------------------------------------------

    def _log_refusal(self, what: str, detail: object) -> None:
        log.warning("Kafka connection from %s on %s: %s: %s", self.client_host, self.listener.name, what, detail,
                    extra={"client": self.client_host})

    def _refuse(self, what: str, error: object) -> None:
        """Closes the connection after a client's fault, with one (rate-limited) line."""
        self._log_refusal(f"{what}, closing it", error)
        self._close()

    def _close(self, after_answer: bool = False) -> None:
        """Closes the connection; what was written is still sent. `after_answer`: an answer that
        ends the connection (a failed authentication) was just written: the client closes on
        reading it, else it is closed after CLOSE_LINGER_S. Closing at once lets the answer and
        the close arrive together, and some clients (kafka-python) then report only the close."""
        self.closed = True  # nothing more is started or written
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if after_answer:
            transport.resume_reading()  # to see its close (what it sends is dropped)
            self.loop.call_later(CLOSE_LINGER_S, transport.close)
        else:
            transport.close()

    def _schedule_idle_check(self) -> None:
        self._idle_handle = self.loop.call_at(self._last_read + self.listener.idle_s, self._check_idle)

    def _check_idle(self) -> None:
        if self.closed:
            return
        if not self._answers and self.loop.time() >= self._last_read + self.listener.idle_s:
            log.debug("closing the idle Kafka connection from %s (connections.max.idle.ms)", self.client_host)
            self._close()
            return
        if self._answers:  # a long poll in flight is not idleness
            self._last_read = self.loop.time()
        self._schedule_idle_check()

    async def drain(self) -> None:
        """Shutdown: reads no more, lets the answers in flight go out, then closes."""
        if self.transport is not None and not self.closed:
            self.transport.pause_reading()
            self._reading_paused = True
        self.listener.memory.release(sum(e.size for e in self._backlog))
        self._backlog.clear()
        if self._answers:
            await asyncio.gather(*self._answers, return_exceptions=True)
        self._close()
