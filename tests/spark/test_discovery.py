"""`format("kraft")` without `register()`: PySpark's data-source lookup imports every top-level
`pyspark_*` module and registers its `DefaultSource`; we run the same lookup it runs."""

from __future__ import annotations

from importlib import import_module
from pkgutil import iter_modules

import pytest

pytest.importorskip("pyspark")


def test_pyspark_lookup_finds_the_kraft_source():
    from pyspark.sql.datasource import DataSource

    found = {}
    for info in iter_modules():
        if info.name.startswith("pyspark_"):
            mod = import_module(info.name)
            if hasattr(mod, "DefaultSource") and issubclass(mod.DefaultSource, DataSource):
                found[mod.DefaultSource.name()] = mod.DefaultSource
    assert "kraft" in found
