"""The transaction APIs on the Kafka listener (kraft/kafka/transactions.py, InitProducerId and
FindCoordinator in kraft/kafka/apis/producer_ids_api.py, Produce's transactional id) over the real
TransactionApis and authorization of kraft/server, with a coordinator below them that keeps its
transactional ids in memory under the coordinator's own pure rules (kraft/broker/transactions/
state.py): Kafka's requests of each served version in, kio responses out (every one encodable),
Kafka's error codes where Kafka puts them."""

from __future__ import annotations

import datetime
from typing import Any, Iterable, Mapping

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from kraft.broker.transactions import state
from kraft.errors import KraftError
from kraft.kafka.codec import encode_response
from request_metrics_support import RecordedRequests
from kraft.kafka.dispatch import HandlerRegistry
from kraft.kafka.entities import build
from kraft.kafka.handlers import register_handlers
from kraft.log import kafka_batch
from kraft.log.batch import TRANSACTIONAL_FLAG, Record
from kraft.server.authorization import Authorization
from kraft.server.groups import CommitOffsetsResult, CommittedOffset, NodeEndpoint, OffsetCommitEntry
from kraft.server.metadata import BrokerDescription, ClusterDescription
from kraft.server.quotas import Quotas
from kraft.server.record_apis import RecordApis
from kraft.server.request_context import RequestContext
from kraft.server.services import BrokerServices
from kraft.server.transaction_apis import TransactionApis
from kraft.server.transactions import FindTransactionCoordinatorResult, TransactionDescription, TransactionProducer

ALICE = RequestContext("User:alice", "10.0.0.8", "PLAINTEXT", client_id="app")
TID, TOPIC, GROUP = "tx", "t", "g"
INIT, FIND, ADD_PARTITIONS, ADD_OFFSETS, END, TXN_COMMIT, DESCRIBE, LIST, PRODUCE = 22, 10, 24, 25, 26, 28, 65, 66, 0
NOW_MS = 1_700_000_000_000


class Coordinator:
    """A TransactionService keeping each id's TransactionMetadata in a dict, moved by the
    coordinator's rules (the records, the runtime and the markers are the real coordinator's
    concern, not the listener's)."""

    def __init__(self, topics: Mapping[str, int]) -> None:
        self.topics = topics  # topic -> partitions
        self.txns: dict[str, state.TransactionMetadata] = {}
        self.next_producer_id = 1000

    def _apply(self, transaction: state.Transition) -> None:
        if transaction.metadata is not None:
            self.txns[transaction.metadata.transactional_id] = transaction.metadata
        if transaction.error is not None:
            raise KraftError(transaction.error, "retry")

    def _rule(self, rule: Any, *args: Any) -> state.Transition:
        try:
            transition: state.Transition = rule(*args)
            return transition
        except state.TxnError as e:
            raise KraftError(e.error_code, e.message) from None

    async def find_coordinator(self, transactional_id: str) -> FindTransactionCoordinatorResult:
        return FindTransactionCoordinatorResult(transactional_id, 0, NodeEndpoint(1, "http-host", 8080))

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None = None) -> TransactionProducer:
        self._rule(state.check_timeout, timeout_ms, 900_000)
        self.next_producer_id += 1
        self._apply(self._rule(state.init_producer_id, self.txns.get(transactional_id), transactional_id, timeout_ms,
                               self.next_producer_id, NOW_MS, expected))
        meta = self.txns[transactional_id]
        return TransactionProducer(meta.producer_id, meta.producer_epoch)

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], str | None]:
        wanted = sorted(set(partitions))
        missing = [tp for tp in wanted if tp[1] >= self.topics.get(tp[0], 0)]
        if missing:
            return {tp: "UNKNOWN_TOPIC_OR_PARTITION" if tp in missing else "OPERATION_NOT_ATTEMPTED" for tp in wanted}
        self._apply(self._rule(state.add_partitions, self.txns.get(transactional_id), transactional_id, producer_id,
                               producer_epoch, wanted, NOW_MS))
        return {tp: None for tp in wanted}

    async def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str) -> None:
        [error] = (await self.add_partitions(transactional_id, producer_id, producer_epoch,
                                             [("__consumer_offsets", 0)])).values()
        if error is not None:
            raise KraftError(error, "__consumer_offsets-0 could not be added")

    async def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              commit: bool, bump_epoch: bool = False) -> TransactionProducer:
        self._apply(self._rule(state.end_transaction, self.txns.get(transactional_id), transactional_id, producer_id,
                               producer_epoch, commit, NOW_MS, bump_epoch))
        meta = self.txns[transactional_id]
        return TransactionProducer(meta.producer_id, meta.producer_epoch)

    async def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], str | None]:
        try:
            return state.verify_partitions(self.txns.get(transactional_id), transactional_id, producer_id,
                                           producer_epoch, partitions)
        except state.TxnError as e:
            raise KraftError(e.error_code, e.message) from None

    def complete(self, transactional_id: str) -> None:
        """The markers are written (the real coordinator's channel)."""
        self.txns[transactional_id] = state.complete(self.txns[transactional_id], NOW_MS)

    async def describe(self, transactional_id: str) -> TransactionDescription:
        meta = self.txns.get(transactional_id)
        if meta is None:
            raise KraftError("TRANSACTIONAL_ID_NOT_FOUND", f"transactional id {transactional_id!r} is unknown")
        return TransactionDescription(meta.transactional_id, 1, meta.state.value, meta.producer_id,
                                      meta.producer_epoch, meta.timeout_ms, meta.txn_start_timestamp,
                                      tuple(sorted(meta.partitions)))

    def list(self, states: Iterable[str] = (), producer_ids: Iterable[int] = ()) -> list[TransactionDescription]:
        wanted_states, wanted_pids = set(states), set(producer_ids)
        return [TransactionDescription(m.transactional_id, 1, m.state.value, m.producer_id, m.producer_epoch,
                                       m.timeout_ms, m.txn_start_timestamp, ())
                for m in self.txns.values()
                if (not wanted_states or m.state.value in wanted_states)
                and (not wanted_pids or m.producer_id in wanted_pids)]


