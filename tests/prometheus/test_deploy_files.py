"""deploy/'s Grafana dashboards and provisioning hang together, docs/operations.md explains every
panel and alert, and the PromQL name extraction the Prometheus tests rely on is right. No server
needed: these run everywhere."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).parent))

from prometheus_support import (  # noqa: E402
    DASHBOARDS, DEPLOY, alert_rules, grouping_labels, legend_labels, matcher_labels, metric_names,
)

OPERATIONS = DEPLOY.parent / "docs" / "operations.md"
EXPECTED_DASHBOARDS = {"kraft / Cluster overview", "kraft / KRaft quorum", "kraft / Consumer groups"}
EXPECTED_ALERTS = {"KraftNoActiveController", "KraftMultipleActiveControllers",
                   "KraftUnderReplicatedPartitions", "KraftUnderMinIsrPartitions",
                   "KraftOfflinePartitions", "KraftFencedBrokers", "KraftConsumerLagGrowing",
                   "KraftNodeDown"}


def dashboards() -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(DASHBOARDS.glob("*.json"))]


def test_metric_names_of_promql() -> None:
    expr = ('histogram_quantile(0.99, sum by (request, le) (rate(kafka_network_requestmetrics_'
            'totaltimems_bucket{error!="NONE", request=~"Fetch.*"}[1m] offset 5m)))')
    assert metric_names(expr) == {"kafka_network_requestmetrics_totaltimems_bucket"}
    assert matcher_labels(expr) == {"kafka_network_requestmetrics_totaltimems_bucket": {"error", "request"}}
    assert grouping_labels(expr) == {"request", "le"}
    joined = ("scalar(max(a_total)) - b_offset and on(instance) c{job=\"x\"} > 1e3 "
              "or sum without (topic) (d) unless vector(0)")
    assert metric_names(joined) == {"a_total", "b_offset", "c", "d"}
    assert grouping_labels(joined) == {"instance", "topic"}
    assert metric_names('up{job="by (x)"} == 0') == {"up"}
    assert legend_labels("{{consumergroup}} {{ topic }}-{{partition}}") == {"consumergroup", "topic", "partition"}


def test_dashboards_are_provisioned_against_the_provisioned_datasource() -> None:
    datasources = yaml.safe_load((DEPLOY / "grafana/provisioning/datasources/prometheus.yml").read_text())
    uid = datasources["datasources"][0]["uid"]
    found = dashboards()
    assert {d["title"] for d in found} == EXPECTED_DASHBOARDS
    assert len({d["uid"] for d in found}) == len(found)
    for d in found:
        ids = [p["id"] for p in d["panels"]]
        assert len(ids) == len(set(ids)), d["title"]
        for panel in d["panels"]:
            assert panel["datasource"]["uid"] == uid, panel["title"]
            assert panel["description"] and panel["targets"], panel["title"]
            grid = panel["gridPos"]
            assert grid["x"] + grid["w"] <= 24, panel["title"]
            for target in panel["targets"]:
                assert target["datasource"]["uid"] == uid and metric_names(target["expr"]), target


def test_compose_mounts_what_provisioning_reads() -> None:
    providers = yaml.safe_load((DEPLOY / "grafana/provisioning/dashboards/kraft.yml").read_text())
    path = providers["providers"][0]["options"]["path"]
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    grafana_volumes = compose["services"]["grafana"]["volumes"]
    assert f"./grafana/dashboards:{path}:ro" in grafana_volumes
    prometheus = compose["services"]["prometheus"]
    config = next(a for a in prometheus["command"] if a.startswith("--config.file="))
    assert (DEPLOY / "prometheus" / Path(config.split("=", 1)[1]).name).is_file()


def test_alerts_are_the_documented_set() -> None:
    assert {rule["alert"] for rule in alert_rules()} == EXPECTED_ALERTS
    for rule in alert_rules():
        assert rule["labels"]["severity"] in ("warning", "critical")
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]


def test_operations_doc_explains_every_panel_and_alert() -> None:
    text = OPERATIONS.read_text()
    missing = [f"panel {p['title']!r}" for d in dashboards() for p in d["panels"]
               if f"**{p['title']}**" not in text]
    missing += [f"alert {name}" for name in sorted(EXPECTED_ALERTS) if f"`{name}`" not in text]
    assert not missing, "docs/operations.md does not explain: " + ", ".join(missing)
