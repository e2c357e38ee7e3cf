"""The chaos history checker finds each kind of anomaly in a hand-made history, and none in a
clean one."""

from __future__ import annotations

from typing import Any

from kraft.bench.chaos.checker import check


def ack(producer: str, seq: int, offset: int, part: int = 0, idem: bool = True) -> dict[str, Any]:
    return {"k": "ack", "t": 1.0, "producer": producer, "idem": idem, "topic": "t", "part": part,
            "seq": seq, "value": f"{producer}-{seq}", "offset": offset}


def final_log(records: list[tuple[int, str]], part: int = 0,
              quarantined: list[tuple[int, int]] | None = None) -> dict[str, Any]:
    out = {"k": "final_log", "t": 9.0, "topic": "t", "part": part, "records": [list(r) for r in records]}
    if quarantined is not None:
        out["quarantined"] = [list(r) for r in quarantined]
    return out


def clean() -> list[dict[str, Any]]:
    return [
        {"k": "run", "t": 0.1, "faults": ["kill"]},
        {"k": "fault", "t": 0.5, "fault": "kill", "target": 2},
        {"k": "fenced", "t": 3.6, "broker": 2, "node": 1},  # the killed broker: the fault's doing
        {"k": "recovered", "t": 3.9, "fault": "kill", "target": 2, "seconds": 1.4},
        ack("idem", 0, 0), ack("idem", 1, 1),
        {"k": "seen", "t": 2.0, "topic": "t", "part": 0, "offset": 0, "value": "idem-0"},
        {"k": "commit", "t": 2.1, "group": "g", "topic": "t", "part": 0, "offset": 1},
        {"k": "meta", "t": 3.0, "op": "create", "phase": "sent", "topic": "m"},
        {"k": "meta", "t": 3.1, "op": "create", "phase": "ok", "topic": "m"},
        {"k": "avail", "t": 4.0, "topic": "t", "part": 0, "ok": False, "leader": -1},
        {"k": "avail", "t": 6.5, "topic": "t", "part": 0, "ok": True, "leader": 1},
        final_log([(0, "idem-0"), (1, "idem-1")]),
        {"k": "final_commit", "t": 9.0, "group": "g", "topic": "t", "part": 0, "offset": 1},
        {"k": "final_topics", "t": 9.0, "node": 1, "topics": {"t": 1, "m": 1}},
    ]


def replaced(events: list[dict[str, Any]], kind: str, new: dict[str, Any]) -> list[dict[str, Any]]:
    return [new if e["k"] == kind else e for e in events]


def test_a_clean_history_has_no_anomaly():
    found = check(clean())
    assert found.ok
    assert (found.acked, found.lost, found.duplicated, found.reordered, found.truncated_after_seen,
            found.offsets_lost, found.metadata_lost) == (2, 0, 0, 0, 0, 0, 0)
    assert found.faults == {"kill": 1} and found.faults_missing == [] and found.not_recovered == 0
    assert found.recoveries == [{"fault": "kill", "target": 2, "seconds": 1.4}]
    assert found.max_time_to_full_isr_s == found.p99_time_to_full_isr_s == 1.4
    assert (found.fencings, found.fencings_uncaused) == (1, 0)
    assert found.max_unavailable_s == 2.5


def test_an_acknowledged_record_missing_is_lost():
    found = check(replaced(clean(), "final_log", final_log([(0, "idem-0")])))
    assert found.lost == 1 and not found.ok
    assert found.examples["lost"][0]["offset"] == 1


def test_an_acknowledged_record_at_another_offset_is_lost():
    found = check(replaced(clean(), "final_log", final_log([(0, "idem-0"), (1, "other-0"), (2, "idem-1")])))
    assert found.lost == 1


def test_duplicates_counted_and_only_the_idempotent_ones_are_a_defect():
    found = check(replaced(clean(), "final_log", final_log([(0, "idem-0"), (1, "idem-1"), (2, "idem-1")])))
    assert (found.duplicated, found.duplicated_idempotent) == (1, 1) and not found.ok
    plain = [ack("plain", 0, 0, idem=False), final_log([(0, "plain-0"), (1, "plain-0")])]
    found = check(plain)
    assert (found.duplicated, found.duplicated_idempotent) == (1, 0) and found.ok


def test_a_producer_record_before_one_sent_earlier_is_reordered():
    events = [ack("idem", 0, 1), ack("idem", 1, 0), final_log([(0, "idem-1"), (1, "idem-0")])]
    found = check(events)
    assert found.reordered == 1 and found.lost == 0 and not found.ok


def test_a_seen_record_later_replaced_or_cut_was_truncated_after_seen():
    events = clean() + [{"k": "seen", "t": 2.0, "topic": "t", "part": 0, "offset": 5, "value": "idem-9"}]
    assert check(events).truncated_after_seen == 1
    events = clean() + [{"k": "seen", "t": 2.0, "topic": "t", "part": 0, "offset": 1, "value": "gone-1"}]
    assert check(events).truncated_after_seen == 1


