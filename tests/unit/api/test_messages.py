"""The messages of `api/messages/` (issue 16, "one definition per message"): every Struct of the
route table round-trips JSON and msgpack, refusals name the field, no request message nests deeper
than the body limit, and the OpenAPI document is generated from these Structs."""

from __future__ import annotations

import re
from typing import Any, Iterator

import msgspec
import msgspec.inspect as mi
import pytest

from kraft.api.messages.common import MAX_PARTITIONS, TOPIC_LIST_PATTERN, TOPIC_NAME_PATTERN, ErrorResponse
from kraft.api.messages.records import RecordData
from kraft.api.openapi import ROUTES, openapi_document
from kraft.api.wire import MAX_BODY_DEPTH
from kraft.metadata import topic_name

MESSAGES = sorted({t for r in ROUTES for t in (r.request, r.answer, r.query) if t is not None},
                  key=lambda t: t.__name__)
REQUESTS = sorted({t for r in ROUTES for t in (r.request, r.query) if t is not None}, key=lambda t: t.__name__)
_TEXT = ("t", "earliest", "0", "SCRAM-SHA-256")


def example(info: mi.Type) -> Any:
    """A value of the type that its constraints and its message's Kafka rules accept; every field
    of a Struct filled, so a round trip covers all of them."""
    if isinstance(info, mi.Metadata):
        return example(info.type)
    if isinstance(info, mi.StructType):
        return info.cls(**{f.name: example(f.type) for f in info.fields})
    if isinstance(info, mi.UnionType):
        return example(next(t for t in info.types if not isinstance(t, mi.NoneType)))
    if isinstance(info, mi.IntType):
        return max(1, info.ge or 0, (info.gt or 0) + 1)
    if isinstance(info, mi.FloatType):
        return 1.5
    if isinstance(info, mi.BoolType):
        return False
    if isinstance(info, mi.StrType):
        return next(t for t in _TEXT if info.pattern is None or re.search(info.pattern, t))
    if isinstance(info, mi.BytesType):
        return b"\x00\xffbin"
    if isinstance(info, mi.MemoryViewType):  # the produce request's records: a view of the body
        return memoryview(b"\x00\xffbin")
    if isinstance(info, mi.LiteralType):
        return info.values[0]
    if isinstance(info, mi.ListType):
        return [example(info.item_type)]
    if isinstance(info, mi.TupleType):
        return tuple(example(t) for t in info.item_types)
    if isinstance(info, mi.DictType):
        return {"k": example(info.value_type)}
    if isinstance(info, mi.AnyType):
        return "text"
    raise AssertionError(f"no example for {info}")


@pytest.mark.parametrize("message", MESSAGES, ids=lambda t: t.__name__)
@pytest.mark.parametrize("codec", [msgspec.json, msgspec.msgpack], ids=["json", "msgpack"])
def test_every_message_round_trips(message: type, codec: Any) -> None:
    value = example(mi.type_info(message))
    assert codec.decode(codec.encode(value), type=message) == value


def test_binary_is_base64_in_json_and_bin_in_msgpack() -> None:
    from kraft.api.messages.batch import ProducePartition

    p = ProducePartition(topic="t", partition=0, records=b"\x00\x01")
    assert msgspec.json.encode(p) == b'{"topic":"t","partition":0,"records":"AAE="}'
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(p)) == {"topic": "t", "partition": 0, "records": b"\x00\x01"}


def _nesting(info: mi.Type, seen: tuple[type, ...] = ()) -> int:
    """How many levels of objects and arrays a value of the type can have; `Any` fields other than
    a record's key/value (checked by the route) fail the test."""
    if isinstance(info, mi.Metadata):
        if info.type == mi.AnyType() and info.extra_json_schema == mi.type_info(RecordData).extra_json_schema:
            return 0
        return _nesting(info.type, seen)
    if isinstance(info, mi.StructType):
        assert info.cls not in seen, f"{info.cls.__name__} is recursive"
        return 1 + max((_nesting(f.type, (*seen, info.cls)) for f in info.fields), default=0)
    if isinstance(info, mi.UnionType):
        return max(_nesting(t, seen) for t in info.types)
    if isinstance(info, (mi.ListType, mi.TupleType, mi.DictType)):
        items = info.item_types if isinstance(info, mi.TupleType) else (
            [info.value_type] if isinstance(info, mi.DictType) else [info.item_type])
        return 1 + max(_nesting(t, seen) for t in items)
    assert not isinstance(info, mi.AnyType), "a request field of any type could nest without a bound"
    return 0


