"""docs/api.md is the rendering of the OpenAPI document the node serves; it must not drift."""

from __future__ import annotations

from pathlib import Path

from kraft.api.apidoc import render
from kraft.api.openapi import openapi_document

DOC = Path(__file__).resolve().parents[3] / "docs" / "api.md"


def test_docs_api_md_is_up_to_date():
    assert DOC.read_text() == render(), "regenerate with: python -m kraft.api.apidoc > docs/api.md"


def test_every_operation_is_rendered():
    text = render()
    for path, ops in openapi_document()["paths"].items():
        for method in ("get", "post", "put", "patch", "delete"):
            if method in ops:
                assert f"### `{method.upper()} {path}`" in text
