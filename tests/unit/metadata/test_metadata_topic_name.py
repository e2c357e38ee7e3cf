"""Kafka's topic name rules."""

from __future__ import annotations

import pytest

from metadata.errors import MetadataError
from metadata.topic_name import collision_key, validate_topic_name


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
