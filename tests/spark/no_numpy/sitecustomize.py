"""On PYTHONPATH, hides numpy (and so pandas) from this interpreter and from the Python workers
Spark starts from it, as in a fresh `pip install .[spark]` without the dev extras' numpy: `import
numpy` fails and `importlib.util.find_spec("numpy")` is None (what pyspark checks)."""

import sys
from typing import Any


def _hidden(name: str) -> bool:
    return name == "numpy" or name.startswith("numpy.")


class _WithoutNumpy:
    """One meta path finder that never finds numpy."""

    def __init__(self, finder: Any) -> None:
        self._finder = finder

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        return None if _hidden(name) else self._finder.find_spec(name, path, target)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._finder, attr)


sys.meta_path[:] = [_WithoutNumpy(f) for f in sys.meta_path]
for _name in [n for n in sys.modules if _hidden(n)]:
    del sys.modules[_name]
