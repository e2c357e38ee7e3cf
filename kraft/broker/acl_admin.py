"""`AclService` (api/routes/acls.py): ACLs and client quotas read from this node's metadata image
and changed through the active controller (`ControllerChannel`, which answers once this node's
image shows the change)."""

from __future__ import annotations

from typing import Any, Callable

from kraft.controller.channel import ControllerChannel
from kraft.metadata.acl import filter_from_dict
from kraft.metadata.image import MetadataImage


class AclAdmin:
    def __init__(self, controller: ControllerChannel, image: Callable[[], MetadataImage]) -> None:
        self.controller = controller
        self._image = image

    def describe_acls(self, flt: dict[str, Any]) -> list[dict[str, str]]:
        return [acl.to_dict() for _, acl in self._image().acls.matching(filter_from_dict(flt))]

    async def create_acls(self, acls: list[dict[str, Any]]) -> dict[str, Any]:
        answer = await self.controller.create_acls(acls)
        return {"created": answer.get("created", [])}

    async def delete_acls(self, filters: list[dict[str, Any]]) -> dict[str, Any]:
        answer = await self.controller.delete_acls(filters)
        return {"filter_results": answer.get("filter_results", [])}

    def describe_client_quotas(self) -> list[dict[str, Any]]:
        return self._image().client_quotas.describe()

    async def alter_client_quotas(self, entries: list[dict[str, Any]], validate_only: bool) -> dict[str, Any]:
        answer = await self.controller.alter_client_quotas(entries, validate_only)
        return {"entries": answer.get("entries", len(entries))}
