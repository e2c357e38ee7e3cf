"""The client's security settings, with kafka-python's names: `security_protocol` (PLAINTEXT, SSL,
SASL_PLAINTEXT, SASL_SSL), `sasl_mechanism` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512),
`sasl_plain_username`/`sasl_plain_password`, `ssl_cafile`, `ssl_certfile`/`ssl_keyfile`/`ssl_password`
(a client certificate for mTLS), `ssl_check_hostname`.

Over HTTP, SASL credentials travel as `Authorization: Basic` (inside TLS with SASL_SSL) with the
mechanism in `X-Kraft-Sasl-Mechanism`; the broker checks them against its SCRAM credentials.
"""

from __future__ import annotations

import base64
import ssl
from dataclasses import dataclass
from typing import Any

from api.errors import KraftError

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
