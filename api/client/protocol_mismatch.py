"""Telling a client at once that it speaks the wrong security protocol to a listener.

A plain-HTTP request to a TLS listener is closed without an answer, which looks like a node going
away: the client would retry it until its timeout and then report a disconnect. On such a close
the transport probes the address once with a TLS handshake (no certificate check: the question is
only whether the server speaks TLS) and, when it does, fails with what to set, as Kafka's tools
hint at an SSL handshake. The reverse (TLS to a plain listener) and a certificate the client's CAs
do not vouch for are recognised from the handshake error itself. These errors are not retriable:
no retry changes the client's configuration.
"""

from __future__ import annotations

import http.client
import socket
import ssl

from kraft.api.errors import KraftError

Address = tuple[str, int]

# How a TLS server treats the bytes of a plain-HTTP request: it closes the connection (aiohttp, and
# most servers) or answers with a TLS alert record, which is no HTTP status line.
_CLOSED_WITHOUT_ANSWER = (http.client.BadStatusLine, ConnectionResetError)
PROBE_TIMEOUT_S = 5.0


class ProtocolMismatch(KraftError):
    """The client's security.protocol does not match the listener's (or its CAs refuse the
    listener's certificate): a configuration error, so not retriable."""

    def __init__(self, message: str) -> None:
        super().__init__("NETWORK_EXCEPTION", message)

    @property
    def retriable(self) -> bool:
        return False


def speaks_tls(address: Address, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """Whether the server at `address` completes (or refuses with a TLS alert) a TLS handshake."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection(address, timeout=timeout_s) as raw:
            with context.wrap_socket(raw, server_hostname=address[0]):
                return True
    except ssl.SSLError as e:
        # an alert is TLS speaking (e.g. a listener that requires a client certificate)
        return "ALERT" in (e.reason or "")
    except OSError:
        return False


def _where(address: Address) -> str:
    host, port = address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def plain_client_mismatch(error: Exception, address: Address) -> ProtocolMismatch | None:
    """For a plain-HTTP client whose request failed with `error`: the mismatch, when the server
    closed without an answer and speaks TLS."""
    if not isinstance(error, _CLOSED_WITHOUT_ANSWER) or not speaks_tls(address):
        return None
    return ProtocolMismatch(
        f"the listener at {_where(address)} speaks TLS, and this client spoke plain HTTP to it "
        "(security.protocol=PLAINTEXT): set security.protocol=SSL (or SASL_SSL) and ssl.truststore.location "
        "to the cluster's CA (the kraft tools read these keys from --command-config FILE; the Python client "
        "takes security_protocol='SSL', ssl_cafile=...)")


def tls_client_mismatch(error: Exception, address: Address) -> ProtocolMismatch | None:
    """For a TLS client whose handshake failed with `error`: a plain listener, or a certificate
    this client's CAs do not vouch for."""
    if isinstance(error, ssl.SSLCertVerificationError):
        return ProtocolMismatch(
            f"the TLS listener at {_where(address)} presented a certificate this client does not trust "
            f"({error.verify_message}): set ssl.truststore.location (Python client: ssl_cafile) to the CA "
            "that signed the cluster's certificates")
    if isinstance(error, ssl.SSLError) and error.reason == "WRONG_VERSION_NUMBER":
        return ProtocolMismatch(
            f"the listener at {_where(address)} does not speak TLS (it answered in plain text), and this client "
            "uses TLS: set security.protocol=PLAINTEXT (or SASL_PLAINTEXT), or connect to the cluster's TLS "
            "listener")
    return None
