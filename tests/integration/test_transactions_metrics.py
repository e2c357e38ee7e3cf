"""The transaction metrics of a real node's /metrics: the coordinator's partition load time (Kafka's
transaction-coordinator-metrics), its transactional ids by state, the markers it wrote and the
transactions it completed by result, and each partition's last-stable-offset lag (high watermark
minus LSO), which an open transaction raises and its commit brings back to 0."""

from __future__ import annotations

import math

import requests
from prometheus_client.parser import text_string_to_metric_families

from harness import shutdown_all, start_node, wait_for
from kraft.api.client import Admin, Producer
from kraft.api.client.types import NewTopic


def scrape(node) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = requests.get(f"{node.url}/metrics", timeout=10).text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def transaction(node, tid: str, partition: int, records: int) -> Producer:
    p = Producer(node.bootstrap, transactional_id=tid, linger_ms=0)
    p.init_transactions()
    p.begin_transaction()
    for i in range(records):
        p.send("ledger", f"{tid}-{i}".encode(), partition=partition).get(timeout=30)
    return p


def test_transaction_metrics_follow_commits_aborts_and_open_transactions(tmp_path) -> None:
    node = start_node(tmp_path, transaction_state_log_num_partitions=1)
    try:
        with Admin(node.bootstrap) as admin:
            admin.create_topics([NewTopic("ledger", 2, 1)])
        committed = transaction(node, "committer", 0, 1)
        committed.commit_transaction()
        aborted = transaction(node, "aborter", 0, 1)
        aborted.abort_transaction()
        still_open = transaction(node, "holder", 1, 2)

        def settled():
            samples = scrape(node)
            done = value(samples, "kraft_transaction_coordinator_transactions_completed_total", result="ABORT")
            return samples if done == 1 else None

        samples = wait_for(settled, 30, what="the abort to complete")
        completed = "kraft_transaction_coordinator_transactions_completed_total"
        markers = "kraft_transaction_coordinator_markers_written_total"
        assert value(samples, completed, result="COMMIT") == 1
        assert value(samples, markers, result="COMMIT") == 1 and value(samples, markers, result="ABORT") == 1
        ids = "kraft_transaction_coordinator_transactional_ids"
        assert [value(samples, ids, state=s) for s in ("Ongoing", "CompleteCommit", "CompleteAbort", "PrepareCommit")] \
            == [1, 1, 1, 0]
        load_max = value(samples, "kafka_server_transaction_coordinator_metrics_partition_load_time_max")
        assert load_max is not None and not math.isnan(load_max) and load_max >= 0  # loaded a moment ago
        lag = "kraft_log_last_stable_offset_lag"
        assert value(samples, lag, topic="ledger", partition="1") == 2  # two records behind the open one
        assert value(samples, lag, topic="ledger", partition="0") == 0
        still_open.commit_transaction()
        wait_for(lambda: value(scrape(node), lag, topic="ledger", partition="1") == 0, 30,
                 what="the commit to bring the LSO to the high watermark")
        for p in (committed, aborted, still_open):
            p.close()
    finally:
        shutdown_all([node])
