"""SASL over HTTP on a SASL_SSL node started the issue's way (--add-scram for the first user):
missing or wrong credentials are 401 with one message and write nothing; SCRAM credentials added
with the admin API work for SCRAM and PLAIN; mTLS is required when ssl.client.auth=required; no
password or secret appears in the log."""

from __future__ import annotations

import pytest
import requests

from kraft.api.client import Admin
from kraft.api.errors import KraftError
from harness import shutdown_all, wait_for
from security_support import SecureNode, make_certs, tls_overrides

ADMIN_PASSWORD = "admin-secret-0xA1"
ALICE_PASSWORD = "alice-secret-0xB2"


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    root = tmp_path_factory.mktemp("sasl")
    certs_dir = make_certs(root / "certs", [1])
    n = SecureNode(node_id=1, data_dir=root / "data-1", ca=certs_dir / "ca.pem", auth=("admin", ADMIN_PASSWORD),
                   overrides=tls_overrides(certs_dir, 1, "SASL_SSL", **{
                       "sasl.enabled.mechanisms": "SCRAM-SHA-256,PLAIN"}),
                   args=["--add-scram", f"SCRAM-SHA-256=[name=admin,password={ADMIN_PASSWORD}]"])
    try:
        n.start()
        n.wait_ready(30)  # its broker unfenced: a topic created before fails with INVALID_REPLICATION_FACTOR
        wait_for(lambda: n.session().get(f"{n.url}/v1/metadata", timeout=5).status_code == 200, 30,
                 what="the admin credential in the metadata log")
        yield n
    finally:
        shutdown_all([n])


def anonymous(node: SecureNode) -> requests.Session:
    s = node.session()
    s.auth = None
    return s


def assert_unauthenticated(response: requests.Response) -> None:
    assert response.status_code == 401, response.text
    assert response.json() == {"error_code": "SASL_AUTHENTICATION_FAILED",
                               "message": "Authentication failed: invalid credentials", "retriable": False}


def test_missing_or_wrong_credentials_are_401_and_write_nothing(node):
    http = anonymous(node)
    create = {"name": "t401", "partitions": 1}
    for auth in (None, ("admin", "wrong"), ("nobody", ADMIN_PASSWORD), ("admin", "")):
        assert_unauthenticated(http.post(f"{node.url}/v1/topics", json=create, auth=auth, timeout=10))
        assert_unauthenticated(http.post(f"{node.url}/v1/topics/t401/records", auth=auth, timeout=10,
                                         json={"records": [{"value": "x"}]}))
    assert_unauthenticated(http.get(f"{node.url}/v1/metadata", timeout=10,
                                    headers={"Authorization": "Bearer abc"}))
    names = [t["name"] for t in node.session().get(f"{node.url}/v1/metadata", timeout=10).json()["topics"]]
    assert "t401" not in names
    assert http.get(f"{node.url}/v1/health", timeout=10).status_code == 200  # probes need no credentials


def test_scram_users_added_with_the_admin_api_authenticate(node):
    admin = Admin(bootstrap_servers=f"localhost:{node.port}", security_protocol="SASL_SSL",
                             sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="admin",
                             sasl_plain_password=ADMIN_PASSWORD, ssl_cafile=str(node.ca))
    try:
        admin.alter_user_scram_credentials(upsertions=[("alice", "SCRAM-SHA-256", ALICE_PASSWORD, 8192)])
        assert admin.describe_user_scram_credentials()["alice"] == {"SCRAM-SHA-256": 8192}
    finally:
        admin.close()
    http = anonymous(node)
    alice = ("alice", ALICE_PASSWORD)
    assert http.post(f"{node.url}/v1/topics", json={"name": "ta", "partitions": 1}, auth=alice,
                     timeout=10).status_code == 201
    for mechanism in ("SCRAM-SHA-256", "PLAIN"):
        answer = http.post(f"{node.url}/v1/topics/ta/records", auth=alice, timeout=10,
                           headers={"X-Kraft-Sasl-Mechanism": mechanism}, json={"records": [{"value": mechanism}]})
        assert answer.status_code == 200, answer.text
    assert_unauthenticated(http.get(f"{node.url}/v1/metadata", auth=alice, timeout=10,
                                    headers={"X-Kraft-Sasl-Mechanism": "SCRAM-SHA-512"}))  # not enabled


def test_no_password_in_the_log(node):
    # Self-contained (xdist may run it on a worker where no other test of this module ran): a
    # failed login with a wrong password, a credential written and then used.
    wrong = "wrong-secret-0xC3"
    assert_unauthenticated(anonymous(node).get(f"{node.url}/v1/metadata", auth=("admin", wrong), timeout=10))
    admin = Admin(bootstrap_servers=f"localhost:{node.port}", security_protocol="SASL_SSL",
                  sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="admin",
                  sasl_plain_password=ADMIN_PASSWORD, ssl_cafile=str(node.ca))
    try:
        admin.alter_user_scram_credentials(upsertions=[("alice", "SCRAM-SHA-256", ALICE_PASSWORD, 8192)])
    finally:
        admin.close()
    assert anonymous(node).get(f"{node.url}/v1/metadata", auth=("alice", ALICE_PASSWORD),
                               timeout=10).status_code == 200
    wait_for(lambda: "authentication failed" in node.log_path.read_text(errors="replace"), 15,
             what="the failed login in the node's log")
    text = node.log_path.read_text(errors="replace")
    for secret in (ADMIN_PASSWORD, ALICE_PASSWORD, wrong):
        assert secret not in text