class Groups:
    def __init__(self) -> None:
        self.commits: list[tuple[str, int, int, list[OffsetCommitEntry]]] = []
        self.error: KraftError | None = None

    async def commit_transactional_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                                           offsets: list[OffsetCommitEntry]) -> CommitOffsetsResult:
        if self.error is not None:
            raise self.error
        self.commits.append((group_id, producer_id, producer_epoch, offsets))
        return CommitOffsetsResult(tuple(CommittedOffset(e.topic, e.partition, e.offset) for e in offsets))


class Authorizer:
    """Allows every operation except the (operation, resource type, name) of `denied`."""

    def __init__(self, *denied: tuple[str, str, str]) -> None:
        self.refuse = set(denied)

    def authorize(self, principal: str, host: str, operation: str, resource_type: str, resource_name: str) -> bool:
        return (operation, resource_type, resource_name) not in self.refuse

    def denied(self, resource_type: str) -> None:
        pass


class Metadata:
    def cluster(self, listener: str | None = None) -> ClusterDescription:
        return ClusterDescription("c", 1, (BrokerDescription(1, "kafka-host", 9092, None),))


class Throttle:
    def record(self, kind: str, principal: str, client_id: str, value: float, now_ms: int) -> int:
        return 0


class Node:
    def __init__(self, *denied: tuple[str, str, str]) -> None:
        self.metrics = RecordedRequests()
        self.coordinator, self.groups = Coordinator({TOPIC: 2, "u": 1, "__consumer_offsets": 1}), Groups()
        auth = Authorization(Authorizer(*denied))
        services = BrokerServices(
            node=None, metadata=Metadata(), authorization=auth, quotas=Quotas(Throttle()),  # type: ignore[arg-type]
            # the Produce service refuses transactional produces before it touches replicas or topics
            records=RecordApis(None, None, auth, Quotas(Throttle())),  # type: ignore[arg-type]
            topics=None, groups=None, security=None, controller=None,  # type: ignore[arg-type]
            replicas=None, transactions=TransactionApis(self.coordinator, self.groups, None, auth),  # type: ignore[arg-type]
            metrics=self.metrics)
        self.registry = HandlerRegistry()
        register_handlers(self.registry, services)

    async def ask(self, api_key: int, version: int, body: Mapping[str, Any]) -> Any:
        request = build(load_request_schema(api_key, version), body)
        ctx = ALICE.for_api(type(request).__name__.removesuffix("Request"), version)
        response = await self.registry.handler(api_key)(ctx, request)
        encode_response(7, response)  # every answer is one the client can read
        return response

    async def init(self, version: int = 4, producer_id: int = -1, producer_epoch: int = -1,
                   timeout_ms: int = 60_000) -> Any:
        return await self.ask(INIT, version, {"transactional_id": TID, "transaction_timeout": timeout_ms,
                                              "producer_id": producer_id, "producer_epoch": producer_epoch})

    async def init_other(self, tid: str) -> Any:
        return await self.ask(INIT, 4, {"transactional_id": tid, "transaction_timeout": 60_000,
                                        "producer_id": -1, "producer_epoch": -1})

    async def add(self, version: int, producer_id: int, epoch: int, topics: Mapping[str, list[int]],
                  tid: str = TID) -> dict[tuple[str, int], ErrorCode]:
        answer = await self.ask(ADD_PARTITIONS, version, {
            "v3_and_below_transactional_id": tid, "v3_and_below_producer_id": producer_id,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
        return {(t.name, p.partition_index): p.partition_error_code
                for t in answer.results_by_topic_v3_and_below for p in t.results_by_partition}


DENY_TID = ("WRITE", "TRANSACTIONAL_ID", TID)


def test_the_transaction_apis_advertise_the_clients_versions() -> None:
    table = Node().registry.api_versions
    # confluent-kafka 2.16 sends InitProducerId v4, AddPartitionsToTxn v0, AddOffsetsToTxn v0, EndTxn v1,
    # TxnOffsetCommit v3, FindCoordinator v2; kafka-python 3.0 at most v4/v3/v3/v3/v3; aiokafka v0
    assert {key: table.ranges[key] for key in (INIT, FIND, ADD_PARTITIONS, ADD_OFFSETS, END, TXN_COMMIT, DESCRIBE,
                                               LIST)} == {
        INIT: (0, 5), FIND: (0, 4), ADD_PARTITIONS: (0, 5), ADD_OFFSETS: (0, 4), END: (0, 5), TXN_COMMIT: (0, 4),
        DESCRIBE: (0, 0), LIST: (0, 2)}


async def test_every_api_is_counted_once_in_the_request_metrics_with_its_top_level_error() -> None:
    """One request-metrics path: a data-path API (InitProducerId) and a transaction API
    (DescribeTransactions) each counted once, under Kafka's name, with the answer's error."""
    node = Node(DENY_TID)
    await node.init(4)
    await node.ask(DESCRIBE, 0, {"transactional_ids": [TID]})
    assert node.metrics.observed == [("InitProducerId", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
                                     ("DescribeTransactions", "NONE")]


@pytest.mark.parametrize("version", [0, 3, 5])
async def test_init_producer_id_with_a_transactional_id_bumps_the_epoch(version: int) -> None:
    node = Node()
    first = await node.init(version)
    assert (first.error_code, first.producer_epoch) == (ErrorCode.none, 0) and first.producer_id > 0
    second = await node.init(version)
    assert (second.producer_id, second.producer_epoch) == (first.producer_id, 1)
    assert node.coordinator.txns[TID].timeout_ms == 60_000


@pytest.mark.parametrize("version, fenced", [(3, ErrorCode.invalid_producer_epoch), (4, ErrorCode.producer_fenced)])
async def test_init_producer_id_with_a_stale_producer_epoch_is_fenced(version: int, fenced: ErrorCode) -> None:
    """KIP-360: a producer re-initialising itself names its producer id and epoch; a zombie's
    old epoch must not bump the epoch of the producer that fenced it."""
    node = Node()
    first = await node.init(version)
    current = await node.init(version)  # the successor: epoch 1
    zombie = await node.init(version, first.producer_id, first.producer_epoch)
    assert (zombie.error_code, zombie.producer_id, zombie.producer_epoch) == (fenced, -1, -1)
    assert node.coordinator.txns[TID].producer_epoch == 1
    again = await node.init(version, current.producer_id, current.producer_epoch)
    assert (again.error_code, again.producer_epoch) == (ErrorCode.none, 2)


async def test_init_producer_id_refuses_a_bad_timeout_and_an_unauthorized_id() -> None:
    bad = await Node().init(timeout_ms=10**9)
    assert bad.error_code == ErrorCode.invalid_transaction_timeout
    refused = await Node(DENY_TID).init()
    assert refused.error_code == ErrorCode.transactional_id_authorization_failed


@pytest.mark.parametrize("version", [1, 3])
async def test_find_coordinator_of_a_transactional_id_names_its_kafka_endpoint(version: int) -> None:
    found = await Node().ask(FIND, version, {"key": TID, "key_type": 1})
    assert (found.error_code, found.node_id, found.host, found.port) == (ErrorCode.none, 1, "kafka-host", 9092)
    refused = await Node(("DESCRIBE", "TRANSACTIONAL_ID", TID)).ask(FIND, version, {"key": TID, "key_type": 1})
    assert (refused.error_code, refused.node_id) == (ErrorCode.transactional_id_authorization_failed, -1)


async def test_find_coordinator_v4_batches_transactional_ids_and_refuses_an_unknown_key_type() -> None:
    found = await Node().ask(FIND, 4, {"key_type": 1, "coordinator_keys": [TID, "other"]})
    assert [(c.key, c.error_code, c.port) for c in found.coordinators] == \
        [(TID, ErrorCode.none, 9092), ("other", ErrorCode.none, 9092)]
    unknown = await Node().ask(FIND, 4, {"key_type": 7, "coordinator_keys": [TID]})
    assert unknown.coordinators[0].error_code == ErrorCode.invalid_request


@pytest.mark.parametrize("version", [0, 2, 3])
async def test_add_partitions_answers_each_partition(version: int) -> None:
    node = Node()
    ids = await node.init()
    added = await node.add(version, ids.producer_id, ids.producer_epoch, {TOPIC: [0, 1], "u": [0]})
    assert added == {(TOPIC, 0): ErrorCode.none, (TOPIC, 1): ErrorCode.none, ("u", 0): ErrorCode.none}
    assert node.coordinator.txns[TID].partitions == {(TOPIC, 0), (TOPIC, 1), ("u", 0)}
    missing = await node.add(version, ids.producer_id, ids.producer_epoch, {TOPIC: [0], "missing": [0]})
    assert missing == {(TOPIC, 0): ErrorCode.operation_not_attempted,
                       ("missing", 0): ErrorCode.unknown_topic_or_partition}


@pytest.mark.parametrize("version, fenced", [(1, ErrorCode.invalid_producer_epoch), (2, ErrorCode.producer_fenced)])
async def test_add_partitions_of_an_unknown_id_or_a_stale_epoch_fail_every_partition(
        version: int, fenced: ErrorCode) -> None:
    node = Node()
    ids = await node.init()
    unknown = await node.add(version, 7, 0, {TOPIC: [0, 1]}, tid="nobody")
    assert set(unknown.values()) == {ErrorCode.invalid_producer_id_mapping}
    await node.init()  # fences epoch 0
    stale = await node.add(version, ids.producer_id, ids.producer_epoch, {TOPIC: [0, 1]})
    assert stale == {(TOPIC, 0): fenced, (TOPIC, 1): fenced}


async def test_add_partitions_names_the_topic_it_may_not_write() -> None:
    node = Node(("WRITE", "TOPIC", "u"))
    ids = await node.init()
    answer = await node.add(3, ids.producer_id, ids.producer_epoch, {TOPIC: [0], "u": [0]})
    assert answer == {(TOPIC, 0): ErrorCode.operation_not_attempted, ("u", 0): ErrorCode.topic_authorization_failed}
    assert node.coordinator.txns[TID].partitions == frozenset()
    refused = Node(DENY_TID)
    answer = await refused.add(3, 1, 0, {TOPIC: [0]})
    assert answer == {(TOPIC, 0): ErrorCode.transactional_id_authorization_failed}


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
async def test_add_offsets_then_end_txn_commit(version: int) -> None:
    node = Node()
    ids = await node.init()
    txn = {"transactional_id": TID, "producer_id": ids.producer_id, "producer_epoch": ids.producer_epoch}
    added = await node.ask(ADD_OFFSETS, version, {**txn, "group_id": GROUP})
    assert added.error_code == ErrorCode.none
    assert node.coordinator.txns[TID].partitions == {("__consumer_offsets", 0)}
    ended = await node.ask(END, version, {**txn, "committed": True})
    assert ended.error_code == ErrorCode.none
    assert node.coordinator.txns[TID].state is state.TxnState.PREPARE_COMMIT


@pytest.mark.parametrize("version, fenced", [(1, ErrorCode.invalid_producer_epoch), (3, ErrorCode.producer_fenced)])
async def test_end_txn_and_add_offsets_errors_at_the_top_level(version: int, fenced: ErrorCode) -> None:
    node = Node()
    ids = await node.init()
    txn = {"transactional_id": TID, "producer_id": ids.producer_id, "producer_epoch": ids.producer_epoch}
    nothing_open = await node.ask(END, version, {**txn, "committed": True})
    assert nothing_open.error_code == ErrorCode.invalid_txn_state
    unknown = await node.ask(END, version, {**txn, "transactional_id": "nobody", "committed": False})
    assert unknown.error_code == ErrorCode.invalid_producer_id_mapping
    await node.init()
    stale = await node.ask(END, version, {**txn, "committed": True})
    assert stale.error_code == fenced
    stale_offsets = await node.ask(ADD_OFFSETS, version, {**txn, "group_id": GROUP})
    assert stale_offsets.error_code == fenced
    refused = await Node(("READ", "GROUP", GROUP)).ask(ADD_OFFSETS, version, {**txn, "group_id": GROUP})
    assert refused.error_code == ErrorCode.group_authorization_failed


def _commit_body(version: int, producer_id: int = 1000, epoch: int = 0) -> dict[str, Any]:
    return {"transactional_id": TID, "group_id": GROUP, "producer_id": producer_id, "producer_epoch": epoch,
            "generation_id": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": TOPIC, "partitions": [
                {"partition_index": 0, "committed_offset": 17, "committed_leader_epoch": -1,
                 "committed_metadata": "m"},
                {"partition_index": 1, "committed_offset": 4, "committed_leader_epoch": -1,
                 "committed_metadata": None}]}]}