def test_a_quarantined_range_holding_only_unacknowledged_records_is_reported_not_a_failure():
    """The final read stepped over [2, 4) (the leader answered CORRUPT_MESSAGE): records whose
    sends were never acknowledged (a plain producer's timed-out send that was written) lie
    there; the run is ok, and the range is counted."""
    events = clean() + [ack("idem", 4, 4)]
    events = replaced(events, "final_log", final_log([(0, "idem-0"), (1, "idem-1"), (4, "idem-4")],
                                                     quarantined=[(2, 4)]))
    found = check(events)
    assert (found.quarantined_ranges, found.quarantined_records, found.lost, found.lost_quarantined) == (1, 2, 0, 0)
    assert found.ok
    assert found.examples["quarantined"] == [{"topic": "t", "part": 0, "start": 2, "end": 4, "leader": None}]


def test_an_acknowledged_record_in_a_quarantined_range_is_lost():
    events = replaced(clean(), "final_log", final_log([(0, "idem-0")], quarantined=[(1, 2)]))
    events.append({"k": "seen", "t": 2.0, "topic": "t", "part": 0, "offset": 1, "value": "idem-1"})
    found = check(events)
    assert (found.lost, found.lost_quarantined, found.quarantined_ranges) == (1, 1, 1) and not found.ok
    assert found.examples["lost"][0]["quarantined"] is True
    # a consumer had been shown it: served, then unreadable
    assert found.truncated_after_seen == 1 and found.examples["truncated_after_seen"][0]["quarantined"] is True


def test_a_committed_offset_that_went_back_is_lost():
    found = check(replaced(clean(), "final_commit",
                           {"k": "final_commit", "t": 9.0, "group": "g", "topic": "t", "part": 0, "offset": 0}))
    assert found.offsets_lost == 1 and not found.ok


def test_metadata_lost_created_topic_missing_deleted_present_partitions_fewer():
    found = check(replaced(clean(), "final_topics", {"k": "final_topics", "t": 9.0, "node": 2, "topics": {"t": 1}}))
    assert found.metadata_lost == 1 and found.examples["metadata_lost"][0]["node"] == 2
    events = clean() + [
        {"k": "meta", "t": 5.0, "op": "delete", "phase": "sent", "topic": "m"},
        {"k": "meta", "t": 5.1, "op": "delete", "phase": "ok", "topic": "m"},
    ]
    assert check(events).metadata_lost == 1  # deleted, yet still present
    events = clean() + [{"k": "meta", "t": 5.0, "op": "add_partitions", "phase": "ok", "topic": "t", "partitions": 2}]
    assert check(events).metadata_lost == 1
    # a creation that timed out, then was asked to be deleted, is no loss either way
    events = replaced(clean(), "final_topics", {"k": "final_topics", "t": 9.0, "node": 1, "topics": {"t": 1}})
    events.append({"k": "meta", "t": 5.0, "op": "delete", "phase": "sent", "topic": "m"})
    assert check(events).metadata_lost == 0


def test_unavailability_still_open_at_the_end_counts_until_the_last_event():
    events = clean() + [{"k": "avail", "t": 7.0, "topic": "t", "part": 0, "ok": False, "leader": 3},
                        {"k": "final_topics", "t": 12.0, "node": 1, "topics": {"t": 1, "m": 1}}]
    found = check(events)
    assert found.max_unavailable_s == 5.0 and found.unavailable_windows == 2


def test_a_fault_not_recovered_from_fails_the_run():
    events = replaced(clean(), "recovered", {"k": "not_recovered", "t": 3.9, "fault": "kill", "target": 2})
    found = check(events)
    assert found.not_recovered == 1 and not found.ok and found.recoveries == []


def test_a_requested_fault_type_never_injected_fails_the_run():
    found = check(replaced(clean(), "run", {"k": "run", "t": 0.1, "faults": ["kill", "stop"]}))
    assert found.faults_missing == ["stop"] and not found.ok
    # one that was tried but could not be done (nothing to tear) is missing too
    events = [e for e in clean() if e["k"] != "run"] + [
        {"k": "run", "t": 0.1, "faults": ["kill", "torn-write"]},
        {"k": "fault", "t": 4.0, "fault": "torn-write", "target": 1},
        {"k": "heal", "t": 4.1, "fault": "torn-write", "target": 1, "detail": {"done": False}},
        {"k": "recovered", "t": 4.5, "fault": "torn-write", "target": 1, "seconds": 0.4}]
    found = check(events)
    assert found.faults_missing == ["torn-write"] and found.faults_not_injected == {"torn-write": 1}


def test_a_fencing_outside_every_fault_window_is_uncaused():
    events = clean() + [{"k": "fenced", "t": 5.0, "broker": 3, "node": 1}]
    found = check(events)
    assert (found.fencings, found.fencings_uncaused) == (2, 1) and found.ok  # reported, not a failure
    assert found.examples["fenced_uncaused"] == [{"k": "fenced", "t": 5.0, "broker": 3, "node": 1}]

