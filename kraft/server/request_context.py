"""Who sent a request, from where, through which listener, for which API: the one value that
authorization, quotas, request metrics and audit logging take (Kafka's `RequestContext`).

Every listener builds one per request, after authentication: the HTTP routes from the security
middleware's principal and the request's headers, the Kafka listener from the connection's
authenticated principal and the request header. A request one of the cluster's nodes sends as
itself has `node_id` set (principal `Node:<id>`); a client's request another node forwarded keeps
the client's principal and address and names the forwarding node in `forwarded_by`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

ANONYMOUS = "User:ANONYMOUS"
NODE_PRINCIPAL_TYPE = "Node"
MAX_CLIENT_ID_CHARS = 255


@dataclass(frozen=True, slots=True)
class RequestContext:
    principal: str  # Kafka's principal string: "User:alice", "User:ANONYMOUS", "Node:2"
    client_address: str  # the client's host (through a forwarding node, the client's, not the node's)
    listener_name: str  # the listener the request arrived on: "CLIENT", "PLAINTEXT", "SASL_SSL", ...
    security_protocol: str = "PLAINTEXT"  # PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
    client_id: str = ""  # Kafka's request header client_id (HTTP: X-Kraft-Client-Id)
    # Kafka's API name ("Produce", "Fetch", "CreateTopics", ...), for metrics and logs; a request with
    # no Kafka counterpart is named by its listener (the HTTP API's inter-node routes: their path)
    api: str = ""
    api_version: int = 0  # the Kafka protocol's version; the HTTP API's is 1 (/v1)
    correlation_id: int = 0
    node_id: int | None = None  # set only when one of the cluster's nodes calls as itself
    forwarded_by: int | None = None  # the node that forwarded a client's request (KIP-590)

    def __post_init__(self) -> None:
        assert (self.node_id is None) or self.principal == f"{NODE_PRINCIPAL_TYPE}:{self.node_id}", self
        assert len(self.client_id) <= MAX_CLIENT_ID_CHARS

    @property
    def is_node(self) -> bool:
        """One of the cluster's own nodes calling as itself (never throttled, always authorized)."""
        return self.node_id is not None

    def for_api(self, api: str, api_version: int = 0) -> RequestContext:
        return replace(self, api=api, api_version=api_version)


def node_context(node_id: int, client_address: str, listener_name: str) -> RequestContext:
    """The context of a request the cluster's node `node_id` sent as itself."""
    return RequestContext(principal=f"{NODE_PRINCIPAL_TYPE}:{node_id}", client_address=client_address,
                          listener_name=listener_name, node_id=node_id)
