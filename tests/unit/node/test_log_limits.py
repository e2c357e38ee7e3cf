"""What clients can make the node log: lines marked with a `client` are rate-limited per client and
per kind with a count of what was suppressed; aiohttp's tracebacks for a malformed request become
one WARNING line; every other line passes untouched."""

from __future__ import annotations

import logging

import pytest
from aiohttp.http_exceptions import LineTooLong

from kraft.logging import ClientLineLimiter, MalformedRequestFolder, NodeFormatter


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def captured():
    """(logger, lines, clock): a logger whose handler has the node's filters, the limiter on `clock`."""
    clock = Clock()
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    handler = Collect()
    handler.setFormatter(NodeFormatter(1))
    handler.addFilter(MalformedRequestFolder())
    limiter = ClientLineLimiter(per_client=3, per_line=5, interval_s=10.0, clock=clock)
    handler.addFilter(limiter)
    logger = logging.getLogger("kraft.test-limits")
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(logging.INFO)
    aiohttp_logger = logging.getLogger("aiohttp.server")
    saved = aiohttp_logger.handlers[:], aiohttp_logger.propagate
    aiohttp_logger.handlers[:] = [handler]
    aiohttp_logger.propagate = False
    yield logger, lines, clock, limiter
    aiohttp_logger.handlers[:], aiohttp_logger.propagate = saved
    if limiter._timer is not None:
        limiter._timer.cancel()


def failed_login(logger: logging.Logger, client: str, user: str = "admin") -> None:
    logger.warning("authentication failed for %s %s from %s: %s", "GET", "/v1/metadata", client,
                   f"user {user!r}: unknown user or wrong password", extra={"client": client})


def test_a_flood_from_one_client_is_cut_and_counted(captured):
    logger, lines, clock, _ = captured
    for _ in range(1000):
        failed_login(logger, "10.0.0.7")
    assert len(lines) == 3
    clock.now += 10  # the next window: its first line reports the last one's count
    failed_login(logger, "10.0.0.7")
    assert "997 similar lines suppressed in the last 10 s" in lines[3]
    assert "authentication failed for GET /v1/metadata from 10.0.0.7" in lines[3]
    assert len(lines) == 5


def test_many_clients_share_one_bound_per_kind_of_line(captured):
    logger, lines, clock, _ = captured
    for i in range(1000):
        failed_login(logger, f"10.0.{i // 250}.{i % 250}")
    assert len(lines) == 5
    logger.warning("refused %s from %s", "POST /v1/controller/topics", "10.0.0.9", extra={"client": "10.0.0.9"})
    assert len(lines) == 6  # another kind of line has its own bound


def test_lines_without_a_client_are_never_limited(captured):
    logger, lines, _, _ = captured
    for i in range(100):
        logger.info("partition t-%d became leader", i)
    assert len(lines) == 100


def test_the_count_is_reported_when_the_window_ends_even_if_the_flood_stopped(captured):
    logger, lines, clock, limiter = captured
    for _ in range(10):
        failed_login(logger, "10.0.0.7")
    assert limiter._timer is not None  # reported at the window's end by a timer, not by a later line
    limiter._timer.cancel()
    clock.now += 10
    limiter._on_timer()
    assert "7 similar lines suppressed" in lines[-1]
    assert limiter._timer is None


def test_aiohttp_tracebacks_for_malformed_requests_become_one_warning_line(captured):
    _, lines, _, _ = captured
    server = logging.getLogger("aiohttp.server")
    for _ in range(10):
        try:
            raise LineTooLong("Status line is too long", "8190", "9000")
        except LineTooLong:
            server.exception("Error handling request from %s", "10.0.0.7")
    assert len(lines) == 3
    assert all("\n" not in line and " WARNING " in line for line in lines)
    assert "malformed request from 10.0.0.7: Got more than 8190 bytes" in lines[0]
    try:
        raise ValueError("a bug of the node")
    except ValueError:
        server.exception("Error handling request from %s", "10.0.0.7")
    assert " ERROR " in lines[-1] and "Traceback" in lines[-1]  # not the client's error: kept whole
