"""ssl.principal.mapping.rules as Kafka reads them."""

from __future__ import annotations

import pytest

from kraft.security.principal import map_subject, parse_rules


def test_default_is_the_subject():
    assert map_subject(parse_rules("DEFAULT"), "CN=alice,O=kraft") == "CN=alice,O=kraft"


def test_rules_in_order_with_groups_and_case():
    rules = parse_rules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, RULE:^CN=([^,]*),O=(.*)$/$2-$1/U, DEFAULT")
    assert map_subject(rules, "CN=Svc,OU=ServiceUsers,O=x") == "svc"
    assert map_subject(rules, "CN=bob,O=kraft") == "KRAFT-BOB"
    assert map_subject(rules, "O=kraft") == "O=kraft"


def test_no_matching_rule_maps_to_nothing():
    assert map_subject(parse_rules("RULE:^CN=(.*)$/$1/"), "O=kraft,CN=x") is None
    assert map_subject(parse_rules("RULE:^CN=([a-z]+)$/$1/"), "O=kraft") is None


@pytest.mark.parametrize("text", ["RULE:^CN=(.*)$", "NOPE", "RULE:(/x/"])
def test_malformed_rules_are_refused(text):
    with pytest.raises(ValueError):
        parse_rules(text)
