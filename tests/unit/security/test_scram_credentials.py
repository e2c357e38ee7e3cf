"""SCRAM: the controller's AlterUserScramCredentials (all or nothing, bad input named) and the
password check against what it stores."""

from __future__ import annotations

import base64

import pytest

from kraft.security.scram import scram_upsertion
from kraft.controller.handlers import alter_user_scram_credentials
from kraft.security import scram
from kraft.metadata.delta import apply_records
from kraft.metadata.errors import MetadataError
from kraft.metadata.image import MetadataImage


def stored(image: MetadataImage, user: str, mechanism: str) -> scram.ScramCredential:
    data = image.scram.get(user, mechanism)
    assert data is not None
    return scram.ScramCredential(mechanism, base64.b64decode(data.salt), data.iterations,
                                 base64.b64decode(data.stored_key), base64.b64decode(data.server_key))


def apply(image: MetadataImage, upsertions=(), deletions=()) -> MetadataImage:
    result = alter_user_scram_credentials(image, list(upsertions), list(deletions))
    return apply_records(image, [(image.offset + 1 + i, r) for i, r in enumerate(result.records)])[1]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_the_stored_credential_checks_the_password_and_holds_no_password(mechanism):
    upsertion = scram_upsertion("alice", mechanism, "alice-pw", 8192)
    image = apply(MetadataImage.EMPTY, [upsertion])
    credential = stored(image, "alice", mechanism)
    assert credential.iterations == 8192
    assert scram.verify(credential, "alice-pw") and not scram.verify(credential, "alice-pW")
    assert "alice-pw" not in repr(image.to_snapshot())
    image = apply(image, deletions=[{"name": "alice", "mechanism": mechanism}])
    assert image.scram.users() == {}


@pytest.mark.parametrize("upsertion, error", [
    ({"name": ""}, "INVALID_REQUEST"),
    ({"name": "bob"}, "INVALID_REQUEST"),  # twice in one request
    ({"name": "a", "mechanism": "MD5"}, "UNSUPPORTED_SASL_MECHANISM"),
    ({"iterations": 100}, "INVALID_REQUEST"),
    ({"salt": "not base64!"}, "INVALID_REQUEST"),
    ({"salted_password": base64.b64encode(b"short").decode()}, "INVALID_REQUEST"),
])
def test_bad_upsertions_are_refused_and_write_nothing(upsertion, error):
    good = scram_upsertion("bob", "SCRAM-SHA-256", "pw")
    with pytest.raises(MetadataError) as e:
        alter_user_scram_credentials(MetadataImage.EMPTY, [good, {**good, "name": "carol", **upsertion}], [])
    assert e.value.error_code == error


@pytest.mark.parametrize("upsertion, error", [
    ({"mechanism": {}}, "UNSUPPORTED_SASL_MECHANISM"),  # unhashable: must not reach the dict lookup
    ({"mechanism": ["SCRAM-SHA-256"]}, "UNSUPPORTED_SASL_MECHANISM"),
    ({"name": {"n": 1}}, "INVALID_REQUEST"),
    ({"iterations": True}, "INVALID_REQUEST"),
    ({"iterations": 10**40}, "INVALID_REQUEST"),
    ({"salt": None}, "INVALID_REQUEST"),  # str(None) would be valid base64
    ({"salt": ["AAAA"]}, "INVALID_REQUEST"),
    ({"salted_password": 12345}, "INVALID_REQUEST"),
])
def test_upsertion_fields_of_the_wrong_type_are_refused(upsertion, error):
    good = scram_upsertion("carol", "SCRAM-SHA-256", "pw")
    with pytest.raises(MetadataError) as e:
        alter_user_scram_credentials(MetadataImage.EMPTY, [{**good, **upsertion}], [])
    assert e.value.error_code == error


@pytest.mark.parametrize("deletion", [{"name": "x", "mechanism": {}}, {"name": "x", "mechanism": []},
                                      {"name": [], "mechanism": "SCRAM-SHA-256"}, ["x", "SCRAM-SHA-256"]])
def test_deletions_of_the_wrong_type_are_refused(deletion):
    with pytest.raises(MetadataError) as e:
        alter_user_scram_credentials(MetadataImage.EMPTY, [], [deletion])
    assert e.value.error_code in ("INVALID_REQUEST", "UNSUPPORTED_SASL_MECHANISM")


def test_deleting_a_missing_credential_is_refused():
    with pytest.raises(MetadataError, match="no SCRAM-SHA-256 credential"):
        alter_user_scram_credentials(MetadataImage.EMPTY, [], [{"name": "x", "mechanism": "SCRAM-SHA-256"}])


def users(*entries: tuple[str, str, int]) -> MetadataImage:
    return apply(MetadataImage.EMPTY, [scram_upsertion(u, m, f"{u}-pw", i) for u, m, i in entries])


@pytest.mark.parametrize("entries, mechanisms, expected", [
    # the issue's: an unknown user was checked at the highest stored count (16384), a known one at its own
    ([("admin", "SCRAM-SHA-256", 4096), ("bob", "SCRAM-SHA-256", 4096), ("carol", "SCRAM-SHA-256", 16384)],
     ["SCRAM-SHA-256", "PLAIN"], ("SCRAM-SHA-256", 4096)),
    ([("carol", "SCRAM-SHA-512", 16384)], ["SCRAM-SHA-256", "PLAIN"], ("SCRAM-SHA-512", 16384)),
    ([("a", "SCRAM-SHA-256", 4096), ("b", "SCRAM-SHA-256", 8192)], ["PLAIN"], ("SCRAM-SHA-256", 4096)),
    ([("a", "SCRAM-SHA-512", 8192)], ["SCRAM-SHA-256"], ("SCRAM-SHA-256", scram.DEFAULT_ITERATIONS)),
    ([], ["SCRAM-SHA-512"], ("SCRAM-SHA-512", scram.DEFAULT_ITERATIONS)),
])
async def test_an_unknown_user_is_checked_like_a_typical_user(entries, mechanisms, expected):
    """Kafka's ScramSaslServer checks an unknown user against a fake credential; here it has the
    mechanism and iteration count most users have, so a wrong password costs the same for both."""
    from aiohttp.test_utils import make_mocked_request

    from kraft.api.security import AuthenticationFailed
    from kraft.security.authn import ClientAuthenticator

    image = users(*entries)
    authenticator = ClientAuthenticator("SASL_PLAINTEXT", mechanisms, [], lambda: image)
    stand_in = authenticator._stand_in(image.scram, authenticator._candidates(""))
    assert (stand_in.mechanism, stand_in.iterations) == expected
    token = base64.b64encode(b"nobody:nobody-pw").decode()
    with pytest.raises(AuthenticationFailed, match=f"unknown user or wrong password \\({expected[0]}\\)"):
        await authenticator.authenticate(make_mocked_request("GET", "/", headers={"Authorization": f"Basic {token}"}))
