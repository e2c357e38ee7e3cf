"""ACLs, client quotas and SCRAM credentials (Kafka's DescribeAcls/CreateAcls/DeleteAcls,
DescribeClientQuotas/AlterClientQuotas, DescribeUserScramCredentials/AlterUserScramCredentials),
as the public routes take them and nodes forward them to the controller (`request_id` added).

Fields are typed here; what the values mean (a known operation or mechanism, base64 of the right
length, a known quota key) the controller checks, with Kafka's error codes."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from kraft.api.errors import invalid_request
from kraft.api.messages.common import INT32_MAX, Message, RequestId
from kraft.metadata.client_quotas import QUOTA_KEYS, check_quota
from kraft.metadata.errors import MetadataError

MAX_ENTRIES = 1000
MAX_NAME_CHARS = 1024

# -- ACLs -----------------------------------------------------------------------------------------


class AclBinding(Message):
    """Names as Kafka spells them, in any case (Read, READ)."""

    resource_type: Annotated[str, Meta(extra_json_schema={"enum": ["TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID"]})]
    resource_name: str
    pattern_type: Annotated[str, Meta(extra_json_schema={"enum": ["LITERAL", "PREFIXED"]})]
    principal: Annotated[str, Meta(description="User:alice, User:*")]
    host: Annotated[str, Meta(description="an address, or * (the default)")] = "*"
    operation: Annotated[str, Meta(description=(
        "Kafka's: READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, "
        "ALTER_CONFIGS, IDEMPOTENT_WRITE, ALL"))]
    permission_type: Annotated[str, Meta(extra_json_schema={"enum": ["ALLOW", "DENY"]})]


class AclFilter(Message):
    """Kafka's AclBindingFilter: an absent field (or ANY) matches everything; pattern_type MATCH
    matches every pattern that applies to resource_name."""

    resource_type: str | None = None
    resource_name: str | None = None
    pattern_type: Annotated[str | None, Meta(description="ANY, MATCH, LITERAL or PREFIXED")] = None
    principal: str | None = None
    host: str | None = None
    operation: str | None = None
    permission_type: str | None = None


AclBindings = Annotated[list[AclBinding], Meta(max_length=MAX_ENTRIES)]
AclFilters = Annotated[list[AclFilter], Meta(max_length=MAX_ENTRIES)]


class CreateAclsRequest(Message):
    acls: AclBindings


class ControllerCreateAclsRequest(CreateAclsRequest):
    request_id: RequestId | None = None


class DescribeAclsResponse(Message):
    acls: list[AclBinding]


class CreateAclsResponse(Message):
    created: list[AclBinding]


class ControllerCreateAclsResponse(CreateAclsResponse):
    metadata_offset: int


class DeleteAclsRequest(Message):
    filters: AclFilters


class ControllerDeleteAclsRequest(DeleteAclsRequest):
    request_id: RequestId | None = None


class FilterResult(Message):
    matching_acls: list[AclBinding]


class DeleteAclsResponse(Message):
    filter_results: list[FilterResult]


class ControllerDeleteAclsResponse(DeleteAclsResponse):
    metadata_offset: int


# -- client quotas ----------------------------------------------------------------------------------


class QuotaEntity(Message, omit_defaults=False):
    """A user, a client id, or both; `<default>` names the default user or client id; null: any."""

    user: str | None = None
    client_id: str | None = None


class QuotaOp(Message):
    """Set `key` to `value`, or with `remove: true` remove it."""

    key: Annotated[str, Meta(extra_json_schema={
        "enum": ["producer_byte_rate", "consumer_byte_rate", "request_percentage"]})]
    # the range is checked by check_quota, whose message names the quota (the schema states it too)
    value: Annotated[float, Meta(extra_json_schema={"exclusiveMinimum": 0})] | None = None
    remove: bool = False

    def __post_init__(self) -> None:
        if self.remove:
            self.value = None
        elif self.value is None:
            raise invalid_request("Object missing required field `value` (or `remove: true`)")
        elif self.key in QUOTA_KEYS:  # an unknown key is the controller's to refuse, as the others
            try:
                check_quota(self.key, self.value)
            except MetadataError as e:
                raise invalid_request(e.message) from None


class QuotaEntry(Message):
    entity: QuotaEntity
    ops: Annotated[list[QuotaOp], Meta(max_length=MAX_ENTRIES)]


class AlterClientQuotasRequest(Message):
    entries: Annotated[list[QuotaEntry], Meta(max_length=MAX_ENTRIES)]
    validate_only: bool = False


class ControllerAlterClientQuotasRequest(AlterClientQuotasRequest):
    request_id: RequestId | None = None


class AlterClientQuotasResponse(Message):
    entries: Annotated[int, Meta(description="how many entries were changed")]


class ControllerAlterClientQuotasResponse(AlterClientQuotasResponse):
    metadata_offset: int


class QuotaDescription(Message, omit_defaults=False):
    user: str | None
    client_id: str | None
    quotas: dict[str, float]


class DescribeClientQuotasResponse(Message):
    entries: list[QuotaDescription]


# -- SCRAM credentials ------------------------------------------------------------------------------

ScramMechanism = Annotated[str, Meta(extra_json_schema={"enum": ["SCRAM-SHA-256", "SCRAM-SHA-512"]})]
UserName = Annotated[str, Meta(min_length=1, max_length=MAX_NAME_CHARS)]


class ScramUpsertion(Message):
    """The client salts and iterates: the password itself is never sent."""

    name: UserName
    mechanism: ScramMechanism
    iterations: Annotated[int, Meta(ge=0, le=INT32_MAX, description=(
        "4096 to 16384 (Kafka's range, which the controller checks); absent: 4096"))] | None = None
    salt: Annotated[str, Meta(description="base64")]
    salted_password: Annotated[str, Meta(description="base64 PBKDF2(password, salt, iterations)")]


class ScramDeletion(Message):
    name: UserName
    mechanism: ScramMechanism


class AlterScramCredentialsRequest(Message):
    """All or none."""

    upsertions: Annotated[list[ScramUpsertion], Meta(max_length=MAX_ENTRIES)] = []
    deletions: Annotated[list[ScramDeletion], Meta(max_length=MAX_ENTRIES)] = []


class ControllerAlterScramCredentialsRequest(AlterScramCredentialsRequest):
    request_id: RequestId | None = None


class ScramResult(Message):
    name: str
    mechanism: ScramMechanism


class AlterScramCredentialsResponse(Message):
    results: list[ScramResult]


class ControllerAlterScramCredentialsResponse(AlterScramCredentialsResponse):
    metadata_offset: int


class DescribeScramQuery(Message):
    user: Annotated[str | None, Meta(description="one user only")] = None


class ScramCredential(Message):
    mechanism: ScramMechanism
    iterations: int


class UserScramCredentials(Message):
    name: str
    credentials: list[ScramCredential]


class DescribeScramCredentialsResponse(Message):
    users: list[UserScramCredentials]
