"""Fixtures for the client tests: a fake broker on 127.0.0.1 (see client_fake_broker.py)."""

from __future__ import annotations

from typing import Iterator

import pytest

from client_fake_broker import FakeBroker


@pytest.fixture
def broker() -> Iterator[FakeBroker]:
    with FakeBroker() as b:
        yield b
