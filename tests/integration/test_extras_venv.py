"""Each optional extra works with only what it declares (issue 11, item 9): a fresh virtualenv per
extra, `pip install '<checkout>[extra]'` from PyPI, and the extra's code run there. The dev extras
of the test environment (numpy among them) once hid a sink that needed numpy.

Slow (pip downloads pyspark, ~400 MB, unless pip's cache has it) but part of the suite that
scripts/test.sh runs: the `slow` marker is not deselected there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import requests

PIP_TIMEOUT_S = 1800
# pip may download pyspark from PyPI: more than the suite's per-test timeout allows
pytestmark = [pytest.mark.slow, pytest.mark.spread, pytest.mark.timeout(PIP_TIMEOUT_S + 600)]  # a venv per test

ROOT = Path(__file__).resolve().parents[2]
VALUE_ONLY_WRITE = ROOT / "tests" / "spark" / "value_only_write.py"


def clean_env() -> dict[str, str]:
    """The environment without anything pointing back at the test environment's packages."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def install_extra(tmp_path: Path, extra: str) -> Path:
    """A new virtualenv with the checkout installed with `extra`; returns its python. The source is
    copied first: pip builds in the source tree, and the checkout is shared."""
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", ".hypothesis", "kraft-data"))
    venv = tmp_path / f"venv-{extra}"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    pip = subprocess.run([str(python), "-m", "pip", "install", "-q", f"{source}[{extra}]"],
                         cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    return python


def run_in(python: Path, args: list[str], cwd: Path, timeout: float = 600) -> str:
    proc = subprocess.run([str(python), *args], cwd=cwd, env=clean_env(), capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    return proc.stdout


@pytest.mark.skipif(shutil.which("java") is None, reason="Spark needs Java 17")
def test_spark_extra_in_a_clean_virtualenv(node, tmp_path: Path) -> None:
    python = install_extra(tmp_path, "spark")
    topic = "extras-spark"
    assert requests.post(f"{node.url}/v1/topics", json={"name": topic}, timeout=10).status_code == 201
    out = run_in(python, [str(VALUE_ONLY_WRITE), node.bootstrap, topic], tmp_path).splitlines()
    assert out[0] == "numpy: absent", "the spark extra now brings numpy: this test no longer shows the sink works without it"
    assert out[-1] == "read: [(None, b'a'), (b'k', b'b')]", out


def test_zk_extra_in_a_clean_virtualenv(tmp_path: Path) -> None:
    python = install_extra(tmp_path, "zk")
    # kazoo itself and every module of the ZooKeeper mode, which is the code that uses it
    out = run_in(python, ["-c", (
        "import importlib, pkgutil, kazoo.client, kraft.zk\n"
        "names = [m.name for m in pkgutil.iter_modules(kraft.zk.__path__)]\n"
        "for name in names: importlib.import_module('kraft.zk.' + name)\n"
        "print('imported', kazoo.client.KazooClient.__name__, *names)\n")], tmp_path)
    assert out.startswith("imported KazooClient"), out
    # a real (non-editable) install is one namespace: only `kraft` and Spark's discovery module at
    # the top of site-packages, and the client is `from kraft import ...`
    out = run_in(python, ["-c", (
        "import importlib.metadata as md, importlib.util as u\n"
        "top = sorted({f.parts[0].removesuffix('.py') for f in md.files('kraft')\n"
        "              if (f.parts[0].endswith('.py') or '.' not in f.parts[0]) and f.parts[0] != '__pycache__'})\n"
        "print(top, [n for n in ('api', 'log', 'metadata', 'spark_connector') if u.find_spec(n)])\n"
        "from kraft import Admin, Consumer, Producer\n"
        "print(Producer.__module__)\n"
        "from kraft.api.openapi import DOCS_ASSETS\n"
        "from kraft.api.routes.openapi import PAGE, STATIC\n"
        "print(all((STATIC / name).is_file() for name in (PAGE, *DOCS_ASSETS)))\n")], tmp_path).splitlines()
    # ... and GET /docs finds its page and Swagger UI's files in the installed package
    assert out == ["['kraft', 'pyspark_kraft'] []", "kraft.api.client.producer", "True"], out

