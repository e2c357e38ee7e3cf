"""`AclService` (kraft/server/security_admin.py): ACLs and client quotas read from this node's
metadata image and changed through the active controller (`ControllerChannel`, which answers once
this node's image shows the change)."""

from __future__ import annotations

from typing import Any, Callable

from kraft.controller.channel import ControllerChannel
from kraft.metadata.acl import AclBindingFilter, StandardAcl, acl_from_dict
from kraft.metadata.image import MetadataImage
from kraft.server.security_admin import QuotaDescription


class AclAdmin:
    def __init__(self, controller: ControllerChannel, image: Callable[[], MetadataImage]) -> None:
        self.controller = controller
        self._image = image

    def describe_acls(self, flt: AclBindingFilter) -> list[StandardAcl]:
        return [acl for _, acl in self._image().acls.matching(flt)]

    async def create_acls(self, acls: list[StandardAcl]) -> list[StandardAcl]:
        answer = await self.controller.create_acls([acl.to_dict() for acl in acls])
        return [acl_from_dict(created) for created in answer.get("created", [])]

    async def delete_acls(self, filters: list[AclBindingFilter]) -> list[list[StandardAcl]]:
        # the controller takes a filter's set fields only (an absent one matches anything)
        sent = [{name: getattr(flt, name) for name in StandardAcl.FIELDS if getattr(flt, name) is not None}
                for flt in filters]
        answer = await self.controller.delete_acls(sent)
        return [[acl_from_dict(acl) for acl in result["matching_acls"]]
                for result in answer.get("filter_results", [])]

    def describe_client_quotas(self) -> list[QuotaDescription]:
        return [QuotaDescription(e["user"], e["client_id"], e["quotas"])
                for e in self._image().client_quotas.describe()]

    async def alter_client_quotas(self, entries: list[dict[str, Any]], validate_only: bool) -> int:
        answer = await self.controller.alter_client_quotas(entries, validate_only)
        return int(answer.get("entries", len(entries)))
