"""Helpers of the Prometheus tests: the PromQL of every Grafana panel and alert rule in deploy/,
the metric and label names an expression uses, the names Strimzi's dashboards and rules use, and a
real Prometheus server in a temp dir."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import requests
import yaml

from harness import free_port, wait_for

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
DASHBOARDS = DEPLOY / "grafana" / "dashboards"
RULES = DEPLOY / "prometheus" / "rules" / "kraft-alerts.yml"
RULE_TESTS = DEPLOY / "prometheus" / "rules" / "kraft-alerts.test.yml"
STRIMZI_NAMES = DEPLOY.parent / "tests" / "fixtures" / "strimzi_metric_names.txt"
FILE_SD_CONFIG = DEPLOY / "prometheus" / "prometheus-file-sd.yml"
STATIC_CONFIG = DEPLOY / "prometheus" / "prometheus.yml"
PROMETHEUS_BINARIES = ("/usr/bin/prometheus", "prometheus")
PROMTOOL_BINARIES = ("/usr/bin/promtool", "promtool")
INSTALL_HINT = ("needs Debian's prometheus package (apt-get install -y prometheus; .ci/run installs "
                "it), or deselect with -m 'not prometheus'")


# -- what deploy/ queries -------------------------------------------------------------------------


@dataclass(frozen=True)
class Query:
    where: str  # "dashboard <title> / panel <title>" or "alert <name>"
    expr: str
    legend: str = ""


def template_variables(dashboard: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in dashboard.get("templating", {}).get("list", [])}


def with_all_selected(dashboard: dict[str, Any], expr: str) -> str:
    """`expr` as Grafana sends it with every query variable on All (its `allValue`)."""
    for name, variable in template_variables(dashboard).items():
        if variable["type"] == "query":
            for spelling in (f"${{{name}}}", f"${name}"):
                expr = expr.replace(spelling, variable["allValue"])
    return expr


def panel_queries() -> list[Query]:
    """Every panel target's PromQL, with the dashboard's variables on All."""
    queries = []
    for path in sorted(DASHBOARDS.glob("*.json")):
        dashboard = json.loads(path.read_text())
        for panel in dashboard["panels"]:
            for target in panel.get("targets", []):
                queries.append(Query(f"{dashboard['title']} / {panel['title']}",
                                     with_all_selected(dashboard, target["expr"]),
                                     target.get("legendFormat", "")))
    return queries


_LABEL_VALUES = re.compile(r"^label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\)$")


def variable_queries() -> list[tuple[Query, str]]:
    """(the selector, the label) of every `label_values(selector, label)` query variable."""
    found = []
    for path in sorted(DASHBOARDS.glob("*.json")):
        dashboard = json.loads(path.read_text())
        for name, variable in template_variables(dashboard).items():
            if variable["type"] != "query":
                continue
            query = variable["query"]["query"] if isinstance(variable["query"], dict) else variable["query"]
            match = _LABEL_VALUES.match(query.strip())
            assert match, f"{dashboard['title']} / ${name}: {query!r} is not label_values(selector, label)"
            found.append((Query(f"{dashboard['title']} / variable ${name}", match.group(1)), match.group(2)))
    return found


def alert_rules() -> list[dict[str, Any]]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def alert_queries() -> list[Query]:
    return [Query(f"alert {rule['alert']}", rule["expr"]) for rule in alert_rules()]


def strimzi_names() -> dict[str, list[str]]:
    """The metric names of Strimzi's Kafka, KRaft and Kafka Exporter dashboards and Kafka alert
    rules (tests/fixtures/strimzi_metric_names.txt): name -> the Strimzi files that use it."""
    names = {}
    for line in STRIMZI_NAMES.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, sources = line.split("\t")
            names[name] = sources.split()
    return names


# -- names in PromQL ------------------------------------------------------------------------------

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_MATCHERS = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)?\s*\{([^}]*)\}")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_IDENTIFIER = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
             "bool", "offset", "inf", "nan"}


def metric_names(expr: str) -> set[str]:
    """Metric names an expression selects: identifiers that are neither functions, keywords,
    label names, durations nor numbers."""
    text = _STRING.sub('""', expr)
    text = _GROUPING.sub(" ", text)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    names = set()
    for match in _IDENTIFIER.finditer(text):
        before = text[match.start() - 1] if match.start() else " "
        if before.isdigit() or before == ".":  # 5m, 1e3
            continue
        if text[match.end():].lstrip().startswith("(") or match.group(0).lower() in _KEYWORDS:
            continue
        names.add(match.group(0))
    return names


def matcher_labels(expr: str) -> dict[str, set[str]]:
    """Label names in `metric{...}` matchers, per metric."""
    text = _STRING.sub('""', expr)
    found: dict[str, set[str]] = {}
    for metric, body in _MATCHERS.findall(text):
        labels = set(re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)", body))
        found.setdefault(metric, set()).update(labels)
    return found


def grouping_labels(expr: str) -> set[str]:
    """Label names of by/without/on/ignoring/group_left/group_right clauses."""
    labels: set[str] = set()
    for _, body in _GROUPING.findall(_STRING.sub('""', expr)):
        labels.update(name.strip() for name in body.split(",") if name.strip())
    return labels


def legend_labels(legend: str) -> set[str]:
    return set(re.findall(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}", legend))


# -- a real Prometheus ----------------------------------------------------------------------------


def find_binary(candidates: Iterable[str]) -> str | None:
    for candidate in candidates:
        path = candidate if Path(candidate).is_file() else shutil.which(candidate)
        if path:
            return path
    return None


_SECURED_LINE = re.compile(r"^(\s+)# ((?:scheme|tls_config|basic_auth|  [a-z_]+):.*)$")


def secured_config_text(config_text: str) -> str:
    """A deploy/ Prometheus config with its commented-out lines for a secured cluster (TLS and a
    user with Describe on the cluster: docs/security.md, "Metrics") turned on."""
    return "\n".join(_SECURED_LINE.sub(r"\1\2", line) for line in config_text.splitlines()) + "\n"


class Prometheus:
    """A Prometheus started from deploy/'s file-SD config (scrape and evaluation every second,
    the shipped alert rules) on a free port, scraping the `targets` (host:port); `config_text`
    replaces the shipped config's text, `scrape` overrides settings of its kraft job."""

    def __init__(self, binary: str, root: Path, targets: list[str], config_text: str | None = None,
                 scrape: dict[str, Any] | None = None) -> None:
        self.root = root
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = yaml.safe_load(config_text if config_text is not None else FILE_SD_CONFIG.read_text())
        config["scrape_configs"][0].update(scrape or {})
        config["global"].update(scrape_interval="1s", scrape_timeout="1s", evaluation_interval="1s")
        config["rule_files"] = [str(RULES)]
        (root / "targets").mkdir(parents=True, exist_ok=True)
        (root / "targets" / "kraft.json").write_text(json.dumps([{"targets": targets}]))
        config["scrape_configs"][0]["file_sd_configs"][0]["files"] = [str(root / "targets" / "*.json")]
        (root / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.log = open(root / "prometheus.log", "wb")
        self.proc = subprocess.Popen(
            [binary, f"--config.file={root / 'prometheus.yml'}", f"--storage.tsdb.path={root / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self.log, stderr=subprocess.STDOUT,
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join((self.root / "prometheus.log").read_text(errors="replace").splitlines()[-lines:])

    def api(self, path: str, **params: Any) -> Any:
        if self.proc.poll() is not None:
            raise RuntimeError(f"prometheus exited with {self.proc.returncode}:\n{self.log_tail()}")
        response = requests.get(f"{self.url}/api/v1/{path}", params=params, timeout=10)
        body = response.json()
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        return self.api("query", query=expr)["result"]

    def scalar(self, expr: str) -> float | None:
        result = self.query(expr)
        return float(result[0]["value"][1]) if len(result) == 1 else None

    def wait_ready(self, timeout: float = 30.0) -> None:
        wait_for(lambda: requests.get(f"{self.url}/-/ready", timeout=2).status_code == 200,
                 timeout, interval=0.2, what="prometheus ready")

    def wait_targets_up(self, count: int, timeout: float = 30.0) -> None:
        def up() -> bool:
            active = self.api("targets")["activeTargets"]
            return len(active) == count and all(t["health"] == "up" for t in active)
        wait_for(up, timeout, interval=0.2, what=f"{count} kraft targets up")

    def metric_names(self) -> set[str]:
        return set(self.api("label/__name__/values"))

    def series_labels(self, metric: str) -> set[str]:
        return {label for series in self.api("series", **{"match[]": metric}) for label in series}