@pytest.mark.parametrize("message", REQUESTS, ids=lambda t: t.__name__)
def test_no_request_nests_deeper_than_the_body_limit(message: type) -> None:
    """What the body limit was for: nothing deeper than MAX_BODY_DEPTH reaches a route. A decoded
    message cannot be deeper than its Struct (unknown fields are skipped while decoding, and a
    body too deep for the decoder is refused), so the bound holds by construction."""
    assert _nesting(mi.type_info(message)) < MAX_BODY_DEPTH


# -- the OpenAPI document is generated from the messages --------------------------------------------


def test_every_body_and_answer_is_a_message() -> None:
    doc = openapi_document()
    for route in ROUTES:
        op = doc["paths"][route.path][route.method.lower()]
        if route.request is not None:
            for media in ("application/json", "application/msgpack"):
                assert op["requestBody"]["content"][media]["schema"] == {
                    "$ref": f"#/components/schemas/{route.request.__name__}"}
        else:
            assert "requestBody" not in op, route
        answer = op["responses"][str(route.status)].get("content", {})  # a redirect has no body
        if route.answer is not None:
            assert answer["application/json"]["schema"] == {"$ref": f"#/components/schemas/{route.answer.__name__}"}
        for status, response in op["responses"].items():
            if "x-error-codes" in response:
                assert response["content"]["application/json"]["schema"] == {
                    "$ref": "#/components/schemas/ErrorResponse"}


def test_components_are_msgspec_schemas_of_the_messages() -> None:
    """No schema written by hand: the components are what msgspec says of the Structs (with
    docstrings dedented), and every reference resolves."""
    doc = openapi_document()
    _, expected = msgspec.json.schema_components([ErrorResponse, *MESSAGES],
                                                 ref_template="#/components/schemas/{name}")
    components = doc["components"]["schemas"]
    assert components.keys() == expected.keys()
    for name, schema in components.items():
        assert {k: v for k, v in schema.items() if k != "description"} == \
               {k: v for k, v in expected[name].items() if k != "description"}, name
    assert {node["$ref"].rsplit("/", 1)[1] for node in _walk(doc) if "$ref" in node} <= components.keys()


def test_the_topic_name_rule_is_the_metadata_one_everywhere() -> None:
    assert TOPIC_NAME_PATTERN == f"^{topic_name.LEGAL_CHARACTERS.pattern}$"
    doc = openapi_document()
    rules = [node for node in _walk(doc) if node.get("pattern") == TOPIC_NAME_PATTERN]
    assert len(rules) >= 15  # bodies, path parameters, group ids
    assert all(node["maxLength"] == topic_name.MAX_NAME_LENGTH and node["minLength"] == 1 for node in rules)
    patterns = {node["pattern"] for node in _walk(doc) if "a-zA-Z0-9" in str(node.get("pattern"))}
    assert patterns == {TOPIC_NAME_PATTERN, TOPIC_LIST_PATTERN}  # the list: names and commas


def _walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def test_kafka_ranges_are_in_the_schema_and_checked_with_their_code() -> None:
    from kraft.api.errors import KraftError
    from kraft.api.messages.topics import CreateTopicRequest

    partitions = openapi_document()["components"]["schemas"]["CreateTopicRequest"]["properties"]["partitions"]
    assert {"minimum": 1, "maximum": MAX_PARTITIONS}.items() <= partitions["anyOf"][0].items()
    with pytest.raises(KraftError) as refused:
        msgspec.json.decode(b'{"name": "t", "partitions": 0}', type=CreateTopicRequest)
    assert refused.value.error_code == "INVALID_PARTITIONS" and "$.partitions" in refused.value.message
