"""Pure parts of the connector, without Spark: offsets JSON, option parsing, rate limit, planning."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, strategies as st

from kraft.api.errors import KraftError
from kraft.spark_connector.offsets import from_json, parse_assign, plan_ranges, rate_limit, to_json_text
from kraft.spark_connector.options import parse_sink_options, parse_source_options

BOOT = {"kraft.bootstrap.servers": "127.0.0.1:9092"}
topics = st.text(alphabet="abcxyz-._", min_size=1, max_size=5)
offsets_maps = st.dictionaries(st.tuples(topics, st.integers(0, 50)), st.integers(0, 10**12), max_size=12)


@given(offsets_maps)
def test_offsets_json_round_trips_and_is_canonical(offsets):
    text = to_json_text(offsets)
    assert from_json(text) == offsets
    # canonical: the same map built in any order gives the same text, partitions sorted numerically
    assert to_json_text(dict(reversed(list(offsets.items())))) == text
    for partitions in json.loads(text).values():
        assert list(partitions) == sorted(partitions, key=int)
    assert list(json.loads(text)) == sorted(json.loads(text))


def test_partitions_sort_numerically_not_as_strings():
    assert to_json_text({("t", 10): 1, ("t", 9): 2, ("t", 2): 3}) == '{"t":{"2":3,"9":2,"10":1}}'


@pytest.mark.parametrize("text, words", [
    ("{nope", "not valid JSON"),
    ('["t"]', "JSON object"),
    ('{"t": {"x": 1}}', "partitions are non-negative"),
    ('{"t": {"0": "1"}}', "offsets integers"),
    ('{"t": 5}', "must map to"),
])
def test_bad_offsets_json_is_a_clear_error(text, words):
    with pytest.raises(KraftError) as e:
        from_json(text, "startingOffsets")
    assert e.value.error_code == "INVALID_CONFIG" and words in e.value.message and "startingOffsets" in e.value.message


def test_assign_parses_and_rejects_garbage():
    assert parse_assign('{"b":[1,0],"a":[2]}') == [("a", 2), ("b", 0), ("b", 1)]
    for bad in ("[]", '{"a": [-1]}', '{"a": "0"}', "{}"):
        with pytest.raises(KraftError):
            parse_assign(bad)


@given(st.dictionaries(st.tuples(topics, st.integers(0, 5)), st.tuples(st.integers(0, 1000), st.integers(0, 1000)),
                       min_size=1, max_size=8), st.integers(1, 2000))
def test_rate_limit_stays_in_range_and_progresses(spans, limit):
    start = {tp: min(a, b) for tp, (a, b) in spans.items()}
    latest = {tp: max(a, b) for tp, (a, b) in spans.items()}
    end = rate_limit(start, latest, limit)
    assert set(end) == set(latest)
    assert all(start[tp] <= end[tp] <= latest[tp] for tp in end)
    taken = sum(end[tp] - start[tp] for tp in end)
    backlog = sum(latest[tp] - start[tp] for tp in end)
    assert taken <= limit + len(end)  # small partitions round up (Kafka's rule)
    assert taken == backlog if backlog <= limit else taken >= min(limit, backlog) - len(end)
    if backlog:
        assert taken > 0


def test_rate_limit_prorates_like_kafka():
    start = {("t", 0): 0, ("t", 1): 0}
    assert rate_limit(start, {("t", 0): 900, ("t", 1): 100}, 100) == {("t", 0): 90, ("t", 1): 10}
    assert rate_limit(start, {("t", 0): 1000, ("t", 1): 1}, 10) == {("t", 0): 9, ("t", 1): 1}


@given(st.dictionaries(st.tuples(topics, st.integers(0, 5)), st.tuples(st.integers(0, 300), st.integers(0, 300)),
                       min_size=1, max_size=6), st.one_of(st.none(), st.integers(1, 40)))
def test_planned_ranges_cover_every_offset_once(spans, min_partitions):
    start = {tp: min(a, b) for tp, (a, b) in spans.items()}
    end = {tp: max(a, b) for tp, (a, b) in spans.items()}
    ranges = plan_ranges(start, end, min_partitions)
    covered = sorted((r.topic, r.partition, o) for r in ranges for o in range(r.from_offset, r.until_offset))
    expected = sorted((t, p, o) for (t, p) in end for o in range(start[(t, p)], end[(t, p)]))
    assert covered == expected
    assert all(r.size > 0 for r in ranges)
    total = len(expected)
    if min_partitions and total >= min_partitions:
        assert len(ranges) >= min(min_partitions, total) // 2


def test_source_options_kafka_names_and_defaults():
    streaming = parse_source_options({**BOOT, "subscribe": "b, a", "maxOffsetsPerTrigger": "10"}, streaming=True)
    assert streaming.subscription.topics == ("a", "b")
    assert streaming.starting.kind == "latest" and streaming.max_offsets_per_trigger == 10
    assert streaming.fail_on_data_loss and not streaming.include_headers
    batch = parse_source_options({**BOOT, "subscribePattern": "t-.*", "failOnDataLoss": "false"}, streaming=False)
    assert batch.starting.kind == "earliest" and batch.ending.kind == "latest" and not batch.fail_on_data_loss
    spec = parse_source_options({**BOOT, "assign": '{"t":[0]}', "startingOffsets": '{"t":{"0":-2}}'}, False)
    assert spec.starting.offsets == {("t", 0): -2}
    # Spark lower-cases option names
    lower = parse_source_options({"kraft.bootstrap.servers": "h:1", "subscribe": "a", "startingtimestamp": "5"}, True)
    assert lower.starting.kind == "timestamp" and lower.starting.timestamp == 5


@pytest.mark.parametrize("options, words", [
    ({"subscribe": "a", "kafka.bootstrap.servers": "h:1", "bogus": "1"}, "unknown option(s) for the kraft source: bogus, kafka.bootstrap.servers"),
    ({"subscribe": "a"}, "kraft.bootstrap.servers: is required"),
    ({**BOOT}, "exactly one of the options assign, subscribe, subscribePattern"),
    ({**BOOT, "subscribe": "a", "assign": '{"a":[0]}'}, "got assign, subscribe"),
    ({**BOOT, "subscribePattern": "("}, "not a valid regular expression"),
    ({**BOOT, "subscribe": "a", "failOnDataLoss": "maybe"}, "expected true or false"),
    ({**BOOT, "subscribe": "a", "maxOffsetsPerTrigger": "0"}, "must be at least 1"),
    ({**BOOT, "subscribe": "a", "endingOffsets": "latest"}, "batch queries only"),
    ({"kraft.bootstrap.servers": "nohostport", "subscribe": "a"}, "is not host:port"),
    ({**BOOT, "subscribe": "a", "startingOffsets": '{"a":{"0":-3}}'}, "below -2"),
])
def test_bad_streaming_source_options(options, words):
    with pytest.raises(KraftError) as e:
        parse_source_options(options, streaming=True)
    assert e.value.error_code == "INVALID_CONFIG"
    assert words in e.value.message


def test_batch_rules_on_latest_and_earliest():
    with pytest.raises(KraftError, match="latest .* not allowed for batch"):
        parse_source_options({**BOOT, "subscribe": "a", "startingOffsets": "latest"}, streaming=False)
    with pytest.raises(KraftError, match="earliest .* not allowed as an ending"):
        parse_source_options({**BOOT, "subscribe": "a", "endingOffsets": '{"a":{"0":-2}}'}, streaming=False)


def test_sink_options():
    options = parse_sink_options({**BOOT, "topic": "out", "kraft.acks": "-1", "exactlyOnce": "true"}, streaming=True)
    assert options.acks == "all" and options.exactly_once and options.topic == "out"
    with pytest.raises(KraftError, match="applies to streaming writes"):
        parse_sink_options({**BOOT, "exactlyOnce": "true"}, streaming=False)
    with pytest.raises(KraftError, match="needs kraft.acks=all"):
        parse_sink_options({**BOOT, "exactlyOnce": "true", "kraft.acks": "1"}, streaming=True)
    with pytest.raises(KraftError, match="kraft.compression.type"):
        parse_sink_options({**BOOT, "kraft.compression.type": "brotli"}, streaming=False)
    txn = {**BOOT, "kraft.transactional.id.prefix": "etl-", "kraft.transaction.timeout.ms": "90000"}
    options = parse_sink_options(txn, streaming=True)
    assert (options.transactional_id_prefix, options.transaction_timeout_ms, options.exactly_once) == ("etl-", 90000, False)
    for bad, streaming, words in (({}, False, "applies to streaming writes"),
                                  ({"exactlyOnce": "true"}, True, "choose one"),
                                  ({"kraft.acks": "1"}, True, "needs kraft.acks=all"),
                                  ({"kraft.transaction.timeout.ms": "0"}, True, "kraft.transaction.timeout.ms")):
        with pytest.raises(KraftError, match=words):
            parse_sink_options({**txn, **bad}, streaming=streaming)
    with pytest.raises(KraftError, match="unknown option.*subscribe"):
        parse_sink_options({**BOOT, "subscribe": "x"}, streaming=False)
    # the transactional sink's test hook is no option: no query's configuration reaches it
    with pytest.raises(KraftError, match="unknown option.*kraft.test.commit.gate"):
        parse_sink_options({**txn, "kraft.test.commit.gate": "/tmp/gate"}, streaming=True)
