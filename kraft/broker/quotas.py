"""Client quota enforcement (Kafka's ClientQuotaManager): produce and fetch byte rates and the
request-time percentage, per quota entity, throttled as Kafka throttles.

Each quota entity (metadata/client_quotas.py: the most specific of user+client, user, client,
defaults that sets the quota) has a rate over `quota.window.num` windows of
`quota.window.size.seconds` (Kafka's SampledStat `Rate`: the span is at least `num - 1` full
windows, so a new client gets that much burst). After recording a request, a rate above the bound
gives a throttle time of `(rate - bound) / bound * span` (Kafka's `throttleTime`), capped at the
whole sampled span; the services report it as `throttle_time_ms` and the listener delays its answer by it.
The state here is touched only on the event loop; time is passed in (`now_ms`).

Metrics, named as jmx_exporter spells Kafka's `kafka.server:type=Produce|Fetch|Request,user=,client-id=`:
`kafka_server_produce_throttle_time`, `kafka_server_fetch_throttle_time`,
`kafka_server_request_throttle_time` (average throttle in ms over the window, per entity),
`kafka_server_produce_byte_rate`, `kafka_server_fetch_byte_rate`, `kafka_server_request_request_time`
(the measured rate, per entity).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kraft.metadata.client_quotas import (
    CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE, ClientQuotasImage, Entity,
)
from kraft.server.quotas import FETCH, PRODUCE, REQUEST

QUOTA_KEYS = {PRODUCE: PRODUCER_BYTE_RATE, FETCH: CONSUMER_BYTE_RATE, REQUEST: REQUEST_PERCENTAGE}
RATE_METRICS = {PRODUCE: "byte_rate", FETCH: "byte_rate", REQUEST: "request_time"}
MAX_SENSORS = 10_000  # quota entities tracked at once; the idlest is dropped past that


class Rate:
    """A rate per second over `num` windows of `window_ms`, as Kafka's SampledStat Rate measures it."""

    def __init__(self, window_ms: int, num: int) -> None:
        assert window_ms > 0 and num >= 2
        self.window_ms = window_ms
        self.num = num
        self._samples: deque[list[int | float]] = deque()  # [window start ms, total]

    def _purge(self, now_ms: int) -> None:
        while self._samples and self._samples[0][0] <= now_ms - self.num * self.window_ms:
            self._samples.popleft()

    def record(self, value: float, now_ms: int) -> None:
        self._purge(now_ms)
        if not self._samples or now_ms >= self._samples[-1][0] + self.window_ms:
            self._samples.append([now_ms, 0])
        self._samples[-1][1] += value

    def span_ms(self, now_ms: int) -> int:
        """The time the rate is measured over: at least `num - 1` full windows."""
        elapsed = now_ms - int(self._samples[0][0]) if self._samples else 0
        return max(elapsed, (self.num - 1) * self.window_ms)

    def measure(self, now_ms: int) -> float:
        self._purge(now_ms)
        total = sum(s[1] for s in self._samples)
        return total * 1000.0 / self.span_ms(now_ms)

    def last_ms(self) -> int:
        return int(self._samples[-1][0]) if self._samples else -1


@dataclass
class Sensor:
    """One quota entity of one quota type: its rate and the throttle times it got."""

    rate: Rate
    throttle: Rate  # throttle ms recorded per request, for the average
    requests: Rate
    last_used_ms: int = 0
    tags: dict[str, str] = field(default_factory=dict)


def quota_user(principal: str) -> str:
    """Kafka's quota user: the principal's name (`User:alice` -> `alice`)."""
    kind, sep, name = principal.partition(":")
    return name if sep and kind == "User" else principal


