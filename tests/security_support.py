"""Test helpers for secured clusters: requests signed with the cluster's node credential."""

from __future__ import annotations

import json
import time
from typing import Any

import msgpack
import requests

from kraft.security.node_auth import NodeCredential


def node_request(base_url: str, secret: str, node_id: int, method: str, path_qs: str, body: Any = None,
                 timeout: float = 10.0, as_json: bool = False) -> requests.Response:
    """One request (msgpack, or JSON with `as_json`) signed as node `node_id` of the cluster
    sharing `secret`."""
    media = "application/json" if as_json else "application/msgpack"
    data = None if body is None else json.dumps(body).encode() if as_json else msgpack.packb(body, use_bin_type=True)
    headers = NodeCredential(node_id, secret).sign(method, path_qs, data, int(time.time() * 1000))
    headers["Accept"] = media
    if data is not None:
        headers["Content-Type"] = media
    return requests.request(method, base_url + path_qs, data=data, headers=headers, timeout=timeout)
