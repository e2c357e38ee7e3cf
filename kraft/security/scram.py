"""SCRAM credentials (RFC 5802, Kafka's ScramFormatter) and checking a password against them.

A credential is what Kafka's `UserScramCredentialRecord` holds: salt, iterations, StoredKey =
H(HMAC(SaltedPassword, "Client Key")) and ServerKey = HMAC(SaltedPassword, "Server Key"), with
SaltedPassword = PBKDF2(password, salt, iterations). The password is never stored; a client sends
it in `Authorization: Basic` over TLS and the node recomputes StoredKey (PBKDF2 runs in a thread,
never on the event loop) and compares in constant time.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from dataclasses import dataclass
from typing import Any

from kraft.errors import KraftError

MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS = 4096  # Kafka's minimum
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096
SALT_BYTES = 32


@dataclass(frozen=True)
class ScramCredential:
    mechanism: str
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(MECHANISMS[mechanism], password.encode("utf-8"), salt, iterations)


def from_salted_password(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """What the controller stores from a client's salted password (AlterUserScramCredentials
    sends that, never the password)."""
    digest = MECHANISMS[mechanism]
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    return ScramCredential(mechanism, salt, iterations, hashlib.new(digest, client_key).digest(),
                           hmac.new(salted, b"Server Key", digest).digest())


def make_credential(mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    salt = os.urandom(SALT_BYTES) if salt is None else salt
    return from_salted_password(mechanism, salted_password(mechanism, password, salt, iterations), salt, iterations)


def verify(credential: ScramCredential, password: str) -> bool:
    """Whether `password` is the credential's; constant time in the comparison."""
    candidate = make_credential(credential.mechanism, password, credential.iterations, credential.salt)
    return hmac.compare_digest(candidate.stored_key, credential.stored_key)


def dummy(mechanism: str, iterations: int = DEFAULT_ITERATIONS) -> ScramCredential:
    """A credential no password matches, checked for unknown users so that the time an answer
    takes does not tell whether a user exists."""
    return ScramCredential(mechanism, os.urandom(SALT_BYTES), iterations, os.urandom(64), os.urandom(64))


def parse_scram_config(text: str) -> dict[str, str]:
    """kafka-configs' `[iterations=8192,password=alice-secret]` (and `--add-scram`'s
    `[name=admin,password=...]`) -> {"iterations": "8192", "password": "alice-secret"}."""
    body = text.strip()
    if not (body.startswith("[") and body.endswith("]")):
        raise ValueError("expected [key=value,...]")
    out = {}
    for part in body[1:-1].split(","):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"expected key=value, got {part!r}")
        out[key.strip()] = value.strip()
    return out


def scram_upsertion(user: str, mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS) -> dict[str, Any]:
    """One AlterUserScramCredentials upsertion as a client sends it: a random salt and
    PBKDF2(password, salt, iterations), base64-encoded; the password itself is not in it."""
    if mechanism not in MECHANISMS:
        raise KraftError("UNSUPPORTED_SASL_MECHANISM", f"mechanism must be one of {', '.join(MECHANISMS)}")
    salt = os.urandom(SALT_BYTES)
    salted = salted_password(mechanism, password, salt, iterations)
    return {"name": user, "mechanism": mechanism, "iterations": iterations,
            "salt": base64.b64encode(salt).decode("ascii"), "salted_password": base64.b64encode(salted).decode("ascii")}
