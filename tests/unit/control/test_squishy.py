"""Squishy bin packing reproduces Nexus's Table 2 worked example exactly."""

import math
import random

import pytest

from vidnexus.contracts.profile import Profile
from vidnexus.control.squishy import SessionLoad, lower_bound, merge_nodes, plan, residue, saturate

# Nexus SOSP Table 2: batch → latency (ms).
PROFILES = {
    "A": Profile((4, 8, 16), (0.050, 0.075, 0.100)),
    "B": Profile((4, 8, 16), (0.050, 0.090, 0.125)),
    "C": Profile((4, 8, 16), (0.060, 0.095, 0.125)),
}
SLO = {"A": 0.200, "B": 0.250, "C": 0.250}


def load(m, rate):
    return SessionLoad(m, m, SLO[m], rate)


@pytest.mark.parametrize("m, batch, rps", [("A", 16, 160.0), ("B", 16, 128.0), ("C", 16, 128.0)])
def test_saturated_throughputs(m, batch, rps):
    b, t = saturate(load(m, 1000), PROFILES[m])
    assert b == batch and t == pytest.approx(rps)


def test_table2_a_and_b_share_a_device_c_gets_another():
    p = plan([load("A", 64), load("B", 32), load("C", 32)], PROFILES)
    assert p.devices == 2 and p.infeasible == ()
    shared = next(n for n in p.nodes if n.sessions() == {"A", "B"})
    alone = next(n for n in p.nodes if n.sessions() == {"C"})
    assert shared.duty_cycle_s == pytest.approx(0.125)
    assert {a.session_id: a.batch for a in shared.allocations} == {"A": 8, "B": 4}
    assert shared.busy_s == pytest.approx(0.125)  # 75 + 50 ms
    # Worst cases: A 125 + 75 = 200 ms ≤ 200, B 125 + 50 = 175 ms ≤ 250.
    assert p.check() == []
    assert alone.allocations[0].batch == 5 and alone.duty_cycle_s == pytest.approx(5 / 32)


def test_c_does_not_fit_in_a_slack():
    a = residue(load("A", 64), 64, PROFILES["A"])
    c = residue(load("C", 32), 32, PROFILES["C"])
    assert merge_nodes(a, c, PROFILES) is None  # 75 + 60 = 135 ms > 125 ms duty cycle


def test_high_rates_fill_whole_devices_first():
    p = plan([load("A", 64 + 2 * 160)], PROFILES)
    assert sum(1 for n in p.nodes if n.saturated) == 2
    assert p.rate_of("A") == pytest.approx(64 + 2 * 160)
    assert p.check() == []


def test_infeasible_sessions_are_reported_with_the_reason():
    prof = {"slow": Profile((1, 2), (0.3, 0.4))}
    p = plan([SessionLoad("s", "slow", 0.2, 10)], prof)
    assert p.devices == 0 and p.infeasible[0][0] == "s" and "200 ms SLO" in p.infeasible[0][1]


def test_memory_is_a_second_capacity():
    heavy = [SessionLoad(m, m, SLO[m], r, memory_bytes=6) for m, r in (("A", 64), ("B", 32))]
    assert plan(heavy, PROFILES).devices == 1
    assert plan(heavy, PROFILES, memory_capacity=10).devices == 2
    assert plan(heavy, PROFILES, memory_capacity=5).infeasible


@pytest.mark.parametrize("seed", range(20))
def test_random_workloads_give_valid_plans_above_the_lower_bound(seed):
    rng = random.Random(seed)
    profiles, sessions = {}, []
    for i in range(rng.randint(1, 30)):
        m = f"m{i}"
        a, b = rng.uniform(0.0005, 0.01), rng.uniform(0.002, 0.05)
        profiles[m] = Profile.linear(a, b, 64)
        sessions.append(SessionLoad(f"s{i}", m, rng.uniform(0.05, 0.4), rng.uniform(1, 2000)))
    p = plan(sessions, profiles)
    assert p.check() == []
    placed = {s.session_id for s in sessions} - {sid for sid, _ in p.infeasible}
    for s in sessions:
        if s.session_id in placed:
            assert p.rate_of(s.session_id) >= s.rate - 1e-6
    assert p.devices >= math.floor(lower_bound([s for s in sessions if s.session_id in placed], profiles) - 1e-9)


# -- baselines ---------------------------------------------------------------------------------
from vidnexus.control.baselines import batch_oblivious, exact_plan


def test_exact_matches_squishy_on_table2_and_oblivious_needs_more():
    sessions = [load("A", 64), load("B", 32), load("C", 32)]
    assert exact_plan(sessions, PROFILES).devices == 2
    assert exact_plan(sessions, PROFILES).check() == []
    assert batch_oblivious(sessions, PROFILES).devices == 3


@pytest.mark.parametrize("seed", range(12))
def test_exact_is_a_lower_bound_for_squishy_on_small_instances(seed):
    rng = random.Random(100 + seed)
    profiles, sessions = {}, []
    for i in range(rng.randint(2, 7)):
        m = f"m{i}"
        profiles[m] = Profile.linear(rng.uniform(0.0005, 0.01), rng.uniform(0.002, 0.05), 64)
        sessions.append(SessionLoad(f"s{i}", m, rng.uniform(0.05, 0.4), rng.uniform(1, 400)))
    ex, sq, ob = exact_plan(sessions, profiles), plan(sessions, profiles), batch_oblivious(sessions, profiles)
    assert ex.check() == [] and ob.check() == []
    assert ex.devices <= sq.devices <= ob.devices
    bad = {sid for sid, _ in ex.infeasible}
    assert bad == {sid for sid, _ in sq.infeasible}
    for s in sessions:
        if s.session_id not in bad:
            assert ex.rate_of(s.session_id) >= s.rate - 1e-6


def test_the_check_allows_the_packers_own_rounding_of_batch_sizes():
    """A batch is ceil(d·rate − 1e-6): at d = 0.1 s a rate a hair above 40 req/s gets batch 4, which
    serves 40 − 1e-5 req/s. The check allows that rounding and still refuses a batch one short."""
    from vidnexus.control.squishy import Allocation, Node, Plan
    rate = 40 + 5e-6
    ok = Plan((Node(0.1, (Allocation("s", "m", 4, rate, 0.02, 1.0),)),))
    short = Plan((Node(0.1, (Allocation("s", "m", 3, rate, 0.02, 1.0),)),))
    assert ok.check() == []
    assert [m for m in short.check() if "serves" in m]