class ClientQuotaManager:
    """Throttle decisions for every quota type; `record` is the only state change."""

    def __init__(self, quotas: Callable[[], ClientQuotasImage], window_ms: int = 1000, num: int = 11) -> None:
        self._quotas = quotas
        self.window_ms = window_ms
        self.num = num
        self._sensors: dict[tuple[str, Entity], Sensor] = {}

    def _sensor(self, kind: str, entity: Entity, now_ms: int) -> Sensor:
        key = (kind, entity)
        sensor = self._sensors.get(key)
        if sensor is None:
            if len(self._sensors) >= MAX_SENSORS:
                idlest = min(self._sensors, key=lambda k: self._sensors[k].last_used_ms)
                del self._sensors[idlest]
            user, client_id = entity
            sensor = self._sensors[key] = Sensor(
                Rate(self.window_ms, self.num), Rate(self.window_ms, self.num), Rate(self.window_ms, self.num),
                tags={"user": user or "", "client_id": client_id or ""})
        sensor.last_used_ms = now_ms
        return sensor

    def record(self, kind: str, principal: str, client_id: str, value: float, now_ms: int) -> int:
        """Record `value` (bytes, or request time in ms for REQUEST) and answer the throttle time
        in ms (0 when the entity has no quota of this kind or is within it)."""
        found = self._quotas().quota_entity(quota_user(principal), client_id, QUOTA_KEYS[kind])
        if found is None:
            return 0
        entity, bound = found
        if kind == REQUEST:  # a percentage of one thread's time: ms of work per second / 10
            bound *= 10.0
        sensor = self._sensor(kind, entity, now_ms)
        sensor.rate.record(value, now_ms)
        observed = sensor.rate.measure(now_ms)
        throttle_ms = 0
        if observed > bound:
            span = sensor.rate.span_ms(now_ms)
            throttle_ms = min(round((observed - bound) / bound * span), self.num * self.window_ms)
        sensor.throttle.record(throttle_ms, now_ms)
        sensor.requests.record(1, now_ms)
        assert throttle_ms >= 0
        return throttle_ms

    def samples(self, now_ms: int) -> Iterator[tuple[str, dict[str, str], float, float]]:
        """(kind, tags, rate, average throttle ms) of every tracked entity, for the metrics."""
        for (kind, _), sensor in list(self._sensors.items()):
            requests = sensor.requests.measure(now_ms)
            avg_throttle = sensor.throttle.measure(now_ms) / requests if requests > 0 else 0.0
            rate = sensor.rate.measure(now_ms) / (10.0 if kind == REQUEST else 1.0)
            yield kind, sensor.tags, rate, avg_throttle


class QuotaMetrics(Collector):
    """The throttle-time and rate gauges, read from the manager at scrape time."""

    def __init__(self, manager: ClientQuotaManager, clock_ms: Callable[[], int],
                 registry: CollectorRegistry | None = None) -> None:
        self.manager = manager
        self.clock_ms = clock_ms
        if registry is not None:
            registry.register(self)

    def describe(self) -> list[Metric]:
        return list(self._families().values())

    def collect(self) -> Iterator[Metric]:
        families = self._families()
        for kind, tags, rate, throttle in self.manager.samples(self.clock_ms()):
            families[f"{kind}_throttle_time"].add_metric([tags["user"], tags["client_id"]], throttle)
            families[f"{kind}_{RATE_METRICS[kind]}"].add_metric([tags["user"], tags["client_id"]], rate)
        yield from families.values()

    @staticmethod
    def _families() -> dict[str, GaugeMetricFamily]:
        labels = ["user", "client_id"]
        out = {}
        for kind, what in RATE_METRICS.items():
            out[f"{kind}_throttle_time"] = GaugeMetricFamily(
                f"kafka_server_{kind}_throttle_time",
                f"Average {kind} throttle time in ms over the quota window, per quota entity.", labels=labels)
            unit = "percent of one thread" if kind == REQUEST else "bytes per second"
            out[f"{kind}_{what}"] = GaugeMetricFamily(
                f"kafka_server_{kind}_{what}", f"Measured {kind} rate ({unit}), per quota entity.", labels=labels)
        return out
