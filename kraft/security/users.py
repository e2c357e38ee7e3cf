"""The node's `UserService` (kraft/server/security_admin.py): describes SCRAM credentials from its
metadata image and alters them through the controller."""

from __future__ import annotations

from typing import Any, Callable

from kraft.metadata.image import MetadataImage
from kraft.server.security_admin import ScramCredentialInfo, ScramResult, UserScramCredentials


class ScramUsers:
    def __init__(self, image: Callable[[], MetadataImage], front: Any) -> None:
        self.image = image
        self.front = front  # the controller channel

    def describe(self, user: str | None) -> list[UserScramCredentials]:
        return [UserScramCredentials(name, tuple(ScramCredentialInfo(m, it) for m, it in mechanisms.items()))
                for name, mechanisms in self.image().scram.users().items() if user is None or name == user]

    async def alter(self, upsertions: list[dict[str, Any]], deletions: list[dict[str, Any]]) -> list[ScramResult]:
        answer = await self.front.alter_user_scram_credentials(upsertions, deletions)
        return [ScramResult(r["name"], r["mechanism"]) for r in answer.get("results", [])]
