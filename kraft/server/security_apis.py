"""The security administration APIs (Kafka's DescribeAcls / CreateAcls / DeleteAcls,
DescribeClientQuotas / AlterClientQuotas, DescribeUserScramCredentials /
AlterUserScramCredentials): each needs its operation on the cluster (`access.py`). Without an
authorizer the ACL APIs answer SECURITY_DISABLED, as Kafka does; a node that keeps no ACLs,
quotas or SCRAM credentials (ZooKeeper mode) answers UNSUPPORTED_VERSION.
"""

from __future__ import annotations

from typing import Any

from kraft.errors import KraftError
from kraft.metadata.acl import CLUSTER as CLUSTER_TYPE, AclBindingFilter, StandardAcl
from kraft.server.access import (
    ALTER_CLIENT_QUOTAS, ALTER_USER_SCRAM_CREDENTIALS, CLUSTER, CREATE_ACLS, DELETE_ACLS, DESCRIBE_ACLS,
    DESCRIBE_CLIENT_QUOTAS, DESCRIBE_USER_SCRAM_CREDENTIALS, Rule, rule_of,
)
from kraft.server.authorization import Authorization
from kraft.server.request_context import RequestContext
from kraft.server.security_admin import (
    AclService, QuotaDescription, QuotaFilter, ScramResult, UserScramCredentials, UserService,
)


def _rule(api: str) -> Rule:
    return rule_of(api, CLUSTER_TYPE, CLUSTER)


class SecurityApis:
    def __init__(self, acls: AclService | None, users: UserService | None, authorization: Authorization) -> None:
        self._acls = acls
        self._users = users
        self.auth = authorization

    def _acl_service(self, ctx: RequestContext, api: str, needs_authorizer: bool = False) -> AclService:
        self.auth.require(ctx, _rule(api))
        if needs_authorizer and not self.auth.enabled:
            raise KraftError("SECURITY_DISABLED", "No Authorizer is configured on the broker (authorizer.class.name)")
        if self._acls is None:
            raise KraftError("UNSUPPORTED_VERSION", "this node does not manage ACLs")
        return self._acls

    def _user_service(self, ctx: RequestContext, api: str) -> UserService:
        self.auth.require(ctx, _rule(api))
        if self._users is None:
            raise KraftError("UNSUPPORTED_VERSION", "this node does not manage SCRAM credentials")
        return self._users

    def describe_acls(self, ctx: RequestContext, flt: AclBindingFilter) -> list[StandardAcl]:
        return self._acl_service(ctx, DESCRIBE_ACLS, needs_authorizer=True).describe_acls(flt)

    async def create_acls(self, ctx: RequestContext, acls: list[StandardAcl]) -> list[StandardAcl]:
        return await self._acl_service(ctx, CREATE_ACLS, needs_authorizer=True).create_acls(acls)

    async def delete_acls(self, ctx: RequestContext, filters: list[AclBindingFilter]) -> list[list[StandardAcl]]:
        return await self._acl_service(ctx, DELETE_ACLS, needs_authorizer=True).delete_acls(filters)

    def describe_client_quotas(self, ctx: RequestContext, flt: QuotaFilter = QuotaFilter()) -> list[QuotaDescription]:
        """The entities `flt` matches (every one by default) and their quotas."""
        return [q for q in self._acl_service(ctx, DESCRIBE_CLIENT_QUOTAS).describe_client_quotas() if flt.matches(q)]

    async def alter_client_quotas(self, ctx: RequestContext, entries: list[dict[str, Any]], validate_only: bool) -> int:
        return await self._acl_service(ctx, ALTER_CLIENT_QUOTAS).alter_client_quotas(entries, validate_only)

    def describe_scram_credentials(self, ctx: RequestContext, user: str | None) -> list[UserScramCredentials]:
        return self._user_service(ctx, DESCRIBE_USER_SCRAM_CREDENTIALS).describe(user)

    async def alter_scram_credentials(self, ctx: RequestContext, upsertions: list[dict[str, Any]],
                                      deletions: list[dict[str, Any]]) -> list[ScramResult]:
        return await self._user_service(ctx, ALTER_USER_SCRAM_CREDENTIALS).alter(upsertions, deletions)