def _commit_errors(answer: Any) -> list[tuple[str, int, ErrorCode]]:
    return [(t.name, p.partition_index, p.error_code) for t in answer.topics for p in t.partitions]


@pytest.mark.parametrize("version", [0, 2, 3, 4])
async def test_txn_offset_commit_hands_the_offsets_to_the_group_coordinator(version: int) -> None:
    node = Node()
    answer = await node.ask(TXN_COMMIT, version, _commit_body(version, 1000, 3))
    assert _commit_errors(answer) == [(TOPIC, 0, ErrorCode.none), (TOPIC, 1, ErrorCode.none)]
    assert node.groups.commits == [(GROUP, 1000, 3, [OffsetCommitEntry(TOPIC, 0, 17, "m"),
                                                     OffsetCommitEntry(TOPIC, 1, 4, "")])]


async def test_txn_offset_commit_failures_are_every_partitions() -> None:
    node = Node()
    node.groups.error = KraftError("INVALID_PRODUCER_EPOCH", "epoch 3 is fenced")
    answer = await node.ask(TXN_COMMIT, 3, _commit_body(3))
    assert _commit_errors(answer) == [(TOPIC, 0, ErrorCode.invalid_producer_epoch),
                                      (TOPIC, 1, ErrorCode.invalid_producer_epoch)]
    refused = await Node(("READ", "TOPIC", TOPIC)).ask(TXN_COMMIT, 3, _commit_body(3))
    assert {e for _, _, e in _commit_errors(refused)} == {ErrorCode.topic_authorization_failed}
    not_coordinator = Node()
    not_coordinator.groups.error = KraftError("NOT_COORDINATOR", "elsewhere")
    answer = await not_coordinator.ask(TXN_COMMIT, 0, _commit_body(0))
    assert {e for _, _, e in _commit_errors(answer)} == {ErrorCode.not_coordinator}
    assert node.groups.commits == []


