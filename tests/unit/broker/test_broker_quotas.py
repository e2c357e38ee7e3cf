"""Client quota enforcement (kraft/broker/quotas.py): Kafka's rate over sampled windows and its
throttle time, with the clock passed in."""

from __future__ import annotations

from types import MappingProxyType

from kraft.broker.quotas import FETCH, PRODUCE, REQUEST, ClientQuotaManager, Rate, quota_user
from kraft.metadata.client_quotas import DEFAULT, ClientQuotasImage


def quotas(**entities: dict[str, float]) -> ClientQuotasImage:
    """user:client keys, e.g. {"alice:": {...}, ":app": {...}}."""
    out = {}
    for key, values in entities.items():
        user, client = key.split("__")
        out[(user or None, client or None)] = MappingProxyType(values)
    return ClientQuotasImage(MappingProxyType(out))


def test_rate_spans_at_least_num_minus_one_windows() -> None:
    rate = Rate(1000, 3)
    rate.record(1000, 0)
    assert rate.span_ms(0) == 2000 and rate.measure(0) == 500.0
    rate.record(1000, 2500)
    assert rate.measure(2500) == 2000 * 1000 / 2500
    assert rate.measure(10_000) == 0.0  # every window expired


def test_no_quota_no_throttle_and_kafkas_formula_above_it() -> None:
    image = quotas(**{"alice__": {"producer_byte_rate": 1000.0}})
    m = ClientQuotaManager(lambda: image, window_ms=1000, num=2)
    assert m.record(PRODUCE, "User:bob", "app", 10**6, 0) == 0
    assert m.record(FETCH, "User:alice", "app", 10**6, 0) == 0  # only a producer quota is set
    # 3000 bytes over the minimum 1 s span: rate 3000 B/s, (3000 - 1000) / 1000 * 1000 ms
    assert m.record(PRODUCE, "User:alice", "app", 3000, 0) == 2000
    assert quota_user("User:alice") == "alice"


def test_a_steady_producer_is_held_to_its_rate() -> None:
    """Sending whenever the previous answer (delayed by its throttle) came back converges to the quota."""
    image = quotas(**{"__slow": {"producer_byte_rate": 10_000.0}})
    m = ClientQuotaManager(lambda: image, window_ms=1000, num=11)
    now, sent = 0, 0
    while now < 120_000:
        now += m.record(PRODUCE, "User:ANONYMOUS", "slow", 1000, now) + 1  # 1 ms to serve a request
        sent += 1000
    assert abs(sent / (now / 1000) - 10_000) / 10_000 < 0.1  # the 10 s burst credit fades


def test_entities_share_a_rate_and_request_percentage_counts_time() -> None:
    image = quotas(**{f"{DEFAULT}__": {"request_percentage": 10.0}})  # 100 ms of work per second
    m = ClientQuotaManager(lambda: image, window_ms=1000, num=2)
    assert m.record(REQUEST, "User:a", "x", 50, 0) == 0
    # another user under the same default entity shares its rate: 150 ms in 1 s is over 100 ms
    assert m.record(REQUEST, "User:b", "y", 100, 10) == 500
    [(kind, tags, rate, throttle)] = list(m.samples(10))
    assert (kind, tags, rate) == (REQUEST, {"user": DEFAULT, "client_id": ""}, 15.0) and throttle == 250.0
