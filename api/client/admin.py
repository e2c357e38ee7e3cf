"""The admin client: topics, partitions, configs, cluster description, partition offsets,
DeleteRecords (kafka-delete-records), partition reassignments (kafka-reassign-partitions) and
consumer groups (list, describe, committed offsets, delete, reset offsets: kafka-consumer-groups).

Calls go to any broker (the node forwards controller work); NOT_CONTROLLER answers that name the
active controller are retried there, other retriable errors after a backoff, until
`api_timeout_ms`. A missing topic is reported at once (UNKNOWN_TOPIC_OR_PARTITION is not retried).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence
from urllib.parse import quote

from kraft.api.client.cluster import ClusterSnapshot
from kraft.api.client.compat import check_unused_configs
from kraft.api.client.security import pop_security
from kraft.api.client.consumer import offsets_path
from kraft.api.client.group import GroupCoordinatorClient
from kraft.api.client.transactions import PreparedTransaction, TxnCoordinatorClient
from kraft.api.client.retry import call_with_retries
from kraft.api.client.transport import Address, Transport
from kraft.api.client.types import (
    ClusterDescription,
    DeletedRecords,
    NewPartitions,
    NewTopic,
    OffsetAndMetadata,
    PartitionOffsets,
    TopicDescription,
    TopicListing,
    TopicPartition,
    partition_info_from_wire,
)
from kraft.api.errors import KraftError
from kraft.security.scram import scram_upsertion

LIST_GROUPS_TIMEOUT_S = 5.0  # per broker: a paused broker must not stall the whole listing
ANSWER_MARGIN_S = 5.0  # beyond the time a request asks the broker to wait
# delete_records does not ask again: the topic is missing, or the replicas already had the timeout
FINAL_DELETE_RECORDS_ERRORS = frozenset({"UNKNOWN_TOPIC_OR_PARTITION", "REQUEST_TIMED_OUT"})

OffsetSpec = int | str  # "earliest", "latest", or a timestamp in ms


@dataclass(frozen=True)
class CreatedTopic:
    name: str
    topic_id: str
    partitions: int
    replication_factor: int
    configs: dict[str, str]


@dataclass(frozen=True)
class TopicConfigs:
    configs: dict[str, str]  # the topic's overrides
    defaults: dict[str, str]  # the broker defaults that apply otherwise


@dataclass(frozen=True)
class PartitionReassignment:
    """A partition's replicas during (or after) a reassignment: `replicas` holds the target and
    the replicas still leaving; empty adding/removing means none is in progress."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


def _reassignments(answer: Mapping[str, Any]) -> dict[TopicPartition, PartitionReassignment]:
    return {
        TopicPartition(p["topic"], int(p["partition"])): PartitionReassignment(
            tuple(p["replicas"]), tuple(p["adding_replicas"]), tuple(p["removing_replicas"]))
        for p in answer.get("partitions", ())
    }


def topic_path(name: str, suffix: str = "") -> str:
    return f"/v1/topics/{quote(name, safe='')}{suffix}"


def _config_strings(configs: Mapping[str, Any]) -> dict[str, str | None]:
    return {str(k): None if v is None else str(v) for k, v in configs.items()}