async def test_txn_offset_commit_answers_an_unauthorized_topic_on_its_own() -> None:
    """handleTxnOffsetCommitRequest: a topic the principal may not Read answers its partitions
    TOPIC_AUTHORIZATION_FAILED and the others are committed, or get the group's error."""
    body = _commit_body(3)
    body["topics"].append({"name": "u", "partitions": [{"partition_index": 0, "committed_offset": 9,
                                                         "committed_leader_epoch": -1, "committed_metadata": ""}]})
    node = Node(("READ", "TOPIC", "u"))
    answer = await node.ask(TXN_COMMIT, 3, body)
    assert _commit_errors(answer) == [(TOPIC, 0, ErrorCode.none), (TOPIC, 1, ErrorCode.none),
                                      ("u", 0, ErrorCode.topic_authorization_failed)]
    assert node.groups.commits == [(GROUP, 1000, 0, [OffsetCommitEntry(TOPIC, 0, 17, "m"),
                                                     OffsetCommitEntry(TOPIC, 1, 4, "")])]
    node.groups.error = KraftError("INVALID_PRODUCER_EPOCH", "epoch 3 is fenced")
    answer = await node.ask(TXN_COMMIT, 3, body)
    assert _commit_errors(answer) == [(TOPIC, 0, ErrorCode.invalid_producer_epoch),
                                      (TOPIC, 1, ErrorCode.invalid_producer_epoch),
                                      ("u", 0, ErrorCode.topic_authorization_failed)]


