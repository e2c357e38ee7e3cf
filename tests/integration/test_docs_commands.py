"""Every shell command shown in README.md and docs/*.md runs, against real `kraft-node` processes,
and prints what the docs show.

Blocks: every fenced block tagged `bash`, `sh`, `shell` or `console`, or not tagged at all, is a
shell block and runs by default. A block that cannot run in a test (installing, a node in the
foreground, docker, Spark, ZooKeeper, multi-terminal recipes, a long measurement, or text that is
not a command) is listed in BLOCKS below with the reason; a listing that no longer matches a block
fails `test_block_listings_match_the_docs`, so a changed block is run again by default.

One doc is one shell session, run top to bottom as a reader would in one terminal (variables and
files carry over from block to block), in a fresh directory, against a fresh node of its own (docs
stand alone: `clicks` in docs/cli.md is not the `clicks` of docs/spark.md). Blocks listed as
`Run(cluster=True)` start their own nodes in the background (`kraft-node ... &`): every port in
them is a free one, and the session's processes are killed when the doc is done.

Substitutions: the doc's ports (9092, 9193, ..., 19092, 29092, ..., and ZooKeeper's 2181) become free ports; `kraft`,
`kraft-node`, `kraft-bench`, `python` and `python3` run this checkout with this interpreter;
`$KRAFT_BOOTSTRAP_SERVER` points the tools' default `--bootstrap-server` (127.0.0.1:9092) at the
doc's node; `Run(scale=True)` caps `--num-records`, `--partitions`, `--runs` and `--samples` (SCALED: a
benchmark's figures need the full size, its flags and output do not), and a command that, scaled, is
one the session ran already (and shows no output) is not run again.

Shown output: comment lines right after a command (no blank line between) are its output, with
`# ` removed (`kraft topics --create ...` then `# Created topic clicks.`); in a `$ `-prompt block,
the lines after a `$ command` are its output. Each shown line must match a line of the real output
(stdout and stderr together), in order, other lines may come between (a node's log lines, partitions
a doc leaves out); runs of whitespace compare equal, `...` matches anything, and a shown line that
is JSON compares as JSON. Every command must exit 0 unless its block lists another exit code.

Python: every fenced `python` block runs too, in its place in the doc's session (after the shell
blocks above it, against the same node), as a script of its own run by this interpreter: the doc's
ports are substituted as in shell blocks, and it must exit 0. It imports `kraft` as installed (this
checkout, `pip install -e .`), without the checkout on PYTHONPATH, so an import a user's install
would refuse (`import spark_connector`) fails here too. README.md's blocks run in the repository
root, where its reader is (its own `kraft/` first on sys.path). A block that cannot run is marked in the
doc itself, on the line before its fence: `<!-- not-run: the reason -->`; NOT_RUN_PYTHON_BLOCKS
counts the marked blocks per doc, so they cannot grow unnoticed.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness import free_port, shutdown_all, start_node, wait_for
from kraft.zk.ensemble import zookeeper_available

# each doc is a session of its own with its own node: the docs spread over the xdist workers
pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.spread]

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELL_LANGUAGES = {"", "bash", "sh", "shell", "console"}
PYTHON_LANGUAGES = {"python", "python3", "py"}
NOT_RUN = re.compile(r"^\s*<!--\s*not-run:(.*?)-->\s*$")
# Python blocks marked `<!-- not-run: ... -->`, per doc. Raise a count only with a reason in the doc.
NOT_RUN_PYTHON_BLOCKS = {
    "docs/groups.md": 1,  # a synopsis of the consumer's calls
    "docs/security.md": 1,  # the reader's secured cluster (node1:9093, ca.pem)
    "docs/spark.md": 3,  # a Spark session: the fragment that registers, the pipeline (about a minute), the transactional sink's options
}
READER_IN_REPO_ROOT = {"README.md"}  # docs whose Python blocks a reader runs in the checkout's root
SCALED = {"--num-records": 500, "--partitions": 2000, "--runs": 1, "--samples": 30}  # Run(scale=True)'s caps
# A doc port: 9092-9394 as the docs number them (client 9x92/9x93, Raft 9x93/9x94), the
# benchmarks' 19092 / 29xxx, and ZooKeeper's 2181.
DOC_PORT = re.compile(r"(?<![\w.\-/])(?:[12]?9[0-4]9[2-4]|2181)(?![\w])")


@dataclass(frozen=True)
class Skip:
    reason: str


@dataclass(frozen=True)
class Run:
    cluster: bool = False  # runs against nodes the doc's blocks start themselves, not the test's node
    exit_codes: dict[str, int] = field(default_factory=dict)  # command (its start) -> exit code
    scale: bool = False  # --num-records, --partitions and --runs capped as SCALED says
    env: dict[str, str] = field(default_factory=dict)  # "{bootstrap}" is the doc node's address
    zookeeper: bool = False  # starts a ZooKeeper server (Debian's package and java; the doc is skipped without)


# (doc, first line of the block) -> how to treat it. Every other shell block runs with Run().
BLOCKS: dict[tuple[str, str], Skip | Run] = {
    ("README.md", "pip install '.[zk]' && kraft-node"):
        Skip("installs the package and runs a node in the foreground (the test's node is that node)"),
    ("README.md", "bash scripts/test.sh"):
        Skip("installs the test dependencies and runs the whole suite, this test included"),
    ("README.md", "python3 -c 'import secrets; print(secrets.token_urlsafe(32))' > cluster.secret && "
                  "chmod 600 cluster.secret"): Run(cluster=True),
    ("README.md", "kraft-bench produce --topic bench --num-records 1000000 --record-size 100 --acks 1 "
                  "--json produce.json"):
        Run(scale=True),
    ("docs/benchmarks.md", "kraft-node --data-dir /tmp/benchnode --listen 127.0.0.1:19092"):
        Skip("a node in the foreground (the test's node stands for it)"),
    ("docs/benchmarks.md", "kraft-bench produce --bootstrap-server $B --topic p1 --num-records 2000000"):
        Run(scale=True, env={"B": "{bootstrap}"}),
    ("docs/benchmarks.md", "# idempotent (the baseline), then transactional: a commit every 100 ms, and every 1,000 records"):
        Skip("a measurement on three local clusters of its own, past the doc's time budget; "
             "tests/integration/test_bench_transactional.py runs produce --transactional"),
    ("docs/benchmarks.md", "QUORUM=1@127.0.0.1:29093,2@127.0.0.1:29193,3@127.0.0.1:29293"):
        Skip("abbreviated: node 1 only, nodes 2 and 3 in a comment (the full recipe is docs/operations.md's, "
             "which runs)"),
    ("docs/benchmarks.md", "kraft-bench produce --bootstrap-server $B --topic r-all --replication-factor 3 "
                           "--acks all --record-size 100 --num-records 1000000 --partitions 6"):
        Skip("needs the abbreviated three-node cluster above (RF 3)"),
    ("docs/benchmarks.md", "kraft-bench chaos --duration 600 --faults kill,stop,partition,disk-full,torn-write,"
                           "slow-disk \\"):
        Skip("a 10-minute fault-injection run (tests/integration/test_chaos_run.py runs a short one)"),
    ("docs/benchmarks.md", "kraft-bench metadata --partitions 10000 --brokers 2 --samples 30 --json m10k.json"):
        Skip("measurements that start clusters of their own and take minutes each"),
    ("docs/benchmarks.md", "kraft-bench metadata --partitions 20000 --brokers 2 --json m20k.json"):
        Run(scale=True),
    ("docs/benchmarks.md", "kraft-bench failover --target controller --partitions 100000 --runs 5 --json f100k.json"):
        Run(scale=True),
    ("docs/benchmarks.md", "kraft-bench produce --bootstrap-server $B --topic p1 --num-records 300000 \\"):
        Skip("three clients one after the other, in a doc already near DOC_TIMEOUT_S "
             "(tests/integration/test_bench_kafka_clients.py runs the same commands small)"),
    ("docs/benchmarks.md", "kraft-bench produce --bootstrap-server $B --topic h1 --num-records 300000 --client kraft"):
        Skip("four measurements of two clients in a doc already near DOC_TIMEOUT_S "
             "(tests/integration/test_bench_kafka_clients.py runs produce and consume with both clients small)"),
    ("docs/benchmarks.md", "for direction in to-kraft from-kraft; do"):
        Skip("six in-memory measurements, a python start-up each, in a doc already near DOC_TIMEOUT_S "
             "(tests/unit/bench/test_convert_bench.py runs the command small)"),
    ("docs/benchmarks.md", "kraft-bench metadata --partitions 100000 --brokers 2 --json m100k.json"):
        Skip("the second round's `kraft-bench metadata` runs scaled; these differ only in their sizes"),
    ("docs/benchmarks.md", "# acks=all ack latency, RF 3, paced (the latency rows), with the per-stage trace"):
        Run(scale=True),
    ("docs/benchmarks.md", "# after, beside the peers: every row of the issue's table in one run"):
        Skip("minutes of measurement with Redis and NATS started by the bench, and $B/$B3 are clusters of main's "
             "checkout (tests/integration/test_bench_peers.py runs `kraft-bench peers` small)"),
    ("docs/benchmarks.md", "kraft-bench compare-metadata --partitions 10000 --runs 1 --samples 50 --json cmp.json"):
        Skip("needs ZooKeeper and minutes (tests/zookeeper runs compare-metadata small)"),
    ("docs/benchmarks.md", "# each run: a fresh node, B=127.0.0.1:<its port>"):
        Skip("a recipe: fresh nodes between the runs, and py-spy attaches to the node (ptrace rights) "
             "(tests/integration/test_bench_kafka_clients.py runs produce and consume with both clients small)"),
    ("docs/benchmarks.md", "kraft-bench produce --local-cluster 3 --topic prof --partitions 6 --replication-factor 3 "
                           "--acks all \\"):
        Skip("py-spy attaches to processes (ptrace rights); the profiles are not needed to check the flags"),
    ("docs/benchmarks.md", "# issue 23's produce goal: one node (confluent-kafka, then kraft's client over HTTP), "
                           "and RF 3 acks=all"):
        Skip("three measurements of a million records, one on a three-node cluster, in a doc already near "
             "DOC_TIMEOUT_S (tests/integration/test_bench_kafka_clients.py runs produce with both clients small)"),
    ("docs/groups.md", "kraft consumer-groups --bootstrap-server H:P --list"):
        Skip("a synopsis of the flags (H:P, G, [a | b]), not a command"),
    ("docs/kraft-vs-zookeeper.md", "nice -n 10 kraft-bench compare-metadata --partitions-sweep 1000,3000,10000 "
                                   "--runs 3 \\"):
        Skip("measurements of 5 to 12 minutes that need ZooKeeper (tests/zookeeper runs both modes small)"),
    ("docs/operations.md", "$ kraft-node --override num.partitions=zero"):
        Run(exit_codes={"kraft-node --override num.partitions=zero": 2}),
    ("docs/operations.md", "$ kraft-node --override log.retension.hours=24"):
        Run(exit_codes={"kraft-node --override log.retension.hours=24": 2}),
    ("docs/operations.md", "2026-11-23T19:40:13.927Z WARNING node=1 node: ignoring Kafka configuration keys that "
                           "this broker does not use: inter.broker.listener.name, listener.security.protocol.map, "
                           "num.io.threads, ..."):
        Skip("a log line, not a command"),
    ("docs/operations.md", "kraft-data/"): Skip("a directory listing, not a command"),
    ("docs/operations.md", "python3 -c 'import secrets; print(secrets.token_urlsafe(32))' > cluster.secret && "
                           "chmod 600 cluster.secret"): Run(cluster=True),
    ("docs/operations.md", "kraft-node --node-id 4 --role broker --controller-quorum $QUORUM --listen "
                           "127.0.0.1:9392 \\"): Run(cluster=True),
    ("docs/reliability.md", "kraft-bench chaos --duration 600 --faults kill,stop,partition,disk-full,torn-write,"
                            "slow-disk,controller-disk-full,log-dir \\"):
        Skip("a 10-minute fault-injection run (tests/integration/test_chaos_run.py runs a short one)"),
    ("docs/reliability.md", "python3 tests/unit/controlplane/simulation.py --seed 1234 --trace       "
                            "# every step printed"):
        Skip("simulation sweeps of minutes (tests/unit/controlplane/test_controlplane_simulation.py runs them)"),
    ("docs/replication.md", "python3 tests/unit/replication/simulation.py --seed 1234 --trace"):
        Skip("simulation sweeps of minutes (tests/unit/replication/test_replication_simulation.py runs them)"),
    ("docs/security.md", "kraft configs --bootstrap-server node1:9093 --command-config admin.properties --alter \\"):
        Skip("illustrative: node1:9093 is a host of the reader's cluster (the step-by-step cluster below runs "
             "the same commands)"),
    ("docs/security.md", "python -m kraft.security.certs --out certs --node 1 --node 2 --node 3 --host node1.example "
                         "--host node2.example"): Run(cluster=True),
    ("docs/security.md", "python3 -c 'import secrets; print(secrets.token_urlsafe(32))' > cluster.secret && "
                         "chmod 600 cluster.secret"): Run(cluster=True),
    ("docs/security.md", "QUORUM=1@127.0.0.1:9194,2@127.0.0.1:9294,3@127.0.0.1:9394"): Run(cluster=True),
    ("docs/security.md", "cat > admin.properties <<'EOF'"): Run(cluster=True),
    ("docs/security.md", "kraft acls --bootstrap-server localhost:9193 --command-config admin.properties \\"):
        Run(cluster=True),
    ("docs/security.md", "kraft configs --bootstrap-server localhost:9193 --command-config admin.properties "
                         "--alter \\"):
        Run(cluster=True),
    ("docs/spark.md", "pip install '.[spark]'          # pyspark>=4.0 (tested with 4.3), pyarrow; needs Java 17"):
        Skip("installs packages"),
    ("docs/zookeeper-mode.md", "mkdir -p zk"): Run(cluster=True, zookeeper=True),
    ("docs/zookeeper-mode.md", "python3 -c 'import secrets; print(secrets.token_urlsafe(32))' > cluster.secret && "
                               "chmod 600 cluster.secret"): Run(cluster=True, zookeeper=True),
}


# -- blocks and steps ------------------------------------------------------------------------------


@dataclass
class Block:
    doc: str
    line: int  # of the opening fence, 1-based
    language: str
    lines: list[str]
    not_run: str | None = None  # the reason of a `<!-- not-run: ... -->` on the line before the fence

    @property
    def key(self) -> tuple[str, str]:
        return self.doc, next((ln.strip() for ln in self.lines if ln.strip()), "")

    @property
    def python(self) -> bool:
        return self.language in PYTHON_LANGUAGES

    @property
    def treatment(self) -> Skip | Run:
        if self.python:
            return Run() if self.not_run is None else Skip(self.not_run)
        return BLOCKS.get(self.key, Run())


@dataclass
class Step:
    command: str
    shown: list[str]
    line: int  # in the doc


FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)[^`]*$")


def fenced_blocks(path: Path) -> list[Block]:
    doc = str(path.relative_to(REPO))
    lines = path.read_text().splitlines()
    blocks, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, language = m.group(1), m.group(2), m.group(3).lower()
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            j += 1
        body = [ln[len(indent):] if ln.startswith(indent) else ln.lstrip() for ln in lines[i + 1:j]]
        marker = NOT_RUN.match(lines[i - 1]) if i else None
        blocks.append(Block(doc, i + 1, language, body, marker.group(1).strip() if marker else None))
        i = j + 1
    return blocks


def shell_blocks(path: Path) -> list[Block]:
    return [b for b in fenced_blocks(path) if b.language in SHELL_LANGUAGES]


def session_blocks(path: Path) -> list[Block]:
    """The shell and Python blocks of a doc, in its order."""
    return [b for b in fenced_blocks(path) if b.language in SHELL_LANGUAGES or b.python]


def _complete(command: str) -> bool:
    """Whether `command` is a whole shell command (no open loop, quote, pipe or continuation)."""
    if command.endswith("\\"):
        return False
    for delimiter in re.findall(r"<<-?\s*['\"]?(\w+)['\"]?", command):
        if not re.search(rf"^\s*{delimiter}\s*$", command, re.M):
            return False
    return subprocess.run(["bash", "-n"], input=command, capture_output=True, text=True).returncode == 0


def steps(block: Block) -> list[Step]:
    """The block's commands, each with the output the doc shows for it."""
    out: list[Step] = []
    prompt = any(ln.startswith("$ ") for ln in block.lines)
    pending: list[str] = []  # an unfinished command
    start = 0
    collecting = False  # right after a finished command, before a blank line
    for n, line in enumerate(block.lines):
        doc_line = block.line + 1 + n
        if pending:
            pending.append(line[2:] if prompt and line.startswith("$ ") else line)
            if _complete("\n".join(pending)):
                out.append(Step("\n".join(pending), [], start))
                pending, collecting = [], True
            continue
        if not line.strip():
            collecting = False
            continue
        if prompt:
            if line.startswith("$ "):
                pending, start = [line[2:]], doc_line
                if _complete(line[2:]):
                    out.append(Step(line[2:], [], start))
                    pending, collecting = [], True
            elif out and collecting:
                out[-1].shown.append(line)
            continue
        if line.lstrip().startswith("#"):
            if collecting:
                text = line.lstrip()[1:]
                out[-1].shown.append(text[1:] if text.startswith(" ") else text)
            continue
        pending, start = [line], doc_line
        if _complete(line):
            out.append(Step(line, [], start))
            pending, collecting = [], True
    if pending:
        out.append(Step("\n".join(pending), [], start))
    return out


