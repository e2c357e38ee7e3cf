"""The AppKeys through which the HTTP routes reach the node's services (kraft/server: the
interfaces and the values crossing them)."""

from __future__ import annotations

from aiohttp import web

from kraft.server.admin import AdminService
from kraft.server.metadata import MetadataView, NodeInfo
from kraft.server.records import ReplicaService

NODE_INFO = web.AppKey("node_info", NodeInfo)
METADATA = web.AppKey("metadata_view", MetadataView)
ADMIN = web.AppKey("admin_service", AdminService)
REPLICAS = web.AppKey("replica_service", ReplicaService)
