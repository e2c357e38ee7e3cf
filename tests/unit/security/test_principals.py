"""The principal the security middleware sets on each request, over real TLS connections:
mTLS subjects through the mapping rules, SASL users, ANONYMOUS, nodes; and the 401/403 answers."""

from __future__ import annotations

import base64
import ssl
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from kraft.api.security import PRINCIPAL, SECURITY, security_middleware
from kraft.security import certs, scram
from kraft.security.authn import ClientAuthenticator
from kraft.security.node_auth import NodeCredential
from kraft.security.peers import PeerSecurity
from kraft.security.principal import parse_rules
from kraft.security.service import NodeSecurity
from kraft.metadata.image import MetadataImage, ScramCredentialData, ScramImage, frozen_map

SECRET = "unit-secret"


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def image_with(user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> MetadataImage:
    c = scram.make_credential(mechanism, password)
    data = ScramCredentialData(*(base64.b64encode(v).decode() for v in (c.salt, c.stored_key, c.server_key)),
                               c.iterations)
    return MetadataImage(scram=ScramImage(frozen_map({(user, mechanism): data})))


async def serve(protocol: str, tls: ssl.SSLContext | None, rules: str = "DEFAULT",
                image: MetadataImage = MetadataImage.EMPTY) -> tuple[web.AppRunner, int]:
    security = NodeSecurity(NodeCredential(1, SECRET), PeerSecurity())
    security.authenticator = ClientAuthenticator(protocol, ["SCRAM-SHA-256", "PLAIN"], parse_rules(rules),
                                                 lambda: image)
    app = web.Application(middlewares=[security_middleware])
    app[SECURITY] = security

    async def whoami(request: web.Request) -> web.Response:
        return web.json_response({"principal": request[PRINCIPAL]})
    app.router.add_get("/whoami", whoami)
    app.router.add_post("/v1/controller/brokers/register", whoami)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("pki")
    ca = certs.make_ca()
    certs.write_ca(ca, d)
    certs.write_keystore(ca, d / "node.pem", "node-1", ["127.0.0.1"])
    certs.write_keystore(ca, d / "client.pem", "carol", organization="kraft")
    return d


def server_tls(pki: Path, client_auth: int) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(pki / "node.pem")
    ctx.load_verify_locations(pki / "ca.pem")
    ctx.verify_mode = client_auth
    return ctx


def client_tls(pki: Path, with_cert: bool) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    if with_cert:
        ctx.load_cert_chain(pki / "client.pem")
    return ctx


async def get(url: str, ctx: ssl.SSLContext | None = None, **kwargs: object) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as s:
        async with s.request(kwargs.pop("method", "GET"), url, ssl=ctx if ctx is not None else False,  # type: ignore[arg-type]
                             **kwargs) as r:
            return r.status, await r.json()


async def test_mtls_subject_mapped_by_the_rules_or_anonymous_without_a_certificate(pki):
    runner, port = await serve("SSL", server_tls(pki, ssl.CERT_OPTIONAL), rules="RULE:^O=kraft,CN=(.*)$/$1/U,DEFAULT")
    try:
        url = f"https://127.0.0.1:{port}/whoami"
        assert await get(url, client_tls(pki, True)) == (200, {"principal": "User:CAROL"})
        assert await get(url, client_tls(pki, False)) == (200, {"principal": "User:ANONYMOUS"})
    finally:
        await runner.cleanup()
    runner, port = await serve("SSL", server_tls(pki, ssl.CERT_REQUIRED), rules="DEFAULT")
    try:
        assert await get(f"https://127.0.0.1:{port}/whoami", client_tls(pki, True)) == (
            200, {"principal": "User:O=kraft,CN=carol"})
    finally:
        await runner.cleanup()


async def test_sasl_users_nodes_and_refusals():
    runner, port = await serve("SASL_PLAINTEXT", None, image=image_with("alice", "pw"))
    base = f"http://127.0.0.1:{port}"
    try:
        alice = basic("alice", "pw")
        assert await get(f"{base}/whoami", headers=alice) == (200, {"principal": "User:alice"})
        assert await get(f"{base}/whoami", headers=alice) == (200, {"principal": "User:alice"})  # cached
        wrong = [await get(f"{base}/whoami", headers=basic(u, p)) for u, p in (("alice", "no"), ("bob", "pw"))]
        assert wrong[0] == wrong[1] and wrong[0][0] == 401
        assert wrong[0][1]["error_code"] == "SASL_AUTHENTICATION_FAILED"
        # a user's credentials do not open the control plane; the node credential does
        status, body = await get(f"{base}/v1/controller/brokers/register", method="POST", headers=alice)
        assert (status, body["error_code"]) == (403, "CLUSTER_AUTHORIZATION_FAILED")
        path = "/v1/controller/brokers/register"
        headers = PeerSecurity(NodeCredential(2, SECRET)).headers("POST", path, target=1)
        assert await get(f"{base}{path}", method="POST", headers=headers) == (200, {"principal": "Node:2"})
    finally:
        await runner.cleanup()

