"""deploy/'s Grafana dashboards and provisioning hang together, docs/operations.md explains every
panel and alert, and the PromQL name extraction the Prometheus tests rely on is right. No server
needed: these run everywhere."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).parent))

from prometheus_support import (  # noqa: E402
    DASHBOARDS, DEPLOY, alert_rules, grouping_labels, legend_labels, matcher_labels, metric_names,
    panel_queries, template_variables, variable_queries, with_all_selected,
)

OPERATIONS = DEPLOY.parent / "docs" / "operations.md"
EXPECTED_DASHBOARDS = {"kraft / Cluster overview", "kraft / KRaft quorum", "kraft / Consumer groups"}
# Cluster-wide counts the active controller alone reports: summed over every node, never filtered
# by $instance (a selection without the active controller would read 0).
CLUSTER_WIDE = {f"kafka_controller_kafkacontroller_{name}" for name in (
    "offlinepartitionscount", "globaltopiccount", "globalpartitioncount", "activebrokercount",
    "fencedbrokercount", "preferredreplicaimbalancecount")}
CLUSTER_WIDE_PANELS = {("Active controllers", "kafka_controller_kafkacontroller_activecontrollercount"),
                       ("Metadata lag", "kafka_controller_kafkacontroller_lastcommittedrecordoffset")}
TOPIC_LABELLED = ("kafka_server_brokertopicmetrics_", "kafka_log_log_", "kafka_consumergroup_lag",
                  "kafka_consumergroup_current_offset", "kafka_topic_")
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
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


def test_dashboards_query_the_datasource_variable() -> None:
    datasources = yaml.safe_load((DEPLOY / "grafana/provisioning/datasources/prometheus.yml").read_text())
    provisioned = datasources["datasources"][0]
    assert provisioned["type"] == "prometheus" and provisioned["isDefault"]  # what $datasource picks
    found = dashboards()
    assert {d["title"] for d in found} == EXPECTED_DASHBOARDS
    assert len({d["uid"] for d in found}) == len(found)
    for d in found:
        ids = [p["id"] for p in d["panels"]]
        assert len(ids) == len(set(ids)), d["title"]
        for panel in d["panels"]:
            assert panel["datasource"] == DATASOURCE, panel["title"]
            assert panel["description"] and panel["targets"], panel["title"]
            grid = panel["gridPos"]
            assert grid["x"] + grid["w"] <= 24, panel["title"]
            for target in panel["targets"]:
                assert target["datasource"] == DATASOURCE and metric_names(target["expr"]), target


def test_dashboards_import_like_community_dashboards() -> None:
    """Grafana's import asks for DS_PROMETHEUS; $datasource, $instance and $topic select."""
    for d in dashboards():
        assert d["__inputs"] == [{"name": "DS_PROMETHEUS", "label": "Prometheus", "description": "",
                                  "type": "datasource", "pluginId": "prometheus",
                                  "pluginName": "Prometheus"}], d["title"]
        assert {"type": "datasource", "id": "prometheus", "name": "Prometheus", "version": "1.0.0"} in d["__requires"]
        assert {r["id"] for r in d["__requires"] if r["type"] == "panel"} == {p["type"] for p in d["panels"]}
        variables = template_variables(d)
        uses_topic = any(m.startswith(TOPIC_LABELLED) for p in d["panels"] for t in p["targets"]
                         for m in metric_names(t["expr"]))
        assert list(variables) == ["datasource", "instance"] + (["topic"] if uses_topic else []), d["title"]
        assert variables["datasource"]["type"] == "datasource"
        assert variables["datasource"]["query"] == "prometheus"
        for name in list(variables)[1:]:
            v = variables[name]
            assert v["type"] == "query" and v["datasource"] == DATASOURCE, (d["title"], name)
            assert v["includeAll"] and v["multi"] and v["allValue"] == ".*", (d["title"], name)
            assert v["current"]["value"] == ["$__all"], (d["title"], name)
            assert v["definition"] == v["query"]["query"], (d["title"], name)


def test_panel_queries_filter_by_instance_and_topic() -> None:
    missing = []
    for d in dashboards():
        for panel in d["panels"]:
            for target in panel["targets"]:
                expr = target["expr"]
                selectors = dict(re.findall(r"([A-Za-z_:][A-Za-z0-9_:]*)\s*(\{[^}]*\})?", expr))
                for metric in metric_names(expr):
                    body = selectors.get(metric, "")
                    cluster_wide = metric in CLUSTER_WIDE or (panel["title"], metric) in CLUSTER_WIDE_PANELS
                    if not cluster_wide and 'instance=~"$instance"' not in body:
                        missing.append(f"{panel['title']}: {metric} without $instance")
                    if metric.startswith(TOPIC_LABELLED) and 'topic=~"$topic"' not in body:
                        missing.append(f"{panel['title']}: {metric} without $topic")
                    if cluster_wide and "$instance" in body:
                        missing.append(f"{panel['title']}: cluster-wide {metric} filtered by $instance")
    assert not missing, "\n".join(missing)


def test_panel_and_variable_queries_as_prometheus_gets_them() -> None:
    d = {"templating": {"list": [{"name": "instance", "type": "query", "allValue": ".*"},
                                 {"name": "datasource", "type": "datasource"}]}}
    assert with_all_selected(d, 'up{instance=~"$instance", x=~"${instance}"}') == 'up{instance=~".*", x=~".*"}'
    assert not any("$" in q.expr for q in panel_queries())
    variables = variable_queries()
    assert {label for _, label in variables} == {"instance", "topic"}
    for query, _label in variables:
        assert metric_names(query.expr) and "$" not in query.expr, query


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
