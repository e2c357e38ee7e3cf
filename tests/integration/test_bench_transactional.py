"""`kraft-bench produce --transactional` on a real node: the records go in transactions of
--commit-every records, all committed at the end (a read_committed reader gets every one), and the
report counts the commits and their latency; --acks other than all is refused. `kraft-bench consume
--isolation-level read_committed` reads them back."""

from __future__ import annotations

import json
import subprocess
import sys

from harness import shutdown_all, start_node
from transactions_support import committed_values


def bench(node, *args: str, command: str = "produce") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from kraft.bench import main; main()", command,
                           "--bootstrap-server", node.bootstrap, *args], capture_output=True, text=True, timeout=300)


def test_transactional_produce_commits_every_n_records(tmp_path) -> None:
    node = start_node(tmp_path, transaction_state_log_num_partitions=1)
    try:
        out = tmp_path / "out.json"
        run = bench(node, "--topic", "txbench", "--num-records", "1000", "--record-size", "10", "--acks", "all",
                    "--transactional", "--commit-every", "100", "--json", str(out))
        assert run.returncode == 0, run.stderr
        summary = json.loads(out.read_text())
        assert (summary["records"], summary["errors"], summary["commits"]) == (1000, 0, 10)
        assert summary["commit_p50_ms"] > 0 and summary["commit_max_ms"] >= summary["commit_p50_ms"]
        assert summary["transactional"] is True and summary["records_per_sec"] > 0
        assert len(committed_values(node.bootstrap, "txbench", 1)) == 1000
        read = tmp_path / "read.json"
        consumed = bench(node, "--topic", "txbench", "--num-records", "1000", "--isolation-level", "read_committed",
                         "--json", str(read), command="consume")
        assert consumed.returncode == 0, consumed.stderr
        report = json.loads(read.read_text())
        assert (report["records"], report["isolation_level"]) == (1000, "read_committed"), report
        refused = bench(node, "--topic", "txbench", "--num-records", "10", "--transactional")
        assert refused.returncode == 2 and "--transactional needs --acks all" in refused.stderr
    finally:
        shutdown_all([node])
