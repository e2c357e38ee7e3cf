"""The installed distribution is one namespace, `kraft` (issue: a broker must not install packages
called `api`, `log` or `metadata` into a user's environment), built from the repository's folders."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import kraft
from kraft.api import client

REPO = Path(__file__).resolve().parents[2]
FOLDERS = {"kraft": "kraft", "kraft.api": "api", "kraft.log": "log", "kraft.metadata": "metadata",
           "kraft.spark_connector": "spark_connector"}


def _setuptools() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_package_folder_is_installed_under_kraft() -> None:
    expected = set()
    for name, folder in FOLDERS.items():
        for init in (REPO / folder).rglob("__init__.py"):
            expected.add(".".join([name, *init.parent.relative_to(REPO / folder).parts]))
    assert set(_setuptools()["packages"]) == expected


def test_nothing_but_kraft_and_the_spark_discovery_module_at_top_level() -> None:
    settings = _setuptools()
    assert {p.split(".")[0] for p in settings["packages"]} == {"kraft"}
    assert settings["py-modules"] == ["pyspark_kraft"]
    assert {k: v for k, v in settings["package-dir"].items()} == {
        k: v for k, v in FOLDERS.items() if k != "kraft"}


def test_the_client_is_importable_from_kraft() -> None:
    from kraft import Admin, Consumer, Producer

    assert (Producer, Consumer, Admin) == (client.Producer, client.Consumer, client.Admin)
    assert kraft.__all__ == list(client.__all__)
    assert all(getattr(kraft, name) is getattr(client, name) for name in client.__all__)


def test_dir_lists_the_client_and_kafka_client_names_say_which_class_to_use() -> None:
    assert set(client.__all__) <= set(dir(kraft))
    for kafka_name, ours in (("KafkaProducer", "Producer"), ("KafkaConsumer", "Consumer"),
                             ("KafkaAdminClient", "Admin")):
        with pytest.raises(ImportError, match=rf"from kraft import {ours}\b"):
            exec(f"from kraft import {kafka_name}", {})
    with pytest.raises(AttributeError):  # any other missing name stays an AttributeError
        kraft.NoSuchThing  # noqa: B018


# -- the same imports from a source checkout, a regular install and an editable install -----------

# Every name the build maps from a folder, the client and the package data; prints where each came from.
PROBE = ("import json, kraft, kraft.api, kraft.log, kraft.metadata, kraft.spark_connector\n"
         "from kraft import Producer\n"
         "from kraft.kafka_broker_keys import KAFKA_BROKER_KEYS\n"  # package data: Kafka's key list
         "assert 'share.coordinator.state.topic.replication.factor' in KAFKA_BROKER_KEYS\n"
         "print(json.dumps({m.__name__: m.__file__ for m in (kraft, kraft.api, kraft.log, kraft.metadata,"
         " kraft.spark_connector)}))\n")


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _probe(python: Path, cwd: Path, env: dict[str, str] | None = None) -> dict[str, Path]:
    """Runs PROBE as a reader would (`python -c`: the working directory is first on sys.path)."""
    proc = subprocess.run([str(python), "-c", PROBE], cwd=cwd, env=env or _clean_env(), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {name: Path(path) for name, path in json.loads(proc.stdout.splitlines()[-1]).items()}


def _all_within(found: dict[str, Path], root: Path) -> bool:
    return all(path.is_relative_to(root) for path in found.values())


def _pip(python: Path, *args: str, cwd: Path) -> None:
    proc = subprocess.run([str(python), "-m", "pip", *args], cwd=cwd, env=_clean_env(), capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]


@pytest.mark.slow  # two pip installs into a fresh venv: its module starts first under xdist
def test_kraft_names_resolve_from_a_checkout_a_regular_and_an_editable_install(tmp_path: Path) -> None:
    # A copy: pip builds in the source tree, and the checkout is shared. The venv sees the
    # system's packages (the dependencies, no download): pip installs kraft alone (--no-deps).
    source = tmp_path / "checkout"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", ".hypothesis", "kraft-data", "tests"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    # a source checkout, nothing installed: from its root, and from elsewhere with it on PYTHONPATH
    assert _all_within(_probe(python, source), source)
    assert _all_within(_probe(python, elsewhere, {**_clean_env(), "PYTHONPATH": str(source)}), source)

    # a regular install (README: `pip install .`): in the checkout's root its own kraft/ comes
    # first on sys.path, and kraft.api ... must still resolve (to the checkout's folders)
    _pip(python, "install", "-q", "--no-deps", str(source), cwd=tmp_path)
    site_packages = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                        capture_output=True, text=True, check=True).stdout.strip())
    assert _all_within(_probe(python, source), source)
    assert _all_within(_probe(python, elsewhere), site_packages)

    # an editable install
    _pip(python, "uninstall", "-q", "-y", "kraft", cwd=tmp_path)
    _pip(python, "install", "-q", "--no-deps", "-e", str(source), cwd=tmp_path)
    assert _all_within(_probe(python, source), source)
    assert _all_within(_probe(python, elsewhere), source)
