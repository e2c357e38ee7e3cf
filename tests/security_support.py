"""Test helpers for secured clusters: requests signed with the cluster's node credential."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack
import requests

from harness import NodeProcess, wait_for
from kraft.security import certs
from kraft.security.node_auth import NodeCredential
from kraft.security.peers import PeerSecurity


def node_request(base_url: str, secret: str, node_id: int, method: str, path_qs: str, body: Any = None,
                 timeout: float = 10.0, as_json: bool = False, trusted: dict[str, str] | None = None,
                 target: int | None = None) -> requests.Response:
    """One request (msgpack, or JSON with `as_json`) signed as node `node_id` of the cluster
    sharing `secret`, addressed to node `target` (default: the node at `base_url`, which its
    health answer names) and covering `trusted` (headers of api.security.SIGNED_HEADERS)."""
    return requests.request(method, base_url + path_qs, timeout=timeout, **signed_request(
        base_url, secret, node_id, method, path_qs, body, as_json, trusted, target))


def signed_request(base_url: str, secret: str, node_id: int, method: str, path_qs: str, body: Any = None,
                   as_json: bool = False, trusted: dict[str, str] | None = None,
                   target: int | None = None) -> dict[str, Any]:
    """`data` and `headers` of `node_request`: to send (or send again, elsewhere) as they are."""
    media = "application/json" if as_json else "application/msgpack"
    data = None if body is None else json.dumps(body).encode() if as_json else msgpack.packb(body, use_bin_type=True)
    if target is None:
        target = requests.get(f"{base_url}/v1/health", timeout=10).json()["node_id"]
    headers = PeerSecurity(NodeCredential(node_id, secret)).headers(method, path_qs, data, target=target,
                                                                     trusted=trusted)
    headers["Accept"] = media
    if data is not None:
        headers["Content-Type"] = media
    return {"data": data, "headers": headers}


@dataclass
class SecureNode(NodeProcess):
    """A node whose listener speaks TLS (`ca` verifies it); `auth` (user, password) for SASL."""

    ca: Path | None = None
    auth: tuple[str, str] | None = None

    @property
    def url(self) -> str:
        return f"https://localhost:{self.port}" if self.ca is not None else f"http://127.0.0.1:{self.port}"

    def session(self) -> requests.Session:
        s = requests.Session()
        s.trust_env = False  # else REQUESTS_CA_BUNDLE overrides the session's CA
        if self.ca is not None:
            s.verify = str(self.ca)
        if self.auth is not None:
            s.auth = self.auth
        return s

    def health(self, timeout: float = 2.0) -> dict[str, Any]:
        response = self.session().get(f"{self.url}/v1/health", timeout=timeout)
        response.raise_for_status()
        return response.json()

    def ready(self, timeout: float = 2.0) -> bool:
        return self.session().get(f"{self.url}/v1/health", params={"ready": "true"},
                                  timeout=timeout).status_code == 200


def start_all(nodes: list[SecureNode], timeout: float = 60.0) -> None:
    """Start a cluster's nodes together; wait until each is ready and answers `/v1/metadata` to
    its `auth` (the credential given with --add-scram is then in every node's metadata)."""
    for n in nodes:
        n.start(wait=False)
    for n in nodes:
        n.wait_healthy(timeout)
    wait_for(lambda: all(n.ready() and n.session().get(f"{n.url}/v1/metadata", timeout=5).status_code == 200
                         for n in nodes), timeout, what="every node ready and the credential everywhere")


def make_certs(directory: Path, nodes: list[int], clients: list[str] = ()) -> Path:  # type: ignore[assignment]
    """A CA (`ca.pem`), `node-N.pem` for localhost/127.0.0.1 and `client-NAME.pem`; returns the dir."""
    ca = certs.make_ca()
    certs.write_ca(ca, directory)
    for n in nodes:
        certs.write_keystore(ca, directory / f"node-{n}.pem", f"node-{n}", ["localhost", "127.0.0.1"])
    for name in clients:
        certs.write_keystore(ca, directory / f"client-{name}.pem", name, organization="kraft")
    return directory


def tls_overrides(certs_dir: Path, node_id: int, protocol: str = "SSL", **extra: Any) -> dict[str, Any]:
    return {"security.protocol": protocol, "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(certs_dir / f"node-{node_id}.pem"),
            "ssl.truststore.location": str(certs_dir / "ca.pem"), **extra}
