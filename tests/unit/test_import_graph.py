"""The node does not depend on its HTTP edge (docs/decisions.md, "One service layer"): no module
under kraft/ imports `kraft.api` but the process entry point (which picks the listeners), the
client re-export in kraft/__init__.py and the client tools under kraft/bench; and the services
(kraft/server) import neither aiohttp nor `kraft.api`, so a second listener is a second adapter
over them. Read from the source with ast (every import statement, wherever it sits)."""

from __future__ import annotations

import ast
from pathlib import Path

KRAFT = Path(__file__).resolve().parents[2] / "kraft"
MAY_IMPORT_API = {KRAFT / "main.py", KRAFT / "__init__.py"}


def imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def of(names: set[str], package: str) -> set[str]:
    return {n for n in names if n == package or n.startswith(package + ".")}


def test_nothing_under_kraft_imports_the_http_edge_but_the_entry_point_and_the_client_tools() -> None:
    offenders = {}
    for path in sorted(KRAFT.rglob("*.py")):
        if path in MAY_IMPORT_API or (KRAFT / "bench") in path.parents:
            continue
        found = of(imports(path), "kraft.api")
        if found:
            offenders[str(path.relative_to(KRAFT.parent))] = sorted(found)
    assert offenders == {}


def test_the_services_import_neither_aiohttp_nor_the_http_edge() -> None:
    modules = sorted((KRAFT / "server").glob("*.py"))
    assert len(modules) > 5
    for path in modules:
        names = imports(path)
        assert of(names, "aiohttp") == set() and of(names, "kraft.api") == set(), path.name


def test_the_check_sees_an_import_of_the_edge(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from kraft.api.routes import batch\n    import aiohttp.web\n")
    assert of(imports(module), "kraft.api") == {"kraft.api.routes", "kraft.api.routes.batch"}
    assert of(imports(module), "aiohttp") == {"aiohttp.web"}
