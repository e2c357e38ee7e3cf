"""Retrying a client call on retriable KraftErrors, with a backoff and an overall deadline."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

from kraft.api.errors import KraftError

T = TypeVar("T")


def call_with_retries(
    call: Callable[[], T],
    *,
    timeout_s: float,
    backoff_s: float,
    retriable: Callable[[KraftError], bool] = lambda e: e.retriable,
    on_retry: Callable[[KraftError], None] | None = None,
) -> T:
    """Runs `call` until it succeeds, raises a non-retriable error, or `timeout_s` has passed
    (then the last error is raised)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return call()
        except KraftError as e:
            if not retriable(e) or time.monotonic() + backoff_s > deadline:
                raise
            if on_retry is not None:
                on_retry(e)
        time.sleep(backoff_s)
