"""The control-plane simulation (`simulation.py`): a modelled three-voter Raft quorum under lost,
delayed, duplicated and reordered messages, crashed, paused and restarted nodes and failing
journals, driving kraft's controller service and commit queue, replicated-state rule, controller
handlers, broker sessions, metadata loaders, broker publisher, replica manager (with its Partition
cores and follower fetchers), coordinator runtime and broker state machine on a simulated asyncio
loop; the invariants are checked after
every step. A failing seed prints its one-line reproduction
(`python3 tests/unit/controlplane/simulation.py --seed N --trace`); fix the cause and add the seed
to REGRESSION_SEEDS with what it found."""

from __future__ import annotations

import dataclasses
import os

import pytest

from tests.unit.controlplane.simulation import InvariantViolation, SimSettings, Simulation, run_seed

# seed -> the defect it found (seeds are tied to this scheduler: after changing how it draws,
# re-find them by undoing the fix and sweeping)
REGRESSION_SEEDS: dict[int, str] = {
    # Defects of kraft's own code:
    # Once the simulation ran the real ReplicaManager (and failed on an ERROR logged by kraft):
    # while the active controller's journal failed, its session task logged "broker session
    # check failed" with a traceback at every check for a fence the quorum refused with
    # KAFKA_STORAGE_ERROR, a failure the quorum had logged once already.
    377: "the session task logged a refused fence as an error at every check (kraft's controller)",
    # These found defects of the simulation (its Raft model and its checks), and keep the
    # situations they found in the sweep:
    # A vote answer read the voter's term when it arrived, not when it was given: a late "yes"
    # of an earlier term counted in the candidate's next campaign and elected a second leader
    # in one term (a committed entry changed). Seeds 207, 10059 and 20122 found it first; on the
    # asyncio loop of the real shells (timers of the same ms in a seeded order), 259 of seeds
    # 0-999 finds it.
    259: "a late vote of an earlier term elected a second Raft leader (the model's bug)",
    # Offset commits 4, 5 and 6 waited in the network while their coordinator was paused and
    # arrived in the same ms, 6 first: 6 was acknowledged, then 5 overwrote it (OffsetCommit is
    # last-writer-wins, in Kafka too). The check now asks for the latest acknowledged commit or
    # one written after it, by the coordinator's clock.
    916: "an older offset commit held up in the network overwrote a newer one (the check's scope)",
    # A broker paused past its session woke on metadata answers that waited while it was
    # stopped and loaded __consumer_offsets-0 as leader at its old epoch 0, without the commits
    # acknowledged since by the leader at epoch 1: Kafka's stale window (it cannot acknowledge a
    # commit); the committed-offsets check applies to loads at the committed leader epoch.
    # (Found with the simulation's copies of the shells; on the asyncio loop this seed no longer
    # makes a stale load: not re-found yet, it needs a sweep of tens of thousands of seeds.)
    30231: "a zombie coordinator loaded older offsets (the check's scope)",
}

SWEEP_SEEDS = int(os.environ.get("KRAFT_CP_SIM_SEEDS", "1000"))  # ~150-200 ms of CPU a seed
SWEEP_CHUNKS = 4  # so that `-n 2` runs the sweep on both cores
# the deeper sweep runs only when asked (the full suite does not deselect `slow`, and CI's
# budget is the sweep above)
SLOW_SWEEP_SEEDS = int(os.environ.get("KRAFT_CP_SIM_SLOW_SEEDS", "0"))


def reproduction(seed: int) -> str:
    return f"python3 tests/unit/controlplane/simulation.py --seed {seed} --trace"


def sweep(seeds: range) -> list[Simulation]:
    """Every seed of `seeds`; fails listing each failing seed as a one-line reproduction."""
    done, failures = [], []
    for seed in seeds:
        try:
            done.append(run_seed(seed))
        except InvariantViolation as e:
            failures.append(f"{reproduction(seed)}  # {str(e).splitlines()[0][:300]}")
    assert not failures, "failing seeds:\n" + "\n".join(failures)
    return done


