"""`/v1/controller/...`: the controller API brokers and tools use (KRaft's controller RPCs).

Broker registration, heartbeats and unregistration, the metadata log for observers (long poll
from an offset, or "snapshot needed" and the image snapshot in msgpack), quorum status,
AlterPartition, producer-id blocks, partition reassignments (KIP-455), and the topic changes
other nodes forward. Only the active controller answers; any other node answers NOT_CONTROLLER
with `leader: {node_id, host, port}` when it knows the active controller. Kafka's client admin
APIs served here (quorum, elections, reassignments) never get that far on another node: it
forwards them to the active controller (api/access.py, KIP-590). Writes take an optional
`request_id`: a retry with the same id after an unknown outcome is applied once. Every write
answer carries `metadata_offset`, the offset it was committed at.
"""

from __future__ import annotations

import asyncio

import msgpack
import msgspec
from aiohttp import web
from msgspec.structs import asdict

from kraft.api.errors import KraftError
from kraft.api.messages.common import config_strings
from kraft.api.messages.controller import (
    AllocateProducerIdsRequest, AlterPartitionRequest, AlterReassignmentsRequest, BrokerHeartbeatRequest,
    ElectLeadersRequest, MetadataLogQuery, RegisterBrokerRequest, UnregisterBrokerRequest,
)
from kraft.api.messages.security import (
    ControllerAlterClientQuotasRequest, ControllerAlterScramCredentialsRequest, ControllerCreateAclsRequest,
    ControllerDeleteAclsRequest,
)
from kraft.api.messages.topics import (
    ControllerAlterConfigsRequest, ControllerCreatePartitionsRequest, ControllerCreateTopicRequest,
    ControllerDeleteTopicRequest,
)
from kraft.api.routes.acls import quota_entries
from kraft.api.routes.users import scram_alterations
from kraft.api.routes.services import context_of, services_of
from kraft.api.wire import MSGPACK, read_message, read_query, render
from kraft.metadata.partition_change import BrokerState
from kraft.server.admin import ControllerApi

routes = web.RouteTableDef()


def _api(request: web.Request) -> ControllerApi:
    """The controller API, for the inter-node routes (the node credential authorized them)."""
    api = services_of(request).controller_api
    if api is None:
        raise KraftError("NOT_CONTROLLER", "this node serves no controller API")
    return api


# -- status and the metadata log ----------------------------------------------------------------


@routes.get("/v1/controller/quorum")
async def describe_quorum(request: web.Request) -> web.Response:
    return render(request, await services_of(request).controller.describe_quorum(context_of(request)))


@routes.get("/v1/controller/quorum/local")
async def local_status(request: web.Request) -> web.Response:
    return render(request, _api(request).local_status())


@routes.get("/v1/controller/metadata")
async def fetch_metadata(request: web.Request) -> web.Response:
    q = read_query(request, MetadataLogQuery)
    return render(request, await _api(request).fetch_metadata(q.broker_id, q.from_offset, q.max_records,
                                                              q.max_wait_ms))


@routes.get("/v1/controller/snapshot")
async def snapshot(request: web.Request) -> web.Response:
    build = _api(request).snapshot()
    body = await asyncio.to_thread(lambda: msgpack.packb(build(), use_bin_type=True))
    return web.Response(body=body, content_type=MSGPACK)


# -- brokers --------------------------------------------------------------------------------------


@routes.post("/v1/controller/brokers/register")
async def register_broker(request: web.Request) -> web.Response:
    b = await read_message(request, RegisterBrokerRequest)
    answer = await _api(request).register_broker(
        b.broker_id, b.incarnation_id, [asdict(e) for e in b.endpoints], b.rack, b.cluster_id,
        b.request_id)
    return render(request, answer)


@routes.post("/v1/controller/brokers/heartbeat")
async def broker_heartbeat(request: web.Request) -> web.Response:
    b = await read_message(request, BrokerHeartbeatRequest)
    answer = await _api(request).broker_heartbeat(b.broker_id, b.broker_epoch, b.current_metadata_offset,
                                                  b.want_fence, b.want_shutdown, b.offline_log_dirs,
                                                  b.offline_replicas)
    return render(request, answer)


@routes.post("/v1/controller/brokers/unregister")
async def unregister_broker(request: web.Request) -> web.Response:
    b = await read_message(request, UnregisterBrokerRequest)
    return render(request, await _api(request).unregister_broker(b.broker_id, b.request_id))


