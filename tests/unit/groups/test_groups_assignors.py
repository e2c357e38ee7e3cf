"""Assignors: every subscribed partition goes to exactly one subscriber; range is Kafka's range;
uniform is balanced and sticky."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from kraft.broker.groups.assignors import range_assign, uniform_assign

TOPICS = ("a", "b", "c")

counts_st = st.fixed_dictionaries({t: st.integers(0, 12) for t in TOPICS})
members_st = st.dictionaries(
    st.text("mnopq", min_size=1, max_size=3),
    st.frozensets(st.sampled_from(TOPICS), min_size=1),
    min_size=1, max_size=6,
)


def check_complete(members, counts, assignment) -> None:
    owners: dict[tuple[str, int], str] = {}
    for member_id, tps in assignment.items():
        for tp in tps:
            assert tp not in owners, f"{tp} assigned twice"
            assert tp[0] in members[member_id], f"{tp} given to {member_id}, not subscribed"
            owners[tp] = member_id
    wanted = {(t, p) for subs in members.values() for t in subs for p in range(counts.get(t, 0))}
    assert set(owners) == wanted
    assert set(assignment) == set(members)


@given(members_st, counts_st)
def test_range_is_complete_and_contiguous(members, counts) -> None:
    a = range_assign(members, counts, {})
    check_complete(members, counts, a)
    for topic in TOPICS:
        subs = sorted(m for m in members if topic in members[m])
        sizes = [len([tp for tp in a[m] if tp[0] == topic]) for m in subs]
        if subs:
            assert sizes == sorted(sizes, reverse=True) and max(sizes) - min(sizes) <= 1
        start = 0
        for m, size in zip(subs, sizes):
            assert {p for t, p in a[m] if t == topic} == set(range(start, start + size))
            start += size


def test_range_matches_kafka_example() -> None:
    # Kafka's RangeAssignor javadoc: C0, C1 subscribed to t0, t1 with 3 partitions each.
    a = range_assign({"C0": frozenset({"t0", "t1"}), "C1": frozenset({"t0", "t1"})}, {"t0": 3, "t1": 3}, {})
    assert a["C0"] == {("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1)}
    assert a["C1"] == {("t0", 2), ("t1", 2)}


@given(members_st, counts_st)
def test_uniform_is_complete(members, counts) -> None:
    check_complete(members, counts, uniform_assign(members, counts, {}))


@given(st.lists(st.text("mnopq", min_size=1, max_size=3), min_size=1, max_size=7, unique=True), counts_st)
def test_uniform_balances_a_shared_subscription(member_ids, counts) -> None:
    members = {m: frozenset(TOPICS) for m in member_ids}
    sizes = [len(tps) for tps in uniform_assign(members, counts, {}).values()]
    assert max(sizes) - min(sizes) <= 1


@settings(max_examples=200)
@given(members_st, counts_st, st.data())
def test_uniform_is_sticky(members, counts, data) -> None:
    first = uniform_assign(members, counts, {})
    # Same members again: nothing moves.
    assert uniform_assign(members, counts, first) == first
    # One member leaves: complete again; with one shared subscription the others keep all they had
    # (with different subscriptions balancing may move some, as Kafka's uniform assignor does).
    if len(members) > 1:
        gone = data.draw(st.sampled_from(sorted(members)))
        rest = {m: s for m, s in members.items() if m != gone}
        second = uniform_assign(rest, counts, first)
        check_complete(rest, counts, second)
        if len(set(members.values())) == 1:
            for m in rest:
                assert first[m] <= second[m]


@given(st.integers(1, 6), st.integers(0, 30))
def test_uniform_join_moves_only_what_balance_needs(n, partitions) -> None:
    members = {f"m{i}": frozenset({"a"}) for i in range(n)}
    before = uniform_assign(members, {"a": partitions}, {})
    after = uniform_assign({**members, "new": frozenset({"a"})}, {"a": partitions}, before)
    moved = sum(len(before[m] - after[m]) for m in members)
    assert moved == len(after["new"]) == partitions // (n + 1)
