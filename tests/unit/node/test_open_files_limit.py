"""The node's open-files limit (issue 11): the soft limit raised to the hard one at start, and the
segment file cache sized inside it."""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest

from kraft.config import ConfigError, load_config
from kraft.log.file_cache import default_open_files_max

RAISE_IN_A_CHILD = """
import logging, resource, sys
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
resource.setrlimit(resource.RLIMIT_NOFILE, (128, 256))
from kraft.node import raise_open_files_limit
print(raise_open_files_limit(), resource.getrlimit(resource.RLIMIT_NOFILE)[0])
"""


def test_soft_limit_is_raised_to_the_hard_limit_and_logged() -> None:
    done = subprocess.run([sys.executable, "-c", RAISE_IN_A_CHILD], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.split() == ["256", "256"]
    assert "open-files limit (RLIMIT_NOFILE) raised from 128 to 256" in done.stderr


@pytest.mark.parametrize("limit", [256, 1024, 4096, 65536, 1_048_576])
def test_segment_file_cache_leaves_most_descriptors_to_sockets(limit: int) -> None:
    # every segment file borrows from the cache, so the cache is all the log ever holds open
    assert 16 <= default_open_files_max(limit) <= max(16, limit // 8)


def test_open_files_max_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="log.open.files.max"):
        load_config({}, None, ["log.open.files.max=0"])
    assert load_config({}, None, ["log.open.files.max=64"])["log.open.files.max"] == 64