def test_block_listings_match_the_docs() -> None:
    """Every entry of BLOCKS names a shell block that exists: a changed block runs again by default."""
    keys = {b.key for path in DOCS for b in shell_blocks(path)}
    stale = [key for key in BLOCKS if key not in keys]
    assert not stale, f"BLOCKS entries that match no shell block in the docs: {stale}"


def test_python_blocks_not_run_are_marked_and_counted() -> None:
    """Each `not-run` marker stands before a Python block and gives a reason; their number per doc
    is NOT_RUN_PYTHON_BLOCKS'."""
    counts: dict[str, int] = {}
    for path in DOCS:
        blocks = fenced_blocks(path)
        for block in blocks:
            if block.not_run is not None:
                where = f"{block.doc}:{block.line}"
                assert block.python, f"{where}: a not-run marker before a {block.language or 'plain'} block"
                assert block.not_run, f"{where}: a not-run marker without a reason"
                counts[block.doc] = counts.get(block.doc, 0) + 1
        markers = [n for n, ln in enumerate(path.read_text().splitlines(), 1) if NOT_RUN.match(ln)]
        fences = {b.line - 1 for b in blocks if b.not_run is not None}
        assert set(markers) <= fences, f"{path.name}: not-run markers not right before a fence, lines {markers}"
    assert counts == NOT_RUN_PYTHON_BLOCKS


