"""A real Prometheus scraping a secured node (SASL_SSL, StandardAuthorizer) through deploy/'s
file-SD config with its commented lines for a secured cluster turned on, as docs/security.md
("Metrics") says to: as the user given Describe on the cluster the target is up and every topic's
series is stored; as a user without that permission the scrape is refused (403, the target down)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from kraft.api.client import Admin  # noqa: E402
from harness import shutdown_all, wait_for  # noqa: E402
from prometheus_support import (  # noqa: E402
    FILE_SD_CONFIG, INSTALL_HINT, PROMETHEUS_BINARIES, Prometheus, find_binary, secured_config_text,
)
from security_support import SecureNode, make_certs, tls_overrides  # noqa: E402

pytestmark = [pytest.mark.prometheus, pytest.mark.cluster]

ADMIN = ("admin", "admin-secret-0xE1")
USERS = {"prometheus": "prometheus-secret-0xE2", "mallory": "mallory-secret-0xE3"}


def scraping_as(binary: str, root: Path, node: SecureNode, user: str) -> Prometheus:
    password_file = root / f"{user}.password"
    password_file.write_text(USERS[user] + "\n")
    text = (secured_config_text(FILE_SD_CONFIG.read_text())
            .replace("/etc/prometheus/kraft-ca.pem", str(node.ca))
            .replace("/etc/prometheus/kraft-prometheus.password", str(password_file))
            .replace("username: prometheus", f"username: {user}"))
    prom = Prometheus(binary, root / user, [f"localhost:{node.port}"], config_text=text)
    prom.wait_ready()
    return prom


def target(prom: Prometheus) -> dict | None:
    active = prom.api("targets")["activeTargets"]
    return active[0] if len(active) == 1 and active[0]["health"] != "unknown" else None


def test_prometheus_scrapes_a_secured_node_as_a_user_with_describe_on_the_cluster(tmp_path):
    binary = find_binary(PROMETHEUS_BINARIES)
    if binary is None:
        pytest.fail(f"no prometheus binary: the Prometheus tests {INSTALL_HINT}")
    certs_dir = make_certs(tmp_path / "certs", [1])
    node = SecureNode(node_id=1, data_dir=tmp_path / "data-1", ca=certs_dir / "ca.pem", auth=ADMIN,
                      overrides=tls_overrides(certs_dir, 1, "SASL_SSL", **{
                          "sasl.enabled.mechanisms": "SCRAM-SHA-256,PLAIN", "super.users": "User:admin",
                          "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}),
                      args=["--add-scram", f"SCRAM-SHA-256=[name={ADMIN[0]},password={ADMIN[1]}]"])
    proms: list[Prometheus] = []
    try:
        node.start()
        node.wait_ready(30)
        wait_for(lambda: node.session().get(f"{node.url}/v1/metadata", timeout=5).status_code == 200, 30,
                 what="the admin credential in the metadata log")
        with Admin(f"localhost:{node.port}", security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-256",
                   sasl_plain_username=ADMIN[0], sasl_plain_password=ADMIN[1], ssl_cafile=str(node.ca)) as admin:
            admin.alter_user_scram_credentials(upsertions=[(u, "SCRAM-SHA-256", p, 4096) for u, p in USERS.items()])
            admin.create_topic("payroll", 1, 1)
            admin.create_acls([{"resource_type": "CLUSTER", "resource_name": "kafka-cluster",
                                "pattern_type": "LITERAL", "principal": "User:prometheus", "host": "*",
                                "operation": "DESCRIBE", "permission_type": "ALLOW"}])
        allowed = scraping_as(binary, tmp_path, node, "prometheus")
        proms.append(allowed)
        refused = scraping_as(binary, tmp_path, node, "mallory")
        proms.append(refused)

        allowed.wait_targets_up(1)
        wait_for(lambda: allowed.query('kafka_server_brokertopicmetrics_messagesin_total{topic="payroll"}'), 30,
                 what="the payroll series in Prometheus")
        down = wait_for(lambda: target(refused), 30, what="mallory's scrape done")
        assert down["health"] == "down" and "403" in down["lastError"], down
        assert refused.query('{topic="payroll"}') == []
    finally:
        for prom in proms:
            prom.stop()
        shutdown_all([node])