async def test_describe_transactions_answers_each_id() -> None:
    node = Node(("DESCRIBE", "TRANSACTIONAL_ID", "secret"))
    ids = await node.init()
    await node.add(3, ids.producer_id, ids.producer_epoch, {TOPIC: [1, 0], "u": [0]})
    answer = await node.ask(DESCRIBE, 0, {"transactional_ids": [TID, "nobody", "secret"]})
    described, unknown, secret = answer.transaction_states
    assert (described.error_code, described.transaction_state, described.producer_id, described.producer_epoch) == \
        (ErrorCode.none, "Ongoing", ids.producer_id, 0)
    assert described.transaction_timeout == datetime.timedelta(seconds=60)
    assert described.transaction_start_time == datetime.datetime.fromtimestamp(NOW_MS / 1000, datetime.timezone.utc)
    assert [(t.topic, t.partitions) for t in described.topics] == [(TOPIC, (0, 1)), ("u", (0,))]
    assert unknown.error_code == ErrorCode.transactional_id_not_found
    assert secret.error_code == ErrorCode.transactional_id_authorization_failed


async def test_list_transactions_filters_by_state_producer_and_duration_and_hides_ids() -> None:
    node = Node(("DESCRIBE", "TRANSACTIONAL_ID", "secret"))
    ids = await node.init()
    await node.add(3, ids.producer_id, ids.producer_epoch, {TOPIC: [0]})
    node.coordinator.txns["idle"] = state.TransactionMetadata("idle", 5, 0, 1000, state.TxnState.EMPTY)
    node.coordinator.txns["secret"] = state.TransactionMetadata("secret", 6, 0, 1000, state.TxnState.EMPTY)
    everything = await node.ask(LIST, 0, {"state_filters": [], "producer_id_filters": []})
    assert sorted((t.transactional_id, t.transaction_state) for t in everything.transaction_states) == \
        [("idle", "Empty"), (TID, "Ongoing")]
    ongoing = await node.ask(LIST, 1, {"state_filters": ["Ongoing", "Bogus"], "producer_id_filters": [],
                                       "duration_filter": -1})
    assert [t.transactional_id for t in ongoing.transaction_states] == [TID]
    assert ongoing.unknown_state_filters == ("Bogus",)
    by_producer = await node.ask(LIST, 0, {"state_filters": [], "producer_id_filters": [5]})
    assert [t.transactional_id for t in by_producer.transaction_states] == ["idle"]
    # running for longer than a year: the one Ongoing since NOW_MS is not; Kafka's arithmetic
    # takes an id without an open transaction (start -1) as running since the epoch
    long_running = await node.ask(LIST, 1, {"state_filters": ["Ongoing"], "producer_id_filters": [],
                                            "duration_filter": 10**13})
    assert long_running.transaction_states == ()


