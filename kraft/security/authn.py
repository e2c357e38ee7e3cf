"""Client authentication on the client listener, as its security.protocol says:
PLAINTEXT -> User:ANONYMOUS; SSL -> the certificate's subject through ssl.principal.mapping.rules
(User:ANONYMOUS without a certificate, when ssl.client.auth allows none); SASL_PLAINTEXT/SASL_SSL
-> `Authorization: Basic` (user:password) checked against the user's SCRAM credential in the
metadata image (PLAIN: any SCRAM mechanism of the user; SCRAM-SHA-256/512 named in the optional
`X-Kraft-Sasl-Mechanism` header: that one). Kafka's SCRAM exchange proves the password without
sending it; over HTTP the password travels inside TLS instead, and what is stored stays SCRAM's.

PBKDF2 runs in a thread and a successful check is cached (keyed by a hash of user, mechanism and
password, valid while the stored credential is unchanged), so the hot path costs one SHA-256.
An unknown user takes a known user's path, as Kafka's ScramSaslServer does with a fake credential:
the password is checked against a stand-in credential that no password matches, of the mechanism
and iteration count most stored credentials have, so a wrong password for an unknown user takes
as long as one for a typical user and the answer's time does not tell whether the user exists.
(A user whose own count is unusual is told apart by the time it takes, as in Kafka.)

The Kafka listener (kraft/kafka/sasl.py) takes the same checks: `verify_password` for SASL/PLAIN,
`scram_credential` for a SCRAM exchange (a stand-in for an unknown user, whose salt is the same at
every attempt, as a real user's is), `certificate_principal` for an SSL listener.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import dataclasses
import hashlib
import hmac
import os
from collections import Counter, OrderedDict
from typing import Any, Callable

from aiohttp import web

from kraft.security import scram
from kraft.security.principal import Rule, map_subject
from kraft.metadata.image import MetadataImage, ScramCredentialData, ScramImage
from kraft.server.request_context import ANONYMOUS

MECHANISM_HEADER = "X-Kraft-Sasl-Mechanism"
MAX_CACHED = 10_000


class AuthenticationFailed(Exception):
    """Wrong, missing or unusable client credentials (the reason is for the log only)."""


def _credential(mechanism: str, data: ScramCredentialData) -> scram.ScramCredential:
    return scram.ScramCredential(mechanism, base64.b64decode(data.salt), data.iterations,
                                 base64.b64decode(data.stored_key), base64.b64decode(data.server_key))


class ClientAuthenticator:
    def __init__(self, protocol: str, mechanisms: list[str], rules: list[Rule],
                 image: Callable[[], MetadataImage]) -> None:
        self.protocol = protocol
        self.mechanisms = list(mechanisms)
        self.rules = rules
        self.image = image
        self._verified: OrderedDict[bytes, str] = OrderedDict()  # cache key -> the stored_key it matched
        # unknown users' stand-in credentials, per candidate mechanisms, for one SCRAM image
        self._stand_ins: tuple[ScramImage | None, dict[tuple[str, ...], scram.ScramCredential]] = (None, {})
        self._salt_key = os.urandom(32)  # stand-in salts: stable per name in this process, unguessable

    async def authenticate(self, request: web.Request) -> str:
        if self.protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
            return await self._sasl(request)
        if self.protocol == "SSL":
            return self._certificate(request)
        return ANONYMOUS

    # -- mTLS -------------------------------------------------------------------------------------

    def _certificate(self, request: web.Request) -> str:
        ssl_object = request.transport.get_extra_info("ssl_object") if request.transport else None
        return self.certificate_principal(ssl_object)

    def certificate_principal(self, ssl_object: Any) -> str:
        """The principal of a TLS connection's client certificate (ssl.principal.mapping.rules);
        ANONYMOUS without one (ssl.client.auth none, or requested and not sent)."""
        der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        if not der:
            return ANONYMOUS
        from cryptography import x509  # here: only a TLS listener with client certificates needs it, not every start

        subject = x509.load_der_x509_certificate(der).subject.rfc4514_string()
        name = map_subject(self.rules, subject)
        if name is None:
            raise AuthenticationFailed(f"no ssl.principal.mapping.rules entry matches the certificate {subject}")
        return f"User:{name}"

    # -- SASL over HTTP ---------------------------------------------------------------------------

    async def _sasl(self, request: web.Request) -> str:
        user, password = _basic(request.headers.get("Authorization"))
        asked = request.headers.get(MECHANISM_HEADER, "").upper()
        if asked and asked not in self.mechanisms:
            raise AuthenticationFailed(f"mechanism {asked} is not enabled")
        ok, checked = await self._verify(user, password, asked)
        if not ok:
            raise AuthenticationFailed(f"user {user!r}: unknown user or wrong password ({checked})")
        return f"User:{user}"

    async def verify_password(self, user: str, password: str, mechanism: str) -> bool:
        """Whether `password` is the user's: against its credential of `mechanism` (a SCRAM one),
        or for PLAIN and "" (none named) of any enabled SCRAM mechanism."""
        return (await self._verify(user, password, mechanism))[0]

    async def _verify(self, user: str, password: str, mechanism: str) -> tuple[bool, str]:
        """(whether it is the password, the mechanism of the credential checked)."""
        candidates = self._candidates(mechanism)
        scram_image = self.image().scram
        found = next(((m, d) for m in candidates if (d := scram_image.get(user, m)) is not None), None)
        # known or not, the same steps: the cache look-up, then PBKDF2 in a thread
        credential = _credential(*found) if found else self._stand_in(scram_image, candidates)
        data = found[1] if found else None
        key = self._cache_key(user, credential.mechanism, password)
        if data is not None and self._verified.get(key) == data.stored_key:
            return True, credential.mechanism
        ok = await asyncio.to_thread(scram.verify, credential, password)
        if not ok or data is None:
            return False, credential.mechanism
        self._verified[key] = data.stored_key
        self._verified.move_to_end(key)
        if len(self._verified) > MAX_CACHED:
            self._verified.popitem(last=False)
        return True, credential.mechanism

    def scram_credential(self, user: str, mechanism: str) -> scram.ScramCredential:
        """The user's stored credential of `mechanism` (a SCRAM exchange), else a stand-in that
        no proof matches, shaped like most stored ones, with a salt derived from the name (a
        real user's salt is the same at every attempt, so must a stand-in's be)."""
        scram_image = self.image().scram
        data = scram_image.get(user, mechanism)
        if data is not None:
            return _credential(mechanism, data)
        stand_in = self._stand_in(scram_image, (mechanism,))
        salt = hmac.new(self._salt_key, user.encode("utf-8"), hashlib.sha256).digest()
        return dataclasses.replace(stand_in, salt=salt)

    def _candidates(self, asked: str) -> tuple[str, ...]:
        """The SCRAM mechanisms whose credentials may authenticate a password, in order."""
        if asked and asked != "PLAIN":
            return (asked,)
        if asked == "PLAIN" or "PLAIN" in self.mechanisms:
            return tuple(scram.MECHANISMS)
        return tuple(m for m in self.mechanisms if m in scram.MECHANISMS) or ("SCRAM-SHA-256",)

    def _stand_in(self, scram_image: ScramImage, candidates: tuple[str, ...]) -> scram.ScramCredential:
        """An unknown user's credential: no password matches it, and checking one costs what it
        costs for most users: the mechanism and iteration count most stored credentials of
        `candidates` have (ties: the lower count), else the first candidate at Kafka's default."""
        image, stand_ins = self._stand_ins
        if image is not scram_image:
            stand_ins = {}
            self._stand_ins = (scram_image, stand_ins)
        if candidates not in stand_ins:
            counts = Counter((m, c.iterations) for (_, m), c in scram_image.credentials.items() if m in candidates)
            mechanism, iterations = (min(counts, key=lambda k: (-counts[k], k[1])) if counts
                                     else (candidates[0], scram.DEFAULT_ITERATIONS))
            stand_ins[candidates] = scram.dummy(mechanism, iterations)
        return stand_ins[candidates]

    @staticmethod
    def _cache_key(user: str, mechanism: str, password: str) -> bytes:
        return hashlib.sha256(f"{user}\0{mechanism}\0{password}".encode("utf-8")).digest()


def _basic(header: str | None) -> tuple[str, str]:
    if not header:
        raise AuthenticationFailed("no Authorization header")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic":
        raise AuthenticationFailed(f"Authorization scheme {scheme!r} is not Basic")
    try:
        user, sep, password = base64.b64decode(value.strip(), validate=True).decode("utf-8").partition(":")
    except (binascii.Error, UnicodeDecodeError):
        raise AuthenticationFailed("malformed Basic credentials") from None
    if not sep or not user:
        raise AuthenticationFailed("malformed Basic credentials")
    return user, password
