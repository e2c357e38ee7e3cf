"""The client's security settings, with kafka-python's names: `security_protocol` (PLAINTEXT, SSL,
SASL_PLAINTEXT, SASL_SSL), `sasl_mechanism` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512),
`sasl_plain_username`/`sasl_plain_password`, `ssl_cafile`, `ssl_certfile`/`ssl_keyfile`/`ssl_password`
(a client certificate for mTLS), `ssl_check_hostname`.

Over HTTP, SASL credentials travel as `Authorization: Basic` (inside TLS with SASL_SSL) with the
mechanism in `X-Kraft-Sasl-Mechanism`; the broker checks them against its SCRAM credentials.
"""

from __future__ import annotations

import base64
import re
import ssl
from dataclasses import dataclass
from typing import Any

from kraft.api.errors import KraftError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
MECHANISM_HEADER = "X-Kraft-Sasl-Mechanism"
KEYS = ("security_protocol", "sasl_mechanism", "sasl_plain_username", "sasl_plain_password", "ssl_cafile",
        "ssl_certfile", "ssl_keyfile", "ssl_password", "ssl_check_hostname")


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    mechanism: str = "PLAIN"
    username: str | None = None
    password: str | None = None
    cafile: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    key_password: str | None = None
    check_hostname: bool = True

    def client_configs(self) -> dict[str, Any]:
        """The settings as the clients' keywords (`Producer(**security.client_configs())`)."""
        return dict(zip(KEYS, (self.protocol, self.mechanism, self.username, self.password, self.cafile,
                               self.certfile, self.keyfile, self.key_password, self.check_hostname)))

    def __repr__(self) -> str:  # never the password
        return f"ClientSecurity({self.protocol}, {self.mechanism}, user={self.username!r})"

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def scheme(self) -> str:
        return "https" if self.uses_tls else "http"

    def headers(self) -> dict[str, str]:
        if self.protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
            return {}
        token = base64.b64encode(f"{self.username}:{self.password}".encode("utf-8")).decode("ascii")
        return {"Authorization": f"Basic {token}", MECHANISM_HEADER: self.mechanism}

    def ssl_context(self) -> ssl.SSLContext | None:
        if not self.uses_tls:
            return None
        context = ssl.create_default_context(cafile=self.cafile)
        context.check_hostname = self.check_hostname
        if self.certfile:
            context.load_cert_chain(self.certfile, self.keyfile, self.key_password)
        return context


PLAINTEXT = ClientSecurity()


def pop_security(configs: dict[str, Any]) -> ClientSecurity:
    """Takes the security keywords out of `configs` (kafka-python's names); INVALID_CONFIG names a
    bad value."""
    given = {k: configs.pop(k) for k in KEYS if k in configs}
    protocol = str(given.get("security_protocol", "PLAINTEXT")).upper()
    mechanism = str(given.get("sasl_mechanism", "PLAIN")).upper()
    if protocol not in PROTOCOLS:
        raise KraftError("INVALID_CONFIG", f"security_protocol={protocol!r}: use one of {', '.join(PROTOCOLS)}")
    if mechanism not in MECHANISMS:
        raise KraftError("INVALID_CONFIG", f"sasl_mechanism={mechanism!r}: use one of {', '.join(MECHANISMS)}")
    security = ClientSecurity(protocol, mechanism, given.get("sasl_plain_username"), given.get("sasl_plain_password"),
                              given.get("ssl_cafile"), given.get("ssl_certfile"), given.get("ssl_keyfile"),
                              given.get("ssl_password"), bool(given.get("ssl_check_hostname", True)))
    if protocol.startswith("SASL_") and not (security.username and security.password is not None):
        raise KraftError("INVALID_CONFIG", f"security_protocol={protocol} needs sasl_plain_username and "
                                           "sasl_plain_password")
    try:
        security.ssl_context()
    except (OSError, ssl.SSLError) as e:
        raise KraftError("INVALID_CONFIG", f"ssl_cafile/ssl_certfile/ssl_keyfile: cannot be loaded: {e}") from None
    return security


_JAAS_MODULES = {
    "org.apache.kafka.common.security.plain.PlainLoginModule",
    "org.apache.kafka.common.security.scram.ScramLoginModule",
}
_JAAS_OPTION = re.compile(r'\s*([A-Za-z_][\w.]*)\s*=\s*(?:"((?:\\.|[^"\\])*)"|([^\s;"]+))')


def parse_jaas_config(text: str) -> tuple[str, str]:
    """Kafka's `sasl.jaas.config` with PlainLoginModule or ScramLoginModule:
    `org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="s";`
    -> (username, password). ValueError otherwise (never quoting the text: it holds a password)."""
    parts = text.strip().split(None, 2)
    if len(parts) < 2 or parts[0] not in _JAAS_MODULES or parts[1] != "required":
        raise ValueError("sasl.jaas.config must be 'org.apache.kafka.common.security.plain.PlainLoginModule "
                         "required username=\"...\" password=\"...\";' (or scram.ScramLoginModule)")
    rest = parts[2] if len(parts) == 3 else ""
    options: dict[str, str] = {}
    pos = 0
    while True:
        match = _JAAS_OPTION.match(rest, pos)
        if match is None:
            break
        value = match.group(2) if match.group(2) is not None else match.group(3)
        options[match.group(1)] = re.sub(r"\\(.)", r"\1", value)
        pos = match.end()
    if rest[pos:].strip() not in ("", ";") or "username" not in options or "password" not in options:
        raise ValueError("sasl.jaas.config needs username=\"...\" and password=\"...\" and ends with ';'")
    return options["username"], options["password"]


def from_kafka_properties(props: dict[str, str]) -> dict[str, Any]:
    """Kafka's client security keys (security.protocol, sasl.mechanism, sasl.jaas.config,
    ssl.truststore.location, ssl.keystore.location, ssl.key.password,
    ssl.endpoint.identification.algorithm; PEM files) as this client's keywords. INVALID_CONFIG
    names a bad key."""
    out: dict[str, Any] = {}
    if "security.protocol" in props:
        out["security_protocol"] = props["security.protocol"].strip().upper()
    if "sasl.mechanism" in props:
        out["sasl_mechanism"] = props["sasl.mechanism"].strip().upper()
    if "sasl.jaas.config" in props:
        try:
            out["sasl_plain_username"], out["sasl_plain_password"] = parse_jaas_config(props["sasl.jaas.config"])
        except ValueError as e:
            raise KraftError("INVALID_CONFIG", str(e)) from None
    for key in ("ssl.truststore.type", "ssl.keystore.type"):
        if props.get(key, "PEM").strip().upper() != "PEM":
            raise KraftError("INVALID_CONFIG", f"{key}={props[key]!r}: only PEM files are read")
    if "ssl.truststore.location" in props:
        out["ssl_cafile"] = props["ssl.truststore.location"]
    if "ssl.keystore.location" in props:  # certificate chain and key in one PEM
        out["ssl_certfile"] = out["ssl_keyfile"] = props["ssl.keystore.location"]
    if "ssl.key.password" in props:
        out["ssl_password"] = props["ssl.key.password"]
    if props.get("ssl.endpoint.identification.algorithm", "https").strip() == "":
        out["ssl_check_hostname"] = False
    return out
