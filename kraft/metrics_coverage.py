"""The metric names Kafka operators' dashboards query that a kraft node does not serve, and why.

The names are those of Strimzi's community Grafana dashboards (Kafka, KRaft, Kafka Exporter) and
its Prometheus rules for Kafka, listed in tests/fixtures/strimzi_metric_names.txt. Every name of
that list is served by a kraft node (or, for `up`, by Prometheus for every node it scrapes) unless
it is a key of UNSERVED: a concept kraft does not have, or a metric of Kubernetes rather than of
the broker.

docs/operations.md's table "Names Kafka dashboards use that kraft does not serve" is this dict
(`markdown_table()` prints it); tests/unit/metrics/test_strimzi_names.py holds the two equal, and
tests/prometheus checks against a live cluster that every other name is served and none of these.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Unserved:
    reason: str  # markdown, as the docs table shows it


_KUBERNETES = "a metric of Kubernetes (the kubelet's cAdvisor), not of the broker"
_NO_JVM = "no JVM (a node is one Python process)"
_ONE_LOOP = ("no thread pools: one asyncio event loop does a node's network I/O and request handling; "
             "when it is saturated, `kraft_event_loop_lag_seconds` grows")
UNSERVED: dict[str, Unserved] = {
    "container_cpu_usage_seconds_total": Unserved(f"{_KUBERNETES}; a node serves `process_cpu_seconds_total`"),
    "container_memory_usage_bytes": Unserved(f"{_KUBERNETES}; a node serves `process_resident_memory_bytes`"),
    "container_last_seen": Unserved(f"{_KUBERNETES}; a node that cannot be scraped has `up` 0"),
    "kubelet_volume_stats_available_bytes": Unserved(
        "a metric of Kubernetes (the kubelet, per persistent volume claim); elsewhere node_exporter's "
        "`node_filesystem_avail_bytes` of the data directory's filesystem"),
    "kubelet_volume_stats_capacity_bytes": Unserved(
        "a metric of Kubernetes (the kubelet, per persistent volume claim); elsewhere node_exporter's "
        "`node_filesystem_size_bytes`"),
    "jvm_memory_bytes_used": Unserved(f"{_NO_JVM}: `process_resident_memory_bytes`"),
    "jvm_gc_collection_seconds_count": Unserved(
        f"{_NO_JVM}: Python's collector runs are `python_gc_collections_total`"),
    "jvm_gc_collection_seconds_sum": Unserved(
        f"{_NO_JVM}: Python's collector records no time (its runs are `python_gc_collections_total`)"),
    "jvm_threads_current": Unserved(
        f"{_NO_JVM}: its threads are the event loop's, pysyncobj's Raft thread and disk I/O workers"),
    "kafka_network_socketserver_networkprocessoravgidle_percent": Unserved(_ONE_LOOP),
    "kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent": Unserved(_ONE_LOOP),
}


def markdown_table() -> str:
    """docs/operations.md's table of UNSERVED."""
    rows = ["| metric | why kraft does not serve it |", "|---|---|"]
    rows += [f"| `{name}` | {entry.reason} |" for name, entry in sorted(UNSERVED.items())]
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
