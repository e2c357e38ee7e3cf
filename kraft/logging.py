"""The node's one log format on stderr: `2026-11-23T03:30:00.123Z INFO node=1 broker: message`,
and the bounds on what clients can make the node log.

The component is the logger name after `kraft.` (loggers are `kraft.broker`, `kraft.api`, ...).

A line a client causes (a failed login, a refused node credential, a malformed request) is logged
with the client's address as `extra={"client": ...}`; `ClientLineLimiter` lets through at most
`PER_CLIENT` such lines per client and `PER_LINE` in all of each kind (logger and message template)
every `INTERVAL_S`, counts the rest and then logs one line saying how many it suppressed, so a
flood grows the log by a bounded rate instead of its own. aiohttp's server logs a client's
malformed request (a request line too long, a broken encoding) as an ERROR with a traceback;
`MalformedRequestFolder` makes that one WARNING line with the client's address.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
import time
from collections import Counter
from typing import Callable

from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestPayloadError

PER_CLIENT = 5
PER_LINE = 20
INTERVAL_S = 10.0
_AIOHTTP_ERROR = "Error handling request from %s"  # aiohttp.server's message for a request it refused
_QUOTED_BYTES = re.compile(r":\s*(?:b'|b\"|bytearray\().*", re.DOTALL)


def parser_error_text(exc: BaseException, limit: int = 200) -> str:
    """Why aiohttp's HTTP parser refused what a client sent (a body that does not decode as its
    Content-Encoding says, a request line too long, ...) in one short line: the parser's message
    without its traceback, its line breaks, or the bytes it quotes from the request (a header
    too long may be a credential)."""
    for error in (exc, exc.__cause__):
        if isinstance(error, HttpProcessingError) and error.message:
            text = str(error.message)
            break
    else:
        text = str(exc.__cause__ or exc)
    return " ".join(_QUOTED_BYTES.sub("", text).split())[:limit]


class NodeFormatter(logging.Formatter):
    def __init__(self, node_id: int) -> None:
        super().__init__()
        self.node_id = node_id

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        component = record.name.removeprefix("kraft.") if record.name != "kraft" else "node"
        line = (
            f"{stamp}.{int(record.msecs):03d}Z {record.levelname} node={self.node_id} "
            f"{component}: {record.getMessage()}"
        )
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class MalformedRequestFolder(logging.Filter):
    """aiohttp's ERROR and traceback for a request its parser refused, as one WARNING line."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if record.name != "aiohttp.server" or not isinstance(exc, (HttpProcessingError, RequestPayloadError)):
            return True
        client = str(record.args[0]) if record.msg == _AIOHTTP_ERROR and isinstance(record.args, tuple) \
            and record.args else "unknown"
        record.msg, record.args = "malformed request from %s: %s", (client, parser_error_text(exc))
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        record.exc_info, record.exc_text = None, None
        record.client = client
        return True


Kind = tuple[str, int, str]  # logger, level, message template


class ClientLineLimiter(logging.Filter):
    """Rate-limits the lines logged with a `client`; every other line passes untouched."""

    def __init__(self, per_client: int = PER_CLIENT, per_line: int = PER_LINE, interval_s: float = INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.per_client, self.per_line, self.interval_s, self.clock = per_client, per_line, interval_s, clock
        self._lock = threading.Lock()
        self._window = self._window_at(clock())
        self._passed: Counter[tuple[Kind, str | None]] = Counter()  # (kind, client or None for all)
        self._suppressed: dict[Kind, tuple[int, logging.LogRecord]] = {}  # kind -> (count, the last one)
        self._timer: threading.Timer | None = None

    def _window_at(self, now: float) -> int:
        return int(now // self.interval_s)

    def filter(self, record: logging.LogRecord) -> bool:
        client = getattr(record, "client", None)
        if client is None:
            return True
        kind: Kind = (record.name, record.levelno, str(record.msg))
        with self._lock:
            ended = self._roll()
            passes = self._passed[(kind, client)] < self.per_client and self._passed[(kind, None)] < self.per_line
            if passes:
                self._passed[(kind, client)] += 1
                self._passed[(kind, None)] += 1
            else:
                count, _ = self._suppressed.get(kind, (0, record))
                self._suppressed[kind] = (count + 1, record)
                self._schedule()
        self._report(ended)
        return passes

    def _roll(self) -> dict[Kind, tuple[int, logging.LogRecord]]:
        """Starts a new window when the current one is over; what the old one suppressed."""
        window = self._window_at(self.clock())
        if window == self._window:
            return {}
        ended, self._suppressed = self._suppressed, {}
        self._passed.clear()
        self._window = window
        return ended

    def _schedule(self) -> None:
        if self._timer is None:  # one report at the window's end, even when the flood has stopped
            delay = (self._window + 1) * self.interval_s - self.clock() + 0.01
            self._timer = threading.Timer(max(delay, 0.01), self._on_timer)
            self._timer.daemon = True
            self._timer.start()

    def _on_timer(self) -> None:
        with self._lock:
            self._timer = None
            ended = self._roll()
            if self._suppressed:  # the clock and the timer disagree by a hair: try again
                self._schedule()
        self._report(ended)

    def _report(self, ended: dict[Kind, tuple[int, logging.LogRecord]]) -> None:
        for (name, level, _), (count, last) in ended.items():
            logger = logging.getLogger(name)
            logger.handle(logger.makeRecord(
                name, level, last.pathname, last.lineno,
                "%d similar lines suppressed in the last %g s (the last: %s)",
                (count, self.interval_s, last.getMessage()), None))


def setup_logging(node_id: int, level: int = logging.INFO) -> None:
    """Routes every logger (ours and the libraries') to stderr in the node format."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(NodeFormatter(node_id))
    handler.addFilter(MalformedRequestFolder())
    handler.addFilter(ClientLineLimiter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