def test_mtls_required_refuses_clients_without_a_certificate(tmp_path):
    certs_dir = make_certs(tmp_path / "certs", [1], clients=["carol"])
    n = SecureNode(node_id=1, data_dir=tmp_path / "data-1", ca=certs_dir / "ca.pem",
                   overrides=tls_overrides(certs_dir, 1, "SSL", **{"ssl.client.auth": "required"}))
    try:
        n.start(wait=False)
        client_cert = str(certs_dir / "client-carol.pem")

        def healthy() -> bool:
            s = n.session()
            s.cert = client_cert
            return s.get(f"{n.url}/v1/health", timeout=5).json()["status"] == "ok"
        wait_for(healthy, 30, what="node healthy over mTLS")
        with pytest.raises(requests.ConnectionError):  # TLS 1.3: refused right after the handshake
            n.session().get(f"{n.url}/v1/health", timeout=5)
    finally:
        shutdown_all([n])


def test_cli_command_config_manages_users_over_sasl_ssl(node, tmp_path):
    from click.testing import CliRunner

    from kraft.api.cli import main as kraft_cli

    props = tmp_path / "admin.properties"
    props.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                     f'username="admin" password="{ADMIN_PASSWORD}";\n'
                     f"ssl.truststore.location={node.ca}\n")
    bootstrap = ["--bootstrap-server", f"localhost:{node.port}", "--command-config", str(props)]
    runner = CliRunner()
    alter = runner.invoke(kraft_cli, ["configs", *bootstrap, "--alter", "--add-config",
                                      "SCRAM-SHA-256=[iterations=8192,password=bob-secret-0xC3]",
                                      "--entity-type", "users", "--entity-name", "bob"])
    assert alter.exit_code == 0, alter.output
    assert "Completed updating config for user bob." in alter.output
    described = runner.invoke(kraft_cli, ["configs", *bootstrap, "--describe", "--entity-type", "users",
                                          "--entity-name", "bob"])
    assert described.output.strip() == "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-256=iterations=8192"
    assert anonymous(node).get(f"{node.url}/v1/metadata", auth=("bob", "bob-secret-0xC3"), timeout=10).status_code == 200
    props.write_text(props.read_text().replace(ADMIN_PASSWORD, "not-it"))
    refused = runner.invoke(kraft_cli, ["topics", *bootstrap, "--list"])
    assert refused.exit_code != 0 and "SASL_AUTHENTICATION_FAILED" in refused.output


def test_spark_options_take_kafkas_security_keys_with_the_kraft_prefix(node):
    from kraft.spark_connector.broker import BrokerClient
    from kraft.spark_connector.options import parse_sink_options

    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            f'password="{ADMIN_PASSWORD}";')
    options = {"kraft.bootstrap.servers": f"localhost:{node.port}", "kraft.security.protocol": "SASL_SSL",
               "kraft.sasl.mechanism": "PLAIN", "kraft.sasl.jaas.config": jaas,
               "kraft.ssl.truststore.location": str(node.ca)}
    parsed = parse_sink_options(options, streaming=False)
    client = BrokerClient(parsed.bootstrap_servers, parsed.request_timeout_ms, parsed.security)
    try:
        assert client.metadata(refresh=True).brokers == {1: f"127.0.0.1:{node.port}"}  # the advertised listener
    finally:
        client.close()
    wrong = parse_sink_options({**options, "kraft.sasl.jaas.config": jaas.replace(ADMIN_PASSWORD, "nope")}, False)
    client = BrokerClient(wrong.bootstrap_servers, wrong.request_timeout_ms, wrong.security)
    try:
        with pytest.raises(KraftError, match="SASL_AUTHENTICATION_FAILED"):
            client.metadata(refresh=True)
    finally:
        client.close()
    with pytest.raises(KraftError, match="sasl.jaas.config"):
        parse_sink_options({**options, "kraft.sasl.jaas.config": "username=admin"}, False)


def test_a_consumer_group_reads_over_sasl_ssl(node):
    from kraft.api.client import Consumer, Producer

    security = {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": "admin",
                "sasl_plain_password": ADMIN_PASSWORD, "ssl_cafile": str(node.ca)}
    bootstrap = f"localhost:{node.port}"
    with Producer(bootstrap, acks="all", **security) as producer:
        producer.send("grouped", b"one").get(timeout=30)
    with Consumer(bootstrap_servers=bootstrap, group_id="g-sasl", auto_offset_reset="earliest", **security) as consumer:
        consumer.subscribe(["grouped"])
        got: list[bytes] = []
        wait_for(lambda: got.extend(r.value for rs in consumer.poll(500).values() for r in rs) or got, 60,
                 what="the record through the group")
        assert got == [b"one"]
        consumer.commit()
