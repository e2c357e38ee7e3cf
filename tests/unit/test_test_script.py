"""scripts/test.sh, the README's test command (and .ci/run's), without installing anything: run with
a PATH of stand-ins (a `python3` that records what it is asked to run, an `id` that says who runs
it, no java, prometheus or curl) it says what is missing instead of calling apt-get when it may not,
and pip-installs into the active environment."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "test.sh"


def run_script(tmp_path: Path, uid: int, venv: bool, sudo_ok: bool = False,
               npm: bool = False) -> tuple[subprocess.CompletedProcess, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("dirname", "grep", "env", "cat"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    record = tmp_path / "record"
    prefix = "/some/venv" if venv else sys.base_prefix
    # `python3 -c CODE` answers as a virtualenv's (or the system's) Python; `-m ...` is recorded
    (bin_dir / "python3").write_text(f"""#!/bin/sh
if [ "$1" = "-m" ]; then echo "$* PIP_BREAK_SYSTEM_PACKAGES=${{PIP_BREAK_SYSTEM_PACKAGES:-}}" >> {record}; exit 0; fi
exec {sys.executable} -c "import sys; sys.prefix, sys.base_prefix = {prefix!r}, {sys.base_prefix!r}
exec(sys.argv[1])" "$2"
""")
    (bin_dir / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    for apt in ("apt-get", "apt-cache"):  # only recorded
        (bin_dir / apt).write_text(f"#!/bin/sh\necho {apt} \"$@\" >> {record}\nexit 1\n")
    # a sudo that asks a password (fails with -n), or one that does not: either only records
    (bin_dir / "sudo").write_text(f"#!/bin/sh\necho sudo \"$@\" >> {record}\nexit {0 if sudo_ok else 1}\n")
    if npm:  # Node.js installed: `npm` is recorded with the folder it runs in
        (bin_dir / "node").write_text("#!/bin/sh\nexit 0\n")
        (bin_dir / "npm").write_text(f"#!/bin/sh\necho npm \"$@\" in \"$(pwd)\" >> {record}\nexit 0\n")
    for script in bin_dir.iterdir():
        if not script.is_symlink():
            script.chmod(0o755)
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path)}
    proc = subprocess.run(["/bin/bash", str(SCRIPT), "-k", "something"], env=env, capture_output=True, text=True,
                          timeout=60)
    return proc, record.read_text() if record.exists() else ""


def test_not_root_in_a_virtualenv(tmp_path: Path) -> None:
    proc, record = run_script(tmp_path, uid=1000, venv=True)
    assert proc.returncode == 0, proc.stderr
    assert record.splitlines()[0] == "sudo -n true"  # would sudo ask a password? it would
    assert "apt-get" not in record
    assert "not root and no password-less sudo" in proc.stderr
    for line in ("Java 17+ (openjdk-17-jre-headless): the Spark tests (tests/spark) will fail",
                 "Prometheus (prometheus): the metrics tests (tests/prometheus) will fail",
                 "curl (curl): the docs commands test (tests/integration/test_docs_commands.py) will fail",
                 "Node.js (nodejs): the KafkaJS test (tests/integration/test_kafka_kafkajs_e2e.py) will be skipped"):
        assert line in proc.stderr
    assert record.splitlines()[1:] == [
        "-m pip install -q --disable-pip-version-check -e .[dev,spark,zk,bench] PIP_BREAK_SYSTEM_PACKAGES=",
        "-m pytest -n 2 --dist loadgroup -q --durations=30 -k something PIP_BREAK_SYSTEM_PACKAGES=",
    ]


def test_outside_a_virtualenv_pip_may_install_into_the_system_python(tmp_path: Path) -> None:
    proc, record = run_script(tmp_path, uid=1000, venv=False)
    assert proc.returncode == 0, proc.stderr
    pip = [line for line in record.splitlines() if line.startswith("-m ")]
    assert len(pip) == 2 and all(line.endswith("PIP_BREAK_SYSTEM_PACKAGES=1") for line in pip), record


def test_not_root_with_a_sudo_that_asks_no_password(tmp_path: Path) -> None:
    """apt-get through `sudo -n` (the fake sudo runs nothing: no package, no policy-rc.d is written)."""
    proc, record = run_script(tmp_path, uid=1000, venv=True, sudo_ok=True)
    assert proc.returncode == 0, proc.stderr
    lines = record.splitlines()
    assert lines[:2] == ["sudo -n true", "sudo -n env DEBIAN_FRONTEND=noninteractive apt-get update -qq"]
    # apt-cache knows no openjdk-17-jre-headless here (Debian 13): the default JRE instead
    install = next(line for line in lines if " apt-get install " in line)
    assert install.startswith("sudo -n env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "
                              "--no-install-recommends default-jre-headless prometheus")
    assert "curl" in install.split()
    assert "not root" not in proc.stderr


def test_with_node_it_installs_the_pinned_js_clients_with_npm_ci(tmp_path: Path) -> None:
    proc, record = run_script(tmp_path, uid=1000, venv=True, npm=True)
    assert proc.returncode == 0, proc.stderr
    assert f"npm ci --no-audit --no-fund --loglevel=error in {ROOT / 'tests' / 'js'}" in record.splitlines()
    assert "Node.js (nodejs)" not in proc.stderr


def test_the_script_says_what_it_installs_in_its_first_lines() -> None:
    head = "\n".join(SCRIPT.read_text().splitlines()[:16])
    for what in ("Java 17", "prometheus", "zookeeper", "curl", "nodejs", "dev, spark, zk and bench", "virtualenv"):
        assert what in head


def test_ci_runs_exactly_the_readmes_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    command = re.search(r"whole suite.*?```bash\n(.+?)\n```", readme, re.S).group(1)
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line and not line.startswith("#") and not line.startswith(("set ", "cd "))]
    assert ci == [command] == ["bash scripts/test.sh"]
    assert os.access(SCRIPT, os.X_OK)
