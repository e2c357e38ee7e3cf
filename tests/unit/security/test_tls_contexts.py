"""TLS contexts from Kafka's PEM keys: encrypted keys with ssl.key.password, errors that name the
key and never the password, and the client-auth modes."""

from __future__ import annotations

import ssl

import pytest

from kraft.config import ConfigError, load_config
from kraft.security import certs
from kraft.security.tls import peer_context, server_context


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    ca = certs.make_ca()
    certs.write_ca(ca, d)
    certs.write_keystore(ca, d / "node.pem", "node-1", ["localhost"], key_password="key-pass-0xE5")
    return d


def config(pki, **extra: str):
    return load_config(overrides=[f"{k}={v}" for k, v in {
        "security.protocol": "SSL", "ssl.keystore.location": str(pki / "node.pem"),
        "ssl.truststore.location": str(pki / "ca.pem"), **extra}.items()])


def test_an_encrypted_key_loads_with_its_password(pki):
    server = server_context(config(pki, **{"ssl.key.password": "key-pass-0xE5", "ssl.client.auth": "required"}))
    assert server is not None and server.verify_mode == ssl.CERT_REQUIRED
    assert server.minimum_version == ssl.TLSVersion.TLSv1_2
    peer = peer_context(config(pki, **{"ssl.key.password": "key-pass-0xE5", "ssl.enabled.protocols": "TLSv1.3"}))
    assert peer is not None and peer.check_hostname and peer.minimum_version == ssl.TLSVersion.TLSv1_3


def test_a_wrong_password_names_the_key_not_the_password(pki):
    with pytest.raises(ConfigError, match="ssl.keystore.location") as e:
        server_context(config(pki, **{"ssl.key.password": "wrong-0xF6"}))
    assert "wrong-0xF6" not in str(e.value)


def test_plaintext_needs_no_context(pki):
    assert server_context(load_config()) is None and peer_context(load_config()) is None
