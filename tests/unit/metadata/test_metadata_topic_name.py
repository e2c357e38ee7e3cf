"""Kafka's topic name rules."""

from __future__ import annotations

import pytest

from kraft.metadata.errors import MetadataError
from kraft.metadata.topic_name import INTERNAL_TOPICS, check_client_topic, collision_key, is_internal, validate_topic_name


@pytest.mark.parametrize("name", ["a", "A.b_c-9", "x" * 249, "__consumer_offsets", "..."])
def test_legal_names(name: str) -> None:
    assert validate_topic_name(name) == name


@pytest.mark.parametrize("name", ["", ".", "..", "x" * 250, "a b", "a/b", "é", None, 5, "a\n"])
def test_illegal_names(name: object) -> None:
    with pytest.raises(MetadataError) as e:
        validate_topic_name(name)
    assert e.value.error_code == "INVALID_TOPIC_EXCEPTION"


def test_dot_and_underscore_collide() -> None:
    assert collision_key("a.b") == collision_key("a_b") != collision_key("a-b")


def test_cluster_metadata_is_never_a_topic() -> None:
    # Its partition 0 would share the metadata log's directory, `__cluster_metadata-0`.
    with pytest.raises(MetadataError) as e:
        validate_topic_name("__cluster_metadata")
    assert e.value.error_code == "INVALID_REQUEST"


@pytest.mark.parametrize("name", sorted(INTERNAL_TOPICS))
def test_internal_topics_are_kept_from_clients(name: str) -> None:
    assert is_internal(name) and validate_topic_name(name) == name  # the node itself may create them
    with pytest.raises(MetadataError) as produce:
        check_client_topic(name, "produce to")
    assert produce.value.error_code == "INVALID_TOPIC_EXCEPTION"
    for action in ("create", "delete", "add partitions to"):
        with pytest.raises(MetadataError) as e:
            check_client_topic(name, action)
        assert e.value.error_code == "INVALID_REQUEST" and action in e.value.message


def test_user_topics_with_underscores_are_ordinary() -> None:
    assert not is_internal("__mine") and check_client_topic("__mine", "produce to") == "__mine"
