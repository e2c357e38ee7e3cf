"""RaftQuorum as a lone voter in this process (real pysyncobj, real files, one loopback port): the
claim, the asyncio bridge (propose answers after on_commit ran, in order), error mapping, restart
from journal and snapshot, and the secret rules."""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import time
from pathlib import Path
from typing import Any, AsyncIterator

import pysyncobj.serializer
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
from kraft.controller.raft_journal import durable_replace
from kraft.metadata.image import MetadataImage

from harness import free_port, wait_for, wait_until  # tests/ is on sys.path (tests/conftest.py)


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


@contextlib.asynccontextmanager
async def restarted(tmp_path: Path, port: int,
                    before: list[tuple[int, Any]]) -> AsyncIterator[tuple[RaftQuorum, MetadataImage]]:
    """The voter restarted on the same files, once active: the dump comes as a snapshot, the
    journal tail after it as records, the same records as `before` (what the last incarnation
    committed), then a new claim. Yields the quorum and the snapshot's image; closes it."""
    again = RaftQuorum(config(tmp_path, port, log_compaction_min_entries=5))
    rebuilt = Recorder(again)
    await again.start()
    try:
        await wait_until(again.is_active_controller)
        assert rebuilt.snapshots, "log compaction at 5 entries should have left a snapshot"
        offset, image = rebuilt.snapshots[-1]
        assert image.offset == offset
        assert rebuilt.commits[:-1] == before[offset + 1:] and rebuilt.commits[0][0] == offset + 1
        assert rebuilt.commits[-1][0] == before[-1][0] + 1  # the new claim, after every record
        yield again, image
    finally:
        await again.close()


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

    async with restarted(tmp_path, port, before) as (again, image):
        assert again.active_controller() == (1, 2)
        assert isinstance(image, MetadataImage)
        assert image.controller_epoch == 1 and image.has_request("r3")
        assert await again.propose([noop()]) == 26


def dump_writer(quorum: RaftQuorum) -> int:
    """The pid of the child pysyncobj forked to write a dump (0: none running)."""
    return quorum._syncobj._SyncObj__serializer._Serializer__pid  # type: ignore[union-attr]


async def test_close_waits_for_the_dump_writer_so_a_restart_loses_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pysyncobj writes its dumps in a forked child. One still running after `close` installed
    its dump while the next start ran, after the journal had lined itself up with the older
    dump; pysyncobj then found the journal not starting at the new dump's entries, cleared it and
    lost the committed entries after the dump ("raftCommitIndex exceeds journal end after loading
    dump": the restart test above failed so under load). Here the writer always outlives the
    proposals (its install waits 2 s), so `close` must wait for it."""
    install = pysyncobj.serializer.atomicReplace

    def slow_install(source: str, target: str) -> None:  # runs in the forked writer
        time.sleep(2)  # the subject: a dump writer that outlives the proposals
        install(source, target)

    monkeypatch.setattr(pysyncobj.serializer, "atomicReplace", slow_install)
    port = free_port()
    quorum = RaftQuorum(config(tmp_path, port, log_compaction_min_entries=5))
    seen = Recorder(quorum)
    await quorum.start()
    try:
        await wait_until(quorum.is_active_controller)
        n = 0
        while not dump_writer(quorum):
            assert n < 200, "no dump written"
            await quorum.propose([noop()], request_id=f"r{n}")
            n += 1
        writer = dump_writer(quorum)
        for i in range(3):  # committed after the dump's last entry
            await quorum.propose([noop()], request_id=f"after{i}")
    finally:
        await quorum.close()
    with pytest.raises(ChildProcessError):  # finished and reaped: nothing changes after close
        os.waitpid(writer, os.WNOHANG)
    async with restarted(tmp_path, port, list(seen.commits)):
        pass


def test_a_dump_writer_whose_node_died_installs_nothing(tmp_path: Path) -> None:
    """A node killed (kill -9) while its forked dump writer runs: the orphaned writer must not
    install its dump, which could land while the restarted node starts (the race above)."""
    source, target = tmp_path / "dump.tmp", tmp_path / "dump"
    ready, result = tmp_path / "ready", tmp_path / "result"
    source.write_bytes(b"new dump")
    target.write_bytes(b"old dump")
    node = os.fork()
    if node == 0:  # the "node": forks its dump writer, dies once the writer runs
        code = 1
        try:
            if os.fork() == 0:  # the writer
                try:
                    node_pid = os.getppid()
                    ready.touch()
                    with contextlib.suppress(TimeoutError):  # the install below must refuse either way
                        wait_for(lambda: os.getppid() != node_pid, 10, 0.01, "the node gone")
                    try:
                        durable_replace(str(source), str(target))
                        outcome = "installed"
                    except RuntimeError:
                        outcome = "refused"
                    (tmp_path / "result.tmp").write_text(outcome)
                    os.replace(tmp_path / "result.tmp", result)
                finally:
                    os._exit(0)
            wait_for(ready.exists, 10, 0.01, "the writer running")
            code = 0
        finally:
            os._exit(code)
    os.waitpid(node, 0)
    wait_for(result.exists, 15, 0.02, "the orphaned writer's report")
    assert result.read_text() == "refused" and target.read_bytes() == b"old dump"


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
