"""SASL on a Kafka connection, server side (Kafka's SaslServerAuthenticator): KIP-43's
SaslHandshake (v0: the tokens follow as raw size-prefixed frames; v1: inside SaslAuthenticate
requests, KIP-152) with PLAIN and SCRAM-SHA-256/512 (RFC 5802, through `scramp`) against the
SCRAM credentials the HTTP API checks (`CredentialSource`, kraft/security/authn.py).

`SaslExchange` is one connection's state: which requests it may serve now (`allows`), the
handshake answer, and `authenticate(token) -> token` until the principal (`User:<name>`) is known.
A failed exchange raises `SaslAuthenticationFailed` (the reason is for the log only; the client
gets SASL_AUTHENTICATION_FAILED with one message), after which the connection is closed.

An unknown user takes a known user's path: SCRAM answers its first message from a stand-in
credential (the mechanism and iteration count most stored credentials have, a salt derived from
the name, so repeating the name repeats the salt as a real user's would) and fails only at the
proof, as a wrong password does; PLAIN checks the password against the stand-in.
"""

from __future__ import annotations

import datetime
import enum
from typing import Any, Protocol

import scramp
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode

from kraft.kafka.api_versions import API_VERSIONS
from kraft.security.scram import ScramCredential

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
SASL_HANDSHAKE_VERSIONS = (0, 1)
SASL_AUTHENTICATE_VERSIONS = (0, 2)
FAILED_MESSAGE = "Authentication failed: invalid credentials"
SASL_SERVER_MAX_RECEIVE_SIZE = 524_288  # Kafka's default sasl.server.max.receive.size


class SaslAuthenticationFailed(Exception):
    """The exchange failed (message for the log, never with a password in it)."""


class CredentialSource(Protocol):
    async def verify_password(self, user: str, password: str, mechanism: str) -> bool:
        """PLAIN: whether `password` is the user's (any SCRAM credential of theirs)."""

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential:
        """The user's credential of `mechanism`, else a stand-in no proof matches."""


class State(enum.Enum):
    HANDSHAKE = "expecting ApiVersions or SaslHandshake"
    AUTHENTICATE = "expecting the client's SASL tokens"
    COMPLETE = "authenticated"
    FAILED = "failed"


class SaslExchange:
    def __init__(self, mechanisms: list[str], credentials: CredentialSource) -> None:
        self.mechanisms = list(mechanisms)
        self.credentials = credentials
        self.state = State.HANDSHAKE
        self.raw_tokens = False  # handshake v0: tokens come as bare frames
        self.principal: str | None = None
        self._mechanism: _Mechanism | None = None

    def allows(self, api_key: int) -> bool:
        """Whether a request of `api_key` may be served now; any other closes the connection
        (Kafka: "Unexpected Kafka request ... during SASL handshake")."""
        if self.state is State.HANDSHAKE:
            return api_key in (API_VERSIONS, SASL_HANDSHAKE)
        if self.state is State.AUTHENTICATE:
            return api_key == SASL_AUTHENTICATE and not self.raw_tokens
        return self.state is State.COMPLETE

    def handshake(self, request: Any) -> Any:
        """The SaslHandshake answer; an unknown mechanism fails the exchange (Kafka answers
        UNSUPPORTED_SASL_MECHANISM, then closes)."""
        assert self.state is State.HANDSHAKE
        schema = load_response_schema(SASL_HANDSHAKE, request.__version__)
        if request.mechanism not in self.mechanisms:
            self.state = State.FAILED
            return schema(error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=tuple(self.mechanisms))
        self._mechanism = _Plain(self.credentials) if request.mechanism == "PLAIN" else \
            _Scram(request.mechanism, self.credentials)
        self.state = State.AUTHENTICATE
        self.raw_tokens = request.__version__ == 0
        return schema(error_code=ErrorCode.none, mechanisms=tuple(self.mechanisms))

    async def authenticate(self, token: bytes) -> bytes:
        """The server's token answering `token`; sets `principal` once the exchange is done.
        Raises SaslAuthenticationFailed."""
        assert self.state is State.AUTHENTICATE and self._mechanism is not None
        try:
            answer, user = await self._mechanism.evaluate(token)
        except SaslAuthenticationFailed:
            self.state = State.FAILED
            raise
        if user is not None:
            self.principal = f"User:{user}"
            self.state = State.COMPLETE
            self._mechanism = None
        return answer


class _Mechanism(Protocol):
    async def evaluate(self, token: bytes) -> tuple[bytes, str | None]:
        """(the answer, the user once authenticated)."""


class _Plain:
    """RFC 4616: `authzid NUL authcid NUL passwd`, one message; the answer is empty."""

    def __init__(self, credentials: CredentialSource) -> None:
        self.credentials = credentials

    async def evaluate(self, token: bytes) -> tuple[bytes, str | None]:
        try:
            authzid, user, password = token.decode("utf-8").split("\0")
        except (UnicodeDecodeError, ValueError):
            raise SaslAuthenticationFailed("malformed SASL/PLAIN message") from None
        if not user:
            raise SaslAuthenticationFailed("SASL/PLAIN without a user name")
        if authzid and authzid != user:
            raise SaslAuthenticationFailed(f"user {user!r} asked for another authorization id")
        if not await self.credentials.verify_password(user, password, "PLAIN"):
            raise SaslAuthenticationFailed(f"user {user!r}: unknown user or wrong password (PLAIN)")
        return b"", user


class _Scram:
    """RFC 5802's two round trips: client-first -> server-first (salt, iterations, nonce),
    client-final (the proof) -> server-final (the server's signature)."""

    def __init__(self, mechanism: str, credentials: CredentialSource) -> None:
        self.mechanism = mechanism
        self.credentials = credentials
        self.user: str | None = None
        self._server = scramp.ScramMechanism(mechanism).make_server(self._auth_info)

    def _auth_info(self, user: str) -> tuple[bytes, bytes, bytes, int]:
        self.user = user
        credential = self.credentials.scram_credential(user, self.mechanism)
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    async def evaluate(self, token: bytes) -> tuple[bytes, str | None]:
        try:
            message = token.decode("utf-8")
            if self._server.stage is None:
                self._server.set_client_first(message)
                return self._server.get_server_first().encode("utf-8"), None
            self._server.set_client_final(message)
            return self._server.get_server_final().encode("utf-8"), self.user
        except (UnicodeDecodeError, scramp.ScramException) as e:
            raise SaslAuthenticationFailed(f"user {self.user!r}: {self.mechanism}: {e}") from None


def authenticate_response(version: int, error_code: ErrorCode = ErrorCode.none, message: str | None = None,
                          auth_bytes: bytes = b"") -> Any:
    """kio's SaslAuthenticate answer of `version`."""
    fields: dict[str, Any] = {"error_code": error_code, "error_message": message, "auth_bytes": auth_bytes}
    if version >= 1:
        fields["session_lifetime"] = datetime.timedelta(0)  # no re-authentication (KIP-368 is off)
    return load_response_schema(SASL_AUTHENTICATE, version)(**fields)


def illegal_sasl_state(request: Any) -> Any:
    """Kafka's answer to SaslHandshake / SaslAuthenticate outside an exchange."""
    if request.__api_key__ == SASL_HANDSHAKE:
        return load_response_schema(SASL_HANDSHAKE, request.__version__)(
            error_code=ErrorCode.illegal_sasl_state, mechanisms=())
    return authenticate_response(request.__version__, ErrorCode.illegal_sasl_state,
                                 "SaslAuthenticate is served only during a SASL exchange")
