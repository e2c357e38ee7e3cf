"""Host-scoped ACLs through a forwarding node (3 nodes): a client at 127.0.0.2 may write topic
`hosted` only from that address. Its JSON produce to a node that does not lead the partition is
forwarded to the leader, which authorizes the client's address (sent with the forwarded principal),
not the forwarding node's 127.0.0.1; the same produce from 127.0.0.1 is refused."""

from __future__ import annotations

import http.client
import json

import msgpack

from harness import Cluster, wait_for
from security_support import node_request

TOPIC = "hosted"


def produce_from(host: str, port: int, source: str) -> tuple[int, dict]:
    conn = http.client.HTTPConnection(host, port, timeout=30, source_address=(source, 0))
    try:
        conn.request("POST", f"/v1/topics/{TOPIC}/records", body=json.dumps({"records": [{"value": "v"}]}),
                     headers={"Content-Type": "application/json"})
        answer = conn.getresponse()
        return answer.status, json.loads(answer.read())
    finally:
        conn.close()


def test_the_leader_authorizes_the_client_address_of_a_forwarded_produce(tmp_path):
    with Cluster(tmp_path, controllers=3, combined=True, overrides={
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}) as cluster:
        cluster.start()
        first = cluster.node(1)
        signed = lambda method, path, body=None: node_request(first.url, cluster.secret, 1, method, path, body)  # noqa: E731
        assert signed("POST", "/v1/topics", {"name": TOPIC, "partitions": 1, "replication_factor": 1}).status_code == 201
        assert signed("POST", "/v1/acls", {"acls": [
            {"resource_type": "TOPIC", "resource_name": TOPIC, "pattern_type": "LITERAL",
             "principal": "User:ANONYMOUS", "host": "127.0.0.2", "operation": "WRITE",
             "permission_type": "ALLOW"}]}).status_code == 201

        def leader() -> int | None:
            topics = msgpack.unpackb(signed("GET", f"/v1/metadata?topics={TOPIC}").content)["topics"]
            return topics[0]["partitions"][0]["leader"] if topics and topics[0]["partitions"][0]["leader"] >= 0 \
                else None

        leader_id = wait_for(leader, 30, what="a leader")
        other = cluster.node(next(i for i in (1, 2, 3) if i != leader_id))
        # every node must know the ACL before the request goes through it
        wait_for(lambda: all(len(msgpack.unpackb(node_request(n.url, cluster.secret, 1, "GET", "/v1/acls").content)
                                 ["acls"]) == 1 for n in cluster.running()), 30, what="the ACL everywhere")
        status, body = produce_from("127.0.0.1", other.port, "127.0.0.2")
        assert status == 200 and "error_code" not in body["partitions"][0], body
        status, body = produce_from("127.0.0.1", other.port, "127.0.0.1")
        assert status == 403 and body["error_code"] == "TOPIC_AUTHORIZATION_FAILED", body
