"""One `RaftQuorum` voter in its own process, driven over a small local HTTP interface, for
tests/integration/test_raft_quorum.py.

    python raft_voter.py --node-id 1 --voters 1@127.0.0.1:P1,2@... --data-dir D --secret S --http-port H

Routes (JSON): GET /status, GET /records, POST /propose {"key", "request_id"?},
POST /submit {"records": [...]} (raw batch: no controller check, the log still fences it).
Its state machine folds records into an immutable tuple of (offset, key), so a snapshot carries
everything and the test can compare what each voter applied, whether by records or snapshots.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import signal
import sys
from pathlib import Path
from typing import Any

from aiohttp import web

from kraft.config import parse_voters
from kraft.controller.raft_quorum import RaftQuorum, RaftQuorumConfig


class AppliedKeys:
    """Test state machine: the (offset, key) of every applied record, as an immutable tuple."""

    def initial_state(self) -> tuple:
        return ()

    def replay(self, state: tuple, entries: list[tuple[int, dict[str, Any]]]) -> tuple:
        return state + tuple((offset, record.get("key")) for offset, record in entries)


class Voter:
    def __init__(self, quorum: RaftQuorum) -> None:
        self.quorum = quorum
        self.applied: dict[int, Any] = {}  # offset -> key, as the loop saw it
        self.snapshots = 0
        self.violations: list[str] = []  # ordering problems seen by the callbacks
        quorum.on_commit(self._committed)
        quorum.on_snapshot(self._snapshot)

    def _committed(self, offset: int, record: dict[str, Any]) -> None:
        if offset != max(self.applied, default=-1) + 1:
            self.violations.append(f"record at offset {offset} after {max(self.applied, default=-1)}")
        self.applied[offset] = record.get("key")

    def _snapshot(self, offset: int, state: tuple) -> None:
        self.snapshots += 1
        self.applied = dict(state)
        if max(self.applied, default=-1) != offset:
            self.violations.append(f"snapshot at offset {offset} holds up to {max(self.applied, default=-1)}")

    async def status(self, request: web.Request) -> web.Response:
        status = dataclasses.asdict(self.quorum.status())
        status["is_active_controller"] = self.quorum.is_active_controller()
        status["storage_error"] = self.quorum.storage_error
        status["active_controller"] = self.quorum.active_controller()
        status["snapshots"] = self.snapshots
        return web.json_response(status)

    async def records(self, request: web.Request) -> web.Response:
        return web.json_response({"records": sorted(self.applied.items()),
                                  "snapshots": self.snapshots, "violations": self.violations})

    async def propose(self, request: web.Request) -> web.Response:
        body = await request.json()
        try:
            offset = await self.quorum.propose([{"type": "TestPut", "key": body["key"]}],
                                               request_id=body.get("request_id"))
        except Exception as exc:
            return _error(exc)
        return web.json_response({"offset": offset})

    async def submit(self, request: web.Request) -> web.Response:
        body = await request.json()
        try:
            outcome = await self.quorum.submit(body["records"], timeout=body.get("timeout", 3.0))
        except Exception as exc:
            return _error(exc)
        return web.json_response(dataclasses.asdict(outcome))


def _error(exc: Exception) -> web.Response:
    return web.json_response({"error_code": getattr(exc, "error_code", "UNKNOWN_SERVER_ERROR"),
                              "message": str(exc), "leader_id": getattr(exc, "leader_id", None)},
                             status=409)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--node-id", type=int, required=True)
    parser.add_argument("--voters", required=True)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--secret", required=True)
    parser.add_argument("--http-port", type=int, required=True)
    parser.add_argument("--compaction-entries", type=int, default=10_000)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"%(asctime)s node={args.node_id} %(levelname)s %(name)s %(message)s")

    config = RaftQuorumConfig(node_id=args.node_id, voters=parse_voters(args.voters),
                              data_dir=args.data_dir, secret=args.secret,
                              log_compaction_min_entries=args.compaction_entries,
                              request_timeout=3.0)
    quorum = RaftQuorum(config, AppliedKeys())
    voter = Voter(quorum)
    await quorum.start()
    app = web.Application()
    app.add_routes([web.get("/status", voter.status), web.get("/records", voter.records),
                    web.post("/propose", voter.propose), web.post("/submit", voter.submit)])
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", args.http_port).start()

    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await runner.cleanup()
    await quorum.close()


if __name__ == "__main__":
    asyncio.run(main())
