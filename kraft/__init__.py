"""kraft: a replicated message broker shaped like Apache Kafka in KRaft mode.

The client is re-exported here, `from kraft import Producer, Consumer, Admin`, and imported only
when first asked for, so the node and the pure cores do not load it.

Run from a source checkout (the repository root is the working directory, or on sys.path), this
`kraft/` is imported rather than an installed copy, and `kraft.api`, `kraft.log`, ... are not its
subfolders but its siblings (`api/`, `log/`, ...): `_CheckoutFinder` resolves those names as the
build maps them (pyproject.toml's `[tool.setuptools.package-dir]`), so the same imports work from
a checkout, an editable install and a regular one.
"""

from __future__ import annotations

import importlib.machinery
import sys
import tomllib
from pathlib import Path
from typing import Any, Sequence

# kafka-python's and confluent-kafka's names for the client classes, and kraft's own
_KAFKA_CLIENT_NAMES = {"KafkaProducer": "Producer", "KafkaConsumer": "Consumer",
                       "KafkaAdminClient": "Admin", "AdminClient": "Admin"}


def __getattr__(name: str) -> Any:
    # The client's public names are its classes (capitalised); anything else, a submodule asked
    # for by `from kraft import x` included, must not load the client.
    if name == "__all__" or name[:1].isupper():
        from kraft.api import client

        if name == "__all__":
            return list(client.__all__)
        if name in client.__all__:
            return getattr(client, name)
        if name in _KAFKA_CLIENT_NAMES:
            # an ImportError, not an AttributeError: `from kraft import KafkaProducer` shows it as is
            raise ImportError(f"kraft has no {name}: its client class is kraft.{_KAFKA_CLIENT_NAMES[name]} "
                              f"(from kraft import {_KAFKA_CLIENT_NAMES[name]}); see docs/client.md",
                              name="kraft")
    raise AttributeError(f"module 'kraft' has no attribute {name!r}")


def __dir__() -> list[str]:
    from kraft.api import client

    return sorted({*globals(), *client.__all__})


class _CheckoutFinder:
    """Finds `kraft.<name>` in the checkout folder the build maps it from."""

    def __init__(self, folders: dict[str, Path]) -> None:
        self.folders = folders

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: Any = None) -> importlib.machinery.ModuleSpec | None:
        folder = self.folders.get(fullname)
        if folder is None:
            return None
        return importlib.machinery.PathFinder.find_spec(fullname, [str(folder.parent)])


def _checkout_folders(package: Path) -> dict[str, Path]:
    """kraft.<name> -> sibling folder, when this package sits in a checkout without them inside."""
    try:
        settings = tomllib.loads((package.parent / "pyproject.toml").read_text(encoding="utf-8"))
        mapping = settings["tool"]["setuptools"]["package-dir"]
    except (OSError, ValueError, KeyError):  # an installed package: no pyproject.toml beside it
        return {}
    return {name: package.parent / folder for name, folder in mapping.items()
            if name.startswith("kraft.") and not (package / name.split(".", 1)[1]).exists()
            and (package.parent / folder / "__init__.py").is_file()}


def _install_checkout_finder() -> None:
    folders = _checkout_folders(Path(__file__).resolve().parent)
    if folders and not any(isinstance(f, _CheckoutFinder) for f in sys.meta_path):
        # first: an editable install of another checkout (a .pth in site-packages) maps the same
        # names to its own folders, which would mix two checkouts
        sys.meta_path.insert(0, _CheckoutFinder(folders))


_install_checkout_finder()
