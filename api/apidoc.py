"""Renders the OpenAPI document (`api/openapi.py`) as the Markdown reference `docs/api.md`, so the
reference is never out of step with what the node serves: `python -m kraft.api.apidoc > docs/api.md`,
and a test compares the committed file with a fresh rendering."""

from __future__ import annotations

from typing import Any

from kraft.api.openapi import BODY_ERRORS, COMMON_ERRORS, openapi_document

METHODS = ("get", "post", "put", "patch", "delete")

PREAMBLE = """# kraft HTTP API reference

Generated from the OpenAPI document every node serves at `GET /v1/openapi.json` and shows at
`GET /docs` (`python -m kraft.api.apidoc > docs/api.md`; a test keeps this file in step). Bodies are JSON
(`application/json`) or msgpack (`application/msgpack`) by Content-Type, answers follow Accept. Errors
are `{"error_code", "message", "retriable"}` with Kafka's error names; per-partition errors of the
batch routes sit inside a 200 answer, as in Kafka. Conventions for strings, binary and tombstones
are in `docs/decisions.md`.
"""


def _resolve(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if not ref:
        return schema
    node: Any = doc
    for part in ref.lstrip("#/").split("/"):
        node = node[part]
    return node


def _type(doc: dict[str, Any], schema: dict[str, Any]) -> str:
    schema = _resolve(doc, schema)
    if "oneOf" in schema or "anyOf" in schema:
        return " or ".join(_type(doc, s) for s in schema.get("oneOf", schema.get("anyOf", [])))
    kind = schema.get("type", "string" if "enum" in schema else "any")
    if "prefixItems" in schema:
        return "[" + ", ".join(_type(doc, s) for s in schema["prefixItems"]) + "]"
    if kind == "array":
        return f"array of {_type(doc, schema.get('items', {}))}"
    if schema.get("contentEncoding") == "base64":
        return "bytes (base64 in JSON)"
    bounds = []
    if "minimum" in schema:
        bounds.append(f">= {schema['minimum']}")
    if "exclusiveMinimum" in schema:
        bounds.append(f"> {schema['exclusiveMinimum']}")
    if "maximum" in schema:
        bounds.append(f"<= {schema['maximum']}")
    if "enum" in schema:
        bounds.append("one of " + ", ".join(f"`{v}`" for v in schema["enum"]))
    return kind + (f" ({'; '.join(bounds)})" if bounds else "")


def _fields(doc: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    schema = _resolve(doc, schema)
    required = set(schema.get("required", []))
    return [
        f"| `{name}` | {_type(doc, sub)} | {'yes' if name in required else ''} |"
        for name, sub in schema.get("properties", {}).items()
    ]


def _body_schema(content: dict[str, Any]) -> dict[str, Any] | None:
    for media in ("application/json", "application/msgpack"):
        if media in content:
            return content[media].get("schema")
    return None


def _operation(doc: dict[str, Any], method: str, path: str, op: dict[str, Any]) -> list[str]:
    lines = [f"### `{method.upper()} {path}`", "", op.get("summary", ""), ""]
    if op.get("description"):
        lines += [op["description"], ""]
    params = [p for p in op.get("parameters", []) if p.get("in") == "query"]
    if params:
        lines += ["| query parameter | type | required |", "|---|---|---|"]
        lines += [f"| `{p['name']}` | {_type(doc, p.get('schema', {}))} | {'yes' if p.get('required') else ''} |"
                  for p in params]
        lines.append("")
    body = op.get("requestBody")
    schema = _body_schema(body.get("content", {})) if body else None
    if schema and _fields(doc, schema):
        lines += ["| body field | type | required |", "|---|---|---|", *_fields(doc, schema), ""]
    for code, resp in op.get("responses", {}).items():
        if code.startswith("2"):
            answer = _body_schema(resp.get("content", {}))
            fields = _fields(doc, answer) if answer else []
            lines += [f"Answer `{code}`" + (":" if fields else "."), ""]
            if fields:
                lines += ["| answer field | type | always |", "|---|---|---|", *fields, ""]
    own = [f"`{c}`" for codes in _error_codes(op).values() for c in codes if c not in (*COMMON_ERRORS, *BODY_ERRORS)]
    if own:
        lines += ["Errors: " + ", ".join(own) + ".", ""]
    return lines


def _error_codes(op: dict[str, Any]) -> dict[str, list[str]]:
    """HTTP status -> the Kafka error codes an operation answers with it."""
    return {status: resp["x-error-codes"] for status, resp in op.get("responses", {}).items()
            if "x-error-codes" in resp}


def _errors(doc: dict[str, Any]) -> list[str]:
    """The error statuses, once, with every Kafka error code some route answers with each."""
    statuses: dict[str, set[str]] = {}
    for ops in doc["paths"].values():
        for method in METHODS:
            for status, codes in _error_codes(ops.get(method, {})).items():
                statuses.setdefault(status, set()).update(codes)
    rows = [f"| {status} | {', '.join(f'`{c}`' for c in sorted(statuses[status]))} |" for status in sorted(statuses)]
    return ["| HTTP status | Kafka error codes |", "|---|---|", *rows,
            "", f"Every route may answer {', '.join(f'`{c}`' for c in COMMON_ERRORS)}; a route with a body also "
            f"{', '.join(f'`{c}`' for c in BODY_ERRORS)}. Each route below lists its other codes.", ""]


def render(doc: dict[str, Any] | None = None) -> str:
    doc = doc or openapi_document()
    lines = [PREAMBLE, *_errors(doc)]
    for path, ops in doc["paths"].items():
        for method in METHODS:
            if method in ops:
                lines += _operation(doc, method, path, ops[method])
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    print(render(), end="")