async def test_list_transactions_v2_filters_by_a_pattern_matching_the_whole_id() -> None:
    """KIP-1152: RE2 against the whole transactional id; none or empty lists all; a pattern RE2
    refuses is INVALID_REGULAR_EXPRESSION at the top level."""
    node = Node()
    for tid in ("orders-1", "orders-2", "my-orders-3"):
        node.coordinator.txns[tid] = state.TransactionMetadata(tid, 5, 0, 1000, state.TxnState.EMPTY)

    async def listed(pattern: str | None) -> Any:
        return await node.ask(LIST, 2, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1,
                                        "transactional_id_pattern": pattern})
    assert sorted(t.transactional_id for t in (await listed("orders-.*")).transaction_states) == \
        ["orders-1", "orders-2"]
    assert len((await listed(None)).transaction_states) == len((await listed("")).transaction_states) == 3
    invalid = await listed("orders-(")
    assert invalid.error_code == ErrorCode.invalid_regular_expression and invalid.transaction_states == ()


def broker_add(transactions: list[tuple[str, int, int, bool, dict[str, list[int]]]]) -> dict[str, Any]:
    return {"transactions": [{"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                              "verify_only": verify, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
                             for tid, pid, epoch, verify, topics in transactions]}


def by_transaction(answer: Any) -> dict[str, dict[tuple[str, int], ErrorCode]]:
    return {r.transactional_id: {(t.name, p.partition_index): p.partition_error_code
                                 for t in r.topic_results for p in t.results_by_partition}
            for r in answer.results_by_transaction}


@pytest.mark.parametrize("version", [4, 5])
async def test_add_partitions_v4_batches_transactions_adds_and_verifies(version: int) -> None:
    """KIP-890's broker form: several transactions in one request, each answered on its own; a
    verify_only transaction changes nothing and says which partitions are in it."""
    node = Node()
    ids = await node.init()
    other = await node.init_other("other")
    answer = await node.ask(ADD_PARTITIONS, version, broker_add([
        (TID, ids.producer_id, ids.producer_epoch, False, {TOPIC: [0, 1]}),
        ("other", other.producer_id, other.producer_epoch + 1, False, {TOPIC: [0]}),  # a stale epoch
        ("nobody", 7, 0, True, {TOPIC: [0]})]))
    assert answer.error_code == ErrorCode.none
    assert by_transaction(answer) == {
        TID: {(TOPIC, 0): ErrorCode.none, (TOPIC, 1): ErrorCode.none},
        "other": {(TOPIC, 0): ErrorCode.producer_fenced},
        "nobody": {(TOPIC, 0): ErrorCode.invalid_producer_id_mapping}}
    assert node.coordinator.txns[TID].partitions == {(TOPIC, 0), (TOPIC, 1)}
    verified = await node.ask(ADD_PARTITIONS, version, broker_add([
        (TID, ids.producer_id, ids.producer_epoch, True, {TOPIC: [1], "u": [0]})]))
    assert by_transaction(verified) == {TID: {(TOPIC, 1): ErrorCode.none, ("u", 0): ErrorCode.invalid_txn_state}}
    assert node.coordinator.txns[TID].partitions == {(TOPIC, 0), (TOPIC, 1)}  # verifying added nothing


async def test_add_partitions_v4_needs_cluster_action_not_the_clients_rules() -> None:
    refused = await Node(("CLUSTER_ACTION", "CLUSTER", "kafka-cluster")).ask(ADD_PARTITIONS, 4, broker_add([
        (TID, 1, 0, False, {TOPIC: [0]})]))
    assert refused.error_code == ErrorCode.cluster_authorization_failed and refused.results_by_transaction == ()
    node = Node(("WRITE", "TOPIC", TOPIC))  # a client's rules (Write on the topic) do not apply to a broker's
    ids = await node.init_other(TID)
    answer = await node.ask(ADD_PARTITIONS, 4, broker_add([(TID, ids.producer_id, ids.producer_epoch, False,
                                                            {TOPIC: [0]})]))
    assert by_transaction(answer) == {TID: {(TOPIC, 0): ErrorCode.none}}


async def test_end_txn_v5_bumps_the_epoch_at_every_end_and_takes_a_retry() -> None:
    """Transaction version 2: each EndTxn answers the bumped epoch, the next transaction uses it,
    a retry with the epoch before the bump succeeds with the same answer, and an abort with no
    transaction open bumps the epoch too; a commit with none open is INVALID_TXN_STATE."""
    node = Node()
    ids = await node.init()
    pid, epoch = ids.producer_id, ids.producer_epoch
    for commit in (True, False):
        await node.add(3, pid, epoch, {TOPIC: [0]})
        txn = {"transactional_id": TID, "producer_id": pid, "producer_epoch": epoch, "committed": commit}
        ended = await node.ask(END, 5, txn)
        assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (ErrorCode.none, pid, epoch + 1)
        assert node.coordinator.txns[TID].producer_epoch == epoch + 1
        in_progress = await node.ask(END, 5, txn)
        assert in_progress.error_code == ErrorCode.concurrent_transactions
        node.coordinator.complete(TID)
        retried = await node.ask(END, 5, txn)
        assert (retried.error_code, retried.producer_epoch) == (ErrorCode.none, epoch + 1)
        stale = await node.add(3, pid, epoch, {TOPIC: [0]})  # the ended transaction's epoch is fenced
        assert stale == {(TOPIC, 0): ErrorCode.producer_fenced}
        epoch += 1
    txn = {"transactional_id": TID, "producer_id": pid, "producer_epoch": epoch}
    assert (await node.ask(END, 5, {**txn, "committed": True})).error_code == ErrorCode.invalid_txn_state
    aborted = await node.ask(END, 5, {**txn, "committed": False})
    assert (aborted.error_code, aborted.producer_epoch) == (ErrorCode.none, epoch + 1)
    # v4 (transaction version 1) keeps the epoch
    node = Node()
    ids = await node.init()
    await node.add(3, ids.producer_id, ids.producer_epoch, {TOPIC: [0]})
    await node.ask(END, 4, {"transactional_id": TID, "producer_id": ids.producer_id,
                            "producer_epoch": ids.producer_epoch, "committed": True})
    assert node.coordinator.txns[TID].producer_epoch == ids.producer_epoch


async def test_a_transactional_produce_needs_write_on_its_transactional_id() -> None:
    answer = await Node(DENY_TID).ask(PRODUCE, 9, {
        "transactional_id": TID, "acks": -1, "timeout": 1000,
        "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": b"x"}, {"index": 1, "records": b"y"}]}]})
    assert [(p.index, p.error_code) for t in answer.responses for p in t.partition_responses] == \
        [(0, ErrorCode.transactional_id_authorization_failed), (1, ErrorCode.transactional_id_authorization_failed)]


async def test_transactional_batches_without_a_transactional_id_are_refused_as_kafka_does() -> None:
    """Kafka's handleProduceRequest: transactional records need a transactional id the principal
    may Write, else a principal with Write on the topic alone appends to another producer's
    transaction (its producer id and epoch are all the batch names)."""
    records = (b"k", b"v", (), NOW_MS)
    transactional = kafka_batch.encode_batch(
        [Record(0, NOW_MS, b"k", b"v", ())], base_offset=0, attributes=TRANSACTIONAL_FLAG, producer_id=1001,
        producer_epoch=0, base_sequence=0)
    answer = await Node().ask(PRODUCE, 9, {
        "transactional_id": None, "acks": -1, "timeout": 1000,
        "topic_data": [{"name": TOPIC, "partition_data": [
            {"index": 0, "records": kafka_batch.build_batch([records])}, {"index": 1, "records": transactional}]}]})
    assert [(p.index, p.error_code) for t in answer.responses for p in t.partition_responses] == \
        [(0, ErrorCode.transactional_id_authorization_failed), (1, ErrorCode.transactional_id_authorization_failed)]