def test_outputs_are_read_from_the_docs() -> None:
    """The parser itself: commands, continuations, loops and heredocs, and the shown output."""
    block = Block("x.md", 1, "bash", [
        "# a remark, not output",
        "kraft topics --create --topic t \\",
        "    --partitions 2",
        "# Created topic t.",
        "",
        "for i in 1 2; do",
        "  echo $i",
        "done",
        "cat > a.properties <<'EOF'",
        "x=1",
        "EOF",
        "",
        "# a remark again: a blank line ended the output of the command before",
        "cat a.properties",
        "# x=1",
    ])
    got = [(s.command, s.shown) for s in steps(block)]
    assert got == [("kraft topics --create --topic t \\\n    --partitions 2", ["Created topic t."]),
                   ("for i in 1 2; do\n  echo $i\ndone", []),
                   ("cat > a.properties <<'EOF'\nx=1\nEOF", []),
                   ("cat a.properties", ["x=1"])]
    prompt = Block("x.md", 1, "", ["$ kraft-node --bad", "kraft-node: configuration error: ..."])
    assert [(s.command, s.shown) for s in steps(prompt)] == [
        ("kraft-node --bad", ["kraft-node: configuration error: ..."])]


# -- running a doc ---------------------------------------------------------------------------------


def _entry_points() -> dict[str, str]:
    """The console scripts as this checkout's pyproject.toml declares them (module:function)."""
    with open(REPO / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["scripts"]


def _bin_dir(root: Path) -> Path:
    """Wrappers that run this checkout's tools and Python with this interpreter."""
    bin_dir = root / "bin"
    bin_dir.mkdir()
    for name, target in _entry_points().items():
        module, function = target.split(":")
        code = f"import sys; sys.argv[0] = {name!r}; from {module} import {function}; {function}()"
        (bin_dir / name).write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -c {shlex.quote(code)} "$@"\n')
    for name in ("python", "python3"):
        (bin_dir / name).write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    for script in bin_dir.iterdir():
        script.chmod(0o755)
    return bin_dir


class Ports:
    """The doc's port numbers -> free ports: one map for blocks against the doc's node (9092 is that
    node), one for the blocks that start their own cluster."""

    def __init__(self, node_port: int | None) -> None:
        self.maps: dict[bool, dict[str, str]] = {False: {}, True: {}}
        if node_port is not None:
            self.maps[False]["9092"] = str(node_port)

    def substitute(self, text: str, cluster: bool) -> str:
        ports = self.maps[cluster]

        def one(m: re.Match[str]) -> str:
            if m.group(0) not in ports:
                ports[m.group(0)] = str(free_port())
            return ports[m.group(0)]
        return DOC_PORT.sub(one, text)


def _python_step(block: Block, ports: Ports, scripts: Path) -> Step:
    """The block as a script of its own, run by this interpreter without the checkout on
    PYTHONPATH (the shell blocks' wrappers put it there): `kraft` is imported as installed. The
    README leaves its reader in the repository root, where the checkout's `kraft/` is the first
    on sys.path: its blocks run there, from stdin (as `python -c` would, the working directory is
    sys.path[0], not the script's folder)."""
    script = scripts / f"{Path(block.doc).stem}-{block.line}.py"
    script.write_text(ports.substitute("\n".join(block.lines) + "\n", cluster=False))
    path = os.environ.get("PYTHONPATH")
    env = f"PYTHONPATH={shlex.quote(path)}" if path else "env -u PYTHONPATH"
    first = next((ln for ln in block.lines if ln.strip()), "")
    python = f"{env} {shlex.quote(sys.executable)}"
    if block.doc in READER_IN_REPO_ROOT:
        command = f"(cd {shlex.quote(str(REPO))} && {python} - < {shlex.quote(str(script))})"
    else:
        command = f"{python} {shlex.quote(str(script))}"
    return Step(f"# python: {first}\n{command}", [], block.line + 1)


def _script(runnable: list[tuple[Block, Run]], ports: Ports,
            scripts: Path) -> tuple[str, list[tuple[Block, Run, Step]]]:
    parts, index = ["exec 2>&1 </dev/null"], []
    scaled_steps: dict[str, int] = {}  # a scaled command's words -> the step that runs it
    for block, treatment in runnable:
        for step in [_python_step(block, ports, scripts)] if block.python else steps(block):
            command = ports.substitute(step.command, treatment.cluster)
            i = len(index)
            if treatment.scale:
                for flag, cap in SCALED.items():
                    command = re.sub(rf"{flag} (\d+)", lambda m, flag=flag, cap=cap: f"{flag} {min(int(m.group(1)), cap)}",
                                     command)
                # two lines that differ only in their sizes are one command once scaled: run again
                # (a cluster started again), it would check nothing new
                words = " ".join(shlex.split(command, comments=True))
                if words in scaled_steps and not step.shown:
                    command = f": the same command as step {scaled_steps[words]}"
                scaled_steps.setdefault(words, i)
            index.append((block, treatment, step))
            parts.append(f"printf '\\n@@step {i}@@\\n'\n{command}\nprintf '\\n@@end {i} %s@@\\n' \"$?\"")
    return "\n".join(parts) + "\n", index


def _matches(shown: str, actual: str) -> bool:
    shown, actual = " ".join(shown.split()), " ".join(actual.split())
    if shown.startswith(("{", "[")):
        try:
            return json.loads(shown) == json.loads(actual)
        except ValueError:
            pass
    pattern = ".*".join(re.escape(part) for part in shown.split("..."))
    return re.fullmatch(pattern, actual) is not None


def _shown_in(shown: list[str], output: str) -> bool:
    lines = iter(output.splitlines())
    return all(any(_matches(want, got) for got in lines) for want in shown if want.strip() not in ("", "..."))


def _kill_session(proc: subprocess.Popen) -> None:
    """The session's processes (nodes started with `&` among them): SIGTERM, then SIGKILL."""
    def gone() -> bool:
        proc.poll()  # reap the shell itself, or its zombie keeps the group alive
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return True
        return False
    for sig, wait in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            wait_for(gone, wait, interval=0.1, what="the doc's processes gone")
            return
        except TimeoutError:
            continue


DOC_TIMEOUT_S = 240


def _installed_kraft_is_this_checkout(cwd: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    found = subprocess.run([sys.executable, "-c", "import kraft; print(kraft.__file__)"], cwd=cwd, env=env,
                           capture_output=True, text=True)
    if found.returncode != 0 or not Path(found.stdout.strip()).is_relative_to(REPO):
        pytest.fail(f"the docs' Python blocks import kraft as installed, which is not this checkout "
                    f"({found.stdout.strip() or found.stderr.strip()[-200:]}): pip install -e . here "
                    f"(scripts/test.sh does)")


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_doc_commands(path: Path, tmp_path: Path) -> None:
    runnable = [(b, b.treatment) for b in session_blocks(path) if isinstance(b.treatment, Run)]
    if not runnable:
        pytest.skip("no shell or Python block to run")
    if any(t.zookeeper for _, t in runnable) and not zookeeper_available():
        pytest.skip("starts a ZooKeeper server: needs the Debian zookeeper package and java (scripts/test.sh installs them)")
    if any(b.python for b, _ in runnable):
        _installed_kraft_is_this_checkout(tmp_path)
    node = None
    if any(not t.cluster for _, t in runnable):
        node = start_node(tmp_path / "node")
    try:
        ports = Ports(node.port if node else None)
        scripts = tmp_path / "python"
        scripts.mkdir()
        script, index = _script(runnable, ports, scripts)
        work = tmp_path / "work"
        work.mkdir()
        env = {**os.environ, "PATH": f"{_bin_dir(tmp_path)}{os.pathsep}{os.environ['PATH']}",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
               "PYTHONUNBUFFERED": "1"}
        if node is not None:
            env["KRAFT_BOOTSTRAP_SERVER"] = node.bootstrap
        for _, treatment in runnable:
            env.update({k: v.format(bootstrap=node.bootstrap if node else "") for k, v in treatment.env.items()})
        (tmp_path / "doc.sh").write_text(script)
        # Output to a file, not a pipe: nodes started with `&` keep it open after the script ends.
        with open(tmp_path / "doc.out", "wb") as out:
            proc = subprocess.Popen(["bash", str(tmp_path / "doc.sh")], cwd=work, env=env, stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        timed_out = False
        try:
            proc.wait(timeout=DOC_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            _kill_session(proc)
            proc.wait()
        output = (tmp_path / "doc.out").read_text(errors="replace")
        if timed_out:
            output += f"\n(timed out after {DOC_TIMEOUT_S} s)"
    finally:
        if node is not None:
            shutdown_all([node])

    failures = []
    for i, (block, treatment, step) in enumerate(index):
        m = re.search(rf"\n@@step {i}@@\n(.*?)\n@@end {i} (\d+)@@\n", output, re.S)
        where = f"{block.doc}:{step.line}: {step.command.splitlines()[0]}"
        if m is None:
            failures.append(f"{where}\n  did not finish")
            continue
        got, rc = m.group(1), int(m.group(2))
        expected_rc = next((code for start, code in treatment.exit_codes.items() if step.command.startswith(start)), 0)
        if rc != expected_rc:
            failures.append(f"{where}\n  exit code {rc}, expected {expected_rc}; output:\n{_indent(got)}")
        elif not _shown_in(step.shown, got):
            failures.append(f"{where}\n  the doc shows:\n{_indent(chr(10).join(step.shown))}\n  the command printed:\n"
                            f"{_indent(got)}")
    assert not failures, "\n\n".join(failures) + ("\n\n--- whole session ---\n" + output[-4000:] if any(
        "did not finish" in f for f in failures) else "")


def _indent(text: str, limit: int = 3000) -> str:
    text = text.strip("\n")
    if len(text) > limit:
        text = text[:limit] + "\n..."
    return "\n".join("    " + ln for ln in text.splitlines())