class Admin:
    """Kafka's Admin client; kafka-python's KafkaAdminClient names (create_topics with NewTopic,
    delete_topics, create_partitions with NewPartitions, list_consumer_groups, ...) work beside the
    single-topic methods (docs/client.md)."""

    def __init__(
        self,
        bootstrap_servers: str | list[str] = "127.0.0.1:9092",
        *,
        client_id: str | None = None,
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
        api_timeout_ms: int = 60_000,
        **configs: Any,
    ) -> None:
        security = pop_security(configs)
        check_unused_configs("admin", configs)
        self.client_id = client_id or "kraft-admin"
        self._transport = Transport(bootstrap_servers, request_timeout_ms, security, self.client_id)
        self._request_timeout_ms = request_timeout_ms
        self._backoff_s = retry_backoff_ms / 1000
        self._api_timeout_s = api_timeout_ms / 1000

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._transport.close()

    def _call(self, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None, *,
              address: Address | None = None, timeout_s: float | None = None) -> Any:
        target: list[Address | None] = [address]

        def attempt() -> Any:
            return self._transport.request(method, path, body, params=params, address=target[0],
                                           timeout_s=timeout_s)

        def on_retry(e: KraftError) -> None:
            leader = e.extra.get("leader")
            if e.error_code == "NOT_CONTROLLER" and isinstance(leader, dict) and leader.get("host"):
                target[0] = (str(leader["host"]), int(leader["port"]))
            else:
                target[0] = None

        return call_with_retries(
            attempt,
            timeout_s=self._api_timeout_s,
            backoff_s=self._backoff_s,
            retriable=lambda e: e.retriable and e.error_code != "UNKNOWN_TOPIC_OR_PARTITION",
            on_retry=on_retry,
        )

    # -- topics --------------------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int | None = None,
        replication_factor: int | None = None,
        configs: Mapping[str, Any] | None = None,
    ) -> CreatedTopic:
        body: dict[str, Any] = {"name": name}
        if partitions is not None:
            body["partitions"] = partitions
        if replication_factor is not None:
            body["replication_factor"] = replication_factor
        if configs:
            body["configs"] = _config_strings(configs)
        a = self._call("POST", "/v1/topics", body)
        return CreatedTopic(a["name"], str(a.get("topic_id", "")), int(a["partitions"]), int(a["replication_factor"]), dict(a.get("configs") or {}))

    def delete_topic(self, name: str) -> None:
        self._call("DELETE", topic_path(name))

    def create_topics(self, new_topics: Iterable[NewTopic], timeout_ms: int | None = None,
                      validate_only: bool = False) -> list[CreatedTopic]:
        """kafka-python's batch form; stops at the first topic that fails (its KraftError).
        `timeout_ms` is the admin's api_timeout_ms here; validate_only is not supported."""
        if validate_only:
            raise KraftError("INVALID_REQUEST", "validate_only is not supported: create the topic or not")
        out = []
        for t in new_topics:
            if t.replica_assignments:
                raise KraftError("INVALID_REQUEST", "replica_assignments is not supported: use alter_partition_reassignments after creating")
            partitions = None if t.num_partitions in (None, -1) else t.num_partitions
            rf = None if t.replication_factor in (None, -1) else t.replication_factor
            out.append(self.create_topic(t.name, partitions, rf, t.topic_configs))
        return out

    def delete_topics(self, topics: Iterable[str], timeout_ms: int | None = None) -> None:
        for name in topics:
            self.delete_topic(name)

    def describe_topics(self, topics: Iterable[str] | None = None) -> list[TopicDescription]:
        """kafka-python's name; None describes every topic."""
        names = [t.name for t in self.list_topics()] if topics is None else list(topics)
        return [self.describe_topic(n) for n in names]

    def list_topics(self, include_internal: bool = True) -> list[TopicListing]:
        a = self._call("GET", "/v1/topics")
        listings = [
            TopicListing(t["name"], str(t.get("topic_id", "")), bool(t.get("internal", False)), int(t.get("partitions", 0)))
            for t in a.get("topics", ())
        ]
        return sorted((t for t in listings if include_internal or not t.internal), key=lambda t: t.name)

    def describe_topic(self, name: str) -> TopicDescription:
        a = self._call("GET", topic_path(name))
        return TopicDescription(
            name=a["name"],
            topic_id=str(a.get("topic_id", "")),
            internal=bool(a.get("internal", False)),
            partitions=tuple(sorted((partition_info_from_wire(p) for p in a.get("partitions", ())), key=lambda p: p.partition)),
            configs=dict(a.get("configs") or {}),
        )

    def create_partitions(self, name: str | Mapping[str, NewPartitions], total_count: int | None = None) -> int | dict[str, int]:
        """Grows `name` to `total_count` partitions (Kafka's createPartitions: a total, not a
        delta). kafka-python's form, `{topic: NewPartitions(total)}`, returns {topic: count}."""
        if isinstance(name, Mapping):
            if any(p.new_assignments for p in name.values()):
                raise KraftError("INVALID_REQUEST", "new_assignments is not supported: the controller places new partitions")
            return {topic: int(self.create_partitions(topic, p.total_count)) for topic, p in name.items()}
        if total_count is None:
            raise KraftError("INVALID_REQUEST", "create_partitions needs the new total count")
        a = self._call("POST", topic_path(name, "/partitions"), {"count": total_count})
        return int(a["partitions"])

    def describe_configs(self, name: str) -> TopicConfigs:
        a = self._call("GET", topic_path(name, "/configs"))
        return TopicConfigs(dict(a.get("configs") or {}), dict(a.get("defaults") or {}))

    def alter_configs(self, name: str, configs: Mapping[str, Any]) -> dict[str, str]:
        """Sets overrides; a None value deletes the override. Returns the topic's overrides."""
        a = self._call("PATCH", topic_path(name, "/configs"), {"configs": _config_strings(configs)})
        return dict(a.get("configs") or {})

    # -- cluster and offsets -------------------------------------------------------------------

    def describe_cluster(self) -> ClusterDescription:
        snapshot = ClusterSnapshot.from_wire(self.metadata() or {})
        brokers = tuple(sorted(snapshot.brokers.values(), key=lambda b: b.node_id))
        return ClusterDescription(snapshot.cluster_id or "", snapshot.controller_id, brokers)

    def metadata(self, topics: Iterable[str] | None = None) -> dict[str, Any]:
        """The raw `GET /v1/metadata` answer."""
        params = {"topics": ",".join(topics)} if topics else None
        return self._call("GET", "/v1/metadata", params=params)

    def describe_quorum(self) -> dict[str, Any]:
        """The controller quorum as kafka-metadata-quorum shows it (`GET /v1/controller/quorum`):
        cluster_id, leader_id, leader_epoch, high_watermark, max_follower_lag, voters, observers."""
        return self._call("GET", "/v1/controller/quorum")

    def elect_leaders(self, election_type: str = "preferred",
                      partitions: Iterable[TopicPartition] | None = None) -> list[dict[str, Any]]:
        """Preferred (or unclean) leader election for `partitions`, or every partition whose
        leader is not its preferred replica when None; one result per partition with any error_code."""
        wanted = None if partitions is None else [[tp.topic, tp.partition] for tp in partitions]
        answer = self._call("POST", "/v1/controller/elect-leaders",
                            {"election_type": election_type, "partitions": wanted})
        return list(answer["partitions"])

    def alter_partition_reassignments(
        self, reassignments: Mapping[TopicPartition, Sequence[int] | None]
    ) -> dict[TopicPartition, PartitionReassignment]:
        """Move each partition to its target replicas, or cancel its reassignment (None), all or
        none (INVALID_REPLICA_ASSIGNMENT, UNKNOWN_TOPIC_OR_PARTITION, NO_REASSIGNMENT_IN_PROGRESS
        reject the plan); each partition's state once the change is committed."""
        body = {"partitions": [
            {"topic": tp.topic, "partition": tp.partition, "replicas": None if r is None else list(r)}
            for tp, r in reassignments.items()
        ]}
        return _reassignments(self._call("POST", "/v1/controller/reassignments", body))

    def describe_user_scram_credentials(self, users: Iterable[str] | None = None) -> dict[str, dict[str, int]]:
        """Kafka's DescribeUserScramCredentials: user -> {mechanism: iterations} (never keys)."""
        wanted = None if users is None else set(users)
        answer = self._call("GET", "/v1/users/scram-credentials")
        return {u["name"]: {c["mechanism"]: c["iterations"] for c in u["credentials"]}
                for u in answer["users"] if wanted is None or u["name"] in wanted}

    def alter_user_scram_credentials(
        self, upsertions: Iterable[tuple[str, str, str, int]] = (), deletions: Iterable[tuple[str, str]] = (),
    ) -> list[dict[str, Any]]:
        """Kafka's AlterUserScramCredentials, all or none: upsertions (user, mechanism, password,
        iterations) are salted and iterated here, so the password never leaves the client;
        deletions are (user, mechanism)."""
        body = {"upsertions": [scram_upsertion(u, m, p, i) for u, m, p, i in upsertions],
                "deletions": [{"name": u, "mechanism": m} for u, m in deletions]}
        return list(self._call("POST", "/v1/users/scram-credentials", body)["results"])

    # -- ACLs and client quotas (kafka-acls, kafka-configs --entity-type users|clients) ---------

    def describe_acls(self, **flt: str | None) -> list[dict[str, str]]:
        """Bindings matching Kafka's filter (resource_type, resource_name, pattern_type ANY/MATCH/
        LITERAL/PREFIXED, principal, host, operation, permission_type; absent = any)."""
        params = {k: v for k, v in flt.items() if v is not None}
        return list(self._call("GET", "/v1/acls", params=params)["acls"])

    def create_acls(self, bindings: Iterable[Mapping[str, str]]) -> list[dict[str, str]]:
        return list(self._call("POST", "/v1/acls", {"acls": [dict(b) for b in bindings]})["created"])

    def delete_acls(self, filters: Iterable[Mapping[str, str | None]]) -> list[list[dict[str, str]]]:
        """Per filter, the bindings it matched and removed."""
        answer = self._call("POST", "/v1/acls/delete", {"filters": [dict(f) for f in filters]})
        return [r["matching_acls"] for r in answer["filter_results"]]

    def describe_client_quotas(self) -> list[dict[str, Any]]:
        """[{"user", "client_id", "quotas": {key: value}}] (None: absent, "<default>": the default)."""
        return list(self._call("GET", "/v1/client-quotas")["entries"])

    def alter_client_quotas(self, user: str | None, client_id: str | None,
                            quotas: Mapping[str, float | None]) -> None:
        """Set (a number) or remove (None) quotas of one entity."""
        ops = [{"key": k, "remove": True} if v is None else {"key": k, "value": v} for k, v in quotas.items()]
        self._call("POST", "/v1/client-quotas", {"entries": [{"entity": {"user": user, "client_id": client_id},
                                                              "ops": ops}]})

    def list_partition_reassignments(self) -> dict[TopicPartition, PartitionReassignment]:
        """The partitions being reassigned."""
        return _reassignments(self._call("GET", "/v1/controller/reassignments"))

    def list_offsets(self, specs: Mapping[TopicPartition, OffsetSpec]) -> dict[TopicPartition, PartitionOffsets]:
        """Offsets per partition: spec "earliest" (log start), "latest" (high watermark), or a
        timestamp (the first offset with a timestamp at least that late, None when none is)."""
        out = {}
        for tp, spec in specs.items():
            params = None
            if spec not in ("earliest", "latest"):
                if not isinstance(spec, int):
                    raise KraftError("INVALID_REQUEST", f"offset spec must be earliest, latest or a timestamp, got {spec!r}")
                params = {"timestamp": str(spec)}
            a = self._call("GET", offsets_path(tp), params=params)
            start, hw = int(a["log_start_offset"]), int(a["high_watermark"])
            leo = int(a.get("log_end_offset", hw))
            if spec == "earliest":
                offset, ts = start, None
            elif spec == "latest":
                offset, ts = hw, None
            else:
                offset, ts = a.get("offset"), a.get("timestamp")
            out[tp] = PartitionOffsets(start, hw, leo, offset, ts)
        return out

    def delete_records(
        self, records_to_delete: Mapping[TopicPartition, int], timeout_ms: int | None = None,
        partition_leader_id: int | None = None, *, raise_errors: bool = True,
    ) -> dict[TopicPartition, DeletedRecords]:
        """Kafka's deleteRecords (kafka-python's KafkaAdminClient.delete_records): deletes each
        partition's records before its offset (-1: up to the high watermark), answered once every
        live replica's log start reached it, within `timeout_ms` (default: the request timeout).
        A partition whose leader moved is asked again until `api_timeout_ms`. A partition that
        failed raises its KraftError, or with `raise_errors=False` answers `DeletedRecords(-1,
        error)`. `partition_leader_id` sends the request to that broker (any broker forwards each
        partition to its leader)."""
        wait_ms = self._request_timeout_ms if timeout_ms is None else timeout_ms
        address = None if partition_leader_id is None else self._broker_address(partition_leader_id)
        pending = {TopicPartition(*tp): offset for tp, offset in records_to_delete.items()}
        out: dict[TopicPartition, DeletedRecords] = {}
        deadline = time.monotonic() + self._api_timeout_s
        while pending:
            body = {"timeout_ms": wait_ms, "partitions": [
                {"topic": tp.topic, "partition": tp.partition, "offset": offset} for tp, offset in pending.items()]}
            answer = self._call("POST", "/v1/delete-records", body, address=address,
                                timeout_s=wait_ms / 1000 + ANSWER_MARGIN_S)
            again = {}
            for p in answer["partitions"]:
                tp = TopicPartition(p["topic"], int(p["partition"]))
                if not p.get("error_code"):
                    out[tp] = DeletedRecords(int(p["low_watermark"]))
                    continue
                error = KraftError(p["error_code"], p.get("message") or "")
                if (error.retriable and error.error_code not in FINAL_DELETE_RECORDS_ERRORS
                        and time.monotonic() + self._backoff_s < deadline):
                    again[tp] = pending[tp]  # a leader change: its new leader is asked
                else:
                    out[tp] = DeletedRecords(-1, error)
            pending = again
            if pending:
                time.sleep(self._backoff_s)
        failed = [r.error for r in out.values() if r.error is not None]
        if raise_errors and failed:
            raise failed[0]
        return {TopicPartition(*tp): out[TopicPartition(*tp)] for tp in records_to_delete}

    def describe_log_dirs(self, brokers: Iterable[int] | None = None,
                          topics: Iterable[str] | None = None) -> dict[int, list[dict[str, Any]]]:
        """Kafka's describeLogDirs: each broker's (of `brokers`; None: all) log directories with
        their partitions (of `topics`; None: all), as `GET /v1/log-dirs` answers them."""
        known = ClusterSnapshot.from_wire(self.metadata() or {}).brokers
        wanted = sorted(known) if brokers is None else sorted(set(brokers))
        missing = [b for b in wanted if b not in known]
        if missing:
            raise KraftError("BROKER_NOT_AVAILABLE", f"brokers {missing} are not in the cluster's metadata")
        params = None if topics is None else {"topics": ",".join(topics)}
        return {b: self._transport.request("GET", "/v1/log-dirs", params=params,
                                           address=(known[b].host, known[b].port))["log_dirs"] for b in wanted}

    def _broker_address(self, node_id: int) -> Address:
        broker = ClusterSnapshot.from_wire(self.metadata() or {}).brokers.get(node_id)
        if broker is None:
            raise KraftError("BROKER_NOT_AVAILABLE", f"broker {node_id} is not in the cluster's metadata")
        return broker.host, broker.port

    # -- consumer groups -----------------------------------------------------------------------

    def _group(self, group_id: str) -> GroupCoordinatorClient:
        return GroupCoordinatorClient(self._transport, group_id, self._api_timeout_s, self._backoff_s)

    def list_groups(self) -> list[dict[str, Any]]:
        """Every group of the cluster that the reachable brokers coordinate (see
        `list_groups_with_errors` for which brokers did not answer)."""
        return self.list_groups_with_errors()[0]

    def list_groups_with_errors(self) -> tuple[list[dict[str, Any]], dict[int, KraftError]]:
        """Asks every broker for the groups it coordinates, in parallel and each bounded by a
        short timeout; a broker that is down or paused is reported in the errors (by node id) and
        the others' groups are still listed, as Kafka's ListConsumerGroups result does."""
        return self._ask_every_broker("/v1/groups", None, "groups", "group_id")

    def _ask_every_broker(self, path: str, params: dict[str, Any] | None, field: str,
                          key: str) -> tuple[list[dict[str, Any]], dict[int, KraftError]]:
        """`GET path` of every broker in parallel (each bounded by a short timeout): the union of
        their `field` lists by `key`, and the brokers that did not answer."""
        brokers = sorted(ClusterSnapshot.from_wire(self.metadata() or {}).brokers.values(), key=lambda b: b.node_id)
        timeout_s = min(LIST_GROUPS_TIMEOUT_S, self._request_timeout_ms / 1000)

        def ask(b: Any) -> list[dict[str, Any]]:
            return self._transport.request("GET", path, params=params, address=(b.host, b.port),
                                           timeout_s=timeout_s)[field]

        found: dict[str, dict[str, Any]] = {}
        errors: dict[int, KraftError] = {}
        with ThreadPoolExecutor(max_workers=max(1, min(8, len(brokers)))) as pool:
            for b, future in [(b, pool.submit(ask, b)) for b in brokers]:
                try:
                    for item in future.result():
                        found[item[key]] = item
                except KraftError as e:
                    if not e.retriable:
                        raise
                    errors[b.node_id] = e
        return [found[name] for name in sorted(found)], errors

    # -- transactions (kafka-transactions.sh) --------------------------------------------------

    def list_transactions(self, states: Iterable[str] = (), producer_ids: Iterable[int] = ()
                          ) -> tuple[list[dict[str, Any]], dict[int, KraftError]]:
        """Kafka's ListTransactions on every broker: the transactional ids they coordinate
        (filtered by state and producer id), and the brokers that did not answer."""
        params = {k: ",".join(map(str, v)) for k, v in (("states", states), ("producer_ids", producer_ids)) if v}
        return self._ask_every_broker("/v1/transactions", params or None, "transactions", "transactional_id")

    def describe_transactions(self, transactional_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """Kafka's DescribeTransactions, each asked of its coordinator."""
        return {tid: TxnCoordinatorClient(self._transport, tid, self._api_timeout_s, self._backoff_s).request("GET")
                for tid in transactional_ids}

    def describe_producers(self, topic: str, partition: int) -> list[dict[str, Any]]:
        """Kafka's DescribeProducers: the active producers of a partition (from its leader)."""
        path = f"/v1/topics/{quote(topic, safe='')}/partitions/{partition}/producers"
        return self._call("GET", path)["producers"]

    def describe_producers_of(self, partitions: Iterable[tuple[str, int]]
                              ) -> dict[tuple[str, int], list[dict[str, Any]] | KraftError]:
        """Kafka's Admin.describeProducers over many partitions: each leader is asked once for all
        the partitions it leads (`POST /v1/producers/describe`); a partition whose answer is
        retriable (its leader moved) is asked again until api_timeout_ms. Per partition: its
        active producers, or the error it ended with."""
        todo = sorted(set(partitions))
        found: dict[tuple[str, int], list[dict[str, Any]] | KraftError] = {}
        deadline = time.monotonic() + self._api_timeout_s
        while True:
            snapshot = ClusterSnapshot.from_wire(self.metadata(sorted({t for t, _ in todo})))
            by_leader: dict[Address, list[tuple[str, int]]] = {}
            retry: list[tuple[str, int]] = []
            for topic, partition in todo:
                leader = snapshot.leader_id(TopicPartition(topic, partition))
                address = None if leader is None else snapshot.broker_address(leader)
                if address is not None:
                    by_leader.setdefault(address, []).append((topic, partition))
                    continue
                missing = snapshot.topic_errors.get(topic)
                found[(topic, partition)] = missing or KraftError(
                    "LEADER_NOT_AVAILABLE", f"{topic}-{partition} has no leader in the metadata")
                if missing is None or missing.retriable:
                    retry.append((topic, partition))
            for address, tps in by_leader.items():
                body = {"partitions": [{"topic": t, "partition": p} for t, p in tps]}
                try:
                    answers = self._transport.request("POST", "/v1/producers/describe", body,
                                                      address=address)["partitions"]
                except KraftError as e:
                    if not e.retriable:
                        raise
                    found.update(dict.fromkeys(tps, e))
                    retry.extend(tps)
                    continue
                for answer in answers:
                    tp = (answer["topic"], int(answer["partition"]))
                    if answer.get("error_code"):
                        error = KraftError(answer["error_code"], f"{tp[0]}-{tp[1]}: {answer.get('message') or ''}")
                        found[tp] = error
                        if error.retriable:
                            retry.append(tp)
                    else:
                        found[tp] = answer["producers"]
            if not retry or time.monotonic() + self._backoff_s > deadline:
                return found
            todo = retry
            time.sleep(self._backoff_s)

    def end_transaction(self, prepared: PreparedTransaction, commit: bool) -> None:
        """EndTxn for a transaction another process prepared (`Producer.prepare_transaction`),
        sent to the coordinator it found (asked again if that moved); retriable answers
        (CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR) are retried
        for api_timeout_ms. Raises KraftError: PRODUCER_FENCED or INVALID_PRODUCER_EPOCH when
        that producer epoch was fenced (a newer InitProducerId, or the transaction timed out)."""
        coordinator = TxnCoordinatorClient(self._transport, prepared.transactional_id, self._api_timeout_s,
                                           self._backoff_s)
        coordinator.coordinator = prepared.coordinator
        coordinator.end(prepared.producer_id, prepared.producer_epoch, commit)

    def abort_transaction(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                          coordinator_epoch: int) -> int | None:
        """Kafka's abortTransaction (AbortTransactionSpec): an ABORT marker for the open
        transaction of `producer_id` in the partition, written by its leader (ClusterAction on
        the cluster). For a hanging transaction only: one the coordinator will never end. The
        marker's offset (None for a `__consumer_offsets` partition)."""
        path = f"/v1/topics/{quote(topic, safe='')}/partitions/{partition}/abort-transaction"
        body = {"producer_id": producer_id, "producer_epoch": producer_epoch,
                "coordinator_epoch": max(coordinator_epoch, 0)}  # -1 (no marker seen yet): 0, as Kafka's tool
        return self._call("POST", path, body)["offset"]

    def describe_group(self, group_id: str) -> dict[str, Any]:
        """State, members with their assignments, and per partition the committed offset, the
        log end offset and the lag (the `GET /v1/groups/{group}` answer)."""
        return self._group(group_id).request("GET", retry=True)

    def list_group_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        answer = self._group(group_id).request("GET", "/offsets")
        return {TopicPartition(o["topic"], int(o["partition"])): int(o["offset"]) for o in answer.get("offsets", ())}

    def delete_group(self, group_id: str) -> None:
        self._group(group_id).request("DELETE")

    # kafka-python's KafkaAdminClient names for the group calls above.

    def list_consumer_groups(self) -> list[tuple[str, str]]:
        """(group_id, protocol_type) pairs, as kafka-python returns them."""
        return [(g["group_id"], g.get("protocol_type") or "consumer") for g in self.list_groups()]

    def describe_consumer_groups(self, group_ids: Iterable[str]) -> list[dict[str, Any]]:
        return [self.describe_group(g) for g in group_ids]

    def list_consumer_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None = None
                                    ) -> dict[TopicPartition, OffsetAndMetadata]:
        answer = self._group(group_id).request("GET", "/offsets")
        wanted = None if partitions is None else set(partitions)
        out = {}
        for o in answer.get("offsets", ()):
            tp = TopicPartition(o["topic"], int(o["partition"]))
            if wanted is None or tp in wanted:
                out[tp] = OffsetAndMetadata(int(o["offset"]), str(o.get("metadata") or ""))
        return out

    def delete_consumer_groups(self, group_ids: Iterable[str]) -> list[tuple[str, KraftError | None]]:
        """(group_id, error or None) per group, as kafka-python's (group_id, error) pairs."""
        out: list[tuple[str, KraftError | None]] = []
        for g in group_ids:
            try:
                self.delete_group(g)
                out.append((g, None))
            except KraftError as e:
                out.append((g, e))
        return out

    def delete_group_offsets(
        self, group_id: str, topics: Iterable[tuple[str, Iterable[int] | None]]
    ) -> list[dict[str, Any]]:
        """Kafka's deleteConsumerGroupOffsets: (topic, partitions or None for all) ->
        [{"topic", "partition", "error_code"?, "message"?}]."""
        body = {"topics": [{"topic": t} if ps is None else {"topic": t, "partitions": list(ps)} for t, ps in topics]}
        return list(self._group(group_id).request("POST", "/offsets/delete", body).get("partitions", ()))

    def reset_group_offsets(
        self, group_id: str, topics: Iterable[str], strategy: str, value: int | None = None,
        partitions: Iterable[int] | None = None, dry_run: bool = True,
    ) -> list[dict[str, Any]]:
        """strategy: earliest, latest, offset, datetime (value: ms) or shift (value: +/- n).
        Returns [{"topic", "partition", "previous_offset", "new_offset"}]."""
        body: dict[str, Any] = {"topics": list(topics), "strategy": strategy, "dry_run": dry_run}
        if value is not None:
            body["value"] = value
        if partitions is not None:
            body["partitions"] = list(partitions)
        return list(self._group(group_id).request("POST", "/offsets/reset", body).get("offsets", ()))