@pytest.mark.parametrize("seed", sorted(REGRESSION_SEEDS))
def test_regression_seed(seed: int) -> None:
    run_seed(seed)


@pytest.mark.parametrize("chunk", range(SWEEP_CHUNKS))
def test_no_invariant_breaks(chunk: int) -> None:
    """The CI sweep: SWEEP_SEEDS seeds (KRAFT_CP_SIM_SEEDS), in chunks."""
    size = -(-SWEEP_SEEDS // SWEEP_CHUNKS)
    first = chunk * size
    sims = sweep(range(first, min(first + size, SWEEP_SEEDS)))
    # the runs do what they are for: elections, failovers, faults, fencing, ISR changes
    assert sum(s.counts.get("crash", 0) for s in sims) > len(sims)
    assert sum(s.counts.get("journal_failure", 0) for s in sims) > len(sims) // 2
    assert sum(s.counts.get("alter_partition", 0) for s in sims) > len(sims)
    assert sum(s.counts.get("offset_commit", 0) for s in sims) > len(sims)
    assert sum(s.counts.get("acked_produce", 0) for s in sims) > len(sims)
    assert sum(len(s.active_of_epoch) for s in sims) > 2 * len(sims)


@pytest.mark.slow
@pytest.mark.timeout(7200)
def test_no_invariant_breaks_long_sweep() -> None:
    """`KRAFT_CP_SIM_SLOW_SEEDS=N pytest -m slow ...`: N seeds beyond the CI sweep's."""
    if SLOW_SWEEP_SEEDS <= 0:
        pytest.skip("set KRAFT_CP_SIM_SLOW_SEEDS=N for the deeper sweep")
    sweep(range(1_000_000, 1_000_000 + SLOW_SWEEP_SEEDS))


def test_the_same_seed_replays_the_same_run() -> None:
    a, b = run_seed(42), run_seed(42)
    assert (a.steps, a.counts, a.committed) == (b.steps, b.counts, b.committed)


def test_a_failover_elects_a_new_active_controller_that_keeps_the_metadata() -> None:
    """Without faults the cluster comes up (one active controller, brokers unfenced, topics led);
    a crash of the active controller elects another, with a higher epoch and every committed
    record."""
    quiet = dataclasses.replace(SimSettings(), drop=0.0, duplicate=0.0, fault_interval_ms=10**9)
    sim = Simulation(7, quiet)
    sim.run_until(2_000)
    active = [n for n in sim.nodes.values() if sim.active_epoch(n) is not None]
    assert len(active) == 1
    image = active[0].controller_loader.image
    assert image.topics.by_name and len(image.live_brokers()) == 3
    committed = list(sim.committed)
    sim.crash(active[0])
    sim.run_until(sim.now + 1_500)
    successor = [n for n in sim.nodes.values() if sim.active_epoch(n) is not None]
    assert len(successor) == 1 and successor[0] is not active[0]
    assert successor[0].controller_loader.image.controller_epoch > image.controller_epoch
    assert sim.committed[:len(committed)] == committed
    sim.heal()


def test_a_controller_whose_journal_fails_resigns() -> None:
    """The active controller's journal fails: it stands aside, another is elected, and metadata
    writes commit there."""
    quiet = dataclasses.replace(SimSettings(), drop=0.0, duplicate=0.0, fault_interval_ms=10**9)
    sim = Simulation(11, quiet)
    sim.run_until(1_500)
    [active] = [n for n in sim.nodes.values() if sim.active_epoch(n) is not None]
    offset = max(sim.images)  # the committed metadata offset
    active.journal_failed_until = sim.now + 2_000
    sim.run_until(sim.now + 1_500)
    assert sim.active_epoch(active) is None
    [successor] = [n for n in sim.nodes.values() if sim.active_epoch(n) is not None]
    assert successor is not active
    assert max(sim.images) > offset  # its claim and the brokers' requests committed
