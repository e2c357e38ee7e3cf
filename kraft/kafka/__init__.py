"""Kafka's binary protocol: a sans-I/O core (frames, request headers, kio message types,
ApiVersions, the connection state machine, SASL) and the thin asyncio shell that owns the sockets
(the client port shared with HTTP, one KafkaChannel per connection, the node's listeners).

The core is h11's shape: bytes in, requests out, responses encoded to bytes (frames.py, codec.py,
api_versions.py, connection.py, sniff.py, sasl.py). The shell: client_port.py, channel.py,
dispatch.py (the handler registry), limits.py, listener.py, node_listeners.py. Request and
response types are kio's, generated from Kafka's own message schemas.
"""
