"""SCRAM credentials in the metadata image: replayed from records, kept in snapshots, removed."""

from __future__ import annotations

from kraft.metadata.delta import apply_records
from kraft.metadata.image import MetadataImage
from kraft.metadata.records import RemoveUserScramCredential, UserScramCredential


def credential(name: str, mechanism: str = "SCRAM-SHA-256", iterations: int = 4096) -> UserScramCredential:
    return UserScramCredential(name=name, mechanism=mechanism, salt="c2FsdA==", stored_key="c3Q=",
                               server_key="c2U=", iterations=iterations)


def test_credentials_replay_replace_survive_a_snapshot_and_are_removed():
    _, image = apply_records(MetadataImage.EMPTY, [
        (0, credential("alice")), (1, credential("alice", iterations=8192)), (2, credential("bob", "SCRAM-SHA-512"))])
    assert image.scram.users() == {"alice": {"SCRAM-SHA-256": 8192}, "bob": {"SCRAM-SHA-512": 4096}}
    assert MetadataImage.from_snapshot(image.to_snapshot()).scram == image.scram
    delta, image = apply_records(image, [(3, RemoveUserScramCredential(name="alice", mechanism="SCRAM-SHA-256")),
                                         (4, RemoveUserScramCredential(name="carol", mechanism="SCRAM-SHA-256")),
                                         (5, credential("dave", "MD5"))])
    assert image.scram.users() == {"bob": {"SCRAM-SHA-512": 4096}}
    assert [offset for offset, _ in delta.ignored] == [4, 5]


def test_a_snapshot_without_credentials_loads():
    snapshot = MetadataImage.EMPTY.to_snapshot()
    del snapshot["scram"]
    assert MetadataImage.from_snapshot(snapshot).scram.users() == {}
