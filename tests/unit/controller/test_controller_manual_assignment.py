"""CreateTopics with a manual replica assignment (Kafka's ReplicationControlManager rules) over a
FakeQuorum: the replicas as given, the unfenced ones in sync led by the first of them; a bad
assignment (empty, a broker twice or unregistered, uneven counts, every broker fenced, counts
given too) changes nothing."""

from __future__ import annotations

from test_controller_service import add_brokers, ctl, error_of  # noqa: F401 (ctl is a fixture)


async def test_the_replicas_are_placed_as_given(ctl) -> None:  # noqa: F811
    await add_brokers(ctl, [1, 2, 3])
    await ctl.register_broker(4, "inc-4", [{"name": "HTTP", "host": "127.0.0.1", "port": 9004}], None)  # fenced
    answer = await ctl.create_topics("manual", assignments=[[3, 1], [4, 2], [2, 3]])
    assert (answer["partitions"], answer["replication_factor"]) == (3, 2)
    placed = [ctl.image.partition("manual", p) for p in range(3)]
    assert [(p.replicas, p.isr, p.leader) for p in placed] == [
        ((3, 1), (3, 1), 3), ((4, 2), (2,), 2), ((2, 3), (2, 3), 2)]


async def test_a_bad_assignment_changes_nothing(ctl) -> None:  # noqa: F811
    await add_brokers(ctl, [1, 2, 3])
    await ctl.register_broker(4, "inc-4", [{"name": "HTTP", "host": "127.0.0.1", "port": 9004}], None)  # fenced
    offset = ctl.image.offset
    for kwargs, code in [
        ({"assignments": [[1, 2], []]}, "INVALID_REPLICA_ASSIGNMENT"),
        ({"assignments": []}, "INVALID_REPLICA_ASSIGNMENT"),
        ({"assignments": [[1, 1]]}, "INVALID_REPLICA_ASSIGNMENT"),
        ({"assignments": [[1, 9]]}, "INVALID_REPLICA_ASSIGNMENT"),
        ({"assignments": [[1, 2], [3]]}, "INVALID_REPLICA_ASSIGNMENT"),
        ({"assignments": [[4]]}, "INVALID_REPLICA_ASSIGNMENT"),
        ({"assignments": [["1"]]}, "INVALID_REPLICA_ASSIGNMENT"),
        ({"assignments": [[1]], "partitions": 1}, "INVALID_REQUEST"),
        ({"assignments": [[1]], "replication_factor": 1}, "INVALID_REQUEST"),
    ]:
        assert await error_of(ctl.create_topics("bad", **kwargs)) == code, kwargs
    assert ctl.image.offset == offset and ctl.image.topic_by_name("bad") is None
