"""RaftQuorum as a lone voter in this process (real pysyncobj, real files, one loopback port): the
claim, the asyncio bridge (propose answers after on_commit ran, in order), error mapping, restart
from journal and snapshot, and the secret rules."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from kraft.config import ConfigError
from kraft.controller.raft_quorum import (
    InvalidBatchError,
    NotControllerError,
    RaftQuorum,
    RaftQuorumConfig,
    SECRET_FILE,
    read_secret_file,
    resolve_secret,
)
from kraft.metadata.image import MetadataImage

from harness import free_port, wait_until  # tests/ is on sys.path (tests/conftest.py)


class Recorder:
    """What the loop saw: committed (offset, request_id) in order, and installed snapshots."""

    def __init__(self, quorum: RaftQuorum) -> None:
        self.commits: list[tuple[int, Any]] = []
        self.snapshots: list[tuple[int, MetadataImage]] = []
        quorum.on_commit(lambda offset, record: self.commits.append((offset, record["request_id"])))
        # the image comes as a function building it (the loader runs it in a thread)
        quorum.on_snapshot(lambda offset, build: self.snapshots.append((offset, build())))


def noop() -> dict[str, Any]:
    return {"type": "NoOp", "version": 0}


def config(tmp_path: Path, port: int, **kwargs: Any) -> RaftQuorumConfig:
    return RaftQuorumConfig(node_id=1, voters={1: ("127.0.0.1", port)}, data_dir=tmp_path,
                            secret="s", **kwargs)


async def test_lone_voter_claims_proposes_and_restarts(tmp_path: Path) -> None:
    port = free_port()
    quorum = RaftQuorum(config(tmp_path, port, log_compaction_min_entries=5))
    seen = Recorder(quorum)
    with pytest.raises(NotControllerError):
        await quorum.propose([noop()])
    await quorum.start()
    try:
        await wait_until(quorum.is_active_controller)
        assert quorum.active_controller() == (1, 1)
        assert seen.commits == [(0, None)]  # the claim is the first record

        for i in range(12):
            offset = await quorum.propose([noop(), noop()], request_id=f"r{i}")
            # Answered only after on_commit delivered the batch here.
            assert seen.commits[-2:] == [(offset - 1, f"r{i}"), (offset, f"r{i}")]
        assert [o for o, _ in seen.commits] == list(range(25))
        assert quorum.metadata_offset == 24
        assert await quorum.propose([noop()], request_id="r11") == 24  # a retry: applied once

        with pytest.raises(NotControllerError):  # a record stamped for another epoch is fenced
            await quorum.propose([{**noop(), "controller_epoch": 7}])
        with pytest.raises(InvalidBatchError):
            await quorum.propose([])
        with pytest.raises(InvalidBatchError):
            await quorum.propose([{"version": 0}])
        with pytest.raises(InvalidBatchError):
            await quorum.propose([{"type": "ClaimController", "node_id": 1}])

        status = quorum.status()
        assert (status.raft_state, status.leader_id, status.active_controller_id) == ("Leader", 1, 1)
        assert status.high_watermark >= 14 and status.metadata_offset == 24
    finally:
        await quorum.close()
    before = list(seen.commits)

    # Restart on the same files: the dump (if compaction ran) comes as a snapshot, the journal
    # tail as records; either way the loop ends with the same records, then a new claim.
    again = RaftQuorum(config(tmp_path, port, log_compaction_min_entries=5))
    rebuilt = Recorder(again)
    await again.start()
    try:
        await wait_until(again.is_active_controller)
        assert again.active_controller() == (1, 2)
        assert rebuilt.snapshots, "log compaction at 5 entries should have left a snapshot"
        offset, image = rebuilt.snapshots[-1]
        assert isinstance(image, MetadataImage) and image.offset == offset
        assert image.controller_epoch == 1 and image.has_request("r3")
        # The journal tail follows the snapshot: the same records as before the restart.
        assert rebuilt.commits[:-1] == before[offset + 1:]
        assert rebuilt.commits[0][0] == offset + 1
        assert rebuilt.commits[-1][0] == 25  # the new claim
        assert await again.propose([noop()]) == 26
    finally:
        await again.close()


def test_secret_is_required_and_generated_only_for_a_lone_voter(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        RaftQuorumConfig(node_id=1, voters={1: ("127.0.0.1", 1)}, data_dir=tmp_path, secret="")
    with pytest.raises(ConfigError):
        RaftQuorumConfig(node_id=4, voters={1: ("127.0.0.1", 1)}, data_dir=tmp_path, secret="s")
    with pytest.raises(ConfigError):
        resolve_secret(None, tmp_path, voter_count=3)
    assert resolve_secret("given", tmp_path, voter_count=3) == "given"

    generated = resolve_secret(None, tmp_path / "data", voter_count=1)
    assert len(generated) >= 32
    assert resolve_secret(None, tmp_path / "data", voter_count=1) == generated
    files = list((tmp_path / "data").iterdir())
    assert len(files) == 1 and stat.S_IMODE(os.stat(files[0]).st_mode) == 0o600


def test_a_secret_file_is_warned_about_only_when_open_to_others(tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    given = tmp_path / "cluster.secret"
    given.write_text("s3cret\n")
    given.chmod(0o600)
    generated = resolve_secret(None, tmp_path / "data", voter_count=1)
    with caplog.at_level(logging.WARNING):
        assert read_secret_file(given) == "s3cret"
        assert resolve_secret(None, tmp_path / "data", voter_count=1) == generated
        assert caplog.messages == []
        for path, mode in ((given, 0o640), (tmp_path / "data" / SECRET_FILE, 0o604)):
            path.chmod(mode)
        read_secret_file(given)
        resolve_secret(None, tmp_path / "data", voter_count=1)
    assert caplog.messages == [
        f"secret file {given} is accessible to other users (mode 0640): chmod 600 {given}",
        f"secret file {tmp_path / 'data' / SECRET_FILE} is accessible to other users (mode 0604): "
        f"chmod 600 {tmp_path / 'data' / SECRET_FILE}"]
    given.write_text("\n")
    with pytest.raises(ConfigError, match="is empty"):
        read_secret_file(given)
