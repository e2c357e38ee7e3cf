"""Controller handlers for ACLs and client quotas (Kafka's AclControlManager and
ClientQuotaControlManager): pure functions of the image → `ControllerResult`, like handlers.py.

CreateAcls: every binding valid or nothing is written; a binding that exists already is not
written again (Kafka answers it as created). DeleteAcls: each filter removes the ACLs it matches
and answers them. AlterClientQuotas: entries {entity: {user, client_id}, ops: [{key, value,
remove}]}, all validated before anything is written.
"""

from __future__ import annotations

import random
import uuid
from typing import Any, Sequence

from kraft.controller.handlers import ControllerResult
from kraft.metadata.acl import AclBindingFilter, StandardAcl
from kraft.metadata.client_quotas import check_entity, check_quota
from kraft.metadata.errors import MetadataError
from kraft.metadata.image import MetadataImage
from kraft.metadata.records import AccessControlEntry, ClientQuota, MetadataRecord, RemoveAccessControlEntry

MAX_ACLS_PER_REQUEST = 1000
MAX_QUOTA_ENTRIES = 1000


def create_acls(image: MetadataImage, rng: random.Random, acls: Sequence[StandardAcl]) -> ControllerResult:
    if len(acls) > MAX_ACLS_PER_REQUEST:
        raise MetadataError("INVALID_REQUEST", f"at most {MAX_ACLS_PER_REQUEST} ACLs per request")
    records: list[MetadataRecord] = []
    seen: set[StandardAcl] = set()
    for acl in acls:
        acl.validate()
        if acl in seen or image.acls.find(acl) is not None:
            continue
        seen.add(acl)
        acl_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        records.append(AccessControlEntry(id=acl_id, **acl.to_dict()))
    return ControllerResult(tuple(records), {"created": [a.to_dict() for a in acls]})


def delete_acls(image: MetadataImage, filters: Sequence[AclBindingFilter]) -> ControllerResult:
    if len(filters) > MAX_ACLS_PER_REQUEST:
        raise MetadataError("INVALID_REQUEST", f"at most {MAX_ACLS_PER_REQUEST} filters per request")
    records: list[MetadataRecord] = []
    removed: set[str] = set()
    results = []
    for flt in filters:
        flt.validate()
        matched = image.acls.matching(flt)
        results.append({"matching_acls": [acl.to_dict() for _, acl in matched]})
        for acl_id, _ in matched:
            if acl_id not in removed:  # two filters may match the same ACL: remove it once
                removed.add(acl_id)
                records.append(RemoveAccessControlEntry(id=acl_id))
    return ControllerResult(tuple(records), {"filter_results": results})


def alter_client_quotas(image: MetadataImage, entries: Sequence[Any], validate_only: bool = False) -> ControllerResult:
    if len(entries) > MAX_QUOTA_ENTRIES:
        raise MetadataError("INVALID_REQUEST", f"at most {MAX_QUOTA_ENTRIES} entries per request")
    records: list[MetadataRecord] = []
    for i, entry in enumerate(entries):
        entity = entry.get("entity") if isinstance(entry, dict) else None
        ops = entry.get("ops") if isinstance(entry, dict) else None
        if not isinstance(entity, dict) or not isinstance(ops, list):
            raise MetadataError("INVALID_REQUEST", f"entries[{i}] must be {{entity, ops}}")
        user, client_id = entity.get("user"), entity.get("client_id")
        if not all(v is None or isinstance(v, str) for v in (user, client_id)):
            raise MetadataError("INVALID_REQUEST", f"entries[{i}].entity: user and client_id are strings or null")
        check_entity(user, client_id)
        for j, op in enumerate(ops):
            key = op.get("key") if isinstance(op, dict) else None
            value = op.get("value") if isinstance(op, dict) else None
            remove = op.get("remove", False) if isinstance(op, dict) else False
            if not isinstance(key, str) or not isinstance(remove, bool) or (
                    not remove and (isinstance(value, bool) or not isinstance(value, (int, float)))):
                raise MetadataError("INVALID_REQUEST", f"entries[{i}].ops[{j}] must be {{key, value}} or "
                                                       "{key, remove: true}")
            try:
                quota = None if remove else float(value)
            except OverflowError:  # an integer beyond any float
                raise MetadataError("INVALID_REQUEST", f"entries[{i}].ops[{j}]: {key} is out of range") from None
            check_quota(key, quota)
            records.append(ClientQuota(user=user, client_id=client_id, key=key, value=quota))
    return ControllerResult(() if validate_only else tuple(records), {"entries": len(entries)})
