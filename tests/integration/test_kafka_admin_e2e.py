"""The Kafka admin APIs on real nodes with real clients (issue 23, admin part): confluent-kafka's
AdminClient, kafka-python's KafkaAdminClient and raw requests (for the APIs neither client has)
against the same ACLs, quotas and SCRAM credentials the HTTP API and the `kraft` CLI manage, both
ways; the controller's admin APIs and the replicas' against a 3-node cluster, from any node.

The single node runs Kafka's StandardAuthorizer on a plaintext client port, so every Kafka client
is User:ANONYMOUS; the cluster's own signed requests grant it what the tests need, and a SASL
listener shows that a credential set through Kafka logs in."""

from __future__ import annotations

import dataclasses
import socket
import subprocess
import sys
import time
import uuid
from typing import Any

import msgpack
import pytest
import requests
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from harness import CLUSTER_SECRET, Cluster, NodeProcess, free_port, partition_state, shutdown_all, wait_for
from kafka_wire import read_frame_blocking, read_response, request_bytes
from kraft.kafka.entities import build
from security_support import node_request

ME = "User:ANONYMOUS"
KRAFT = [sys.executable, "-c", "from kraft.api.cli import main; main()"]
DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS, DESCRIBE_QUORUM = 48, 49, 55


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    root = tmp_path_factory.mktemp("kafka-admin")
    sasl_port = free_port()
    n = NodeProcess(node_id=1, data_dir=root / "data-1", wait_ready_on_start=True, overrides={
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "controller.quorum.secret": CLUSTER_SECRET, "kafka.listen": f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512"})
    n.sasl_port = sasl_port  # type: ignore[attr-defined]
    try:
        n.start()
        # the cluster itself lets the anonymous principal administer it and use every topic
        as_node(n, "POST", "/v1/acls", {"acls": [
            acl("CLUSTER", "kafka-cluster", op) for op in ("ALTER", "DESCRIBE", "ALTER_CONFIGS", "DESCRIBE_CONFIGS",
                                                            "CREATE", "IDEMPOTENT_WRITE")
        ] + [acl("TOPIC", "*", "ALL"), acl("GROUP", "*", "ALL")]})
        yield n
    finally:
        shutdown_all([n])


def acl(rtype: str, name: str, op: str, perm: str = "ALLOW", principal: str = ME) -> dict[str, str]:
    return {"resource_type": rtype, "resource_name": name, "pattern_type": "LITERAL", "principal": principal,
            "host": "*", "operation": op, "permission_type": perm}


def as_node(node: NodeProcess, method: str, path: str, body: Any = None) -> Any:
    answer = node_request(node.url, CLUSTER_SECRET, node.node_id, method, path, body)
    assert answer.status_code < 300, answer.content
    return msgpack.unpackb(answer.content)


def kraft(node: NodeProcess, *args: str) -> str:
    proc = subprocess.run(KRAFT + [*args, "--bootstrap-server", node.bootstrap], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return proc.stdout


def confluent_admin(node: NodeProcess) -> Any:
    """confluent-kafka's AdminClient; keep it referenced while its futures are (a collected client
    fails them)."""
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": node.bootstrap})


def kafka_python_admin(bootstrap: str) -> Any:
    from kafka.admin import KafkaAdminClient
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)


def ask(port: int, api_key: int, version: int, **fields: Any) -> Any:
    """One raw Kafka request (`fields` as plain data) on its own connection; its kio answer."""
    request = build(load_request_schema(api_key, version), fields)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request_bytes(api_key, version, 1, **{f.name: getattr(request, f.name)
                                                          for f in dataclasses.fields(request)}))
        return read_response(read_frame_blocking(sock), api_key, version)[1]


def create_topic(node: NodeProcess, name: str) -> None:
    as_node(node, "POST", "/v1/topics", {"name": name})


# -- ACLs -----------------------------------------------------------------------------------------


def test_an_acl_created_through_kafka_denies_a_kafka_python_consumer_and_shows_in_kraft_acls(node):
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType
    from kafka import KafkaConsumer
    from kafka.errors import TopicAuthorizationFailedError

    create_topic(node, "secret")
    requests.post(f"{node.url}/v1/topics/secret/records", json={"records": [{"value": "v"}]},
                  timeout=30).raise_for_status()
    deny = AclBinding(ResourceType.TOPIC, "secret", ResourcePatternType.LITERAL, ME, "*", AclOperation.READ,
                      AclPermissionType.DENY)
    admin = confluent_admin(node)
    for future in admin.create_acls([deny], request_timeout=30).values():
        future.result()
    assert kraft(node, "acls", "--list", "--topic", "secret") == (
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=secret, patternType=LITERAL)`:\n"
        "\t(principal=User:ANONYMOUS, host=*, operation=READ, permissionType=DENY)\n\n")
    consumer = KafkaConsumer("secret", bootstrap_servers=node.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=20000)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                consumer.poll(timeout_ms=1000)
    finally:
        consumer.close()


def test_an_acl_added_by_kraft_acls_is_described_and_deleted_through_kafka(node):
    from confluent_kafka.admin import AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType
    from confluent_kafka.admin import ResourceType
    from kafka.admin import ACLFilter, ACLOperation, ACLPermissionType, ResourcePatternFilter
    from kafka.admin import ResourceType as KafkaPythonResourceType
    from kafka.admin import ACLResourcePatternType

    kraft(node, "acls", "--add", "--deny-principal", "User:mallory", "--operation", "Write", "--topic", "ledger")
    any_ledger = AclBindingFilter(ResourceType.TOPIC, "ledger", ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    confluent = confluent_admin(node)
    described = confluent.describe_acls(any_ledger, request_timeout=30).result()
    assert [(b.principal, b.operation, b.permission_type) for b in described] == \
        [("User:mallory", AclOperation.WRITE, AclPermissionType.DENY)]

    admin = kafka_python_admin(node.bootstrap)
    try:
        flt = ACLFilter(principal="User:mallory", host=None, operation=ACLOperation.ANY,
                        permission_type=ACLPermissionType.ANY,
                        resource_pattern=ResourcePatternFilter(KafkaPythonResourceType.TOPIC, "ledger",
                                                               ACLResourcePatternType.ANY))
        [(_, deleted, error)] = admin.delete_acls([flt])
        assert error.errno == 0 and len(deleted) == 1
    finally:
        admin.close()
    assert "mallory" not in kraft(node, "acls", "--list", "--topic", "ledger")


def test_an_acl_added_by_kraft_acls_refuses_a_kafka_request_until_it_is_removed(node):
    flags = ["--deny-principal", ME, "--operation", "DescribeConfigs", "--cluster"]
    kraft(node, "acls", "--add", *flags)
    try:
        refused = ask(node.port, DESCRIBE_CLIENT_QUOTAS, 1, components=[], strict=False)
        assert refused.error_code == ErrorCode.cluster_authorization_failed and not refused.entries
    finally:
        kraft(node, "acls", "--remove", "--force", *flags)
    assert ask(node.port, DESCRIBE_CLIENT_QUOTAS, 1, components=[], strict=False).error_code == ErrorCode.none


# -- client quotas ----------------------------------------------------------------------------------


def quota_entity(user: str) -> list[dict[str, Any]]:
    return [{"entity_type": "user", "entity_name": user}]


def test_quotas_altered_through_kafka_show_in_kraft_configs_and_the_reverse(node):
    altered = ask(node.port, ALTER_CLIENT_QUOTAS, 1, validate_only=False, entries=[
        {"entity": quota_entity("carol"), "ops": [{"key": "producer_byte_rate", "value": 2048.0, "remove": False}]}])
    assert [e.error_code for e in altered.entries] == [ErrorCode.none]
    assert "producer_byte_rate=2048" in kraft(node, "configs", "--describe", "--entity-type", "users",
                                              "--entity-name", "carol")

    kraft(node, "configs", "--alter", "--entity-type", "users", "--entity-name", "dave",
          "--add-config", "consumer_byte_rate=4096")
    described = ask(node.port, DESCRIBE_CLIENT_QUOTAS, 1, strict=True,
                    components=[{"entity_type": "user", "match_type": 0, "match": "dave"}])
    assert described.error_code == ErrorCode.none
    assert [[(v.key, v.value) for v in e.values] for e in described.entries] == [[("consumer_byte_rate", 4096.0)]]


# -- SCRAM credentials ------------------------------------------------------------------------------


def _kafka_python_logs_in(port: int, user: str, password: str, mechanism: str) -> bool:
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError
    try:
        KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}", security_protocol="SASL_PLAINTEXT",
                         sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password,
                         request_timeout_ms=10000).close()
    except KafkaError:
        return False
    return True


def test_a_scram_credential_set_through_kafka_logs_in_and_shows_over_http_and_the_reverse(node):
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    upsertion = UserScramCredentialUpsertion("erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192),
                                             b"erin-secret", b"salt-of-erin")
    admin = confluent_admin(node)
    for future in admin.alter_user_scram_credentials([upsertion], request_timeout=30).values():
        future.result()
    users = requests.get(f"{node.url}/v1/users/scram-credentials", params={"user": "erin"}, timeout=10).json()
    assert users["users"] == [{"name": "erin", "credentials": [{"mechanism": "SCRAM-SHA-256", "iterations": 8192}]}]
    assert wait_for(lambda: _kafka_python_logs_in(node.sasl_port, "erin", "erin-secret", "SCRAM-SHA-256"), 30,
                    what="erin logs in with the credential set through Kafka")
    assert not _kafka_python_logs_in(node.sasl_port, "erin", "wrong", "SCRAM-SHA-256")

    kraft(node, "configs", "--alter", "--entity-type", "users", "--entity-name", "frank",
          "--add-config", "SCRAM-SHA-512=[iterations=4096,password=frank-secret]")
    described = admin.describe_user_scram_credentials(["frank"], request_timeout=30)
    [(name, future)] = described.items()
    info = future.result()
    assert name == "frank" and [(c.mechanism, c.iterations) for c in info.scram_credential_infos] == \
        [(ScramMechanism.SCRAM_SHA_512, 4096)]


# -- broker configs -------------------------------------------------------------------------------


INCREMENTAL_ALTER_CONFIGS, DESCRIBE_CONFIGS, BROKER_LOGGER = 44, 32, 8


def test_broker_configs_are_described_and_static_keys_refuse_changes(node):
    """confluent-kafka's describe_configs / incremental_alter_configs on the BROKER resource: the
    node's keys read-only, those it was given STATIC_BROKER_CONFIG, the rest DEFAULT_CONFIG, a
    password key sensitive without its value; "" (the cluster default) has no dynamic defaults;
    an alteration of a static key is INVALID_REQUEST and changes nothing; another id is refused."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, ResourceType

    admin = confluent_admin(node)
    broker = ConfigResource(ResourceType.BROKER, "1")
    configs = admin.describe_configs([broker])[broker].result(30)
    assert (configs["node.id"].value, configs["node.id"].source) == ("1", ConfigSource.STATIC_BROKER_CONFIG.value)
    assert (configs["num.partitions"].value, configs["num.partitions"].source) == (
        "1", ConfigSource.DEFAULT_CONFIG.value)
    assert configs["authorizer.class.name"].value.endswith("StandardAuthorizer")
    assert all(c.is_read_only for c in configs.values())
    secret = configs["controller.quorum.secret"]
    assert secret.is_sensitive and secret.value is None
    def raw_describe(name: str) -> Any:  # confluent-kafka refuses an empty broker name itself
        return ask(node.port, DESCRIBE_CONFIGS, 4, include_synonyms=False, include_documentation=False,
                   resources=[{"resource_type": 4, "resource_name": name, "configuration_keys": None}]).results[0]

    assert (raw_describe("").error_code, raw_describe("").configs) == (ErrorCode.none, ())

    change = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry("num.partitions", "3", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as refused:
        admin.incremental_alter_configs([change])[change].result(30)
    error = refused.value.args[0]
    assert error.code() == KafkaError.INVALID_REQUEST and "num.partitions" in error.str(), error
    assert admin.describe_configs([broker])[broker].result(30)["num.partitions"].value == "1"
    assert raw_describe("7").error_code == ErrorCode.invalid_request


def test_broker_logger_levels_are_described_and_set(node):
    """The BROKER_LOGGER resource (kafka-configs --entity-type broker-loggers): the node's loggers
    with Kafka's level names; SET changes a level, DELETE gives it its parent's back; an unknown
    logger or level is INVALID_CONFIG and changes nothing."""
    def describe(*names: str) -> dict[str, str]:
        answer = ask(node.port, DESCRIBE_CONFIGS, 4, include_synonyms=False, include_documentation=False,
                     resources=[{"resource_type": BROKER_LOGGER, "resource_name": "1",
                                 "configuration_keys": list(names) or None}])
        [result] = answer.results
        assert result.error_code == ErrorCode.none, result
        return {c.name: c.value for c in result.configs}

    def alter(*changes: tuple[str, int, str | None]) -> ErrorCode:
        answer = ask(node.port, INCREMENTAL_ALTER_CONFIGS, 1, validate_only=False, resources=[
            {"resource_type": BROKER_LOGGER, "resource_name": "1", "configs": [
                {"name": name, "config_operation": op, "value": value} for name, op, value in changes]}])
        return answer.responses[0].error_code

    loggers = describe()
    assert "root" in loggers and "kraft" in loggers
    before = describe("kraft")["kraft"]
    assert alter(("kraft", 0, "DEBUG")) == ErrorCode.none
    assert describe("kraft") == {"kraft": "DEBUG"}
    assert alter(("kraft", 0, "LOUD")) == ErrorCode.invalid_config
    assert alter(("no.such.logger", 0, "INFO")) == ErrorCode.invalid_config
    assert describe("kraft") == {"kraft": "DEBUG"}
    assert alter(("kraft", 1, None)) == ErrorCode.none
    assert describe("kraft")["kraft"] == before


# -- the controller's and the replicas' admin APIs on 3 nodes ----------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with Cluster(tmp_path_factory.mktemp("kafka-admin-cluster"), controllers=3, combined=True, overrides={
            "broker.session.timeout.ms": 3000, "broker.heartbeat.interval.ms": 300,
            "replica.lag.time.max.ms": 3000}) as c:
        c.start()
        yield c


def test_describe_quorum_from_every_node_names_the_leader_and_its_voters(cluster):
    active = cluster.active_controller()
    for n in cluster.nodes.values():  # the others forward it to the active controller
        answer = ask(n.port, DESCRIBE_QUORUM, 2, topics=[
            {"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}])
        [partition] = answer.topics[0].partitions
        assert partition.error_code == ErrorCode.none and partition.leader_id == active
        assert sorted(v.replica_id for v in partition.current_voters) == [1, 2, 3]


def test_kafka_pythons_describe_metadata_quorum(cluster):
    admin = kafka_python_admin(cluster.node(1).bootstrap)
    try:
        quorum = admin.describe_metadata_quorum()
    finally:
        admin.close()
    [partition] = quorum["topics"][0]["partitions"]
    assert partition["leader_id"] == cluster.active_controller() and partition["error"] is None


def test_describe_log_dirs_lists_each_brokers_partitions(cluster):
    cluster.create_topic("logs", partitions=3, replication_factor=2)
    requests.post(f"{cluster.node(1).url}/v1/topics/logs/records",
                  json={"records": [{"value": "x" * 100, "partition": p} for p in range(3)]}, timeout=30)
    admin = kafka_python_admin(cluster.node(2).bootstrap)
    try:
        answers = admin.describe_log_dirs()
    finally:
        admin.close()
    held: dict[tuple[str, int], list[int]] = {}
    for answer in answers:
        [log_dir] = answer["log_dirs"]
        assert log_dir["error_code"] == 0 and log_dir["log_dir"].endswith(f"data-{answer['broker']}")
        for topic in log_dir["topics"]:
            for p in topic["partitions"]:
                held.setdefault((topic["name"], p["partition_index"]), []).append(answer["broker"])
    for p in range(3):
        assert sorted(held[("logs", p)]) == sorted(partition_state(cluster, 1, "logs", p)["replicas"])


def test_a_preferred_election_through_confluent_kafka_gives_the_leadership_back(cluster):
    from confluent_kafka import ElectionType, TopicPartition

    cluster.create_topic("elect", partitions=1, replication_factor=3)
    preferred = partition_state(cluster, 1, "elect")["replicas"][0]
    cluster.kill(preferred)
    others = [i for i in (1, 2, 3) if i != preferred]
    wait_for(lambda: partition_state(cluster, others[0], "elect")["leader"] not in (preferred, -1, None), 30,
             what="the leadership moved away")
    cluster.restart(preferred)
    wait_for(lambda: preferred in partition_state(cluster, others[0], "elect")["isr"], 60, what="back in the ISR")
    admin = confluent_admin(cluster.node(others[0]))
    result = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("elect", 0)]).result()
    assert [error for error in result.values()] == [None]
    wait_for(lambda: partition_state(cluster, others[0], "elect")["leader"] == preferred, 30,
             what="the preferred replica leads again")


def test_a_reassignment_through_kafka_python_moves_the_replica_and_is_listed_until_done(cluster):
    from kafka import TopicPartition

    cluster.create_topic("moving", partitions=1, replication_factor=1)
    [now] = partition_state(cluster, 1, "moving")["replicas"]
    target = next(i for i in (1, 2, 3) if i != now)
    admin = kafka_python_admin(cluster.node(1).bootstrap)
    try:
        assert admin.alter_partition_reassignments({TopicPartition("moving", 0): [target]}) == \
            {TopicPartition("moving", 0): None}
        wait_for(lambda: partition_state(cluster, 1, "moving")["replicas"] == [target], 60,
                 what="the replica moved")
        wait_for(lambda: TopicPartition("moving", 0) not in admin.list_partition_reassignments(), 30,
                 what="the reassignment is no longer listed")
    finally:
        admin.close()


def test_describe_producers_shows_an_idempotent_producer_on_the_leader(cluster):
    from kafka import TopicPartition
    from kafka.errors import NotLeaderForPartitionError
    from kraft.api.client import Producer

    cluster.create_topic("idem", partitions=1, replication_factor=3)
    with Producer(cluster.node(1).bootstrap, acks="all", enable_idempotence=True) as producer:
        for i in range(3):
            producer.send("idem", value=b"v%d" % i, partition=0).result(timeout=30)
    leader = partition_state(cluster, 1, "idem")["leader"]
    admin = kafka_python_admin(cluster.node(1).bootstrap)
    try:
        answer = admin.describe_producers([TopicPartition("idem", 0)])  # sent to the leader
        with pytest.raises(NotLeaderForPartitionError):
            admin.describe_producers([TopicPartition("idem", 0)], broker_id=next(i for i in (1, 2, 3) if i != leader))
    finally:
        admin.close()
    [state] = answer[TopicPartition("idem", 0)].active_producers
    assert state.producer_epoch >= 0 and state.last_sequence == 2 and state.current_transaction_start_offset == -1


def test_create_topics_with_a_manual_assignment_and_delete_topics_by_id(cluster):
    """confluent-kafka's NewTopic(replica_assignment=...) places the replicas as given (the first
    leads); an assignment naming an unregistered broker is INVALID_REPLICA_ASSIGNMENT; DeleteTopics
    v6 deletes a topic named by its id, and an unknown id is UNKNOWN_TOPIC_ID."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic

    admin = confluent_admin(cluster.node(1))
    plan = [[3, 1, 2], [2, 3, 1]]
    admin.create_topics([NewTopic("placed", num_partitions=len(plan), replica_assignment=plan)])["placed"].result(30)
    state = cluster.wait_for_metadata(
        lambda m: [(p["replicas"], p["leader"]) for t in m["topics"] if t["name"] == "placed"
                   for p in sorted(t["partitions"], key=lambda p: p["partition"])] == [(r, r[0]) for r in plan],
        what="the manual assignment everywhere")
    assert state
    with pytest.raises(KafkaException) as refused:
        admin.create_topics([NewTopic("misplaced", num_partitions=1, replica_assignment=[[1, 9]])])["misplaced"].result(30)
    assert refused.value.args[0].code() == KafkaError.INVALID_REPLICA_ASSIGNMENT

    topic_id = next(t["topic_id"] for t in cluster.metadata(1, "placed")["topics"])
    answer = ask(cluster.node(2).port, 20, 6, timeout=30000, topics=[
        {"name": None, "topic_id": uuid.UUID(topic_id)}, {"name": None, "topic_id": uuid.UUID(int=0xAA)}])
    deleted, unknown = answer.responses
    assert (deleted.error_code, deleted.name, str(deleted.topic_id)) == (ErrorCode.none, "placed", topic_id)
    assert unknown.error_code == ErrorCode.unknown_topic_id
    cluster.wait_for_metadata(lambda m: all(t["name"] != "placed" for t in m["topics"]), what="the topic deleted")