@routes.post("/v1/controller/producer-ids")
async def allocate_producer_ids(request: web.Request) -> web.Response:
    b = await read_message(request, AllocateProducerIdsRequest)
    return render(request, await _api(request).allocate_producer_ids(b.broker_id, b.broker_epoch, b.request_id))


@routes.post("/v1/controller/alter-partition")
async def alter_partition(request: web.Request) -> web.Response:
    b = await read_message(request, AlterPartitionRequest)
    answer = await _api(request).alter_partition(b.broker_id, b.broker_epoch, b.topic, b.partition, b.leader_epoch,
                                                 b.partition_epoch,
                                                 [BrokerState(m.broker_id, m.broker_epoch) for m in b.new_isr_with_epochs],
                                                 b.request_id)
    return render(request, answer)


# -- topics (forwarded by other nodes) ------------------------------------------------------------


@routes.post("/v1/controller/topics")
async def create_topic(request: web.Request) -> web.Response:
    b = await read_message(request, ControllerCreateTopicRequest)
    answer = await _api(request).create_topic(b.name, b.partitions, b.replication_factor,
                                              config_strings(b.configs), b.validate_only, b.request_id,
                                              b.assignments)
    return render(request, answer)


@routes.post("/v1/controller/topics/delete")
async def delete_topic(request: web.Request) -> web.Response:
    b = await read_message(request, ControllerDeleteTopicRequest)
    return render(request, await _api(request).delete_topic(b.name, b.request_id))


@routes.post("/v1/controller/topics/partitions")
async def create_partitions(request: web.Request) -> web.Response:
    b = await read_message(request, ControllerCreatePartitionsRequest)
    return render(request, await _api(request).create_partitions(b.name, b.count, b.validate_only, b.request_id))


@routes.post("/v1/controller/configs")
async def alter_configs(request: web.Request) -> web.Response:
    b = await read_message(request, ControllerAlterConfigsRequest)
    answer = await _api(request).alter_configs(b.resource_type, b.resource_name, config_strings(b.configs),
                                               b.validate_only, b.request_id)
    return render(request, answer)


@routes.post("/v1/controller/users/scram-credentials")
async def alter_user_scram_credentials(request: web.Request) -> web.Response:
    """Forwarded by nodes from `POST /v1/users/scram-credentials` (kafka-configs --entity-type users)."""
    b = await read_message(request, ControllerAlterScramCredentialsRequest)
    upsertions, deletions = scram_alterations(b)
    return render(request, await _api(request).alter_user_scram_credentials(upsertions, deletions, b.request_id))


@routes.post("/v1/controller/elect-leaders")
async def elect_leaders(request: web.Request) -> web.Response:
    """Preferred leader election (the only type: unclean elections follow the topic config)."""
    b = await read_message(request, ElectLeadersRequest)
    return render(request, await services_of(request).controller.elect_leaders(context_of(request), b.partitions,
                                                                              b.request_id))


# -- ACLs and client quotas, forwarded by nodes from /v1/acls and /v1/client-quotas --------------


@routes.post("/v1/controller/acls")
async def create_acls(request: web.Request) -> web.Response:
    b = await read_message(request, ControllerCreateAclsRequest)
    return render(request, await _api(request).create_acls([asdict(acl) for acl in b.acls],
                                                           b.request_id))


@routes.post("/v1/controller/acls/delete")
async def delete_acls(request: web.Request) -> web.Response:
    b = await read_message(request, ControllerDeleteAclsRequest)
    return render(request, await _api(request).delete_acls(msgspec.to_builtins(b.filters), b.request_id))


@routes.post("/v1/controller/client-quotas")
async def alter_client_quotas(request: web.Request) -> web.Response:
    b = await read_message(request, ControllerAlterClientQuotasRequest)
    return render(request, await _api(request).alter_client_quotas(quota_entries(b.entries), b.validate_only,
                                                                   b.request_id))


# -- reassignments (kafka-reassign-partitions) ----------------------------------------------------


@routes.get("/v1/controller/reassignments")
async def list_partition_reassignments(request: web.Request) -> web.Response:
    return render(request, await services_of(request).controller.list_partition_reassignments(context_of(request)))


@routes.post("/v1/controller/reassignments")
async def alter_partition_reassignments(request: web.Request) -> web.Response:
    """Start (`replicas`: the target) or cancel (`replicas`: null) reassignments, all or none."""
    b = await read_message(request, AlterReassignmentsRequest)
    reassignments = [asdict(p) for p in b.partitions]
    return render(request, await services_of(request).controller.alter_partition_reassignments(
        context_of(request), reassignments, b.request_id))
