"""Kafka's binary protocol, sans I/O: frames, request headers, kio message types, ApiVersions.

Pure code with no sockets (h11's shape): bytes in, requests out, responses encoded to bytes; the
listener that owns the socket comes later (design.md §7a). Request and response types are kio's,
generated from Kafka's own message schemas.
"""
