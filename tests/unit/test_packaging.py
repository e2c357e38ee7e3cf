"""The installed distribution is one namespace, `kraft` (issue: a broker must not install packages
called `api`, `log` or `metadata` into a user's environment), built from the repository's folders."""

from __future__ import annotations

import tomllib
from pathlib import Path

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
