"""Security of a node: the cluster's own node credential (`node_auth`), TLS contexts (`tls`),
SCRAM credentials (`scram`) and certificate principals (`principal`)."""
